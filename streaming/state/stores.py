"""Store suppliers, builders and the ``Stores`` factory (Kafka's Stores, *BytesStoreSupplier,
KeyValueStoreBuilder, TimestampedKeyValueStoreBuilder, WindowStoreBuilder,
TimestampedWindowStoreBuilder, SessionStoreBuilder).

Builders assemble the layers like Kafka:
``typed(metered) -> [caching] -> [change logging] -> inner bytes store``.
Logging is enabled and caching disabled by default, as in Kafka's AbstractStoreBuilder.
"""

from __future__ import annotations

import datetime
from typing import Any

from streaming.state.caching import CachingKeyValueStore, CachingSessionStore, CachingWindowStore
from streaming.state.change_logging import (
    ChangeLoggingKeyValueBytesStore,
    ChangeLoggingSessionBytesStore,
    ChangeLoggingTimestampedKeyValueBytesStore,
    ChangeLoggingTimestampedWindowBytesStore,
    ChangeLoggingWindowBytesStore,
)
from streaming.state.in_memory_key_value import InMemoryKeyValueStore
from streaming.state.key_schema import (
    SESSION_KEY_SCHEMA,
    TIME_FIRST_WINDOW_KEY_SCHEMA,
    WINDOW_KEY_SCHEMA,
)
from streaming.state.key_value_bytes import KeyValueBytesStore
from streaming.state.key_value_store import KeyValueStore, TimestampedKeyValueStore
from streaming.state.rocksdb_key_value import RocksDBKeyValueStore
from streaming.state.segmented_bytes_store import SegmentedBytesStore
from streaming.state.session_bytes import SegmentedSessionStore, SessionBytesStore
from streaming.state.session_store import SessionStore
from streaming.state.value_and_timestamp import with_timestamp
from streaming.state.window_bytes import SegmentedWindowStore, WindowBytesStore
from streaming.state.window_store import TimestampedWindowStore, WindowStore

Duration = int | datetime.timedelta
MIN_SEGMENT_INTERVAL = 60_000


def to_millis(duration: Duration, what: str = "duration") -> int:
    """int milliseconds or timedelta -> int milliseconds."""
    if isinstance(duration, datetime.timedelta):
        return duration // datetime.timedelta(milliseconds=1)
    if isinstance(duration, bool) or not isinstance(duration, int):
        raise TypeError(f"{what} must be int milliseconds or timedelta, got {duration!r}")
    return duration


def _restore_with_timestamp(value: bytes | None, timestamp: int) -> bytes | None:
    return with_timestamp(value, timestamp)


# --------------------------------------------------------------------------------- suppliers


class KeyValueBytesStoreSupplier:
    """Creates inner bytes key-value stores (in-memory or RocksDB)."""

    def __init__(self, name: str, persistent: bool, timestamped: bool = False) -> None:
        if name is None:
            raise ValueError("name cannot be null")
        self.name = name
        self.persistent = persistent
        self.timestamped = timestamped

    def get(self) -> KeyValueBytesStore:
        if self.persistent:
            return RocksDBKeyValueStore(self.name)
        return InMemoryKeyValueStore(self.name)

    def metrics_scope(self) -> str:
        return "rocksdb" if self.persistent else "in-memory"


