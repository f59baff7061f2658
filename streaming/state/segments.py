"""Time segments of window/session stores (Kafka's AbstractSegments, KeyValueSegments).

A segment holds the records whose segment timestamp falls in
``[id * segment_interval, (id + 1) * segment_interval)``. Segments older than
``segment_id(stream_time - retention)`` are dropped as stream time advances.

Two physical layouts give the same logical behaviour and the same iteration order:
``InMemorySegments`` (a SortedDict per segment) and ``RocksDBSegments`` (one RocksDB per store,
keys prefixed with the 8-byte segment id so that dropping a segment is a ``delete_range``; Kafka
uses one RocksDB instance per segment, which orders identically).

The RocksDB segments of window and session stores (``write_buffer``) keep their recent
writes in a sorted in-memory buffer in front of RocksDB (``BufferedRocksDBSegment``), so
that the many short-lived sessions of a hot key never become RocksDB delete markers.

Opened in transactional mode (exactly-once), ``RocksDBSegments`` is the store's
``TransactionalStore``: every segment buffers its writes, and nothing reaches RocksDB before
``commit``, which writes the buffers of all segments, the segments dropped by retention
since the last commit (range deletes) and the store's changelog offsets in one batch.
"""

from __future__ import annotations

import pathlib
import struct
from collections.abc import Iterator, Mapping

from rocksdict import Rdict, WriteBatch
from sortedcontainers import SortedDict

from streaming.state.committed_offsets import CommittedOffsets
from streaming.state.rocksdb_util import MemtableFlusher, close_db, open_db, scan
from streaming.state.uncommitted import overlay

BytesKV = tuple[bytes, bytes]
#: A buffered store writes its buffered writes to RocksDB once they reach either limit (the
#: byte count adds key and value sizes of every write, overwrites included).
WRITE_BUFFER_ENTRIES = 10_000
WRITE_BUFFER_BYTES = 4 * 1024 * 1024
_SEG_ID = struct.Struct(">Q")
_OFFSET = 1 << 63


def java_div(a: int, b: int) -> int:
    """Java's long division (truncates toward zero)."""
    return a // b if a >= 0 else -((-a) // b)


class Segment:
    """One time segment: a sorted bytes map."""

    __slots__ = ("id",)

    id: int

    def get(self, key: bytes) -> bytes | None:
        raise NotImplementedError

    def put(self, key: bytes, value: bytes | None) -> None:
        raise NotImplementedError

    def range(self, lower: bytes | None, upper: bytes | None, forward: bool) -> Iterator[BytesKV]:
        """Entries with lower <= key <= upper (None = unbounded) in key order."""
        raise NotImplementedError


class InMemorySegment(Segment):
    """A segment held in a SortedDict."""

    __slots__ = ("map",)

    def __init__(self, segment_id: int) -> None:
        self.id = segment_id
        self.map = SortedDict()

    def get(self, key: bytes) -> bytes | None:
        return self.map.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        if value is None:
            self.map.pop(key, None)
        else:
            self.map[key] = value

    def range(self, lower: bytes | None, upper: bytes | None, forward: bool) -> Iterator[BytesKV]:
        m = self.map
        # snapshot the keys so the store may be modified while iterating
        keys = list(m.irange(lower, upper, reverse=not forward))
        get = m.get
        for key in keys:
            value = get(key)
            if value is not None:
                yield key, value


