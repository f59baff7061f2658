"""Typed session stores (Kafka's MeteredSessionStore)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from streaming.state.api import StateStore, StateStoreContext
from streaming.state.key_schema import MAX_LONG, SESSION_KEY_SCHEMA
from streaming.state.metered import MeteredStore
from streaming.state.session_bytes import (
    SegmentedSessionStore,
    SessionBytesStore,
    WrappedSessionBytesStore,
)
from streaming.windowed import SessionWindow, Windowed

_split = SESSION_KEY_SCHEMA.split


class SessionStore(MeteredStore):
    """Session store of aggregates keyed by Windowed(key, SessionWindow(start, end)).

    ``find_sessions`` returns sessions with ``end >= earliest_session_end_time`` and
    ``start <= latest_session_start_time``, ordered like Kafka's RocksDB session store: by end
    time segment, then ``[key][end][start]`` bytes (for one key: by end, then start).
    """

    wrapped: SessionBytesStore

    def __init__(self, wrapped: SessionBytesStore, key_serde: Any, value_serde: Any) -> None:
        super().__init__(wrapped, key_serde, value_serde)
        self.retention_period = wrapped.retention_period
        self.segment_interval = wrapped.segment_interval
        #: ``SegmentedBytesStore.fetch`` of the segmented store under layers that only pass
        #: reads on, else None (see ``find_session_keys``)
        self._segmented_fetch: Any = None

    def init(self, context: StateStoreContext, root: StateStore | None = None) -> None:
        super().init(context, root)
        layer: Any = self.wrapped
        while type(layer).find_sessions is WrappedSessionBytesStore.find_sessions:
            layer = layer.wrapped
        if type(layer) is SegmentedSessionStore:
            self._segmented_fetch = layer.segmented.fetch

    def _decode_key(self, schema_key: bytes) -> Windowed:
        key, start, end = _split(schema_key)
        return Windowed(self._kdes(self.topic, key), SessionWindow(start, end))

    def _decode(self, it: Iterator[tuple[bytes, bytes]]) -> Iterator[tuple[Windowed, Any]]:
        topic = self.topic
        kdes = self._kdes
        vdes = self._vdes
        for k, v in it:
            key, start, end = _split(k)
            yield Windowed(kdes(topic, key), SessionWindow(start, end)), vdes(topic, v)

    def put(self, session_key: Windowed, aggregate: Any) -> None:
        """Put a session's aggregate; None removes it."""
        topic = self.topic
        w = session_key.window
        self.wrapped.put(
            self._kser(topic, session_key.key),
            w.start,
            w.end,
            None if aggregate is None else self._vser(topic, aggregate),
        )

    def remove(self, session_key: Windowed) -> None:
        w = session_key.window
        self.wrapped.remove(self._kser(self.topic, session_key.key), w.start, w.end)

    # -- by store key: what a processor that reads and writes sessions of one key uses ------

    def find_session_keys(
        self, raw_key: bytes, earliest_session_end_time: int, latest_session_start_time: int
    ) -> Iterator[tuple[bytes, bytes]]:
        """``find_sessions`` of the serialized key ``raw_key``, undecoded: (store key,
        aggregate bytes) pairs; ``SessionKeySchema.split(store_key) -> (raw_key, start,
        end)``."""
        fetch = self._segmented_fetch
        if fetch is not None:
            # what SegmentedSessionStore.find_sessions does for one key, without the layers
            return fetch(raw_key, earliest_session_end_time, latest_session_start_time, True)
        return self.wrapped.find_sessions(
            raw_key, raw_key, earliest_session_end_time, latest_session_start_time, True, True
        )

    def put_schema_key(self, schema_key: bytes, aggregate: Any) -> None:
        """``put`` of the session the store key ``schema_key`` names (None removes it)."""
        self.wrapped.put_schema_key(
            schema_key, None if aggregate is None else self._vser(self.topic, aggregate)
        )

    def remove_schema_key(self, schema_key: bytes) -> None:
        """``remove`` of the session the store key ``schema_key`` names."""
        self.wrapped.remove_schema_key(schema_key)

    def fetch_session(self, key: Any, session_start: int, session_end: int) -> Any:
        topic = self.topic
        raw = self.wrapped.fetch_session(self._kser(topic, key), session_start, session_end)
        return None if raw is None else self._vdes(topic, raw)

    def find_sessions(
        self, key: Any, earliest_session_end_time: Any, latest_session_start_time: int, *more: int
    ) -> Iterator[tuple[Windowed, Any]]:
        """Sessions of ``key`` ending at or after ``earliest_session_end_time`` and starting
        at or before ``latest_session_start_time``; with four arguments, of the key range
        ``find_sessions(key_from, key_to, earliest_end, latest_start)`` (Kafka's overloads)."""
        if more:
            return self.find_sessions_range(
                key, earliest_session_end_time, latest_session_start_time, *more
            )
        raw = self._kser(self.topic, key)
        return self._decode(
            self.wrapped.find_sessions(
                raw, raw, earliest_session_end_time, latest_session_start_time, True, True
            )
        )

    def backward_find_sessions(
        self, key: Any, earliest_session_end_time: Any, latest_session_start_time: int, *more: int
    ) -> Iterator[tuple[Windowed, Any]]:
        if more:
            return self.backward_find_sessions_range(
                key, earliest_session_end_time, latest_session_start_time, *more
            )
        raw = self._kser(self.topic, key)
        return self._decode(
            self.wrapped.find_sessions(
                raw, raw, earliest_session_end_time, latest_session_start_time, False, True
            )
        )

    def _raw_or_none(self, key: Any) -> bytes | None:
        return None if key is None else self._kser(self.topic, key)

    def find_sessions_range(
        self,
        key_from: Any,
        key_to: Any,
        earliest_session_end_time: int,
        latest_session_start_time: int,
    ) -> Iterator[tuple[Windowed, Any]]:
        return self._decode(
            self.wrapped.find_sessions(
                self._raw_or_none(key_from),
                self._raw_or_none(key_to),
                earliest_session_end_time,
                latest_session_start_time,
                True,
            )
        )

    def backward_find_sessions_range(
        self,
        key_from: Any,
        key_to: Any,
        earliest_session_end_time: int,
        latest_session_start_time: int,
    ) -> Iterator[tuple[Windowed, Any]]:
        return self._decode(
            self.wrapped.find_sessions(
                self._raw_or_none(key_from),
                self._raw_or_none(key_to),
                earliest_session_end_time,
                latest_session_start_time,
                False,
            )
        )

    def fetch(self, key: Any, *key_to: Any) -> Iterator[tuple[Windowed, Any]]:
        """All sessions of a key, or with two arguments of the keys in ``[key, key_to]``
        (None = unbounded)."""
        if key_to:
            return self.fetch_range(key, *key_to)
        return self.find_sessions(key, 0, MAX_LONG)

    def backward_fetch(self, key: Any, *key_to: Any) -> Iterator[tuple[Windowed, Any]]:
        if key_to:
            return self.backward_fetch_range(key, *key_to)
        return self.backward_find_sessions(key, 0, MAX_LONG)

    def fetch_range(self, key_from: Any, key_to: Any) -> Iterator[tuple[Windowed, Any]]:
        return self.find_sessions_range(key_from, key_to, 0, MAX_LONG)

    def backward_fetch_range(self, key_from: Any, key_to: Any) -> Iterator[tuple[Windowed, Any]]:
        return self.backward_find_sessions_range(key_from, key_to, 0, MAX_LONG)
