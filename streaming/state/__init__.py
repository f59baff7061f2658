"""State stores with Kafka Streams semantics: key-value, window and session stores, in memory or
on RocksDB, with optional record caching and changelogging.

Layering (outermost first), as in Kafka: typed store (serdes) -> caching (bytes) ->
change logging (bytes) -> inner bytes store. Build stores with :class:`Stores`.
"""

from streaming.state.api import (
    DEFAULT_CACHE_MAX_BYTES,
    EMPTY_RECORD_CONTEXT,
    InMemoryStateStoreContext,
    RecordContext,
    StateStore,
    StateStoreContext,
    WrappedStateStore,
    changelog_topic,
)
from streaming.state.cache import LRUCacheEntry, NamedCache, ThreadCache
from streaming.state.caching import CachingKeyValueStore, CachingSessionStore, CachingWindowStore
from streaming.state.change_logging import (
    ChangeLoggingKeyValueBytesStore,
    ChangeLoggingSessionBytesStore,
    ChangeLoggingTimestampedKeyValueBytesStore,
    ChangeLoggingTimestampedWindowBytesStore,
    ChangeLoggingWindowBytesStore,
)
from streaming.state.in_memory_key_value import InMemoryKeyValueStore
from streaming.state.key_schema import SessionKeySchema, TimeFirstWindowKeySchema, WindowKeySchema
from streaming.state.key_value_bytes import KeyValueBytesStore
from streaming.state.key_value_store import KeyValueStore, TimestampedKeyValueStore
from streaming.state.metered import MeteredStore
from streaming.state.rocksdb_key_value import RocksDBKeyValueStore
from streaming.state.segmented_bytes_store import SegmentedBytesStore
from streaming.state.session_bytes import SegmentedSessionStore, SessionBytesStore
from streaming.state.session_store import SessionStore
from streaming.state.stores import (
    KeyValueBytesStoreSupplier,
    KeyValueStoreBuilder,
    SessionBytesStoreSupplier,
    SessionStoreBuilder,
    StoreBuilder,
    Stores,
    TimestampedKeyValueStoreBuilder,
    TimestampedWindowStoreBuilder,
    WindowBytesStoreSupplier,
    WindowStoreBuilder,
    to_millis,
)
from streaming.state.value_and_timestamp import ValueAndTimestamp, ValueAndTimestampSerde
from streaming.state.window_bytes import SegmentedWindowStore, WindowBytesStore
from streaming.state.window_store import TimestampedWindowStore, WindowStore
from streaming.windowed import SessionWindow, TimeWindow, UnlimitedWindow, Window, Windowed

# Kafka class names for the typed layers
MeteredKeyValueStore = KeyValueStore
MeteredTimestampedKeyValueStore = TimestampedKeyValueStore
MeteredWindowStore = WindowStore
MeteredTimestampedWindowStore = TimestampedWindowStore
MeteredSessionStore = SessionStore

__all__ = [
    "DEFAULT_CACHE_MAX_BYTES",
    "EMPTY_RECORD_CONTEXT",
    "CachingKeyValueStore",
    "CachingSessionStore",
    "CachingWindowStore",
    "ChangeLoggingKeyValueBytesStore",
    "ChangeLoggingSessionBytesStore",
    "ChangeLoggingTimestampedKeyValueBytesStore",
    "ChangeLoggingTimestampedWindowBytesStore",
    "ChangeLoggingWindowBytesStore",
    "InMemoryKeyValueStore",
    "InMemoryStateStoreContext",
    "KeyValueBytesStore",
    "KeyValueBytesStoreSupplier",
    "KeyValueStore",
    "KeyValueStoreBuilder",
    "LRUCacheEntry",
    "MeteredKeyValueStore",
    "MeteredSessionStore",
    "MeteredStore",
    "MeteredTimestampedKeyValueStore",
    "MeteredTimestampedWindowStore",
    "MeteredWindowStore",
    "NamedCache",
    "RecordContext",
    "RocksDBKeyValueStore",
    "SegmentedBytesStore",
    "SegmentedSessionStore",
    "SegmentedWindowStore",
    "SessionBytesStore",
    "SessionBytesStoreSupplier",
    "SessionKeySchema",
    "SessionStore",
    "SessionStoreBuilder",
    "SessionWindow",
    "StateStore",
    "StateStoreContext",
    "StoreBuilder",
    "Stores",
    "ThreadCache",
    "TimeFirstWindowKeySchema",
    "TimeWindow",
    "TimestampedKeyValueStore",
    "TimestampedKeyValueStoreBuilder",
    "TimestampedWindowStore",
    "TimestampedWindowStoreBuilder",
    "UnlimitedWindow",
    "ValueAndTimestamp",
    "ValueAndTimestampSerde",
    "Window",
    "WindowBytesStore",
    "WindowBytesStoreSupplier",
    "WindowKeySchema",
    "WindowStore",
    "WindowStoreBuilder",
    "Windowed",
    "WrappedStateStore",
    "changelog_topic",
    "to_millis",
]
