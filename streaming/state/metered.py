"""Shared plumbing of the typed (metered) store layers: serde resolution and flush listeners."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streaming.state.api import StateStore, StateStoreContext, WrappedStateStore, changelog_topic

#: listener(key, new_value, old_value, record_context) with typed (deserialized) objects
FlushListener = Callable[[Any, Any, Any, Any], None]


class MeteredStore(WrappedStateStore):
    """Outermost typed layer: resolves serdes at init and translates objects to bytes."""

    def __init__(self, wrapped: StateStore, key_serde: Any, value_serde: Any) -> None:
        super().__init__(wrapped)
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.topic: str | None = None
        self.context: StateStoreContext | None = None

    def _wrap_value_serde(self, value_serde: Any) -> Any:
        return value_serde

    def init(self, context: StateStoreContext, root: StateStore | None = None) -> None:
        self.context = context
        self.topic = changelog_topic(context.application_id, self.name)
        key_serde = self.key_serde if self.key_serde is not None else context.default_key_serde
        value_serde = (
            self.value_serde if self.value_serde is not None else context.default_value_serde
        )
        if key_serde is None or value_serde is None:
            raise ValueError(
                f"Store {self.name}: no serde given and the context has no default serde"
            )
        self._key_serde = key_serde
        self._value_serde = self._wrap_value_serde(value_serde)
        self._kser = key_serde.serialize
        self._kdes = key_serde.deserialize
        self._vser = self._value_serde.serialize
        self._vdes = self._value_serde.deserialize
        self.wrapped.init(context, self if root is None else root)

    def _caching_layer(self) -> Any:
        from streaming.state.caching import _CachingMixin

        return self.find_layer(_CachingMixin)

    @property
    def caching_enabled(self) -> bool:
        return self._caching_layer() is not None

    def flush_cache(self) -> None:
        """Flush only the cache layer, if any (Kafka's CachedStateStore.flushCache)."""
        caching = self._caching_layer()
        if caching is not None:
            caching.flush_cache()

    @property
    def resolved_key_serde(self) -> Any:
        """The key serde in use (the given one, else the context's default), once opened."""
        return self._key_serde

    @property
    def resolved_value_serde(self) -> Any:
        """The value serde in use, as the store layers below see it, once opened."""
        return self._value_serde

    def raw_key(self, key: Any) -> bytes:
        return self._kser(self.topic, key)

    def raw_value(self, value: Any) -> bytes | None:
        return None if value is None else self._vser(self.topic, value)

    def key_from(self, raw: bytes) -> Any:
        return self._kdes(self.topic, raw)

    def value_from(self, raw: bytes | None) -> Any:
        return None if raw is None else self._vdes(self.topic, raw)

    def _decode_key(self, raw: bytes) -> Any:
        return self._kdes(self.topic, raw)

    def set_flush_listener(self, listener: FlushListener | None, send_old_values: bool) -> bool:
        """Register the cache flush listener; returns False when the store is not cached.

        The listener is called as ``listener(key, new_value, old_value, record_context)`` with
        deserialized objects for each flushed dirty entry (old_value None unless
        ``send_old_values``)."""
        caching = self._caching_layer()
        if caching is None:
            return False
        if listener is None:
            return caching.set_flush_listener(None, send_old_values)
        decode_key = self._decode_key
        value_from = self.value_from

        def bytes_listener(key: bytes, new: bytes | None, old: bytes | None, rc: Any) -> None:
            listener(decode_key(key), value_from(new), value_from(old), rc)

        return caching.set_flush_listener(bytes_listener, send_old_values)