class RocksDBSegment(Segment):
    """A segment stored under its id prefix in a shared RocksDB."""

    __slots__ = ("db", "plen", "prefix")

    def __init__(self, segment_id: int, db) -> None:
        self.id = segment_id
        self.db = db
        self.prefix = _SEG_ID.pack(segment_id + _OFFSET)
        self.plen = 8

    def get(self, key: bytes) -> bytes | None:
        return self.db.get(self.prefix + key)

    def put(self, key: bytes, value: bytes | None) -> None:
        if value is None:
            self.db.delete(self.prefix + key)
        else:
            self.db.put(self.prefix + key, value)

    def range(self, lower: bytes | None, upper: bytes | None, forward: bool) -> Iterator[BytesKV]:
        p = self.prefix
        lo = p if lower is None else p + lower
        if upper is None:
            hi = _SEG_ID.pack(self.id + _OFFSET + 1)
            it = scan(self.db, lo, hi, forward)
            for k, v in it:
                if k == hi:
                    continue
                yield k[8:], v
        else:
            for k, v in scan(self.db, lo, p + upper, forward):
                yield k[8:], v


class BufferedRocksDBSegment(RocksDBSegment):
    """A RocksDB segment whose writes wait in a sorted in-memory buffer (shared limits in
    ``RocksDBSegments``) until the buffer is full, a memtable flush is due or a checkpoint
    (in transactional mode: until the commit).

    A session merge deletes the session it replaces; in RocksDB every delete is a marker that
    each later seek into the key's range steps over until compaction, and a hot key's lookup
    crossed thousands of them (one per bid). In the buffer, a session put and deleted before
    the buffer is written costs RocksDB nothing: a key RocksDB does not hold (its bloom
    filters and memtable say so when the key is first buffered) is simply dropped from the
    buffer, so only deletes of keys RocksDB may hold are written. Reads merge the buffer
    (which wins) with RocksDB; both are taken as of the moment an iteration starts, like
    RocksDB's own implicit snapshot.
    """

    __slots__ = ("fresh", "owner", "pending")

    def __init__(self, segment_id: int, db, owner: RocksDBSegments) -> None:
        super().__init__(segment_id, db)
        self.owner = owner
        #: key -> value, or None for a delete not yet written to RocksDB
        self.pending: SortedDict = SortedDict()
        #: the pending keys RocksDB does not hold: deleting one needs no delete marker
        self.fresh: set[bytes] = set()

    def get(self, key: bytes) -> bytes | None:
        pending = self.pending
        if key in pending:
            return pending[key]
        return self.db.get(self.prefix + key)

    def put(self, key: bytes, value: bytes | None) -> None:
        pending = self.pending
        if value is None:
            fresh = self.fresh
            if key in fresh:  # put since the last write, RocksDB never saw it
                fresh.discard(key)
                del pending[key]
                return
            if key not in pending and not self.db.key_may_exist(self.prefix + key):
                return  # nothing to delete
            pending[key] = None
            self.owner.buffered(len(key))
            return
        if key not in pending and not self.db.key_may_exist(self.prefix + key):
            self.fresh.add(key)
        pending[key] = value
        self.owner.buffered(len(key) + len(value))

    def write_pending(self, batch: WriteBatch) -> int:
        """Add the pending writes to ``batch`` and forget them; returns how many there were."""
        pending = self.pending
        n = len(pending)
        if n:
            p = self.prefix
            for key, value in pending.items():
                if value is None:
                    batch.delete(p + key)
                else:
                    batch.put(p + key, value)
            pending.clear()
            self.fresh.clear()
        return n

    def discard_pending(self) -> None:
        self.pending.clear()
        self.fresh.clear()

    def range(self, lower: bytes | None, upper: bytes | None, forward: bool) -> Iterator[BytesKV]:
        pending = self.pending
        buffered = (
            [(k, pending[k]) for k in pending.irange(lower, upper, reverse=not forward)]
            if pending
            else []
        )
        # a generator: the buffer and RocksDB are both read as of the first item
        yield from overlay(buffered, RocksDBSegment.range(self, lower, upper, forward), forward)


