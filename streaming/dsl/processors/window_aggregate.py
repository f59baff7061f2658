"""Windowed stream aggregations over time windows (tumbling / hopping).

Ports of Kafka Streams 4.1
``org.apache.kafka.streams.kstream.internals.AbstractKStreamTimeWindowAggregateProcessor``
(the shared emit strategy logic, also used by sliding windows) and
``org.apache.kafka.streams.kstream.internals.KStreamWindowAggregate``.

``count`` and ``reduce`` come through here as well: the DSL passes Kafka's
``countInitializer``/``countAggregator`` and ``reduceInitializer``/``reduceAggregator``.

Pre-aggregation within a batch (``window_fold``): while a task's batch entry
(``streaming.runtime.batch``) runs, a time-window aggregation may fold the records of
each (key, window) into one pending aggregate, read from the store at the window's first
record and written to it once, instead of a fetch and a put per record. It does so exactly
when all of these hold, decided once when the task builds its batch plan:

- the processor is a ``KStreamWindowAggregateProcessor`` (exact class) over
  ``TimeWindows``, and updates are not forwarded per record: the store is cached or the
  emit strategy is on window close;
- its store is a ``TimestampedWindowStore`` (exact class, without duplicates) right
  over a ``CachingWindowStore`` of a ``ThreadCache``: puts reach nothing but the cache, and
  the cache reaches the changelog, the store below and the flush listener only when it
  flushes (a commit, outside the batch) or evicts;
- its key serde and its value serde (inside the timestamp wrapper) are built-in serdes
  whose serialize and deserialize are pure functions (Long, Integer, Short, Double, Float,
  String, Bytes, Json);
- every node that a fused chain of the task hands records to (see ``batch``) is a sink or
  such a processor: nothing else touches a cache while the batch runs, except what these
  processors forward themselves.

Every record is still processed in turn, where it comes: stream time, grace, the
retention rules, the late-record and emitted-before-a-restart checks, the emit throttle and
each window's timestamp (the largest of its records) are computed per record as on the
per-record path; only the store reads and writes of the windows move. What the per-record
path would have written is written, with each window's last record context, in the order
of each window's last update (which the per-record path's cache leaves as the LRU and
dirty order), and before anything else could see the store or the cache:

- before an emit-on-close fetch, a late record forwarded to a side output, a punctuation
  (the task flushes all folds before firing one) and at the end of the batch entry's run;
- when a record fails (its user function, its serde or the store), from that record's
  point of view: the windows before it written, its window read again (which moves it in
  the cache's LRU order, as the per-record path's read did), then the error goes on;
- when the cache could evict: each deferred put counts the most bytes the per-record
  path's put could have added (cache key, node overhead, value, record context); when the
  cache's size plus what the batch's pending puts may take would pass the cache budget,
  everything pending is written and that put is made at once, as on the per-record path
  (which it then is, evictions included).

The aggregate handed to the next record's aggregator is what the store's round trip gives
back: the aggregate itself when the serde gives back an equal value of the same type (a
64-bit int for Long and Json, a finite float for Double and Json, a bool for Json, a 32-bit
int for Integer), otherwise the aggregate serialized (failing as the put would) and read
back. A ``None`` aggregate deletes the window, as the put of ``None`` does. What differs
from the per-record path is invisible to the output: the store's read and write counts,
and an interactive query reading the store from another thread while the batch runs (it
sees the state at the start of the batch or at a flush).
"""

from __future__ import annotations

import contextlib
import logging
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from streaming.dsl.change import Change
from streaming.dsl.processors.forwarding import TupleForwarder
from streaming.dsl.processors.late import LateRecordReporter
from streaming.dsl.processors.quiet_close import schedule_quiet_close
from streaming.dsl.processors.table import WindowedAggregateSupplier
from streaming.dsl.processors.value_getters import ValueGetter, ValueGetterSupplier
from streaming.dsl.processors.window_fold import WindowFold
from streaming.dsl.windows import EmitStrategy, TimeWindows, window_size_and_retention
from streaming.state import ValueAndTimestamp, Windowed
from streaming.state.segmented_bytes_store import SegmentedBytesStore
from streaming.topology.processor import Processor, PunctuationType, Record
from streaming.windowed import MAX_TIMESTAMP, TimeWindow, Window

log = logging.getLogger(__name__)

#: Kafka's ``ConsumerRecord.NO_TIMESTAMP``
NO_TIMESTAMP = -1

