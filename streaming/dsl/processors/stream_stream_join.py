"""KStream-KStream windowed join processors.

Ports of Kafka Streams 4.1 ``KStreamJoinWindow`` (puts each record in its side's window store
after forwarding it), ``KStreamKStreamJoin`` with ``KStreamKStreamJoinLeftSide`` /
``KStreamKStreamJoinRightSide`` (looks the record up in the other side's window store), and
``KStreamImplJoin.TimeTracker`` (stream time shared by both sides of one join in a task).

Left and outer joins keep records without a match in the shared outer-join store
(``TimestampedKeyAndJoinSide`` -> ``LeftOrRightValue``) and emit them joined with None only
once stream time has passed their window end plus grace: the pass over the store runs when a
record at the current stream time arrives, at most every
``__emit.interval.ms.kstreams.outer.join.spurious.results.fix__`` ms of wall-clock time
(default 1000; Kafka's TopologyTestDriver sets 0).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from streaming.state.join_side import LeftOrRightValue, TimestampedKeyAndJoinSide
from streaming.state.window_store import WindowStore
from streaming.topology.processor import Processor, Record

log = logging.getLogger(__name__)

#: Kafka's ``StreamsConfig.InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_OUTER_JOIN_SPURIOUS_RESULTS_FIX``
EMIT_INTERVAL_MS_KSTREAMS_OUTER_JOIN_SPURIOUS_RESULTS_FIX = (
    "__emit.interval.ms.kstreams.outer.join.spurious.results.fix__"
)
DEFAULT_EMIT_INTERVAL_MS = 1000
NO_TIMESTAMP = -1
LONG_MAX = (1 << 63) - 1

Joiner = Callable[[Any, Any, Any], Any]


def _emit_interval_ms(app_configs: Any) -> int:
    """Kafka's ``InternalConfig.getLong(configs, key, 1000L)``."""
    value = (
        app_configs.get(EMIT_INTERVAL_MS_KSTREAMS_OUTER_JOIN_SPURIOUS_RESULTS_FIX)
        if app_configs
        else None
    )
    return DEFAULT_EMIT_INTERVAL_MS if value is None else int(value)


class TimeTracker:
    """Stream time and earliest pending outer record, shared by both sides of a join."""

    __slots__ = ("emit_interval_ms", "min_time", "next_time_to_emit", "stream_time")

    def __init__(self) -> None:
        self.emit_interval_ms = DEFAULT_EMIT_INTERVAL_MS
        self.stream_time = NO_TIMESTAMP
        self.min_time = LONG_MAX
        self.next_time_to_emit = 0


class TimeTrackerSupplier:
    """One ``TimeTracker`` per task, shared by the join's two processors."""

    def __init__(self) -> None:
        self._trackers: dict[str, TimeTracker] = {}

    def get(self, task_id: str) -> TimeTracker:
        tracker = self._trackers.get(task_id)
        if tracker is None:
            tracker = self._trackers[task_id] = TimeTracker()
        return tracker

    def remove(self, task_id: str) -> None:
        self._trackers.pop(task_id, None)


# ------------------------------------------------------------------------------ window side


class JoinWindowSupplier:
    """``KStreamJoinWindow``: forward every record, then keep it in this side's window store."""

    def __init__(self, store_builder: Any) -> None:
        self.store_builder = store_builder

    def stores(self) -> list[Any]:
        return [self.store_builder]

    def __call__(self) -> Processor:
        return JoinWindowProcessor(self.store_builder.name)


class JoinWindowProcessor(Processor):
    """Forward, then put (key, value) at the record's timestamp (null keys are not stored)."""

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def init(self, context: Any) -> None:
        super().init(context)
        self.window = context.get_state_store(self.store_name)

    def process(self, record: Record) -> None:
        self.context.forward(record)
        if record.key is not None:
            # every record starts a new window; the window store is used for its retention
            self.window.put(record.key, record.value, record.timestamp)


# -------------------------------------------------------------------------------- join side


class StreamStreamJoinSupplier:
    """``KStreamKStreamJoinLeftSide`` / ``...RightSide``: one side of a windowed join.

    ``joiner(key, this_value, other_value)`` (already reversed for the right side); ``outer``
    whether this side emits unmatched records; ``before_ms``/``after_ms`` the JoinWindows'
    own bounds (the right side looks the other way).
    """

    def __init__(
        self,
        *,
        left_side: bool,
        joiner: Joiner,
        outer: bool,
        before_ms: int,
        after_ms: int,
        grace_ms: int,
        spurious_result_fix: bool,
        time_trackers: TimeTrackerSupplier,
        other_store_builder: Any,
        outer_store_builder: Any | None,
    ) -> None:
        self.left_side = left_side
        self.joiner = joiner
        self.outer = outer
        self.windows_before_ms = before_ms
        self.windows_after_ms = after_ms
        self.join_before_ms = before_ms if left_side else after_ms
        self.join_after_ms = after_ms if left_side else before_ms
        self.grace_ms = grace_ms
        self.spurious_result_fix = spurious_result_fix
        self.time_trackers = time_trackers
        self.other_store_builder = other_store_builder
        self.outer_store_builder = outer_store_builder

    def stores(self) -> list[Any]:
        stores = [self.other_store_builder]
        if self.outer_store_builder is not None and self.spurious_result_fix:
            stores.append(self.outer_store_builder)
        return stores

    def __call__(self) -> Processor:
        return StreamStreamJoinProcessor(self)


