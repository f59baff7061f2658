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


class InvalidStateStoreException(RuntimeError):
    """The store cannot be queried (unknown name, or the application is not running)."""


def _plain(value: Any) -> Any:
    return value.value if hasattr(value, "timestamp") and hasattr(value, "value") else value


StoresFn = Callable[[], list[tuple[Any, Any]]]  # -> [(lock, store)]


class _View:
    def __init__(self, name: str, stores: StoresFn) -> None:
        self.name = name
        self._stores = stores

    def _each(self) -> Iterable[tuple[Any, Any]]:
        return self._stores()


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
        """Entries with from_key <= key <= to_key, store by store."""
        out = []
        for lock, store in self._each():
            with lock:
                out.extend((k, _plain(v)) for k, v in store.range(from_key, to_key))
        return out

    def all(self) -> list[tuple[Any, Any]]:
        """Every entry, store by store."""
        out = []
        for lock, store in self._each():
            with lock:
                out.extend((k, _plain(v)) for k, v in store.all())
        return out

    def approximate_num_entries(self) -> int:
        total = 0
        for lock, store in self._each():
            with lock:
                total += store.approximate_num_entries()
        return total


class ReadOnlyWindowView(_View):
    """Kafka's ``ReadOnlyWindowStore`` over every local task of the store."""

    def fetch(self, key: Any, time_from: int, time_to: int | None = None) -> Any:
        """``fetch(key, window_start)`` -> value, or ``fetch(key, from, to)`` -> [(start, value)]."""
        if time_to is None:
            for lock, store in self._each():
                with lock:
                    value = store.fetch(key, time_from)
                if value is not None:
                    return _plain(value)
            return None
        for lock, store in self._each():
            with lock:
                found = [(t, _plain(v)) for t, v in store.fetch_range(key, time_from, time_to)]
            if found:
                return found
        return []

    def fetch_all(self, time_from: int, time_to: int) -> list[tuple[Any, Any]]:
        """(Windowed key, value) of every window starting in [time_from, time_to]."""
        out = []
        for lock, store in self._each():
            with lock:
                out.extend((w, _plain(v)) for w, v in store.fetch_all(time_from, time_to))
        return out

    def all(self) -> list[tuple[Any, Any]]:
        out = []
        for lock, store in self._each():
            with lock:
                out.extend((w, _plain(v)) for w, v in store.all())
        return out


class ReadOnlySessionView(_View):
    """Kafka's ``ReadOnlySessionStore`` over every local task of the store."""

    def fetch(self, key: Any) -> list[tuple[Any, Any]]:
        """(Windowed key, aggregate) of every session of ``key``."""
        for lock, store in self._each():
            with lock:
                found = list(store.fetch(key))
            if found:
                return found
        return []

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
