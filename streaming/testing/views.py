"""Plain-value views of timestamped stores, as ``TopologyTestDriver.get_key_value_store`` gives."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def _plain(value: Any) -> Any:
    return value.value if hasattr(value, "timestamp") and hasattr(value, "value") else value


def _plain_items(items: Any) -> Iterator[tuple[Any, Any]]:
    return ((k, _plain(v)) for k, v in items)


class PlainKeyValueView:
    """Reads of a (timestamped) key-value store that return plain values."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.name = store.name

    @classmethod
    def wrap(cls, store: Any) -> Any:
        return cls(store) if hasattr(store, "get") and hasattr(store, "all") else store

    def get(self, key: Any) -> Any:
        return _plain(self._store.get(key))

    def put(self, key: Any, value: Any) -> None:
        self._store.put(key, value)

    def delete(self, key: Any) -> Any:
        return _plain(self._store.delete(key))

    def all(self) -> Iterator[tuple[Any, Any]]:
        return _plain_items(self._store.all())

    def reverse_all(self) -> Iterator[tuple[Any, Any]]:
        return _plain_items(self._store.reverse_all())

    def range(self, from_key: Any, to_key: Any) -> Iterator[tuple[Any, Any]]:
        return _plain_items(self._store.range(from_key, to_key))

    def reverse_range(self, from_key: Any, to_key: Any) -> Iterator[tuple[Any, Any]]:
        return _plain_items(self._store.reverse_range(from_key, to_key))

    def prefix_scan(self, prefix: Any, prefix_serializer: Any) -> Iterator[tuple[Any, Any]]:
        return _plain_items(self._store.prefix_scan(prefix, prefix_serializer))

    def approximate_num_entries(self) -> int:
        return self._store.approximate_num_entries()


class PlainWindowView:
    """Reads of a (timestamped) window store that return plain values."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.name = store.name

    @classmethod
    def wrap(cls, store: Any) -> Any:
        return cls(store) if hasattr(store, "fetch_all") else store

    def fetch(self, key: Any, window_start: int, *more: Any) -> Any:
        """``fetch(key, window_start)``, ``fetch(key, time_from, time_to)`` or
        ``fetch(key_from, key_to, time_from, time_to)``, as the store has them."""
        if more:
            return _plain_items(self._store.fetch(key, window_start, *more))
        return _plain(self._store.fetch(key, window_start))

    def backward_fetch(self, key: Any, time_from: Any, time_to: int, *more: int) -> Any:
        return _plain_items(self._store.backward_fetch(key, time_from, time_to, *more))

    def fetch_range(self, key: Any, time_from: int, time_to: int) -> Iterator[tuple[int, Any]]:
        return _plain_items(self._store.fetch_range(key, time_from, time_to))

    def fetch_all(self, time_from: int, time_to: int) -> Iterator[tuple[Any, Any]]:
        return _plain_items(self._store.fetch_all(time_from, time_to))

    def backward_fetch_all(self, time_from: int, time_to: int) -> Iterator[tuple[Any, Any]]:
        return _plain_items(self._store.backward_fetch_all(time_from, time_to))

    def all(self) -> Iterator[tuple[Any, Any]]:
        return _plain_items(self._store.all())

    def backward_all(self) -> Iterator[tuple[Any, Any]]:
        return _plain_items(self._store.backward_all())
