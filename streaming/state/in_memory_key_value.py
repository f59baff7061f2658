"""In-memory bytes key-value store on a SortedDict (Kafka's InMemoryKeyValueStore)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from sortedcontainers import SortedDict

from streaming.state.api import StateStore, StateStoreContext
from streaming.state.key_value_bytes import BytesKV, KeyValueBytesStore, invalid_range


class InMemoryKeyValueStore(KeyValueBytesStore):
    """Sorted in-memory map of bytes to bytes; non-persistent, rebuilt from the changelog."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._map: SortedDict = SortedDict()
        self._open = False
        #: set by timestamped builders: converts (plain changelog value, timestamp) on restore
        self.restore_value_converter: Callable[[bytes | None, int], bytes | None] | None = None

    @property
    def is_open(self) -> bool:
        return self._open

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        if root is not None:
            context.register(root, self.restore_batch)
        self._open = True

    def restore_batch(self, records: Iterable[tuple[bytes, bytes | None, int]]) -> None:
        """Apply changelog records (key, value, timestamp); value None deletes."""
        conv = self.restore_value_converter
        m = self._map
        for key, value, ts in records:
            if value is None:
                m.pop(key, None)
            else:
                m[key] = value if conv is None else conv(value, ts)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self._map.clear()
        self._open = False

    def get(self, key: bytes) -> bytes | None:
        return self._map.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        if value is None:
            self._map.pop(key, None)
        else:
            self._map[key] = value

    def put_if_absent(self, key: bytes, value: bytes | None) -> bytes | None:
        original = self._map.get(key)
        if original is None:
            self.put(key, value)
        return original

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        for key, value in entries:
            self.put(key, value)

    def delete(self, key: bytes) -> bytes | None:
        return self._map.pop(key, None)

    def _iterate(self, keys: list[bytes]) -> Iterator[BytesKV]:
        # Iterates a snapshot of the keys like Kafka (TreeSet copy), so callers may modify the
        # store while iterating; keys deleted meanwhile are skipped.
        get = self._map.get
        for key in keys:
            value = get(key)
            if value is not None:
                yield key, value

    def range(self, from_key: bytes | None, to_key: bytes | None) -> Iterator[BytesKV]:
        if invalid_range(from_key, to_key):
            return iter(())
        return self._iterate(list(self._map.irange(from_key, to_key)))

    def reverse_range(self, from_key: bytes | None, to_key: bytes | None) -> Iterator[BytesKV]:
        if invalid_range(from_key, to_key):
            return iter(())
        return self._iterate(list(self._map.irange(from_key, to_key, reverse=True)))

    def all(self) -> Iterator[BytesKV]:
        return self._iterate(list(self._map.keys()))

    def reverse_all(self) -> Iterator[BytesKV]:
        return self._iterate(list(reversed(self._map.keys())))

    def prefix_scan(self, prefix: bytes) -> Iterator[BytesKV]:
        keys = []
        for key in self._map.irange(prefix, None):
            if not key.startswith(prefix):
                break
            keys.append(key)
        return self._iterate(keys)

    def approximate_num_entries(self) -> int:
        return len(self._map)