class StreamStreamJoinProcessor(Processor):
    """Join each record with the other side's records in ``[ts - before, ts + after]``."""

    def __init__(self, spec: StreamStreamJoinSupplier) -> None:
        self.spec = spec
        self.left_side = spec.left_side
        self.joiner = spec.joiner
        self.outer = spec.outer
        self.join_before_ms = spec.join_before_ms
        self.join_after_ms = spec.join_after_ms
        self.windows_before_ms = spec.windows_before_ms
        self.windows_after_ms = spec.windows_after_ms
        self.grace_ms = spec.grace_ms
        self.outer_store: Any = None
        #: ``fetch_range`` of the other side as a list, when that store is this package's
        #: window store (set by ``init``)
        self._fetch_list: Callable[[Any, int, int], list[tuple[int, Any]]] | None = None

    def init(self, context: Any) -> None:
        super().init(context)
        spec = self.spec
        self.other_window_store = context.get_state_store(spec.other_store_builder.name)
        store_type = type(self.other_window_store)
        self._fetch_list = (
            self.other_window_store.fetch_range_list
            if issubclass(store_type, WindowStore)
            and store_type.fetch_range is WindowStore.fetch_range
            and store_type._decode_times is WindowStore._decode_times
            else None
        )
        self.tracker = spec.time_trackers.get(context.task_id)
        if spec.spurious_result_fix:
            if spec.outer_store_builder is not None:
                self.outer_store = context.get_state_store(spec.outer_store_builder.name)
            self.tracker.emit_interval_ms = _emit_interval_ms(getattr(context, "app_configs", None))

    def close(self) -> None:
        self.spec.time_trackers.remove(self.context.task_id)

    # -- per record ---------------------------------------------------------------------

    def process(self, record: Record) -> None:
        ts = record.timestamp
        tracker = self.tracker
        if ts > tracker.stream_time:
            tracker.stream_time = ts
        key = record.key
        value = record.value
        forward = self.context.forward
        if self.outer and key is None and value is not None:
            forward(Record(key, self.joiner(key, value, None), ts, record.headers))
            return
        if key is None or value is None:
            # null keys cannot join; null values mean "no record" on the other side of an outer
            # join, so they are dropped as well
            log.debug("Skipping record due to null key or value. %s", _where(self.context))
            return

        outer_store = self.outer_store
        if outer_store is not None and ts == tracker.stream_time:
            self._emit_non_joined_outer_records(outer_store, record)

        time_from = ts - self.join_before_ms
        if time_from < 0:
            time_from = 0
        time_to = ts + self.join_after_ms
        if time_to < 0:
            time_to = 0
        fetch_list = self._fetch_list
        matches = (
            fetch_list(key, time_from, time_to)
            if fetch_list is not None
            else list(self.other_window_store.fetch_range(key, time_from, time_to))
        )
        if matches:
            joiner = self.joiner
            headers = record.headers
            for other_ts, other_value in matches:
                if outer_store is not None:
                    # the matched record will never be emitted as unmatched: drop it
                    outer_store.put_if_absent(self._other_key(key, other_ts), None)
                forward(
                    Record(
                        key,
                        joiner(key, value, other_value),
                        ts if ts >= other_ts else other_ts,
                        headers,
                    )
                )
        elif self.outer:
            # Records late enough that their window has closed already (by the stream time of
            # both sides) are emitted at once; others wait in the outer-join store.
            if outer_store is None or time_to < tracker.stream_time:
                forward(Record(key, self.joiner(key, value, None), ts, record.headers))
            else:
                if ts < tracker.min_time:
                    tracker.min_time = ts
                if self.left_side:
                    outer_store.put(
                        TimestampedKeyAndJoinSide(True, key, ts), LeftOrRightValue(value, None)
                    )
                else:
                    outer_store.put(
                        TimestampedKeyAndJoinSide(False, key, ts), LeftOrRightValue(None, value)
                    )

    def _other_key(self, key: Any, timestamp: int) -> TimestampedKeyAndJoinSide:
        return TimestampedKeyAndJoinSide(not self.left_side, key, timestamp)

    # -- emitting unmatched records -----------------------------------------------------

    def _emit_non_joined_outer_records(self, store: Any, record: Record) -> None:
        tracker = self.tracker
        # only look at the store if there might be something to emit
        if tracker.min_time + self.join_after_ms + self.grace_ms >= tracker.stream_time:
            return
        # throttled by wall-clock time (a performance measure in Kafka; part of its semantics)
        now = self.context.current_system_time_ms()
        if now < tracker.next_time_to_emit:
            return
        tracker.next_time_to_emit = now + tracker.emit_interval_ms
        tracker.min_time = LONG_MAX

        grace = self.grace_ms
        left_lookback = self.windows_after_ms
        right_lookback = self.windows_before_ms
        left_open = right_open = False
        prev_key: TimestampedKeyAndJoinSide | None = None
        for tkjs, lorv in store.all():
            tracker.min_time = tkjs.timestamp
            if left_open and right_open:
                # windows of both sides are still open: nothing later can be emitted
                break
            # keys iterate by <timestamp><side><key>: once a side's window is open, it is
            # open for every later record of that side
            is_left = tkjs.left_side
            lookback = left_lookback if is_left else right_lookback
            if tkjs.timestamp + lookback + grace >= tracker.stream_time:
                if is_left:
                    left_open = True
                else:
                    right_open = True
                continue
            self._forward_non_joined(record, tkjs, lorv)
            if prev_key is not None and prev_key != tkjs:
                # delete a key once all of its values are emitted
                store.put(prev_key, None)
            prev_key = tkjs
        if prev_key is not None:
            store.put(prev_key, None)

    def _forward_non_joined(
        self, record: Record, tkjs: TimestampedKeyAndJoinSide, lorv: LeftOrRightValue
    ) -> None:
        if self.left_side:
            this_value, other_value = lorv.left_value, lorv.right_value
        else:
            this_value, other_value = lorv.right_value, lorv.left_value
        key = tkjs.key
        self.context.forward(
            Record(key, self.joiner(key, this_value, other_value), tkjs.timestamp, record.headers)
        )


