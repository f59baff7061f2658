"""Persistent bytes key-value store on RocksDB via rocksdict (Kafka's RocksDBStore).

Opened in transactional mode (exactly-once: ``context.transactional_state``), it is a
``TransactionalStore``: writes wait in ``UncommittedWrites`` (reads and scans see them) and
restored changelog records in a ``WriteBatch``, until ``commit`` writes both with the
changelog offsets in one batch (``committed_offsets``). Otherwise every write goes straight
to RocksDB, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping

from rocksdict import Rdict, WriteBatch

from streaming.state.api import StateDirHandle, StateStore, StateStoreContext
from streaming.state.committed_offsets import CommittedOffsets
from streaming.state.key_value_bytes import BytesKV, KeyValueBytesStore, increment, invalid_range
from streaming.state.rocksdb_util import (
    MemtableFlusher,
    close_db,
    open_db,
    raw_items,
    scan,
    scan_prefix,
)
from streaming.state.uncommitted import UncommittedWrites, overlay


class RocksDBKeyValueStore(KeyValueBytesStore):
    """RocksDB-backed bytes store at ``state_dir / name``; one open writer per path."""

    #: a transactional store of this class keeps its changelog offsets (``TransactionalStore``)
    keeps_offsets = True

    def __init__(self, name: str) -> None:
        self.name = name
        # None until init() and after close(); the operations are only called while open
        self._db: Rdict = None  # type: ignore[assignment]
        self._dir: StateDirHandle | None = None
        self._flusher = MemtableFlusher()
        self.restore_value_converter: Callable[[bytes | None, int], bytes | None] | None = None
        self.transactional = False
        #: transactional mode: the writes since the last commit (None otherwise)
        self._pending: UncommittedWrites | None = None
        #: transactional mode: restored changelog records waiting for their commit
        self._restored: WriteBatch | None = None
        self._offsets: CommittedOffsets | None = None

    @property
    def persistent(self) -> bool:
        return True

    @property
    def is_open(self) -> bool:
        return self._db is not None

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._dir = StateDirHandle(context, self.name)
        self.transactional = bool(getattr(context, "transactional_state", False))
        self._db = open_db(self._dir.path, wal=self.transactional)
        self._offsets = CommittedOffsets.open(self._db, transactional=self.transactional)
        self._pending = UncommittedWrites() if self.transactional else None
        if root is not None:
            context.register(root, self.restore_batch)

    def restore_batch(self, records: Iterable[tuple[bytes, bytes | None, int]]) -> None:
        """Apply changelog records (key, value, timestamp); value None deletes."""
        conv = self.restore_value_converter
        if self.transactional:
            batch = self._restored
            if batch is None:
                batch = self._restored = WriteBatch(raw_mode=True)
            for key, value, ts in records:
                if value is None:
                    batch.delete(key)
                else:
                    batch.put(key, value if conv is None else conv(value, ts))
            return
        db = self._db
        for key, value, ts in records:
            if value is None:
                db.delete(key)
            else:
                db.put(key, value if conv is None else conv(value, ts))

    # -- transactions ---------------------------------------------------------------------

    def committed_offset(self, topic: str, partition: int) -> int | None:
        offsets = self._offsets
        return None if offsets is None else offsets.offsets.get((topic, partition))

    def commit(self, offsets: Mapping[tuple[str, int], int]) -> None:
        """Write the restored records, then the uncommitted writes, with ``offsets``."""
        assert self._offsets is not None and self._pending is not None  # transactional, open
        batch, self._restored = self._restored, None
        if batch is None:
            batch = WriteBatch(raw_mode=True)
        self._pending.add_to(batch)
        self._offsets.add_to(batch, offsets)
        self._db.write(batch)
        self._pending.clear()
        self._offsets.written(offsets)

    @property
    def uncommitted_bytes(self) -> int:
        pending = self._pending
        return 0 if pending is None else pending.size

    # -- lifecycle ------------------------------------------------------------------------

    def flush(self) -> None:
        if self._db is not None:
            self._flusher.maybe(self._db)

    def force_flush(self) -> None:
        """Write memtables to disk now (the runtime calls it before writing a checkpoint)."""
        if self._db is not None:
            self._flusher.force(self._db)

    def close(self) -> None:
        """Close; in transactional mode what was not committed is dropped."""
        if self._pending is not None:
            self._pending.clear()
        self._restored = None
        if self._offsets is not None:
            self._offsets.release()
            self._offsets = None
        if self._db is not None:
            db, self._db = self._db, None  # type: ignore[assignment]
            close_db(db)
        if self._dir is not None:
            self._dir.release()
            self._dir = None

    # -- reads and writes -----------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        pending = self._pending
        if pending is not None:
            entries = pending.entries
            if key in entries:
                return entries[key]
        return self._db.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        pending = self._pending
        if pending is not None:
            pending.put(key, value)
        elif value is None:
            self._db.delete(key)
        else:
            self._db.put(key, value)

    def put_if_absent(self, key: bytes, value: bytes | None) -> bytes | None:
        original = self.get(key)
        if original is None:
            self.put(key, value)
        return original

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        for key, value in entries:
            self.put(key, value)

    def delete(self, key: bytes) -> bytes | None:
        original = self.get(key)
        if original is not None:
            self.put(key, None)
        return original

    def range(self, from_key: bytes | None, to_key: bytes | None) -> Iterator[BytesKV]:
        if invalid_range(from_key, to_key):
            return iter(())
        return self._scan(from_key, to_key, True)

    def reverse_range(self, from_key: bytes | None, to_key: bytes | None) -> Iterator[BytesKV]:
        if invalid_range(from_key, to_key):
            return iter(())
        return self._scan(from_key, to_key, False)

    def all(self) -> Iterator[BytesKV]:
        return self._scan(None, None, True)

    def reverse_all(self) -> Iterator[BytesKV]:
        return self._scan(None, None, False)

    def _scan(self, lower: bytes | None, upper: bytes | None, forward: bool) -> Iterator[BytesKV]:
        if lower is None and upper is None:
            stored = raw_items(self._db.items(backwards=not forward))
        else:
            stored = scan(self._db, lower, upper, forward)
        pending = self._pending
        if not pending:
            return stored
        return overlay(pending.snapshot(lower, upper, forward), stored, forward)

    def prefix_scan(self, prefix: bytes) -> Iterator[BytesKV]:
        stored = scan_prefix(self._db, prefix)
        pending = self._pending
        if not pending:
            return stored
        upper = increment(prefix)
        buffered = pending.snapshot(prefix, upper, True, upper_inclusive=False)
        if upper is None:  # every byte of the prefix is 0xff: no key past it has it
            buffered = [kv for kv in buffered if kv[0].startswith(prefix)]
        return overlay(buffered, stored, True)

    def approximate_num_entries(self) -> int:
        value = self._db.property_int_value("rocksdb.estimate-num-keys")
        pending = self._pending
        return int(value or 0) + (0 if pending is None else len(pending))