#: Kafka's ``StreamsConfig.InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION``:
#: minimum wall-clock time between two emit-final passes (default 1000 ms). Kafka's
#: TopologyTestDriver sets it to 0 unless configured.
EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION = (
    "__emit.interval.ms.kstreams.windowed.aggregation__"
)
DEFAULT_EMIT_INTERVAL_MS = 1000

# Kafka keeps the last emitted window close time as per-task "processor metadata" committed
# with the offsets (``processorMetadataForKey`` / ``addProcessorMetadataKeyValue``). When the
# context does not offer that, we keep it per context object here.
_FALLBACK_METADATA: weakref.WeakKeyDictionary[Any, dict[str, int]] = weakref.WeakKeyDictionary()


def _processor_metadata_for_key(context: Any, key: str) -> int | None:
    getter = getattr(context, "processor_metadata_for_key", None)
    if getter is not None:
        return getter(key)
    try:
        return _FALLBACK_METADATA.get(context, {}).get(key)
    except TypeError:  # context not weak-referenceable
        return None


def _add_processor_metadata(context: Any, key: str, value: int) -> None:
    adder = getattr(context, "add_processor_metadata_key_value", None)
    if adder is not None:
        adder(key, value)
        return
    with contextlib.suppress(TypeError):  # context not weak-referenceable
        _FALLBACK_METADATA.setdefault(context, {})[key] = value


def _emit_interval_ms(app_configs: Any) -> int:
    """Kafka's ``InternalConfig.getLong(configs, key, 1000L)``."""
    if not app_configs:
        return DEFAULT_EMIT_INTERVAL_MS
    value = app_configs.get(EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION)
    if value is None:
        return DEFAULT_EMIT_INTERVAL_MS
    return int(value)


#: what a wall-clock emit of final results forwards as its triggering record: no headers
NO_RECORD = Record(None, None, NO_TIMESTAMP)


