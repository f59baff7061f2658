"""Session-window aggregation: ``windowed_by(SessionWindows...)`` then count/reduce/aggregate.

Port of Kafka Streams 4.1
``org.apache.kafka.streams.kstream.internals.KStreamSessionWindowAggregate`` (with its
``SessionCacheFlushListener`` and the ``TimestampedTupleForwarder`` it uses):

* records with a null key are dropped (null *values* are aggregated: Kafka only checks the key);
* ``observedStreamTime`` is per processor; ``windowCloseTime = streamTime - grace - gap``;
* every session of the key with ``end >= ts - gap`` and ``start <= ts + gap`` is merged
  (``merger(key, agg, session_agg)`` in the store's order, starting from ``initializer()``);
* a record whose merged session ends before ``windowCloseTime`` is dropped (late);
* otherwise, when the merged window is not exactly ``[ts, ts]``, each merged-away session is
  removed and a tombstone ``Change(None, old if send_old_values else None)`` is forwarded with
  the session's end as timestamp; then the new aggregate is put under
  ``Windowed(key, SessionWindow(start, end))`` and ``Change(agg, None)`` is forwarded with
  timestamp = session end and no headers (Kafka builds a fresh ``Record``);
* with a caching store, updates are forwarded by the cache flush instead (timestamp = session
  end, headers of the cached record);
* ``EmitStrategy.on_window_close()``: no updates; after each record (throttled by the wall clock
  with ``__emit.interval.ms.kstreams.windowed.aggregation__``, default 1000 ms) every session
  with ``lastEmitCloseTime <= end < windowCloseTime`` is emitted once, ordered like Kafka's
  time-ordered session store ``[end][start][key bytes]``, with the triggering record's headers.

The DSL passes, as Kafka's SessionWindowedKStreamImpl does:

* count: ``lambda: 0``, ``lambda k, v, a: a + 1``, ``lambda k, a, b: a + b``;
* reduce: ``lambda: None``, ``agg = lambda k, v, a: v if a is None else reducer(a, v)`` and the
  merger built from that aggregator: ``lambda k, a, b: agg(k, b, a)``, i.e.
  ``b if a is None else reducer(a, b)`` (the first merge starts from the ``None`` initializer);
* aggregate: the user's initializer, aggregator and merger.
"""

from __future__ import annotations

import contextlib
import logging
import struct
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from streaming.dsl.change import Change
from streaming.dsl.processors.late import LateRecordReporter
from streaming.dsl.processors.quiet_close import schedule_quiet_close
from streaming.dsl.processors.table import WindowedAggregateSupplier
from streaming.dsl.processors.table_getters import SessionValueGetterSupplier
from streaming.dsl.processors.window_aggregate import NO_RECORD
from streaming.dsl.windows import EmitStrategy, SessionWindows
from streaming.state.key_schema import SESSION_KEY_SCHEMA
from streaming.state.segmented_bytes_store import SegmentedBytesStore
from streaming.state.session_bytes import SessionBytesStore
from streaming.state.session_store import SessionStore
from streaming.topology.processor import Processor, PunctuationType, Record
from streaming.windowed import MAX_TIMESTAMP, SessionWindow, Windowed

if TYPE_CHECKING:
    from streaming.runtime.context import TaskContext

log = logging.getLogger(__name__)

_session_store_key = SESSION_KEY_SCHEMA.store_key
#: (end, start) of a session store key, given where its 16-byte suffix starts
_unpack_end_start = struct.Struct(">qq").unpack_from

#: Kafka's ``ConsumerRecord.NO_TIMESTAMP``
NO_TIMESTAMP = -1

#: Kafka's ``StreamsConfig.InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION``
#: (Kafka's TopologyTestDriver sets it to 0 unless configured).
EMIT_INTERVAL_CONFIG = "__emit.interval.ms.kstreams.windowed.aggregation__"
DEFAULT_EMIT_INTERVAL_MS = 1000