class WindowBytesStoreSupplier:
    """Creates inner bytes window stores (segmented; RocksDB or in-memory; key- or time-first)."""

    def __init__(
        self,
        name: str,
        retention_period: int,
        segment_interval: int,
        window_size: int,
        retain_duplicates: bool,
        persistent: bool,
        timestamped: bool = False,
        time_ordered: bool = False,
    ) -> None:
        self.name = name
        self.retention_period = retention_period
        self.segment_interval = segment_interval
        self.window_size = window_size
        self.retain_duplicates = retain_duplicates
        self.persistent = persistent
        self.timestamped = timestamped
        self.time_ordered = time_ordered

    def get(self) -> WindowBytesStore:
        if not self.persistent:
            # Kafka's InMemoryWindowStore: a map by window start, then key; it returns windows
            # starting after observed_stream_time - retention (the time-first layout with the
            # key-first store's retention slack).
            segmented = SegmentedBytesStore(
                self.name,
                self.retention_period,
                self.segment_interval,
                TIME_FIRST_WINDOW_KEY_SCHEMA,
                False,
                retention_slack=WINDOW_KEY_SCHEMA.RETENTION_SLACK,
            )
            return SegmentedWindowStore(segmented, self.retain_duplicates, self.window_size)
        schema = TIME_FIRST_WINDOW_KEY_SCHEMA if self.time_ordered else WINDOW_KEY_SCHEMA
        segmented = SegmentedBytesStore(
            self.name, self.retention_period, self.segment_interval, schema, self.persistent
        )
        return SegmentedWindowStore(segmented, self.retain_duplicates, self.window_size)

    def metrics_scope(self) -> str:
        return "rocksdb-window" if self.persistent else "in-memory-window"


class SessionBytesStoreSupplier:
    """Creates inner bytes session stores (segmented by session end)."""

    def __init__(
        self, name: str, retention_period: int, segment_interval: int, persistent: bool
    ) -> None:
        self.name = name
        self.retention_period = retention_period
        self.segment_interval = segment_interval
        self.persistent = persistent

    def get(self) -> SessionBytesStore:
        segmented = SegmentedBytesStore(
            self.name,
            self.retention_period,
            self.segment_interval,
            SESSION_KEY_SCHEMA,
            self.persistent,
        )
        return SegmentedSessionStore(segmented)

    def metrics_scope(self) -> str:
        return "rocksdb-session" if self.persistent else "in-memory-session"


# ---------------------------------------------------------------------------------- builders


class StoreBuilder:
    """Configures and builds one typed store (Kafka's AbstractStoreBuilder)."""

    def __init__(self, supplier: Any, key_serde: Any, value_serde: Any) -> None:
        self.supplier = supplier
        self.name: str = supplier.name
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.caching_enabled = False
        self.logging_enabled = True
        self.log_config: dict = {}

    def with_caching_enabled(self) -> StoreBuilder:
        self.caching_enabled = True
        return self

    def with_caching_disabled(self) -> StoreBuilder:
        self.caching_enabled = False
        return self

    def with_logging_enabled(self, config: dict | None = None) -> StoreBuilder:
        self.logging_enabled = True
        self.log_config = dict(config or {})
        return self

    def with_logging_disabled(self) -> StoreBuilder:
        self.logging_enabled = False
        self.log_config = {}
        return self

    @property
    def persistent(self) -> bool:
        return self.supplier.persistent

    def build(self) -> Any:
        raise NotImplementedError


class KeyValueStoreBuilder(StoreBuilder):
    """Builds a KeyValueStore."""

    timestamped = False

    def _inner(self) -> KeyValueBytesStore:
        store = self.supplier.get()
        if self.timestamped:
            # the inner store holds timestamped bytes (Kafka's RocksDBTimestampedStore /
            # in-memory marker); changelog values are plain, so restore prepends the timestamp
            store.restore_value_converter = _restore_with_timestamp
        if self.logging_enabled:
            cls = (
                ChangeLoggingTimestampedKeyValueBytesStore
                if self.timestamped
                else ChangeLoggingKeyValueBytesStore
            )
            store = cls(store)
        if self.caching_enabled:
            store = CachingKeyValueStore(store)
        return store

    def build(self) -> KeyValueStore:
        return KeyValueStore(self._inner(), self.key_serde, self.value_serde)


class TimestampedKeyValueStoreBuilder(KeyValueStoreBuilder):
    """Builds a TimestampedKeyValueStore."""

    timestamped = True

    def build(self) -> TimestampedKeyValueStore:
        return TimestampedKeyValueStore(self._inner(), self.key_serde, self.value_serde)


