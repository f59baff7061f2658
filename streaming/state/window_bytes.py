"""Bytes-level window store contract and its segmented implementation (Kafka's RocksDBWindowStore,
RocksDBTimeOrderedWindowStore; also used for the in-memory window store).

Every iterator yields ``(schema_key, value)`` where ``schema_key`` is the store key in the
store's key schema (``key_schema.split(schema_key) -> (key bytes, window start)``). Ordering is
Kafka's RocksDB ordering: segment by segment, key bytes inside a segment. Kafka's Java
InMemoryWindowStore orders ``fetch_all``/``all`` by time first; we use the RocksDB order for the
in-memory store too so that both give identical outputs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from streaming.state.api import StateStore, WrappedStateStore
from streaming.state.segmented_bytes_store import SegmentedBytesStore

if TYPE_CHECKING:
    from streaming.state.key_schema import TimeFirstWindowKeySchema, WindowKeySchema

BytesKV = tuple[bytes, bytes]


class WindowBytesStore(StateStore):
    """Window store over bytes keyed by (key bytes, window start)."""

    key_schema: WindowKeySchema | TimeFirstWindowKeySchema
    window_size: int
    retain_duplicates: bool
    retention_period: int
    segment_interval: int

    def put(self, key: bytes, value: bytes | None, window_start: int) -> None:
        raise NotImplementedError

    def fetch(self, key: bytes, window_start: int) -> bytes | None:
        raise NotImplementedError

    def fetch_range(
        self, key: bytes, time_from: int, time_to: int, forward: bool = True
    ) -> Iterator[BytesKV]:
        raise NotImplementedError

    def fetch_key_range(
        self,
        key_from: bytes | None,
        key_to: bytes | None,
        time_from: int,
        time_to: int,
        forward: bool = True,
    ) -> Iterator[BytesKV]:
        raise NotImplementedError

    def fetch_all(self, time_from: int, time_to: int, forward: bool = True) -> Iterator[BytesKV]:
        raise NotImplementedError

    def all(self, forward: bool = True) -> Iterator[BytesKV]:
        raise NotImplementedError


class WrappedWindowBytesStore(WrappedStateStore, WindowBytesStore):
    """Base for window layers: exposes the wrapped store's schema and sizes."""

    wrapped: WindowBytesStore

    def __init__(self, wrapped: WindowBytesStore) -> None:
        super().__init__(wrapped)
        self.key_schema = wrapped.key_schema
        self.window_size = wrapped.window_size
        self.retain_duplicates = wrapped.retain_duplicates
        self.retention_period = wrapped.retention_period
        self.segment_interval = wrapped.segment_interval

    def fetch(self, key: bytes, window_start: int) -> bytes | None:
        return self.wrapped.fetch(key, window_start)

    def fetch_range(self, key, time_from, time_to, forward=True):
        return self.wrapped.fetch_range(key, time_from, time_to, forward)

    def fetch_key_range(self, key_from, key_to, time_from, time_to, forward=True):
        return self.wrapped.fetch_key_range(key_from, key_to, time_from, time_to, forward)

    def fetch_all(self, time_from, time_to, forward=True):
        return self.wrapped.fetch_all(time_from, time_to, forward)

    def all(self, forward=True):
        return self.wrapped.all(forward)


class SegmentedWindowStore(WrappedStateStore, WindowBytesStore):
    """Window store on a SegmentedBytesStore; keeps the duplicate sequence number."""

    def __init__(
        self,
        segmented: SegmentedBytesStore,
        retain_duplicates: bool,
        window_size: int,
    ) -> None:
        super().__init__(segmented)
        self.segmented = segmented
        self.key_schema = segmented.key_schema
        self.window_size = window_size
        self.retain_duplicates = retain_duplicates
        self.retention_period = segmented.retention_period
        self.segment_interval = segmented.segment_interval
        self.seqnum = 0
        self._store_key = segmented.key_schema.store_key

    def put(self, key: bytes, value: bytes | None, window_start: int) -> None:
        # Skip if value is None and duplicates are allowed since this delete is a no-op
        if self.retain_duplicates:
            if value is None:
                if not self.segmented.persistent:
                    # Kafka's InMemoryWindowStore still observes the time of a no-op delete
                    segmented = self.segmented
                    segmented.observed_stream_time = max(
                        segmented.observed_stream_time, window_start
                    )
                return
            self.seqnum = (self.seqnum + 1) & 0x7FFFFFFF
        # both window schemas segment by window start
        self.segmented.put_at(self._store_key(key, window_start, self.seqnum), window_start, value)

    def fetch(self, key: bytes, window_start: int) -> bytes | None:
        # like Kafka, looks up the current sequence number only
        return self.segmented.get(self._store_key(key, window_start, self.seqnum))

    def fetch_range(self, key, time_from, time_to, forward=True):
        return self.segmented.fetch(key, time_from, time_to, forward)

    def fetch_key_range(self, key_from, key_to, time_from, time_to, forward=True):
        return self.segmented.fetch_range(key_from, key_to, time_from, time_to, forward)

    def fetch_all(self, time_from, time_to, forward=True):
        return self.segmented.fetch_all(time_from, time_to, forward)

    def all(self, forward=True):
        return self.segmented.all(forward)
