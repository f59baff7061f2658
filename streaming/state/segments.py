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
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterator, Mapping

from rocksdict import Rdict, ReadOptions, WriteBatch
from sortedcontainers import SortedDict

from streaming.state.committed_offsets import CommittedOffsets
from streaming.state.rocksdb_util import MemtableFlusher, close_db, open_db, raw_items
from streaming.state.sorted_keys import SortedKeys
from streaming.state.uncommitted import overlay

BytesKV = tuple[bytes, bytes]
#: A buffered store writes its buffered writes to RocksDB once they reach either limit (the
#: byte count adds key and value sizes of every write, overwrites included).
WRITE_BUFFER_ENTRIES = 10_000
WRITE_BUFFER_BYTES = 4 * 1024 * 1024
#: A segment the store created itself lists the entries it wrote to RocksDB by record key
#: (``BufferedRocksDBSegment.index``) up to this many entries, then only the record keys, up
#: to this many of them, then nothing.
INDEX_MAX_ENTRIES = 50_000
INDEX_MAX_KEYS = 50_000
#: A fetch of one record key reads at most this many listed entries with point lookups; more
#: take a RocksDB scan.
INDEX_MAX_GETS = 4
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

    def key_range(
        self, key: bytes, lower: bytes | None, upper: bytes | None, forward: bool
    ) -> Iterator[BytesKV]:
        """``range(lower, upper, forward)`` for a reader that keeps only the entries of
        record key ``key``: it may leave out entries of other record keys, never one of
        ``key``, and keeps the order."""
        return self.range(lower, upper, forward)

    def key_range_list(self, key: bytes, lower: bytes | None, upper: bytes | None) -> list[BytesKV]:
        """``list(key_range(key, lower, upper, True))``."""
        return list(self.key_range(key, lower, upper, True))


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
        return _merged(self.db, self.prefix, self.id, lower, upper, forward, None)