def _where(context: Any) -> str:
    metadata = context.record_metadata()
    if metadata is None:
        return "Topic, partition, and offset not known."
    return f"topic=[{metadata.topic}] partition=[{metadata.partition}] offset=[{metadata.offset}]"


# -------------------------------------------------------------------------------- self join


class SelfJoinSupplier:
    """``KStreamKStreamSelfJoin`` (``single.store.self.join``): a stream joined with itself
    through the one window store its windowed node keeps; the store is connected by the
    optimizer, so ``stores()`` is empty."""

    def __init__(
        self, *, store_name: str, before_ms: int, after_ms: int, retention_ms: int, joiner: Joiner
    ) -> None:
        self.store_name = store_name
        self.before_ms = before_ms
        self.after_ms = after_ms
        self.retention_ms = retention_ms
        self.joiner = joiner

    def stores(self) -> list[Any]:
        return []

    def __call__(self) -> Processor:
        return SelfJoinProcessor(self)


class SelfJoinProcessor(Processor):
    """Joins each record with the earlier ones of its key in the window (in the order an
    inner join of the two sides would emit them) and with itself, unless it has expired."""

    def __init__(self, spec: SelfJoinSupplier) -> None:
        self.spec = spec
        self.joiner = spec.joiner
        self.stream_time = NO_TIMESTAMP

    def init(self, context: Any) -> None:
        super().init(context)
        self.window = context.get_state_store(self.spec.store_name)

    def process(self, record: Record) -> None:
        key, value, ts = record.key, record.value, record.timestamp
        if key is None or value is None:
            log.debug("Skipping record due to null key or value. %s", _where(self.context))
            return
        spec, joiner, forward, headers = (
            self.spec,
            self.joiner,
            self.context.forward,
            record.headers,
        )
        if ts > self.stream_time:
            self.stream_time = ts
        self_record = Record(key, joiner(key, value, value), ts, headers)
        emit_self = ts > self.stream_time - spec.retention_ms + 1
        # this side: the stored records as the other side of the join
        for other_ts, other_value in self.window.fetch_range(
            key, max(0, ts - spec.before_ms), max(0, ts + spec.after_ms)
        ):
            forward(Record(key, joiner(key, value, other_value), max(ts, other_ts), headers))
        # other side: the stored records joined with this one, and this one with itself
        emitted_self = False
        for other_ts, other_value in self.window.fetch_range(
            key, max(0, ts - spec.after_ms), max(0, ts + spec.before_ms)
        ):
            latest = max(ts, other_ts)
            if ts < latest and not emitted_self and emit_self:
                emitted_self = True
                forward(self_record)
            forward(Record(key, joiner(key, other_value, value), latest, headers))
        if not emitted_self and emit_self:
            forward(self_record)