class AbstractTimeWindowAggregateProcessor(Processor):
    """Kafka's ``AbstractKStreamTimeWindowAggregateProcessor``: emit on update or on close."""

    def __init__(
        self,
        store_name: str,
        emit_strategy: EmitStrategy,
        send_old_values: bool,
        late_output: str | None,
        close_quiet_ms: int | None = None,
    ) -> None:
        self.store_name = store_name
        #: the child that gets the late records (``KTable.late_records``), or None
        self.late_output = late_output
        #: the aggregation's own quiet time (None: the application's setting)
        self.close_quiet_ms = close_quiet_ms
        self.emit_final = emit_strategy.kind == EmitStrategy.ON_WINDOW_CLOSE
        self.send_old_values = send_old_values
        self.observed_stream_time = NO_TIMESTAMP
        self.last_emit_window_close_time = NO_TIMESTAMP
        # Kafka's KStreamImplJoin.TimeTracker (only the emit throttling part is used here)
        self.next_time_to_emit = 0
        self.emit_interval_ms = DEFAULT_EMIT_INTERVAL_MS
        #: the segmented layer of the store, whose retention decides what emit-on-close can
        #: still read (None: another store, judged by ``min_retention_ms``)
        self.segmented: SegmentedBytesStore | None = None
        #: the stream time past which a record's puts could lose a closed window not yet
        #: emitted (see ``emit_before_expiry``)
        self.emit_before_puts_after = MAX_TIMESTAMP
        #: whether updates are forwarded as they happen (set in ``init``)
        self.forward_updates = False
        #: the pending windows of the batch being run, while this processor folds them
        self.folding: WindowFold | None = None

    #: the least retention the store may have (the builder refuses less)
    min_retention_ms: int
    grace_ms: int

    def init(self, context: Any) -> None:
        super().init(context)
        self.window_store = context.get_state_store(self.store_name)
        self.late = LateRecordReporter(context, self.late_output)
        if self.emit_final:
            last = _processor_metadata_for_key(context, self.store_name)
            if last is not None:
                self.last_emit_window_close_time = last
            self.emit_interval_ms = _emit_interval_ms(getattr(context, "app_configs", None))
            find_layer = getattr(self.window_store, "find_layer", None)
            self.segmented = find_layer(SegmentedBytesStore) if find_layer is not None else None
            if self.emit_interval_ms > 0:
                context.schedule(
                    self.emit_interval_ms, PunctuationType.WALL_CLOCK_TIME, self._emit_held_back
                )
            self._set_last_emit(self.last_emit_window_close_time)
            # no flush listener: final results are forwarded directly, never by the cache
            self.tuple_forwarder = TupleForwarder(None, context, self.send_old_values)
        else:
            self.tuple_forwarder = TupleForwarder(self.window_store, context, self.send_old_values)
        # updates go out now only without emit-on-close and without a cache (whose flush
        # forwards them): otherwise building the update record per window is wasted
        self.forward_updates = not self.emit_final and not self.tuple_forwarder.caching
        schedule_quiet_close(
            context, lambda: self.observed_stream_time, self._quiet_advance, self.close_quiet_ms
        )

    def _quiet_advance(self, stream_time: int) -> None:
        """The input went quiet (``close_when_quiet``, else ``window.close.quiet.ms``): stream
        time follows the wall clock, and the windows it closed are emitted now."""
        self.observed_stream_time = stream_time
        if self.emit_final:
            self.emit_before_expiry(NO_RECORD, stream_time)

    # -- emitting ---------------------------------------------------------------------

    def maybe_forward_update(
        self, record: Record, window: Window, old_agg: Any, new_agg: Any, new_timestamp: int
    ) -> None:
        if not self.forward_updates:
            return
        self.tuple_forwarder.maybe_forward(
            Record(
                Windowed(record.key, window),
                Change(new_agg, old_agg if self.send_old_values else None),
                new_timestamp,
                record.headers,
            )
        )

    def maybe_forward_final_result(self, record: Record, window_close_time: int) -> None:
        if self._should_emit_final(window_close_time):
            upper = self.emit_range_upper_bound(window_close_time)
            # if the upper bound is smaller than 0, then no window has ever closed
            if upper >= 0:
                lower = self.emit_range_lower_bound(window_close_time)
                if self.should_range_fetch(lower, upper):
                    self._fetch_and_emit(record, window_close_time, lower, upper)

    def _emit_held_back(self, _now: int) -> None:
        """Emit what closed while the throttle held the last look back, though no record has
        come since. Kafka waits for the next record, which on a quiet input, or behind another
        emit-on-close stage that itself waits, may never come."""
        if self.observed_stream_time != NO_TIMESTAMP:
            self.maybe_forward_final_result(NO_RECORD, self.observed_stream_time - self.grace_ms)

    def emit_before_expiry(self, record: Record, stream_time: int) -> None:
        """Emit what is closed at ``stream_time`` now, before the record's puts, whatever the
        throttle says, if those puts could move the store's retention past a closed window not
        yet emitted.

        Emit-on-close runs at most once per emit interval of wall-clock time, and the store
        stops returning windows its retention has passed; a backlog read faster than its event
        time passes would otherwise jump over windows between two emits. Kafka's processor
        loses them; here every final result comes out. Called when stream time advances past
        ``emit_before_puts_after``."""
        close = stream_time - self.grace_ms
        lower = self.emit_range_lower_bound(close)
        upper = self.emit_range_upper_bound(close)
        if upper >= lower:
            self._fetch_and_emit(record, close, lower, upper)

    def _set_last_emit(self, window_close_time: int) -> None:
        self.last_emit_window_close_time = window_close_time
        # before the first emit the earliest start is 0: armed from the first record on, so
        # event times near the epoch, where no window has closed at the first look, lose none
        earliest = self.earliest_unemitted_start()
        segmented = self.segmented
        self.emit_before_puts_after = (
            segmented.readable_until(earliest)
            if segmented is not None
            else earliest + self.min_retention_ms
        )

    def earliest_unemitted_start(self) -> int:
        """The start of the earliest window that may be closed but not yet emitted."""
        return self.emit_range_lower_bound(self.last_emit_window_close_time)

    def _should_emit_final(self, window_close_time: int) -> bool:
        if not self.emit_final:
            return False
        now = self.context.current_system_time_ms()
        # throttle the emit frequency
        if now < self.next_time_to_emit:
            return False
        # schedule the next emit time based on now, in case system time jumps a lot
        self.next_time_to_emit = now + self.emit_interval_ms
        # only emit if the window close time progresses
        last = self.last_emit_window_close_time
        return last == NO_TIMESTAMP or last < window_close_time

    def _fetch_and_emit(
        self, record: Record, window_close_time: int, lower: int, upper: int
    ) -> None:
        if self.folding is not None:
            self.folding.batch.flush()
        forward = self.tuple_forwarder.maybe_forward
        headers = record.headers
        for windowed, vat in self.window_store.fetch_all(lower, upper):
            forward(Record(windowed, Change(vat.value, None), vat.timestamp, headers))
        self._set_last_emit(window_close_time)
        _add_processor_metadata(self.context, self.store_name, window_close_time)

    # upper and lower bound are inclusive; they may be negative, then nothing is fetched
    def emit_range_lower_bound(self, window_close_time: int) -> int:
        raise NotImplementedError

    def emit_range_upper_bound(self, window_close_time: int) -> int:
        raise NotImplementedError

    def should_range_fetch(self, lower: int, upper: int) -> bool:
        raise NotImplementedError

    # -- dropping ---------------------------------------------------------------------

    def skip_expired(
        self, record: Record, window: Window, window_expire: int, window_text: str
    ) -> None:
        """Leave ``record`` out of ``window``, which closed at ``window_expire``: counted,
        logged as Kafka logs it, and sent to the late side output if there is one."""
        if self.folding is not None and self.late_output is not None:
            self.folding.batch.flush()
        self.late.dropped(record, window, self.observed_stream_time)
        level = self.late.log_level
        if not log.isEnabledFor(level):
            return
        timestamp = record.timestamp
        md = self.context.record_metadata()
        if md is not None:
            log.log(
                level,
                "Skipping record for expired window. topic=[%s] partition=[%s] offset=[%s] "
                "timestamp=[%s] window=%s expiration=[%s] streamTime=[%s]",
                md.topic,
                md.partition,
                md.offset,
                timestamp,
                window_text,
                window_expire,
                self.observed_stream_time,
            )
        else:
            log.log(
                level,
                "Skipping record for expired window. Topic, partition, and offset not known. "
                "timestamp=[%s] window=%s expiration=[%s] streamTime=[%s]",
                timestamp,
                window_text,
                window_expire,
                self.observed_stream_time,
            )

    def log_skipped_null(self, what: str) -> None:
        md = self.context.record_metadata()
        if md is not None:
            log.warning(
                "Skipping record due to null %s. topic=[%s] partition=[%s] offset=[%s]",
                what,
                md.topic,
                md.partition,
                md.offset,
            )
        else:
            log.warning(
                "Skipping record due to null %s. Topic, partition, and offset not known.", what
            )