class Segments:
    """The live segments of one store, keyed by segment id (Kafka's AbstractSegments)."""

    def __init__(self, name: str, retention_period: int, segment_interval: int) -> None:
        self.name = name
        self.retention_period = retention_period
        self.segment_interval = segment_interval
        self._segments: SortedDict = SortedDict()

    def segment_id(self, timestamp: int) -> int:
        return java_div(timestamp, self.segment_interval)

    def _create(self, segment_id: int) -> Segment:
        raise NotImplementedError

    def _destroy(self, segment: Segment) -> None:
        raise NotImplementedError

    def open(self, directory: pathlib.Path | None) -> None:
        """Open existing segments (persistent layouts) before first use."""

    def segment_for_timestamp(self, timestamp: int) -> Segment | None:
        return self._segments.get(self.segment_id(timestamp))

    def get_or_create_segment_if_live(self, segment_id: int, stream_time: int) -> Segment | None:
        min_live_segment = self.segment_id(stream_time - self.retention_period)
        segment = None
        if segment_id >= min_live_segment:
            segment = self._segments.get(segment_id)
            if segment is None:
                segment = self._create(segment_id)
                self._segments[segment_id] = segment
        self.cleanup_expired(stream_time)
        return segment

    def segments(self, time_from: int, time_to: int, forward: bool) -> list[Segment]:
        lo = self.segment_id(time_from)
        hi = self.segment_id(time_to)
        if lo > hi:
            return []
        segs = self._segments
        return [segs[i] for i in segs.irange(lo, hi, reverse=not forward)]

    def all_segments(self, forward: bool) -> list[Segment]:
        values = list(self._segments.values())
        if not forward:
            values.reverse()
        return values

    def cleanup_expired(self, stream_time: int) -> None:
        min_live_segment = self.segment_id(stream_time - self.retention_period)
        segs = self._segments
        if segs and segs.keys()[0] < min_live_segment:
            for segment_id in list(segs.irange(None, min_live_segment, inclusive=(True, False))):
                self._destroy(segs.pop(segment_id))

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self._segments.clear()


class InMemorySegments(Segments):
    """Segments held in memory."""

    def _create(self, segment_id: int) -> Segment:
        return InMemorySegment(segment_id)

    def _destroy(self, segment: Segment) -> None:
        segment.map.clear()  # type: ignore[attr-defined]