class BufferedRocksDBSegment(RocksDBSegment):
    """A RocksDB segment whose writes wait in a sorted in-memory buffer (shared limits in
    ``RocksDBSegments``) until the buffer is full, a memtable flush is due or a checkpoint
    (in transactional mode: until the commit).

    A session merge deletes the session it replaces; in RocksDB every delete is a marker that
    each later seek into the key's range steps over until compaction, and a hot key's lookup
    crossed thousands of them (one per bid). In the buffer, a session put and deleted before
    the buffer is written costs RocksDB nothing: the delete of a key RocksDB does not hold
    (its bloom filters and memtable say so; what RocksDB holds does not change while a key
    waits in the buffer) simply drops it from the buffer, so only deletes of keys RocksDB may
    hold are written. Reads merge the buffer
    (which wins) with RocksDB; both are taken as of the moment an iteration starts, like
    RocksDB's own implicit snapshot.

    The buffer is a dict (``pending``) with its keys kept in order by ``keys``. A segment the
    store creates starts with nothing in RocksDB (``stored`` False) until its buffer is first
    written: until then reads and writes do not ask RocksDB at all.

    Such a segment of a key-first schema (the owner's ``key_suffix``: the store key is the
    record key followed by that many bytes) also knows what it wrote to RocksDB since:
    ``index`` maps each record key to its stored keys in order (``index_exact``), or, past
    ``INDEX_MAX_ENTRIES`` entries, each record key to None (a record key that is not there
    has no entry in RocksDB). Past ``INDEX_MAX_KEYS`` record keys, or for a segment found in
    RocksDB or whose range a pending transaction drops, ``index`` is None. ``key_range``
    uses it: a record key RocksDB holds nothing of is read from the buffer alone, and a
    record key with few stored entries in range reads them with point lookups instead of an
    iterator and a seek.
    """

    __slots__ = (
        "index",
        "index_entries",
        "index_exact",
        "keys",
        "owner",
        "pending",
        "stored",
        "suffix",
    )

    def __init__(self, segment_id: int, db, owner: RocksDBSegments) -> None:
        super().__init__(segment_id, db)
        self.owner = owner
        #: key -> value, or None for a delete not yet written to RocksDB
        self.pending: dict[bytes, bytes | None] = {}
        #: the keys of ``pending`` in order
        self.keys = SortedKeys()
        #: False while RocksDB certainly holds no key of this segment (``RocksDBSegments``
        #: sets it for a segment it finds in RocksDB or may not have dropped there yet)
        self.stored = True
        #: record key -> its keys in RocksDB in order (``index_exact``) or None; see above
        self.index: dict[bytes, list[bytes] | None] | None = None
        self.index_exact = True
        #: how many stored keys ``index`` lists
        self.index_entries = 0
        #: the length of the store key after the record key (0: no index)
        self.suffix = owner.key_suffix

    def get(self, key: bytes) -> bytes | None:
        pending = self.pending
        if key in pending:
            return pending[key]
        if not self.stored:
            return None
        return self.db.get(self.prefix + key)

    def put(self, key: bytes, value: bytes | None) -> None:
        pending = self.pending
        if value is None:
            if not self.stored or not self.db.key_may_exist(self.prefix + key):
                # nothing to delete in RocksDB: forget a buffered put
                if key in pending:
                    del pending[key]
                    self.keys.remove(key)
                return
            if key not in pending:
                self.keys.add(key)
            pending[key] = None
            self.owner.buffered(len(key))
            return
        if key not in pending:
            self.keys.add(key)
        pending[key] = value
        self.owner.buffered(len(key) + len(value))

    def write_pending(self, batch: WriteBatch) -> int:
        """Add the pending writes to ``batch`` (in key order) and forget them; returns how
        many there were."""
        pending = self.pending
        n = len(pending)
        if n:
            p = self.prefix
            for key in self.keys:
                value = pending[key]
                if value is None:
                    batch.delete(p + key)
                else:
                    batch.put(p + key, value)
            if self.index is not None:
                self._index_pending()
            self.discard_pending()
            self.stored = True
        return n

    def _index_pending(self) -> None:
        """Add the pending writes to ``index`` (they are about to reach RocksDB)."""
        index = self.index
        assert index is not None
        pending = self.pending
        cut = -self.suffix
        if not self.index_exact:
            for key in self.keys:
                if pending[key] is not None:
                    index[key[:cut]] = None
        else:
            entries = self.index_entries
            for key in self.keys:
                record_key = key[:cut]
                listed = index.get(record_key)
                if pending[key] is None:
                    if listed:
                        i = bisect_left(listed, key)
                        if i < len(listed) and listed[i] == key:
                            del listed[i]
                            entries -= 1
                            if not listed:
                                del index[record_key]
                elif listed is None:
                    index[record_key] = [key]
                    entries += 1
                elif listed[-1] < key:
                    listed.append(key)
                    entries += 1
                else:
                    i = bisect_left(listed, key)
                    if listed[i] != key:
                        listed.insert(i, key)
                        entries += 1
            self.index_entries = entries
            if entries > INDEX_MAX_ENTRIES:
                self.index = index = dict.fromkeys(index)
                self.index_exact = False
        if len(index) > INDEX_MAX_KEYS:
            self.index = None

    def discard_pending(self) -> None:
        self.pending.clear()
        self.keys.clear()

    def range(self, lower: bytes | None, upper: bytes | None, forward: bool) -> Iterator[BytesKV]:
        return _merged(self.db, self.prefix, self.id, lower, upper, forward, self)

    def key_range(
        self, key: bytes, lower: bytes | None, upper: bytes | None, forward: bool
    ) -> Iterator[BytesKV]:
        if self.index is None:
            return _merged(self.db, self.prefix, self.id, lower, upper, forward, self)
        return _key_merged(self, key, lower, upper, forward)

    def key_range_list(self, key: bytes, lower: bytes | None, upper: bytes | None) -> list[BytesKV]:
        if self.index is not None:
            found = self.indexed_range(key, lower, upper, True)
            if found is not None:
                return found
        return list(_merged(self.db, self.prefix, self.id, lower, upper, True, self))

    def indexed_range(
        self, key: bytes, lower: bytes | None, upper: bytes | None, forward: bool
    ) -> list[BytesKV] | None:
        """``key_range`` read with ``index``: the buffer with the listed stored entries of
        record key ``key`` in range laid under it, read with point lookups (none for a
        record key RocksDB holds nothing of); None when the index cannot tell or lists too
        many entries in range."""
        index = self.index
        if index is None:
            return None
        stored: list[BytesKV] = []
        if self.stored:
            listed = index.get(key, _ABSENT)
            if listed is None:
                return None
            if listed is not _ABSENT:
                lo = 0 if lower is None else bisect_left(listed, lower)
                hi = len(listed) if upper is None else bisect_right(listed, upper)
                if hi - lo > INDEX_MAX_GETS:
                    return None
                if hi > lo:
                    get = self.db.get
                    p = self.prefix
                    for k in listed[lo:hi]:
                        v = get(p + k)
                        if v is not None:
                            stored.append((k, v))
                    if not forward:
                        stored.reverse()
        pending = self.pending
        if not pending:
            return stored
        buffered = self.keys.range(lower, upper)
        if not buffered:
            return stored
        if not forward:
            buffered.reverse()
        if not stored:
            return [(k, v) for k in buffered if (v := pending[k]) is not None]
        return list(overlay([(k, pending[k]) for k in buffered], iter(stored), forward))