class KStreamWindowAggregateSupplier(WindowedAggregateSupplier):
    """``TimeWindowedKStream.aggregate/count/reduce``: Kafka's ``KStreamWindowAggregate``."""

    store_name: str

    def __init__(
        self,
        windows: TimeWindows,
        store_name: str,
        emit_strategy: EmitStrategy,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
    ) -> None:
        self.windows = windows
        self.store_name = store_name
        self.emit_strategy = (
            emit_strategy if emit_strategy is not None else EmitStrategy.on_window_update()
        )
        self.initializer = initializer
        self.aggregator = aggregator
        if self.emit_strategy.kind == EmitStrategy.ON_WINDOW_CLOSE and not isinstance(
            windows, TimeWindows
        ):
            raise ValueError(
                "ON_WINDOW_CLOSE strategy is only supported for TimeWindows and SlidingWindows "
                "for TimeWindowedKStream"
            )

    def __call__(self) -> Processor:
        return KStreamWindowAggregateProcessor(self)

    def view(self) -> WindowedValueGetterSupplier:
        return WindowedValueGetterSupplier(self.store_name)


class KStreamWindowAggregateProcessor(AbstractTimeWindowAggregateProcessor):
    def __init__(self, supplier: KStreamWindowAggregateSupplier) -> None:
        super().__init__(
            supplier.store_name,
            supplier.emit_strategy,
            supplier.send_old_values,
            supplier.late_output,
            supplier.close_quiet_ms,
        )
        self.s = supplier
        windows = supplier.windows
        self.windows = windows
        self.grace_ms = windows.grace_period_ms()
        # TimeWindows are computed inline (no dict per record); other Windows via windows_for
        self.time_windows = isinstance(windows, TimeWindows)
        if self.time_windows:
            self.size_ms = windows.size_ms
            self.advance_ms = windows.advance_ms
        else:
            self.size_ms = windows.size()
        self.min_retention_ms = window_size_and_retention(windows)[1]

    def process(self, record: Record) -> None:
        key = record.key
        if key is None:
            self.log_skipped_null("key")
            return

        # first get the matching windows
        timestamp = record.timestamp
        if timestamp > self.observed_stream_time:
            self.observed_stream_time = timestamp
            if timestamp > self.emit_before_puts_after:
                self.emit_before_expiry(record, timestamp)
        window_close_time = self.observed_stream_time - self.grace_ms

        store = self.window_store
        initializer = self.s.initializer
        aggregator = self.s.aggregator
        value = record.value

        size = self.size_ms
        if self.time_windows:
            advance = self.advance_ms
            window_start = max(0, timestamp - size + advance) // advance * advance
            starts: Any = range(window_start, timestamp + 1, advance)
            matched = None
        else:
            matched = self.windows.windows_for(timestamp)
            starts = matched.keys()

        # update the windows whose end is still after the close time (creating the missing ones)
        emitted = self.last_emit_window_close_time if self.emit_final else NO_TIMESTAMP
        folding = self.folding
        for window_start in starts:
            window_end = window_start + size if matched is None else matched[window_start].end
            if window_end > window_close_time:
                if window_end <= emitted:  # emitted before a restart: never again
                    if folding is not None and self.late_output is not None:
                        folding.batch.flush()
                    self.late.left_out(
                        record,
                        self._window(window_start, window_end, matched),
                        self.observed_stream_time,
                    )
                if folding is not None:
                    folding.update(key, window_start, timestamp, value)
                    continue
                old = store.fetch(key, window_start)
                old_agg = None if old is None else old.value
                if old_agg is None:
                    old_agg = initializer()
                    new_timestamp = timestamp
                else:
                    old_ts = old.timestamp
                    new_timestamp = timestamp if timestamp > old_ts else old_ts
                new_agg = aggregator(key, value, old_agg)
                store.put(key, ValueAndTimestamp.make(new_agg, new_timestamp), window_start)
                if self.forward_updates:
                    window = (
                        TimeWindow(window_start, window_end)
                        if matched is None
                        else matched[window_start]
                    )
                    self.maybe_forward_update(record, window, old_agg, new_agg, new_timestamp)
            else:
                self.skip_expired(
                    record,
                    self._window(window_start, window_end, matched),
                    window_close_time,
                    f"[{window_start},{window_end})",
                )

        if self.emit_final:
            self.maybe_forward_final_result(record, window_close_time)

    @staticmethod
    def _window(start: int, end: int, matched: Mapping[int, Window] | None) -> Window:
        return TimeWindow(start, end) if matched is None else matched[start]

    def emit_range_lower_bound(self, window_close_time: int) -> int:
        # window ends are exclusive: the inclusive lower bound is one after the last emitted
        # start; the first time, fetch from 0
        last = self.last_emit_window_close_time
        return 0 if last == NO_TIMESTAMP else max(0, last - self.size_ms) + 1

    def emit_range_upper_bound(self, window_close_time: int) -> int:
        return window_close_time - self.size_ms

    def earliest_unemitted_start(self) -> int:
        lower = self.emit_range_lower_bound(self.last_emit_window_close_time)
        if not self.time_windows:
            return lower
        advance = self.advance_ms  # TimeWindows start at multiples of the advance
        return -(-lower // advance) * advance

    def should_range_fetch(self, lower: int, upper: int) -> bool:
        # don't fetch if the close time did not progress enough to cover a new window; window
        # ends are exclusive, so windows ending at the lower bound are not counted (lower - 1)
        if self.last_emit_window_close_time != NO_TIMESTAMP:
            windows_for = self.windows.windows_for
            if windows_for(upper) == windows_for(lower - 1):
                return False
        return True


class WindowedValueGetterSupplier(ValueGetterSupplier):
    """Kafka's ``KStreamWindowAggregateValueGetter``: look a ``Windowed`` key up in the store."""

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def store_names(self) -> list[str]:
        return [self.store_name]

    def get(self) -> WindowedValueGetter:
        return WindowedValueGetter(self.store_name)

    __call__ = get


class WindowedValueGetter(ValueGetter):
    def __init__(self, store_name: str) -> None:
        self.store_name = store_name
        self.store: Any = None

    def init(self, context: Any) -> None:
        self.store = context.get_state_store(self.store_name)

    def get(self, windowed_key: Windowed) -> ValueAndTimestamp | None:
        return self.store.fetch(windowed_key.key, windowed_key.window.start)

    def is_versioned(self) -> bool:
        return False

    def close(self) -> None:
        pass
