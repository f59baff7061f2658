"""Windowed stream aggregations over sliding windows.

Port of Kafka Streams 4.1 ``org.apache.kafka.streams.kstream.internals.KStreamSlidingWindowAggregate``
(on top of ``AbstractKStreamTimeWindowAggregateProcessor``, see ``window_aggregate.py``).

Sliding windows have inclusive bounds ``[start, start + timeDifference]``. Each record gets a
left window ending at its timestamp and, when later records fall into it, a right window
starting one after it; the store holds every distinct window with its aggregate and the
maximum record timestamp. Records earlier than ``timeDifference`` would need negative window
starts; they go into the combined window ``[0, timeDifference]`` (``processEarly``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streaming.dsl.processors.table import WindowedAggregateSupplier
from streaming.dsl.processors.window_aggregate import (
    NO_TIMESTAMP,
    AbstractTimeWindowAggregateProcessor,
    WindowedValueGetterSupplier,
)
from streaming.dsl.windows import EmitStrategy, SlidingWindows, window_size_and_retention
from streaming.state import ValueAndTimestamp
from streaming.topology.processor import Processor, Record
from streaming.windowed import TimeWindow, Window

_make = ValueAndTimestamp.make


class KStreamSlidingWindowAggregateSupplier(WindowedAggregateSupplier):
    """``SlidingWindowedKStream.aggregate/count/reduce``."""

    store_name: str

    def __init__(
        self,
        windows: SlidingWindows,
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

    def __call__(self) -> Processor:
        return KStreamSlidingWindowAggregateProcessor(self)

    def view(self) -> WindowedValueGetterSupplier:
        return WindowedValueGetterSupplier(self.store_name)


class KStreamSlidingWindowAggregateProcessor(AbstractTimeWindowAggregateProcessor):
    def __init__(self, supplier: KStreamSlidingWindowAggregateSupplier) -> None:
        super().__init__(
            supplier.store_name,
            supplier.emit_strategy,
            supplier.send_old_values,
            supplier.late_output,
            supplier.close_quiet_ms,
        )
        self.initializer = supplier.initializer
        self.aggregator = supplier.aggregator
        self.time_difference_ms = supplier.windows.time_difference_ms
        self.grace_ms = supplier.windows.grace_period_ms()
        self.min_retention_ms = window_size_and_retention(supplier.windows)[1]
        self.reverse_iterator_possible: bool | None = None

    def process(self, record: Record) -> None:
        if record.key is None or record.value is None:
            self.log_skipped_null("key or value")
            return

        timestamp = record.timestamp
        if timestamp > self.observed_stream_time:
            self.observed_stream_time = timestamp
            if timestamp > self.emit_before_puts_after:
                self.emit_before_expiry(record, timestamp)
        window_close_time = self.observed_stream_time - self.grace_ms
        td = self.time_difference_ms

        window_end = timestamp + td
        if window_end < window_close_time:
            self.skip_expired(
                record,
                TimeWindow(timestamp, window_end),
                window_close_time,
                f"[{timestamp},{window_end}]",
            )
            return

        if timestamp < td:
            self._process_early(record, window_close_time)
            return

        if self.reverse_iterator_possible is None:
            # Kafka probes backwardFetch and falls back on UnsupportedOperationException
            self.reverse_iterator_possible = callable(
                getattr(self.window_store, "backward_fetch_range", None)
            )

        if self.reverse_iterator_possible:
            self._process_reverse(record, window_close_time)
        else:
            self._process_in_order(record, window_close_time)

        if self.emit_final:
            self.maybe_forward_final_result(record, window_close_time)

    def _process_in_order(self, record: Record, window_close_time: int) -> None:
        window_start_times: set[int] = set()
        # aggregates that go into the current record's left/right window (if needed)
        left_win_agg: ValueAndTimestamp | None = None
        right_win_agg: ValueAndTimestamp | None = None
        # whether the current record's left/right windows already exist
        left_win_already_created = False
        right_win_already_created = False
        previous_record_timestamp: int | None = None

        timestamp = record.timestamp
        td = self.time_difference_ms
        # the upper bound + 1 catches the current record's right window, if it exists
        for start_time, vat in self.window_store.fetch_range(
            record.key, max(0, timestamp - 2 * td), timestamp + 1
        ):
            window_start_times.add(start_time)
            end_time = start_time + td
            window_max_record_timestamp = vat.timestamp

            if end_time < timestamp:
                left_win_agg = vat
                previous_record_timestamp = window_max_record_timestamp
            elif end_time == timestamp:
                left_win_already_created = True
                if window_max_record_timestamp < timestamp:
                    previous_record_timestamp = window_max_record_timestamp
                self._update_window_and_forward(
                    TimeWindow(start_time, end_time), vat, record, window_close_time
                )
            elif end_time > timestamp and start_time <= timestamp:
                right_win_agg = vat
                self._update_window_and_forward(
                    TimeWindow(start_time, end_time), vat, record, window_close_time
                )
            elif start_time == timestamp + 1:
                right_win_already_created = True
            else:
                raise _unexpected_window(start_time, timestamp)

        self._create_windows(
            record,
            window_close_time,
            window_start_times,
            right_win_agg,
            left_win_agg,
            left_win_already_created,
            right_win_already_created,
            previous_record_timestamp,
        )

    def _process_reverse(self, record: Record, window_close_time: int) -> None:
        window_start_times: set[int] = set()
        left_win_agg: ValueAndTimestamp | None = None
        right_win_agg: ValueAndTimestamp | None = None
        left_win_already_created = False
        right_win_already_created = False
        previous_record_timestamp: int | None = None

        timestamp = record.timestamp
        td = self.time_difference_ms
        for start_time, vat in self.window_store.backward_fetch_range(
            record.key, max(0, timestamp - 2 * td), timestamp + 1
        ):
            window_start_times.add(start_time)
            end_time = start_time + td
            window_max_record_timestamp = vat.timestamp
            if start_time == timestamp + 1:
                right_win_already_created = True
            elif end_time > timestamp:
                if right_win_agg is None:
                    right_win_agg = vat
                self._update_window_and_forward(
                    TimeWindow(start_time, end_time), vat, record, window_close_time
                )
            elif end_time == timestamp:
                left_win_already_created = True
                self._update_window_and_forward(
                    TimeWindow(start_time, end_time), vat, record, window_close_time
                )
                if window_max_record_timestamp < timestamp:
                    previous_record_timestamp = window_max_record_timestamp
                else:
                    return
            elif end_time < timestamp:
                left_win_agg = vat
                previous_record_timestamp = window_max_record_timestamp
                break
            else:
                raise _unexpected_window(start_time, timestamp)

        self._create_windows(
            record,
            window_close_time,
            window_start_times,
            right_win_agg,
            left_win_agg,
            left_win_already_created,
            right_win_already_created,
            previous_record_timestamp,
        )

    def _process_early(self, record: Record, window_close_time: int) -> None:
        """Records with 0 <= timestamp < timeDifference: they would create windows with
        negative starts, so they go into the combined window [0, timeDifference] instead; their
        right windows are created or updated as later records come in."""
        timestamp = record.timestamp
        td = self.time_difference_ms
        if timestamp < 0 or timestamp >= td:
            raise ValueError(
                "Early record for sliding windows must fall between fall between 0 <= "
                "inputRecordTimestamp"
            )

        # the window [0, timeDifference] holding all early records
        combined_window: tuple[int, ValueAndTimestamp] | None = None
        right_win_agg: ValueAndTimestamp | None = None
        right_win_already_created = False
        window_start_times: set[int] = set()
        previous_record_timestamp: int | None = None

        for start_time, vat in self.window_store.fetch_range(record.key, 0, timestamp + 1):
            window_start_times.add(start_time)
            window_max_record_timestamp = vat.timestamp

            if start_time == 0:
                combined_window = (start_time, vat)
                # no previous record timestamp needed if maxRecordTimestamp >= timestamp: the
                # previous record's right window was already created by maxRecordTimestamp
                if window_max_record_timestamp < timestamp:
                    previous_record_timestamp = window_max_record_timestamp
            elif start_time <= timestamp:
                right_win_agg = vat
                self._update_window_and_forward(
                    TimeWindow(start_time, start_time + td), vat, record, window_close_time
                )
            elif start_time == timestamp + 1:
                right_win_already_created = True
            else:
                raise _unexpected_window(start_time, timestamp)

        # Without a right window aggregate, the combined window's aggregate goes into the new
        # record's right window when it holds later records: if there were records both
        # earlier and later than this one, a right window would have been found above.
        if (
            right_win_agg is None
            and combined_window is not None
            and combined_window[1].timestamp > timestamp
        ):
            right_win_agg = combined_window[1]

        if not right_win_already_created and _right_window_is_not_empty(right_win_agg, timestamp):
            self._create_current_record_right_window(timestamp, right_win_agg, record)  # type: ignore[arg-type]

        # the previous record's right window, if there is a previous record and it is missing
        if (
            previous_record_timestamp is not None
            and previous_record_timestamp + 1 not in window_start_times
        ):
            self._create_previous_record_right_window(
                previous_record_timestamp + 1, record, window_close_time
            )

        if combined_window is None:
            self._update_window_and_forward(
                TimeWindow(0, td),
                _make(self.initializer(), timestamp),
                record,
                window_close_time,
            )
        else:
            # update the combined window with the new aggregate
            self._update_window_and_forward(
                TimeWindow(combined_window[0], combined_window[0] + td),
                combined_window[1],
                record,
                window_close_time,
            )

    def _create_windows(
        self,
        record: Record,
        close_time: int,
        window_start_times: set[int],
        right_win_agg: ValueAndTimestamp | None,
        left_win_agg: ValueAndTimestamp | None,
        left_win_already_created: bool,
        right_win_already_created: bool,
        previous_record_timestamp: int | None,
    ) -> None:
        timestamp = record.timestamp
        td = self.time_difference_ms
        # right window of the previous record
        if previous_record_timestamp is not None:
            previous_right_win_start = previous_record_timestamp + 1
            # it does not exist yet and the current record falls into it
            if (
                previous_right_win_start not in window_start_times
                and previous_right_win_start + td >= timestamp
            ):
                self._create_previous_record_right_window(
                    previous_right_win_start, record, close_time
                )

        # left window of the new record
        if not left_win_already_created:
            # the previous record falls into the current record's left window
            if (
                previous_record_timestamp is not None
                and timestamp - td <= previous_record_timestamp
            ):
                value_and_time = _make(left_win_agg.value, timestamp)  # type: ignore[union-attr]
            else:
                value_and_time = _make(self.initializer(), timestamp)
            self._update_window_and_forward(
                TimeWindow(timestamp - td, timestamp), value_and_time, record, close_time
            )

        # right window of the new record, if necessary
        if not right_win_already_created and _right_window_is_not_empty(right_win_agg, timestamp):
            self._create_current_record_right_window(timestamp, right_win_agg, record)  # type: ignore[arg-type]

    def _create_current_record_right_window(
        self, timestamp: int, right_win_agg: ValueAndTimestamp, record: Record
    ) -> None:
        start = timestamp + 1
        window = TimeWindow(start, start + self.time_difference_ms)
        self.window_store.put(record.key, right_win_agg, start)
        self.maybe_forward_update(
            record, window, None, right_win_agg.value, right_win_agg.timestamp
        )

    def _create_previous_record_right_window(
        self, window_start: int, record: Record, close_time: int
    ) -> None:
        window = TimeWindow(window_start, window_start + self.time_difference_ms)
        value_and_time = _make(self.initializer(), record.timestamp)
        self._update_window_and_forward(window, value_and_time, record, close_time)

    def _update_window_and_forward(
        self,
        window: Window,
        value_and_time: ValueAndTimestamp | None,
        record: Record,
        window_close_time: int,
    ) -> None:
        window_start = window.start
        window_end = window.end
        if window_end >= window_close_time:
            # aggregate from the existing window
            old_agg = None if value_and_time is None else value_and_time.value
            new_agg = self.aggregator(record.key, record.value, old_agg)
            timestamp = record.timestamp
            if old_agg is None:
                new_timestamp = timestamp
            else:
                old_ts = value_and_time.timestamp  # type: ignore[union-attr]
                new_timestamp = timestamp if timestamp > old_ts else old_ts
            self.window_store.put(record.key, _make(new_agg, new_timestamp), window_start)
            self.maybe_forward_update(record, window, old_agg, new_agg, new_timestamp)
        else:
            self.skip_expired(record, window, window_close_time, f"[{window_start},{window_end}]")

    def emit_range_lower_bound(self, window_close_time: int) -> int:
        last = self.last_emit_window_close_time
        return 0 if last == NO_TIMESTAMP else max(0, last - self.time_difference_ms)

    def emit_range_upper_bound(self, window_close_time: int) -> int:
        # sliding window bounds are inclusive: minus 1 for the inclusive closed window end
        return window_close_time - self.time_difference_ms - 1

    def should_range_fetch(self, lower: int, upper: int) -> bool:
        return True


def _right_window_is_not_empty(right_win_agg: ValueAndTimestamp | None, timestamp: int) -> bool:
    """The aggregate found holds records that fall into the current record's right window."""
    return right_win_agg is not None and right_win_agg.timestamp > timestamp


def _unexpected_window(start_time: int, timestamp: int) -> RuntimeError:
    return RuntimeError(
        f"Unexpected window with start {start_time} found when processing record at "
        f"{timestamp} in `KStreamSlidingWindowAggregate`."
    )