class RocksDBSegments(Segments):
    """Segments sharing one RocksDB database, each under its 8-byte segment-id prefix.

    ``reserved_segment`` adds a segment outside the time range (the versioned store's latest
    values) that is never dropped but buffers and commits like the others."""

    #: a transactional instance keeps its changelog offsets (``TransactionalStore``)
    keeps_offsets = True

    def __init__(
        self,
        name: str,
        retention_period: int,
        segment_interval: int,
        write_buffer: bool = False,
    ) -> None:
        super().__init__(name, retention_period, segment_interval)
        self.db: Rdict | None = None
        self._flusher = MemtableFlusher()
        #: segments buffer their writes (``BufferedRocksDBSegment``)
        self.write_buffer = write_buffer
        self._pending_entries = 0
        self._pending_bytes = 0
        self.transactional = False
        self._offsets: CommittedOffsets | None = None
        #: transactional mode: ids of the segments dropped since the last commit
        self._dropped: list[int] = []
        self._reserved: list[Segment] = []

    def open(self, directory: pathlib.Path | None, *, transactional: bool = False) -> None:
        """Open the database and find its segments; ``transactional``: see the module."""
        assert directory is not None  # persistent stores always open in their state directory
        self.transactional = transactional
        db = self.db = open_db(directory, wal=transactional)
        self._offsets = CommittedOffsets.open(db, transactional=transactional)
        # discover existing segments: one seek per distinct id prefix
        it = db.iter()
        it.seek_to_first()
        while it.valid():
            raw = it.key()[:8]
            segment_id = _SEG_ID.unpack(raw)[0] - _OFFSET
            self._segments[segment_id] = self._create(segment_id)
            it.seek(_SEG_ID.pack(segment_id + _OFFSET + 1))
        del it

    def _create(self, segment_id: int) -> Segment:
        if self.write_buffer or self.transactional:
            return BufferedRocksDBSegment(segment_id, self.db, self)
        return RocksDBSegment(segment_id, self.db)

    def reserved_segment(self, segment_id: int) -> Segment:
        """A segment of ``segment_id`` outside the time range, kept until close."""
        segment = self._create(segment_id)
        self._reserved.append(segment)
        return segment

    def _destroy(self, segment: Segment) -> None:
        assert self.db is not None  # segments exist only while the database is open
        if isinstance(segment, BufferedRocksDBSegment):
            segment.discard_pending()  # its pending writes die with it
        if self.transactional:
            self._dropped.append(segment.id)
            return
        self.db.delete_range(*_segment_range(segment.id))

    def _buffered_segments(self) -> Iterator[BufferedRocksDBSegment]:
        for segment in [*self._segments.values(), *self._reserved]:
            if isinstance(segment, BufferedRocksDBSegment):
                yield segment

    def buffered(self, size: int) -> None:
        """A segment buffered a write of ``size`` bytes: write all buffers once full (in
        transactional mode the runtime commits early instead, see ``uncommitted_bytes``)."""
        self._pending_entries += 1
        self._pending_bytes += size
        if self.transactional:
            return
        if (
            self._pending_entries >= WRITE_BUFFER_ENTRIES
            or self._pending_bytes >= WRITE_BUFFER_BYTES
        ):
            self.write_pending()

    def write_pending(self) -> None:
        """Write every segment's pending writes to RocksDB in one batch (outside a
        transaction; in transactional mode only ``commit`` writes)."""
        if self.db is None or self.transactional:
            return
        self._pending_entries = self._pending_bytes = 0
        batch = WriteBatch(raw_mode=True)
        n = 0
        for segment in self._buffered_segments():
            n += segment.write_pending(batch)
        if n:
            self.db.write(batch)

    # -- transactions ---------------------------------------------------------------------

    def committed_offset(self, topic: str, partition: int) -> int | None:
        offsets = self._offsets
        return None if offsets is None else offsets.offsets.get((topic, partition))

    def commit(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Write the dropped segments' range deletes, every segment's buffered writes and
        ``offsets`` in one batch."""
        assert self.db is not None and self._offsets is not None  # transactional, open
        batch = WriteBatch(raw_mode=True)
        for segment_id in self._dropped:
            batch.delete_range(*_segment_range(segment_id))
        for segment in self._buffered_segments():
            segment.write_pending(batch)
        self._offsets.add_to(batch, offsets)
        self.db.write(batch)
        self._dropped.clear()
        self._pending_entries = self._pending_bytes = 0
        self._offsets.written(offsets)

    @property
    def uncommitted_bytes(self) -> int:
        return self._pending_bytes if self.transactional else 0

    # -- lifecycle ------------------------------------------------------------------------

    def flush(self) -> None:
        if self.db is not None and self._flusher.due():
            self.force_flush()

    def force_flush(self) -> None:
        """Write the buffers (outside a transaction) and memtables to disk now."""
        if self.db is not None:
            self.write_pending()
            self._flusher.force(self.db)

    def close(self) -> None:
        """Close; in transactional mode what was not committed is dropped."""
        if self.db is not None:
            self.write_pending()
        if self.transactional:
            for segment in self._buffered_segments():
                segment.discard_pending()
            self._dropped.clear()
            self._pending_entries = self._pending_bytes = 0
        self._reserved.clear()
        super().close()
        if self._offsets is not None:
            self._offsets.release()
            self._offsets = None
        if self.db is not None:
            db, self.db = self.db, None
            close_db(db)


def _segment_range(segment_id: int) -> tuple[bytes, bytes]:
    """The key range of a segment's prefix, for a range delete."""
    return _SEG_ID.pack(segment_id + _OFFSET), _SEG_ID.pack(segment_id + _OFFSET + 1)
