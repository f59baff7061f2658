"""Typed window stores (Kafka's MeteredWindowStore / MeteredTimestampedWindowStore)."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

from streaming.state.api import StateStore, StateStoreContext
from streaming.state.key_schema import MAX_LONG, WindowKeySchema
from streaming.state.metered import MeteredStore
from streaming.state.value_and_timestamp import ValueAndTimestampSerde
from streaming.state.window_bytes import (
    SegmentedWindowStore,
    WindowBytesStore,
    WrappedWindowBytesStore,
)
from streaming.windowed import MAX_TIMESTAMP, TimeWindow, Windowed

_unpack_long = struct.Struct(">q").unpack_from


class WindowStore(MeteredStore):
    """Window store of objects keyed by (key, window start).

    Orders like Kafka's RocksDB window store: single-key fetches by window start; key-range,
    ``fetch_all`` and ``all`` by segment, then by the key schema's bytes (key-first stores:
    key bytes then start; time-ordered stores: start then key bytes).
    """

    wrapped: WindowBytesStore

    def __init__(self, wrapped: WindowBytesStore, key_serde: Any, value_serde: Any) -> None:
        super().__init__(wrapped, key_serde, value_serde)
        self.window_size = wrapped.window_size
        self.retain_duplicates = wrapped.retain_duplicates
        self.retention_period = wrapped.retention_period
        self.segment_interval = wrapped.segment_interval
        self.key_schema = wrapped.key_schema
        #: ``fetch_range(raw key, time_from, time_to, forward)`` of the first layer that does
        #: more than pass it on (of the segmented store, under a SegmentedWindowStore)
        self._fetch_range: Any = wrapped.fetch_range
        #: ``list(_fetch_range(raw key, time_from, time_to, True))``
        self._fetch_list: Any = self._listed_fetch

    def init(self, context: StateStoreContext, root: StateStore | None = None) -> None:
        super().init(context, root)
        layer: Any = self.wrapped
        while type(layer).fetch_range is WrappedWindowBytesStore.fetch_range:
            layer = layer.wrapped
        if type(layer) is SegmentedWindowStore:
            self._fetch_range = layer.segmented.fetch
            self._fetch_list = layer.segmented.fetch_list
        else:
            self._fetch_range = layer.fetch_range
            self._fetch_list = self._listed_fetch

    def _windowed(self, raw: bytes) -> Windowed:
        key, start = self.key_schema.split(raw)
        end = start + self.window_size
        return Windowed(
            self._kdes(self.topic, key), TimeWindow(start, MAX_TIMESTAMP if end > MAX_LONG else end)
        )

    _decode_key = _windowed

    def _decode_windowed(self, it: Iterator[tuple[bytes, bytes]]) -> Iterator[tuple[Any, Any]]:
        split = self.key_schema.split
        topic = self.topic
        kdes = self._kdes
        vdes = self._vdes
        size = self.window_size
        for k, v in it:
            key, start = split(k)
            end = start + size
            yield (
                Windowed(
                    kdes(topic, key), TimeWindow(start, MAX_TIMESTAMP if end > MAX_LONG else end)
                ),
                vdes(topic, v),
            )

    def _decode_times(self, it: Iterator[tuple[bytes, bytes]]) -> Iterator[tuple[int, Any]]:
        topic = self.topic
        vdes = self._vdes
        if type(self.key_schema) is WindowKeySchema:
            # [key][8-byte start][4-byte seqnum]: extract_timestamp inlined
            for k, v in it:
                yield _unpack_long(k, len(k) - 12)[0], vdes(topic, v)
            return
        ts = self.key_schema.extract_timestamp
        for k, v in it:
            yield ts(k), vdes(topic, v)

    def _listed_fetch(self, key: bytes, time_from: int, time_to: int) -> list[tuple[bytes, bytes]]:
        return list(self._fetch_range(key, time_from, time_to, True))

    def fetch_range_list(self, key: Any, time_from: int, time_to: int) -> list[tuple[int, Any]]:
        """``list(fetch_range(key, time_from, time_to))``."""
        topic = self.topic
        it = self._fetch_list(self._kser(topic, key), time_from, time_to)
        if not it:
            return []
        vdes = self._vdes
        if type(self.key_schema) is WindowKeySchema:
            return [(_unpack_long(k, len(k) - 12)[0], vdes(topic, v)) for k, v in it]
        ts = self.key_schema.extract_timestamp
        return [(ts(k), vdes(topic, v)) for k, v in it]

    def put(self, key: Any, value: Any, window_start: int) -> None:
        """Put the value of a window; None deletes."""
        topic = self.topic
        self.wrapped.put(
            self._kser(topic, key),
            None if value is None else self._vser(topic, value),
            window_start,
        )

    def fetch(self, key: Any, window_start: int, *more: Any) -> Any:
        """Kafka's overloads of ``fetch``: ``fetch(key, window_start)`` -> the value;
        ``fetch(key, time_from, time_to)`` -> (window start, value) of one key;
        ``fetch(key_from, key_to, time_from, time_to)`` -> (Windowed, value) of a key range
        (None = unbounded)."""
        if more:
            if len(more) == 1:
                return self.fetch_range(key, window_start, more[0])
            if len(more) == 2:
                return self.fetch_key_range(key, window_start, *more)
            raise TypeError(f"fetch() takes 2 to 4 arguments, got {2 + len(more)}")
        topic = self.topic
        raw = self.wrapped.fetch(self._kser(topic, key), window_start)
        return None if raw is None else self._vdes(topic, raw)

    def backward_fetch(self, key: Any, time_from: Any, time_to: int, *more: int) -> Any:
        """``backward_fetch(key, time_from, time_to)`` or ``backward_fetch(key_from, key_to,
        time_from, time_to)``: ``fetch``'s ranges, latest window first."""
        if not more:
            return self.backward_fetch_range(key, time_from, time_to)
        if len(more) == 1:
            return self.backward_fetch_key_range(key, time_from, time_to, more[0])
        raise TypeError(f"backward_fetch() takes 3 or 4 arguments, got {3 + len(more)}")

    def fetch_range(self, key: Any, time_from: int, time_to: int) -> Iterator[tuple[int, Any]]:
        """(window start, value) of one key with time_from <= start <= time_to, by start."""
        raw = self._kser(self.topic, key)
        return self._decode_times(self._fetch_range(raw, time_from, time_to, True))

    def backward_fetch_range(
        self, key: Any, time_from: int, time_to: int
    ) -> Iterator[tuple[int, Any]]:
        raw = self._kser(self.topic, key)
        return self._decode_times(self._fetch_range(raw, time_from, time_to, False))

    def _raw_or_none(self, key: Any) -> bytes | None:
        return None if key is None else self._kser(self.topic, key)

    def fetch_key_range(
        self, key_from: Any, key_to: Any, time_from: int, time_to: int
    ) -> Iterator[tuple[Windowed, Any]]:
        """(Windowed, value) for keys in [key_from, key_to] (None = unbounded)."""
        return self._decode_windowed(
            self.wrapped.fetch_key_range(
                self._raw_or_none(key_from), self._raw_or_none(key_to), time_from, time_to, True
            )
        )

    def backward_fetch_key_range(
        self, key_from: Any, key_to: Any, time_from: int, time_to: int
    ) -> Iterator[tuple[Windowed, Any]]:
        return self._decode_windowed(
            self.wrapped.fetch_key_range(
                self._raw_or_none(key_from), self._raw_or_none(key_to), time_from, time_to, False
            )
        )

    def fetch_all(self, time_from: int, time_to: int) -> Iterator[tuple[Windowed, Any]]:
        return self._decode_windowed(self.wrapped.fetch_all(time_from, time_to, True))

    def backward_fetch_all(self, time_from: int, time_to: int) -> Iterator[tuple[Windowed, Any]]:
        return self._decode_windowed(self.wrapped.fetch_all(time_from, time_to, False))

    def all(self) -> Iterator[tuple[Windowed, Any]]:
        return self._decode_windowed(self.wrapped.all(True))

    def backward_all(self) -> Iterator[tuple[Windowed, Any]]:
        return self._decode_windowed(self.wrapped.all(False))


class TimestampedWindowStore(WindowStore):
    """Window store whose values are ValueAndTimestamp."""

    def _wrap_value_serde(self, value_serde: Any) -> Any:
        if isinstance(value_serde, ValueAndTimestampSerde):
            return value_serde
        return ValueAndTimestampSerde(value_serde)