# Kafka keeps the last emitted window close time as task "processor metadata" committed with the
# offsets; when the context offers no such API it is kept per context object here.
_FALLBACK_METADATA: weakref.WeakKeyDictionary[Any, dict[str, int]] = weakref.WeakKeyDictionary()


def _metadata_get(context: Any, key: str) -> int | None:
    getter = getattr(context, "processor_metadata_for_key", None)
    if getter is not None:
        return getter(key)
    try:
        return _FALLBACK_METADATA.get(context, {}).get(key)
    except TypeError:
        return None


def _metadata_put(context: Any, key: str, value: int) -> None:
    adder = getattr(context, "add_processor_metadata_key_value", None)
    if adder is not None:
        adder(key, value)
        return
    with contextlib.suppress(TypeError):
        _FALLBACK_METADATA.setdefault(context, {})[key] = value


def _emit_interval_ms(app_configs: Any) -> int:
    """Kafka's ``InternalConfig.getLong(configs, key, 1000L)``."""
    value = app_configs.get(EMIT_INTERVAL_CONFIG) if app_configs else None
    return DEFAULT_EMIT_INTERVAL_MS if value is None else int(value)


class KStreamSessionWindowAggregateSupplier(WindowedAggregateSupplier):
    """Session-window ``aggregate`` (and ``count``/``reduce``) into a session store."""

    store_name: str

    def __init__(
        self,
        windows: SessionWindows,
        store_name: str,
        emit_strategy: EmitStrategy | None,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
        merger: Callable[[Any, Any, Any], Any],
    ) -> None:
        self.windows = windows
        self.store_name = store_name
        self.emit_strategy = emit_strategy or EmitStrategy.on_window_update()
        self.initializer = initializer
        self.aggregator = aggregator
        self.merger = merger

    def grace_for_suppression_ms(self) -> int:
        """The suppression duration Kafka derives for final results (GracePeriodGraphNode)."""
        return self.windows.grace_ms + self.windows.gap_ms

    def __call__(self) -> Processor:
        return KStreamSessionWindowAggregateProcessor(self)

    def view(self) -> SessionValueGetterSupplier:
        return SessionValueGetterSupplier(self.store_name)