def _key_merged(
    segment: BufferedRocksDBSegment,
    key: bytes,
    lower: bytes | None,
    upper: bytes | None,
    forward: bool,
) -> Iterator[BytesKV]:
    """``segment.key_range`` with an index: ``indexed_range``, or ``_merged`` when the
    index cannot tell. A generator: the buffer, the index and RocksDB are read as of the
    first item."""
    found = segment.indexed_range(key, lower, upper, forward)
    if found is None:
        yield from _merged(segment.db, segment.prefix, segment.id, lower, upper, forward, segment)
    else:
        yield from found


#: ``index.get``'s answer for a record key that is not there
_ABSENT: list[bytes] = []


def _merged(
    db: Rdict,
    prefix: bytes,
    segment_id: int,
    lower: bytes | None,
    upper: bytes | None,
    forward: bool,
    buffer: BufferedRocksDBSegment | None,
) -> Iterator[BytesKV]:
    """The entries of the segment of ``prefix`` with ``lower <= key <= upper`` (None:
    unbounded) in key order, ``buffer``'s pending writes laid over what RocksDB holds (a
    pending key wins, its ``None`` hides the stored entry). A generator: the buffer and
    RocksDB are both read as of the first item.

    A forward scan gives its upper end to RocksDB as ``iterate_upper_bound``, so the iterator
    stops there instead of stepping over the delete markers beyond the range; rocksdict keeps
    only a pointer to the bound of its ``ReadOptions``, which this frame holds as long as the
    iterator lives. A backward scan checks its lower end in Python (rocksdict's backward
    iteration with ``iterate_lower_bound`` returned nothing)."""
    buffered: list[bytes] = []
    pending: dict[bytes, bytes | None] = {}
    if buffer is not None:
        if buffer.pending:
            pending = buffer.pending
            buffered = buffer.keys.range(lower, upper)
        if not buffer.stored:  # the buffer is all there is
            if not forward:
                buffered.reverse()
            for bk, bv in [(k, pending[k]) for k in buffered]:
                if bv is not None:
                    yield bk, bv
            return
    lo = prefix if lower is None else prefix + lower
    if forward:
        options = ReadOptions()
        options.set_iterate_upper_bound(
            _SEG_ID.pack(segment_id + _OFFSET + 1) if upper is None else prefix + upper + b"\x00"
        )
        items = raw_items(db.items(from_key=lo, read_opt=options))
        if not buffered:
            for k, v in items:
                yield k[8:], v
            return
        # the buffer as of the first item, in iteration order
        snapshot = [(k, pending[k]) for k in buffered]
        i = 0
        n = len(snapshot)
        bk, bv = snapshot[0]
        for k, v in items:
            k = k[8:]
            while bk < k:
                if bv is not None:
                    yield bk, bv
                i += 1
                if i == n:
                    yield k, v
                    for k, v in items:
                        yield k[8:], v
                    return
                bk, bv = snapshot[i]
            if bk == k:
                if bv is not None:
                    yield bk, bv
                i += 1
                if i == n:
                    for k, v in items:
                        yield k[8:], v
                    return
                bk, bv = snapshot[i]
            else:
                yield k, v
        while True:
            if bv is not None:
                yield bk, bv
            i += 1
            if i == n:
                return
            bk, bv = snapshot[i]
    # backward
    if upper is None:
        hi = _SEG_ID.pack(segment_id + _OFFSET + 1)
        stored = _backward(db, hi, lo, hi)
    else:
        stored = _backward(db, prefix + upper, lo, None)
    if not buffered:
        for k, v in stored:
            yield k[8:], v
        return
    yield from overlay(
        [(k, pending[k]) for k in reversed(buffered)],
        ((k[8:], v) for k, v in stored),
        False,
    )


def _backward(db: Rdict, upper: bytes, lower: bytes, skip: bytes | None) -> Iterator[BytesKV]:
    """Stored keys from ``upper`` down to ``lower`` (both inclusive) but ``skip``."""
    for kv in raw_items(db.items(backwards=True, from_key=upper)):
        k = kv[0]
        if k < lower:
            return
        if k != skip:
            yield kv


class _SegmentMap(dict):
    """Segment id -> segment, with the ids also in a sorted list (``ids``)."""

    __slots__ = ("ids",)

    def __init__(self) -> None:
        super().__init__()
        self.ids: list[int] = []

    def __setitem__(self, segment_id: int, segment: Segment) -> None:
        if segment_id not in self:
            insort(self.ids, segment_id)
        super().__setitem__(segment_id, segment)

    def __delitem__(self, segment_id: int) -> None:
        super().__delitem__(segment_id)
        self.ids.remove(segment_id)

    def pop(self, segment_id: int, *default: Segment | None) -> Segment | None:  # type: ignore[override]
        if segment_id in self:
            self.ids.remove(segment_id)
        return super().pop(segment_id, *default)

    def clear(self) -> None:
        super().clear()
        self.ids.clear()

    def ordered(self) -> list[Segment]:
        """The segments in id order."""
        return [self[i] for i in self.ids]


