"""Bytes-level session store contract and its segmented implementation (Kafka's
RocksDBSessionStore over a SessionKeySchema segmented store; also used in memory).

Iterators yield ``(schema_key, value)`` with ``SessionKeySchema.split(schema_key) ->
(key bytes, start, end)``, ordered segment (by end time) by segment, then by
``[key][end][start]`` bytes inside a segment (Kafka's RocksDB order).
"""

from __future__ import annotations

from collections.abc import Iterator

from streaming.state.api import StateStore, WrappedStateStore
from streaming.state.key_schema import SESSION_KEY_SCHEMA
from streaming.state.segmented_bytes_store import SegmentedBytesStore

BytesKV = tuple[bytes, bytes]
_store_key = SESSION_KEY_SCHEMA.store_key
_split = SESSION_KEY_SCHEMA.split


class SessionBytesStore(StateStore):
    """Session store over bytes keyed by (key bytes, session start, session end)."""

    retention_period: int
    segment_interval: int

    def put(self, key: bytes, start: int, end: int, value: bytes | None) -> None:
        raise NotImplementedError

    def remove(self, key: bytes, start: int, end: int) -> None:
        raise NotImplementedError

    def put_schema_key(self, schema_key: bytes, value: bytes | None) -> None:
        """``put`` of the session ``SessionKeySchema.split(schema_key)`` names (the key the
        iterators yield): layers that store or log that very key skip splitting it."""
        key, start, end = _split(schema_key)
        self.put(key, start, end, value)

    def remove_schema_key(self, schema_key: bytes) -> None:
        """``remove`` of the session ``schema_key`` names (see ``put_schema_key``)."""
        key, start, end = _split(schema_key)
        self.remove(key, start, end)

    def fetch_session(self, key: bytes, start: int, end: int) -> bytes | None:
        raise NotImplementedError

    def find_sessions(
        self,
        key_from: bytes | None,
        key_to: bytes | None,
        earliest_session_end_time: int,
        latest_session_start_time: int,
        forward: bool = True,
        single_key: bool = False,
    ) -> Iterator[BytesKV]:
        raise NotImplementedError


class WrappedSessionBytesStore(WrappedStateStore, SessionBytesStore):
    """Base for session layers: delegates reads to the wrapped store."""

    wrapped: SessionBytesStore

    def __init__(self, wrapped: SessionBytesStore) -> None:
        super().__init__(wrapped)
        self.retention_period = wrapped.retention_period
        self.segment_interval = wrapped.segment_interval

    def fetch_session(self, key: bytes, start: int, end: int) -> bytes | None:
        return self.wrapped.fetch_session(key, start, end)

    def find_sessions(self, key_from, key_to, earliest, latest, forward=True, single_key=False):
        return self.wrapped.find_sessions(key_from, key_to, earliest, latest, forward, single_key)


class SegmentedSessionStore(WrappedStateStore, SessionBytesStore):
    """Session store on a SegmentedBytesStore with the SessionKeySchema."""

    def __init__(self, segmented: SegmentedBytesStore) -> None:
        super().__init__(segmented)
        self.segmented = segmented
        self.retention_period = segmented.retention_period
        self.segment_interval = segmented.segment_interval

    def put(self, key: bytes, start: int, end: int, value: bytes | None) -> None:
        self.segmented.put(_store_key(key, start, end), value)

    def remove(self, key: bytes, start: int, end: int) -> None:
        self.segmented.remove(_store_key(key, start, end))

    def put_schema_key(self, schema_key: bytes, value: bytes | None) -> None:
        self.segmented.put(schema_key, value)

    def remove_schema_key(self, schema_key: bytes) -> None:
        self.segmented.remove(schema_key)

    def fetch_session(self, key: bytes, start: int, end: int) -> bytes | None:
        return self.segmented.get(_store_key(key, start, end))

    def find_sessions(self, key_from, key_to, earliest, latest, forward=True, single_key=False):
        if single_key:
            return self.segmented.fetch(key_from, earliest, latest, forward)
        return self.segmented.fetch_range(key_from, key_to, earliest, latest, forward)