class KStreamSessionWindowAggregateProcessor(Processor):
    context: TaskContext  # the runtime context: record context and current node

    def __init__(self, supplier: KStreamSessionWindowAggregateSupplier) -> None:
        self.s = supplier
        self.observed_stream_time = NO_TIMESTAMP
        self.last_emit_window_close_time = NO_TIMESTAMP
        self.next_time_to_emit = 0
        self.emit_interval_ms = DEFAULT_EMIT_INTERVAL_MS
        self.segmented: SegmentedBytesStore | None = None
        #: the stream time past which a record's puts could drop a closed session not yet
        #: emitted (see ``_emit_before_expiry``)
        self.emit_before_puts_after = MAX_TIMESTAMP
        self.by_store_key = False

    def init(self, context: Any) -> None:
        super().init(context)
        s = self.s
        self.store = context.get_state_store(s.store_name)
        self.late = LateRecordReporter(context, s.late_output)
        self.node = context.current_node
        self.gap = s.windows.gap_ms
        self.close_offset = s.windows.grace_ms + s.windows.gap_ms
        self.send_old_values = s.send_old_values
        self.emit_final = s.emit_strategy.kind == EmitStrategy.ON_WINDOW_CLOSE
        if self.emit_final:
            last = _metadata_get(context, s.store_name)
            if last is not None:
                self.last_emit_window_close_time = last
            self.emit_interval_ms = _emit_interval_ms(getattr(context, "app_configs", None))
            find_layer = getattr(self.store, "find_layer", None)
            self.segmented = find_layer(SegmentedBytesStore) if find_layer is not None else None
            if self.emit_interval_ms > 0:
                context.schedule(
                    self.emit_interval_ms, PunctuationType.WALL_CLOCK_TIME, self._emit_held_back
                )
            self._set_last_emit(self.last_emit_window_close_time)
            self.caching = False  # final results are forwarded directly, never by a cache
        else:
            set_listener = getattr(self.store, "set_flush_listener", None)
            self.caching = bool(
                set_listener is not None and set_listener(self._flushed, self.send_old_values)
            )
        #: the store is this package's SessionStore: ``process`` works on its store keys
        store_type = type(self.store)
        self.by_store_key = (
            issubclass(store_type, SessionStore)
            and all(
                getattr(store_type, name) is getattr(SessionStore, name)
                for name in ("find_sessions", "put", "remove", "_decode", "find_session_keys")
            )
            and isinstance(self.store.wrapped, SessionBytesStore)
        )
        schedule_quiet_close(
            context, lambda: self.observed_stream_time, self._quiet_advance, s.close_quiet_ms
        )

    def _quiet_advance(self, stream_time: int) -> None:
        """The input went quiet (``close_when_quiet``, else ``window.close.quiet.ms``): stream
        time follows the wall clock, and the sessions it closed are emitted now."""
        self.observed_stream_time = stream_time
        if self.emit_final:
            self._emit_before_expiry(NO_RECORD, stream_time)

    # -- processing -------------------------------------------------------------------

    def process(self, record: Record) -> None:
        key = record.key
        if key is None:
            self._log_skipped_null_key()
            return
        s = self.s
        timestamp = record.timestamp
        if timestamp > self.observed_stream_time:
            self.observed_stream_time = timestamp
            if timestamp > self.emit_before_puts_after:
                self._emit_before_expiry(record, timestamp)
        window_close_time = self.observed_stream_time - self.close_offset

        if self.by_store_key:
            self._process_by_store_key(record, key, timestamp, window_close_time)
            if self.emit_final:
                self._maybe_forward_final_result(record, window_close_time)
            return

        gap = self.gap
        merged = list(self.store.find_sessions(key, timestamp - gap, timestamp + gap))
        agg = s.initializer()
        start = end = timestamp
        if merged:
            merger = s.merger
            for session_key, session_agg in merged:
                agg = merger(key, agg, session_agg)
                w = session_key.window
                if w.start < start:
                    start = w.start
                if w.end > end:
                    end = w.end

        if end < window_close_time:
            self._skip_expired(record, window_close_time, start, end)
        else:
            store = self.store
            emit_updates = not self.emit_final
            if start != timestamp or end != timestamp:  # !mergedWindow.equals(newSessionWindow)
                for session_key, session_agg in merged:
                    store.remove(session_key)
                    if emit_updates:
                        self._forward_update(session_key, None, session_agg)
            agg = s.aggregator(key, record.value, agg)
            session_key = Windowed(key, SessionWindow(start, end))
            store.put(session_key, agg)
            if emit_updates:
                self._forward_update(session_key, agg, None)

        if self.emit_final:
            self._maybe_forward_final_result(record, window_close_time)

    def _process_by_store_key(
        self, record: Record, key: Any, timestamp: int, window_close_time: int
    ) -> None:
        """``process``'s merge and writes on the store keys of the sessions: each session's
        key is read from its store key, never deserialized unless an update is forwarded, and
        the sessions are removed by those store keys."""
        store: SessionStore = self.store
        s = self.s
        topic = store.topic
        raw_key = store._kser(topic, key)
        gap = self.gap
        found = list(store.find_session_keys(raw_key, timestamp - gap, timestamp + gap))
        agg = s.initializer()
        start = end = timestamp
        merged: list[tuple[bytes, int, int, Any]] = []
        if found:
            merger = s.merger
            vdes = store._vdes
            suffix_at = len(raw_key)
            for schema_key, raw_agg in found:
                session_end, session_start = _unpack_end_start(schema_key, suffix_at)
                session_agg = vdes(topic, raw_agg)
                merged.append((schema_key, session_start, session_end, session_agg))
                agg = merger(key, agg, session_agg)
                if session_start < start:
                    start = session_start
                if session_end > end:
                    end = session_end

        if end < window_close_time:
            self._skip_expired(record, window_close_time, start, end)
            return
        emit_updates = not self.emit_final
        if start != timestamp or end != timestamp:  # !mergedWindow.equals(newSessionWindow)
            for schema_key, session_start, session_end, session_agg in merged:
                store.remove_schema_key(schema_key)
                if emit_updates:
                    self._forward_update(
                        Windowed(
                            store._kdes(topic, raw_key), SessionWindow(session_start, session_end)
                        ),
                        None,
                        session_agg,
                    )
        agg = s.aggregator(key, record.value, agg)
        store.put_schema_key(_session_store_key(raw_key, start, end), agg)
        if emit_updates:
            self._forward_update(Windowed(key, SessionWindow(start, end)), agg, None)

    def _forward_update(self, windowed_key: Windowed, new_agg: Any, old_agg: Any) -> None:
        # Kafka: new Record<>(key, new Change<>(newAgg, sendOldValues ? oldAgg : null), end)
        # through TimestampedTupleForwarder (which forwards only without caching)
        if not self.caching:
            self.context.forward(
                Record(
                    windowed_key,
                    Change(new_agg, old_agg if self.send_old_values else None),
                    windowed_key.window.end,
                )
            )

    def _flushed(self, key: Windowed, new_value: Any, old_value: Any, record_context: Any) -> None:
        """Kafka's SessionCacheFlushListener: forward with the session end as timestamp."""
        context = self.context
        previous_node = context.current_node
        previous_rc = context.record_context()
        context.current_node = self.node
        if record_context is not None:
            context.set_record_context(record_context)
        try:
            context.forward(
                Record(
                    key,
                    Change(new_value, old_value),
                    key.window.end,
                    record_context.headers if record_context is not None else (),
                )
            )
        finally:
            context.current_node = previous_node
            context.set_record_context(previous_rc)

    # -- emit on window close -----------------------------------------------------------

    def _emit_held_back(self, _now: int) -> None:
        """Emit the sessions that closed while the throttle held the last look back, though no
        record has come since (see ``AbstractTimeWindowAggregateProcessor._emit_held_back``)."""
        if self.observed_stream_time != NO_TIMESTAMP:
            self._maybe_forward_final_result(
                NO_RECORD, self.observed_stream_time - self.close_offset
            )

    def _emit_before_expiry(self, record: Record, stream_time: int) -> None:
        """Emit the closed sessions now, before the record's puts, whatever the throttle says:
        those puts could drop a closed session not yet emitted (see
        ``AbstractTimeWindowAggregateProcessor.emit_before_expiry``)."""
        self._forward_final_result(record, stream_time - self.close_offset)

    def _set_last_emit(self, window_close_time: int) -> None:
        # sessions ending at the last close time or later (before the first emit: at 0 or
        # later, so event times near the epoch, where no session has closed at the first look,
        # lose none) may wait to be emitted; closed sessions are read from whole live segments
        self.last_emit_window_close_time = window_close_time
        close = max(window_close_time, 0)
        if self.segmented is not None:
            self.emit_before_puts_after = self.segmented.kept_until(close)
        else:
            self.emit_before_puts_after = close + self.close_offset - 1

    def _maybe_forward_final_result(self, record: Record, window_close_time: int) -> None:
        now = self.context.current_system_time_ms()
        if now < self.next_time_to_emit:  # throttle the emit frequency
            return
        self.next_time_to_emit = now + self.emit_interval_ms
        self._forward_final_result(record, window_close_time)

    def _forward_final_result(self, record: Record, window_close_time: int) -> None:
        last = self.last_emit_window_close_time
        if last != NO_TIMESTAMP and last >= window_close_time:
            return  # only emit when the window close time progresses
        # session windows are inclusive: the closed window-end upper bound is close - 1
        upper = window_close_time - 1
        if upper < 0:
            return  # no window ever closed
        lower = last if last > 0 else 0
        if upper < lower:
            return
        forward = self.context.forward
        headers = record.headers
        for windowed, agg in self._fetch_sessions(lower, upper):
            forward(Record(windowed, Change(agg, None), windowed.window.end, headers))
        self._set_last_emit(window_close_time)
        _metadata_put(self.context, self.s.store_name, window_close_time)

    def _fetch_sessions(self, earliest_end: int, latest_end: int) -> Iterable[tuple[Windowed, Any]]:
        """Kafka's time-ordered ``SessionStore.findSessions(earliestEnd, latestEnd)``: all keys,
        ``earliestEnd <= end <= latestEnd``, ordered by ``[end][start][key bytes]``, regardless of
        the store's retention filter (the time-ordered store reads live segments directly); an
        in-memory store reads its live segments too, in the order of Kafka's
        InMemorySessionStore."""
        store = self.store
        fetch = getattr(store, "fetch_sessions", None)
        if fetch is not None:
            return fetch(earliest_end, latest_end)
        return _scan_closed_sessions(store, earliest_end, latest_end)

    # -- logging ------------------------------------------------------------------------

    def _log_skipped_null_key(self) -> None:
        md = self.context.record_metadata()
        if md is not None:
            log.warning(
                "Skipping record due to null key. topic=[%s] partition=[%s] offset=[%s]",
                md.topic,
                md.partition,
                md.offset,
            )
        else:
            log.warning("Skipping record due to null key. Topic, partition, and offset not known.")

    def _skip_expired(self, record: Record, expire: int, start: int, end: int) -> None:
        """Leave ``record`` out of the session ``[start, end]`` it would make, closed at
        ``expire``: counted, logged as Kafka logs it, sent to the late side output."""
        self.late.dropped(record, SessionWindow(start, end), self.observed_stream_time)
        level = self.late.log_level
        if not log.isEnabledFor(level):
            return
        md = self.context.record_metadata()
        log.log(
            level,
            "Skipping record for expired window. topic=[%s] partition=[%s] offset=[%s] "
            "timestamp=[%s] window=[%s,%s] expiration=[%s] streamTime=[%s]",
            md.topic if md is not None else None,
            md.partition if md is not None else None,
            md.offset if md is not None else None,
            record.timestamp,
            start,
            end,
            expire,
            self.observed_stream_time,
        )


