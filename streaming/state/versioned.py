"""Versioned key-value stores (KIP-889): supplier, builder, change logging and the typed layer.

Kafka's RocksDbVersionedKeyValueBytesStoreSupplier, VersionedKeyValueStoreBuilder,
ChangeLoggingVersionedKeyValueBytesStore and MeteredVersionedKeyValueStore. Layers, outermost
first: typed (serdes) -> [change logging] -> ``VersionedBytesStore``. Versioned stores have no
caching layer. The changelog record of a put is ``(key, plain value or None, timestamp)``.
"""

from __future__ import annotations

from typing import Any

from streaming.state.api import StateStore, StateStoreContext, WrappedStateStore
from streaming.state.metered import MeteredStore
from streaming.state.versioned_bytes import (
    PUT_RETURN_CODE_NOT_PUT,
    PUT_RETURN_CODE_VALID_TO_UNDEFINED,
    VersionedBytesStore,
    VersionedRecord,
    default_segment_interval,
)

__all__ = [
    "PUT_RETURN_CODE_NOT_PUT",
    "PUT_RETURN_CODE_VALID_TO_UNDEFINED",
    "ChangeLoggingVersionedKeyValueBytesStore",
    "VersionedBytesStore",
    "VersionedBytesStoreSupplier",
    "VersionedKeyValueStore",
    "VersionedKeyValueStoreBuilder",
    "VersionedRecord",
    "default_segment_interval",
    "is_versioned",
]


class VersionedBytesStoreSupplier:
    """Creates versioned bytes stores (Kafka's RocksDbVersionedKeyValueBytesStoreSupplier)."""

    versioned = True
    timestamped = False

    def __init__(
        self,
        name: str,
        history_retention_ms: int,
        segment_interval_ms: int | None = None,
        persistent: bool = True,
    ) -> None:
        if name is None:
            raise ValueError("name cannot be null")
        if history_retention_ms < 0:
            raise ValueError("historyRetention cannot be negative")
        if segment_interval_ms is None:
            segment_interval_ms = default_segment_interval(history_retention_ms)
        elif segment_interval_ms < 1:
            raise ValueError("segmentInterval cannot be zero or negative")
        self.name = name
        self.history_retention_ms = history_retention_ms
        self.segment_interval_ms = segment_interval_ms
        self.persistent = persistent

    def get(self) -> VersionedBytesStore:
        return VersionedBytesStore(
            self.name, self.history_retention_ms, self.segment_interval_ms, self.persistent
        )

    def metrics_scope(self) -> str:
        return "rocksdb" if self.persistent else "in-memory"


def is_versioned(store_or_supplier: Any) -> bool:
    """True for a versioned store, store supplier or store builder."""
    return bool(getattr(store_or_supplier, "versioned", False))


class ChangeLoggingVersionedKeyValueBytesStore(WrappedStateStore):
    """Logs every versioned put/delete as ``(key, value, timestamp)``."""

    wrapped: VersionedBytesStore

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self.context = context
        self.wrapped.init(context, root)

    def put(self, key: bytes, value: bytes | None, timestamp: int) -> int:
        valid_to = self.wrapped.put(key, value, timestamp)
        self.context.log_change(self.name, key, value, timestamp)
        return valid_to

    def delete(self, key: bytes, timestamp: int) -> VersionedRecord | None:
        old = self.wrapped.delete(key, timestamp)
        self.context.log_change(self.name, key, None, timestamp)
        return old

    def get(self, key: bytes) -> VersionedRecord | None:
        return self.wrapped.get(key)

    def get_as_of(self, key: bytes, as_of_timestamp: int) -> VersionedRecord | None:
        return self.wrapped.get_as_of(key, as_of_timestamp)


class VersionedKeyValueStore(MeteredStore):
    """Typed versioned store (Kafka's MeteredVersionedKeyValueStore / VersionedKeyValueStore)."""

    wrapped: VersionedBytesStore | ChangeLoggingVersionedKeyValueBytesStore

    versioned = True
    PUT_RETURN_CODE_VALID_TO_UNDEFINED = PUT_RETURN_CODE_VALID_TO_UNDEFINED
    PUT_RETURN_CODE_NOT_PUT = PUT_RETURN_CODE_NOT_PUT

    def is_versioned(self) -> bool:
        return True

    def _typed(self, record: VersionedRecord | None) -> VersionedRecord | None:
        if record is None:
            return None
        return VersionedRecord(
            self._vdes(self.topic, record.value), record.timestamp, record.valid_to
        )

    def put(self, key: Any, value: Any, timestamp: int) -> int:
        """Add a version of ``key`` valid from ``timestamp`` (None = tombstone); returns its
        validTo, ``PUT_RETURN_CODE_VALID_TO_UNDEFINED`` if it is the latest version, or
        ``PUT_RETURN_CODE_NOT_PUT`` if it is older than the history retention allows."""
        if key is None:
            raise ValueError("key cannot be null")
        topic = self.topic
        return self.wrapped.put(
            self._kser(topic, key), None if value is None else self._vser(topic, value), timestamp
        )

    def delete(self, key: Any, timestamp: int) -> VersionedRecord | None:
        """Put a tombstone at ``timestamp``; returns the version valid just before it."""
        if key is None:
            raise ValueError("key cannot be null")
        return self._typed(self.wrapped.delete(self._kser(self.topic, key), timestamp))

    def get(self, key: Any, as_of_timestamp: int | None = None) -> VersionedRecord | None:
        """The latest version of ``key``, or the one valid at ``as_of_timestamp``."""
        if key is None:
            raise ValueError("key cannot be null")
        raw_key = self._kser(self.topic, key)
        if as_of_timestamp is None:
            return self._typed(self.wrapped.get(raw_key))
        return self._typed(self.wrapped.get_as_of(raw_key, as_of_timestamp))

    def get_as_of(self, key: Any, as_of_timestamp: int) -> VersionedRecord | None:
        """The version of ``key`` valid at ``as_of_timestamp`` (validFrom <= t < validTo)."""
        return self.get(key, as_of_timestamp)


class VersionedKeyValueStoreBuilder:
    """Builds a VersionedKeyValueStore; logging on by default, never cached."""

    versioned = True

    def __init__(
        self, supplier: VersionedBytesStoreSupplier, key_serde: Any, value_serde: Any
    ) -> None:
        if supplier is None:
            raise ValueError("storeSupplier can't be null")
        self.supplier = supplier
        self.name: str = supplier.name
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.caching_enabled = False
        self.logging_enabled = True
        self.log_config: dict = {}

    @property
    def persistent(self) -> bool:
        return self.supplier.persistent

    def history_retention(self) -> int:
        return self.supplier.history_retention_ms

    def with_caching_enabled(self) -> VersionedKeyValueStoreBuilder:
        raise ValueError("Versioned stores do not support caching")

    def with_caching_disabled(self) -> VersionedKeyValueStoreBuilder:
        return self

    def with_logging_enabled(self, config: dict | None = None) -> VersionedKeyValueStoreBuilder:
        self.logging_enabled = True
        self.log_config = dict(config or {})
        return self

    def with_logging_disabled(self) -> VersionedKeyValueStoreBuilder:
        self.logging_enabled = False
        self.log_config = {}
        return self

    def build(self) -> VersionedKeyValueStore:
        store: Any = self.supplier.get()
        if self.logging_enabled:
            store = ChangeLoggingVersionedKeyValueBytesStore(store)
        return VersionedKeyValueStore(store, self.key_serde, self.value_serde)
