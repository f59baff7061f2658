"""Persistent bytes key-value store on RocksDB via rocksdict (Kafka's RocksDBStore)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from rocksdict import Rdict

from streaming.state.api import StateDirHandle, StateStore, StateStoreContext
from streaming.state.key_value_bytes import BytesKV, KeyValueBytesStore, invalid_range
from streaming.state.rocksdb_util import (
    MemtableFlusher,
    close_db,
    open_db,
    raw_items,
    scan,
    scan_prefix,
)


class RocksDBKeyValueStore(KeyValueBytesStore):
    """RocksDB-backed bytes store at ``state_dir / name``; one open writer per path."""

    def __init__(self, name: str) -> None:
        self.name = name
        # None until init() and after close(); the operations are only called while open
        self._db: Rdict = None  # type: ignore[assignment]
        self._dir: StateDirHandle | None = None
        self._flusher = MemtableFlusher()
        self.restore_value_converter: Callable[[bytes | None, int], bytes | None] | None = None

    @property
    def persistent(self) -> bool:
        return True

    @property
    def is_open(self) -> bool:
        return self._db is not None

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._dir = StateDirHandle(context, self.name)
        self._db = open_db(self._dir.path)
        if root is not None:
            context.register(root, self.restore_batch)

    def restore_batch(self, records: Iterable[tuple[bytes, bytes | None, int]]) -> None:
        """Apply changelog records (key, value, timestamp); value None deletes."""
        conv = self.restore_value_converter
        db = self._db
        for key, value, ts in records:
            if value is None:
                db.delete(key)
            else:
                db.put(key, value if conv is None else conv(value, ts))

    def flush(self) -> None:
        if self._db is not None:
            self._flusher.maybe(self._db)

    def force_flush(self) -> None:
        """Write memtables to disk now (the runtime calls it before writing a checkpoint)."""
        if self._db is not None:
            self._flusher.force(self._db)

    def close(self) -> None:
        if self._db is not None:
            db, self._db = self._db, None  # type: ignore[assignment]
            close_db(db)
        if self._dir is not None:
            self._dir.release()
            self._dir = None

    def get(self, key: bytes) -> bytes | None:
        return self._db.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        if value is None:
            self._db.delete(key)
        else:
            self._db.put(key, value)

    def put_if_absent(self, key: bytes, value: bytes | None) -> bytes | None:
        original = self._db.get(key)
        if original is None:
            self.put(key, value)
        return original

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        for key, value in entries:
            self.put(key, value)

    def delete(self, key: bytes) -> bytes | None:
        db = self._db
        original = db.get(key)
        if original is not None:
            db.delete(key)
        return original

    def range(self, from_key: bytes | None, to_key: bytes | None) -> Iterator[BytesKV]:
        if invalid_range(from_key, to_key):
            return iter(())
        return scan(self._db, from_key, to_key, True)

    def reverse_range(self, from_key: bytes | None, to_key: bytes | None) -> Iterator[BytesKV]:
        if invalid_range(from_key, to_key):
            return iter(())
        return scan(self._db, from_key, to_key, False)

    def all(self) -> Iterator[BytesKV]:
        return raw_items(self._db.items())

    def reverse_all(self) -> Iterator[BytesKV]:
        return raw_items(self._db.items(backwards=True))

    def prefix_scan(self, prefix: bytes) -> Iterator[BytesKV]:
        return scan_prefix(self._db, prefix)

    def approximate_num_entries(self) -> int:
        value = self._db.property_int_value("rocksdb.estimate-num-keys")
        return int(value or 0)