def _scan_closed_sessions(
    store: Any, earliest_end: int, latest_end: int
) -> Iterator[tuple[Windowed, Any]]:
    """Fallback for stores without a time-first index: scan the live segments overlapping
    ``[earliest_end, latest_end]`` (segments are by session end) and sort like Kafka's
    ``TimeFirstSessionKeySchema`` (end, start, key bytes)."""
    find_layer = getattr(store, "find_layer", None)
    segmented = find_layer(SegmentedBytesStore) if find_layer is not None else None
    if segmented is None:
        raise NotImplementedError(
            "emit on window close needs a session store with fetch_sessions(earliest_end, "
            f"latest_end) or a segmented session store; got {type(store).__name__}"
        )
    split = SESSION_KEY_SCHEMA.split
    found: list[tuple[int, int, bytes, bytes]] = []
    # Kafka's InMemorySessionStore.findSessions(earliestEnd, latestEnd) also skips sessions
    # with end <= observed stream time - retention: with the default retention (gap + grace)
    # that is the very stream time a session closes at, so Kafka never emits a session whose
    # close lands on a record's timestamp. Here every live segment is read, as for RocksDB.
    for segment in segmented.segments.segments(earliest_end, latest_end, True):
        for schema_key, value in segment.range(None, None, True):
            key_bytes, start, end = split(schema_key)
            if earliest_end <= end <= latest_end and value is not None:
                found.append((end, start, key_bytes, value))
    if segmented.persistent:
        found.sort(key=lambda t: (t[0], t[1], t[2]))
    else:
        found.sort(key=lambda t: (t[0], t[2], -t[1]))
    key_from = store.key_from
    value_from = store.value_from
    for end, start, key_bytes, value in found:
        yield Windowed(key_from(key_bytes), SessionWindow(start, end)), value_from(value)