class Segments:
    """The live segments of one store, keyed by segment id (Kafka's AbstractSegments)."""

    def __init__(self, name: str, retention_period: int, segment_interval: int) -> None:
        self.name = name
        self.retention_period = retention_period
        self.segment_interval = segment_interval
        self._segments = _SegmentMap()

    def segment_id(self, timestamp: int) -> int:
        interval = self.segment_interval
        return timestamp // interval if timestamp >= 0 else -((-timestamp) // interval)

    def _create(self, segment_id: int) -> Segment:
        raise NotImplementedError

    def _create_new(self, segment_id: int) -> Segment:
        """A segment the store did not have."""
        return self._create(segment_id)

    def _destroy(self, segment: Segment) -> None:
        raise NotImplementedError

    def open(self, directory: pathlib.Path | None) -> None:
        """Open existing segments (persistent layouts) before first use."""

    def segment_for_timestamp(self, timestamp: int) -> Segment | None:
        interval = self.segment_interval
        return self._segments.get(
            timestamp // interval if timestamp >= 0 else -((-timestamp) // interval)
        )

    def get_or_create_segment_if_live(self, segment_id: int, stream_time: int) -> Segment | None:
        interval = self.segment_interval
        expired = stream_time - self.retention_period
        min_live_segment = expired // interval if expired >= 0 else -((-expired) // interval)
        segs = self._segments
        segment = None
        if segment_id >= min_live_segment:
            segment = segs.get(segment_id)
            if segment is None:
                segment = self._create_new(segment_id)
                segs[segment_id] = segment
        ids = segs.ids
        if ids and ids[0] < min_live_segment:
            self._drop_below(min_live_segment)
        return segment

    def segments(self, time_from: int, time_to: int, forward: bool) -> list[Segment]:
        interval = self.segment_interval
        lo = time_from // interval if time_from >= 0 else -((-time_from) // interval)
        hi = time_to // interval if time_to >= 0 else -((-time_to) // interval)
        if lo > hi:
            return []
        segs = self._segments
        ids = segs.ids
        if not ids:
            return []
        if lo <= ids[0] and hi >= ids[-1]:
            found = [segs[i] for i in ids]
        else:
            found = [segs[i] for i in ids[bisect_left(ids, lo) : bisect_right(ids, hi)]]
        if not forward:
            found.reverse()
        return found

    def all_segments(self, forward: bool) -> list[Segment]:
        values = self._segments.ordered()
        if not forward:
            values.reverse()
        return values

    def cleanup_expired(self, stream_time: int) -> None:
        min_live_segment = self.segment_id(stream_time - self.retention_period)
        ids = self._segments.ids
        if ids and ids[0] < min_live_segment:
            self._drop_below(min_live_segment)

    def _drop_below(self, min_live_segment: int) -> None:
        segs = self._segments
        for segment_id in segs.ids[: bisect_left(segs.ids, min_live_segment)]:
            self._destroy(segs.pop(segment_id))  # type: ignore[arg-type]

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
        key_suffix: int = 0,
    ) -> None:
        super().__init__(name, retention_period, segment_interval)
        #: key-first store keys: the record key followed by this many bytes (0: another
        #: layout); the segments the store creates index their RocksDB entries by record key
        self.key_suffix = key_suffix
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
            self._segments[segment_id] = self._create(segment_id)  # stored: True
            it.seek(_SEG_ID.pack(segment_id + _OFFSET + 1))
        del it

    def _create(self, segment_id: int) -> Segment:
        if self.write_buffer or self.transactional:
            return BufferedRocksDBSegment(segment_id, self.db, self)
        return RocksDBSegment(segment_id, self.db)

    def _create_new(self, segment_id: int) -> Segment:
        segment = self._create(segment_id)
        # RocksDB holds keys of this id only if a transaction drops the segment's range later
        if isinstance(segment, BufferedRocksDBSegment) and segment_id not in self._dropped:
            segment.stored = False
            if self.key_suffix:
                segment.index = {}
        return segment

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
        for segment in [*self._segments.ordered(), *self._reserved]:
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
            self._write(batch)

    def _write(self, batch: WriteBatch) -> None:
        """Write ``batch``; if that fails, no segment's ``index`` can be trusted."""
        assert self.db is not None
        try:
            self.db.write(batch)
        except BaseException:
            for segment in self._buffered_segments():
                segment.index = None
            raise

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
        self._write(batch)
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
