"""Interactive queries over local state: read-only views across every local task's store.

``KafkaStreams.store(name)`` returns a view that, on each call, looks at the stores of the
running tasks on this instance (tasks move on rebalances) and reads them under the owning
stream thread's lock, so results are consistent with processing and iterators come back as
lists. Timestamped stores answer with plain values (as Kafka's ``keyValueStore()`` /
``windowStore()`` query types do).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from streaming.errors import InvalidStateStoreException


def _plain(value: Any) -> Any:
    return value.value if hasattr(value, "timestamp") and hasattr(value, "value") else value


StoresFn = Callable[[], list[tuple[Any, Any]]]  # -> [(lock, store)]


class _View:
    def __init__(self, name: str, stores: StoresFn) -> None:
        self.name = name
        self._stores = stores

    def _each(self) -> Iterable[tuple[Any, Any]]:
        return self._stores()

    def _collect(self, read: Callable[[Any], Iterable[tuple[Any, Any]]]) -> list[tuple[Any, Any]]:
        """``read(store)``'s entries with plain values, store by store (as Kafka's composite
        stores concatenate the tasks' iterators)."""
        out: list[tuple[Any, Any]] = []
        for lock, store in self._each():
            with lock:
                out.extend((k, _plain(v)) for k, v in read(store))
        return out


class ReadOnlyKeyValueView(_View):
    """Kafka's ``ReadOnlyKeyValueStore`` over every local task of the store."""

    def get(self, key: Any) -> Any:
        """The value of ``key`` (None when absent locally)."""
        for lock, store in self._each():
            with lock:
                value = store.get(key)
            if value is not None:
                return _plain(value)
        return None

    def range(self, from_key: Any, to_key: Any) -> list[tuple[Any, Any]]:
        """Entries with from_key <= key <= to_key (None = unbounded)."""
        return self._collect(lambda store: store.range(from_key, to_key))

    def reverse_range(self, from_key: Any, to_key: Any) -> list[tuple[Any, Any]]:
        return self._collect(lambda store: store.reverse_range(from_key, to_key))

    def all(self) -> list[tuple[Any, Any]]:
        return self._collect(lambda store: store.all())

    def reverse_all(self) -> list[tuple[Any, Any]]:
        return self._collect(lambda store: store.reverse_all())

    def prefix_scan(self, prefix: Any, prefix_serializer: Any) -> list[tuple[Any, Any]]:
        return self._collect(lambda store: store.prefix_scan(prefix, prefix_serializer))

    def approximate_num_entries(self) -> int:
        total = 0
        for lock, store in self._each():
            with lock:
                total += store.approximate_num_entries()
        return total


class ReadOnlyWindowView(_View):
    """Kafka's ``ReadOnlyWindowStore`` over every local task of the store."""

    def fetch(self, key: Any, time_from: int, *more: Any) -> Any:
        """Kafka's overloads: ``fetch(key, window_start)`` -> value; ``fetch(key, from, to)``
        -> [(start, value)]; ``fetch(key_from, key_to, from, to)`` -> [(Windowed, value)]."""
        if not more:
            for lock, store in self._each():
                with lock:
                    value = store.fetch(key, time_from)
                if value is not None:
                    return _plain(value)
            return None
        return self._collect(lambda store: store.fetch(key, time_from, *more))

    def backward_fetch(self, key: Any, time_from: Any, time_to: int, *more: int) -> Any:
        """``fetch``'s ranges, latest window first within each store."""
        return self._collect(lambda store: store.backward_fetch(key, time_from, time_to, *more))

    def fetch_all(self, time_from: int, time_to: int) -> list[tuple[Any, Any]]:
        """(Windowed key, value) of every window starting in [time_from, time_to]."""
        return self._collect(lambda store: store.fetch_all(time_from, time_to))

    def backward_fetch_all(self, time_from: int, time_to: int) -> list[tuple[Any, Any]]:
        return self._collect(lambda store: store.backward_fetch_all(time_from, time_to))

    def all(self) -> list[tuple[Any, Any]]:
        return self._collect(lambda store: store.all())

    def backward_all(self) -> list[tuple[Any, Any]]:
        return self._collect(lambda store: store.backward_all())


class ReadOnlySessionView(_View):
    """Kafka's ``ReadOnlySessionStore`` over every local task of the store."""

    def fetch(self, key: Any, *key_to: Any) -> list[tuple[Any, Any]]:
        """(Windowed key, aggregate) of every session of ``key``, or of the keys in
        ``[key, key_to]``."""
        return self._collect(lambda store: store.fetch(key, *key_to))

    def backward_fetch(self, key: Any, *key_to: Any) -> list[tuple[Any, Any]]:
        return self._collect(lambda store: store.backward_fetch(key, *key_to))

    def find_sessions(self, key: Any, *bounds: Any) -> list[tuple[Any, Any]]:
        """``find_sessions(key, earliest_end, latest_start)`` or ``find_sessions(key_from,
        key_to, earliest_end, latest_start)``."""
        return self._collect(lambda store: store.find_sessions(key, *bounds))

    def backward_find_sessions(self, key: Any, *bounds: Any) -> list[tuple[Any, Any]]:
        return self._collect(lambda store: store.backward_find_sessions(key, *bounds))

    def fetch_session(self, key: Any, session_start: int, session_end: int) -> Any:
        for lock, store in self._each():
            with lock:
                value = store.fetch_session(key, session_start, session_end)
            if value is not None:
                return value
        return None


def view_for(builder: Any, name: str, stores: StoresFn) -> _View:
    """The read-only view type matching the store a builder makes."""
    from streaming.state.stores import SessionStoreBuilder, WindowStoreBuilder

    if isinstance(builder, WindowStoreBuilder):
        return ReadOnlyWindowView(name, stores)
    if isinstance(builder, SessionStoreBuilder):
        return ReadOnlySessionView(name, stores)
    return ReadOnlyKeyValueView(name, stores)


__all__ = [
    "InvalidStateStoreException",
    "ReadOnlyKeyValueView",
    "ReadOnlySessionView",
    "ReadOnlyWindowView",
    "view_for",
]