class WindowStoreBuilder(StoreBuilder):
    """Builds a WindowStore; caching is ignored for stores retaining duplicates (Kafka)."""

    timestamped = False

    def _inner(self) -> WindowBytesStore:
        store = self.supplier.get()
        if self.timestamped:
            store.segmented.restore_value_converter = _restore_with_timestamp
        if self.logging_enabled:
            cls = (
                ChangeLoggingTimestampedWindowBytesStore
                if self.timestamped
                else ChangeLoggingWindowBytesStore
            )
            store = cls(store)
        if self.caching_enabled and not self.supplier.retain_duplicates:
            store = CachingWindowStore(store)
        return store

    def build(self) -> WindowStore:
        return WindowStore(self._inner(), self.key_serde, self.value_serde)


class TimestampedWindowStoreBuilder(WindowStoreBuilder):
    """Builds a TimestampedWindowStore."""

    timestamped = True

    def build(self) -> TimestampedWindowStore:
        return TimestampedWindowStore(self._inner(), self.key_serde, self.value_serde)


class SessionStoreBuilder(StoreBuilder):
    """Builds a SessionStore."""

    def build(self) -> SessionStore:
        store = self.supplier.get()
        if self.logging_enabled:
            store = ChangeLoggingSessionBytesStore(store)
        if self.caching_enabled:
            store = CachingSessionStore(store)
        return SessionStore(store, self.key_serde, self.value_serde)


# ----------------------------------------------------------------------------------- factory


def _window_args(name: str, retention_period: Duration, window_size: Duration) -> tuple[int, int]:
    if name is None:
        raise ValueError("name cannot be null")
    retention = to_millis(retention_period, "retentionPeriod")
    size = to_millis(window_size, "windowSize")
    if retention < 0:
        raise ValueError("retentionPeriod cannot be negative")
    if size < 0:
        raise ValueError("windowSize cannot be negative")
    if size > retention:
        raise ValueError(
            f"The retention period of the window store {name} must be no smaller than its "
            f"window size. Got size=[{size}], retention=[{retention}]"
        )
    return retention, size


def _segment_interval(retention: int) -> int:
    return max(retention // 2, MIN_SEGMENT_INTERVAL)


class Stores:
    """Factory of store suppliers and builders (Kafka's ``Stores``)."""

    @staticmethod
    def persistent_key_value_store(name: str) -> KeyValueBytesStoreSupplier:
        return KeyValueBytesStoreSupplier(name, persistent=True)

    @staticmethod
    def persistent_timestamped_key_value_store(name: str) -> KeyValueBytesStoreSupplier:
        return KeyValueBytesStoreSupplier(name, persistent=True, timestamped=True)

    @staticmethod
    def in_memory_key_value_store(name: str) -> KeyValueBytesStoreSupplier:
        return KeyValueBytesStoreSupplier(name, persistent=False)

    @staticmethod
    def persistent_window_store(
        name: str,
        retention_period: Duration,
        window_size: Duration,
        retain_duplicates: bool = False,
    ) -> WindowBytesStoreSupplier:
        retention, size = _window_args(name, retention_period, window_size)
        return WindowBytesStoreSupplier(
            name, retention, _segment_interval(retention), size, retain_duplicates, True
        )

    @staticmethod
    def persistent_timestamped_window_store(
        name: str,
        retention_period: Duration,
        window_size: Duration,
        retain_duplicates: bool = False,
    ) -> WindowBytesStoreSupplier:
        retention, size = _window_args(name, retention_period, window_size)
        return WindowBytesStoreSupplier(
            name,
            retention,
            _segment_interval(retention),
            size,
            retain_duplicates,
            True,
            timestamped=True,
        )

    @staticmethod
    def in_memory_window_store(
        name: str,
        retention_period: Duration,
        window_size: Duration,
        retain_duplicates: bool = False,
    ) -> WindowBytesStoreSupplier:
        retention, size = _window_args(name, retention_period, window_size)
        return WindowBytesStoreSupplier(
            name, retention, _segment_interval(retention), size, retain_duplicates, False
        )

    @staticmethod
    def persistent_time_ordered_window_store(
        name: str,
        retention_period: Duration,
        window_size: Duration,
        retain_duplicates: bool = False,
    ) -> WindowBytesStoreSupplier:
        """Time-first window store (Kafka's RocksDbTimeOrderedWindowBytesStoreSupplier without
        index): ``fetch_all`` iterates by (window start, key bytes)."""
        retention, size = _window_args(name, retention_period, window_size)
        return WindowBytesStoreSupplier(
            name,
            retention,
            _segment_interval(retention),
            size,
            retain_duplicates,
            True,
            timestamped=True,
            time_ordered=True,
        )

    @staticmethod
    def persistent_session_store(
        name: str, retention_period: Duration
    ) -> SessionBytesStoreSupplier:
        retention = to_millis(retention_period, "retentionPeriod")
        if retention < 0:
            raise ValueError("retentionPeriod cannot be negative")
        return SessionBytesStoreSupplier(name, retention, _segment_interval(retention), True)

    @staticmethod
    def in_memory_session_store(name: str, retention_period: Duration) -> SessionBytesStoreSupplier:
        retention = to_millis(retention_period, "retentionPeriod")
        if retention < 0:
            raise ValueError("retentionPeriod cannot be negative")
        return SessionBytesStoreSupplier(name, retention, _segment_interval(retention), False)

    @staticmethod
    def key_value_store_builder(
        supplier: KeyValueBytesStoreSupplier, key_serde: Any = None, value_serde: Any = None
    ) -> KeyValueStoreBuilder:
        return KeyValueStoreBuilder(supplier, key_serde, value_serde)

    @staticmethod
    def timestamped_key_value_store_builder(
        supplier: KeyValueBytesStoreSupplier, key_serde: Any = None, value_serde: Any = None
    ) -> TimestampedKeyValueStoreBuilder:
        return TimestampedKeyValueStoreBuilder(supplier, key_serde, value_serde)

    @staticmethod
    def window_store_builder(
        supplier: WindowBytesStoreSupplier, key_serde: Any = None, value_serde: Any = None
    ) -> WindowStoreBuilder:
        return WindowStoreBuilder(supplier, key_serde, value_serde)

    @staticmethod
    def timestamped_window_store_builder(
        supplier: WindowBytesStoreSupplier, key_serde: Any = None, value_serde: Any = None
    ) -> TimestampedWindowStoreBuilder:
        return TimestampedWindowStoreBuilder(supplier, key_serde, value_serde)

    @staticmethod
    def session_store_builder(
        supplier: SessionBytesStoreSupplier, key_serde: Any = None, value_serde: Any = None
    ) -> SessionStoreBuilder:
        return SessionStoreBuilder(supplier, key_serde, value_serde)

    # -- versioned (KIP-889) ----------------------------------------------------------------

    @staticmethod
    def persistent_versioned_key_value_store(
        name: str, history_retention: Duration, segment_interval: Duration | None = None
    ) -> Any:
        """A RocksDB versioned store keeping old versions for ``history_retention``."""
        from streaming.state.versioned import VersionedBytesStoreSupplier

        retention = to_millis(history_retention, "historyRetention")
        interval = (
            None if segment_interval is None else to_millis(segment_interval, "segmentInterval")
        )
        return VersionedBytesStoreSupplier(name, retention, interval, persistent=True)

    @staticmethod
    def in_memory_versioned_key_value_store(
        name: str, history_retention: Duration, segment_interval: Duration | None = None
    ) -> Any:
        """In-memory variant of the versioned store (not in Kafka 4.1; same semantics)."""
        from streaming.state.versioned import VersionedBytesStoreSupplier

        retention = to_millis(history_retention, "historyRetention")
        interval = (
            None if segment_interval is None else to_millis(segment_interval, "segmentInterval")
        )
        return VersionedBytesStoreSupplier(name, retention, interval, persistent=False)

    @staticmethod
    def versioned_key_value_store_builder(
        supplier: Any, key_serde: Any = None, value_serde: Any = None
    ) -> Any:
        """A builder of VersionedKeyValueStore (logging on, no caching)."""
        from streaming.state.versioned import VersionedKeyValueStoreBuilder

        return VersionedKeyValueStoreBuilder(supplier, key_serde, value_serde)
