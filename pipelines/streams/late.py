"""The stream's own account of the records its windowed aggregations dropped as late.

A windowed aggregation skips a record for a window whose end is at or before its close
time (the highest timestamp it has seen minus the grace period); with emit-on-close, a
window already emitted as final (before a restart) no longer changes its output either.
Reconciliation needs exactly these records to explain why a stream window differs from
the batch recompute, and a lake-side approximation cannot know them: the aggregation sees
a repartitioned interleaving of its input that exists only inside the task.

``report_late`` attaches a ``LateRecordTap`` beside an aggregation, on the same stream, so
it sees the same records in the same order and reaches the same decision (the way Flink's
``sideOutputLateData`` does). Each dropped (record, window) pair goes to the application's
late topic, in the same transaction as the aggregation's output.
"""

from __future__ import annotations

from typing import Any

from pipelines.streams.common import KEY_SERDE, VALUE_SERDE
from streaming import Produced, TimeWindows
from streaming.topology.processor import Processor, Record

NO_TIMESTAMP = -1


class LateRecordTap(Processor):
    """Forwards one record per window of ``windows`` that an aggregation over the same
    stream drops: value = the input value plus ``result``, ``window_start``,
    ``window_end`` and ``stream_time`` (the aggregation's observed stream time)."""

    def __init__(self, result: str, windows: TimeWindows, final_store: str | None) -> None:
        self.result = result
        self.size_ms = windows.size_ms
        self.advance_ms = windows.advance_ms
        self.grace_ms = windows.grace_period_ms()
        self.final_store = final_store
        self.observed_stream_time = NO_TIMESTAMP
        self.emitted_close_time = NO_TIMESTAMP

    def init(self, context: Any) -> None:
        super().init(context)
        self.context = context
        # windows emitted as final before a restart: the task's processor metadata
        if self.final_store is not None:
            last = context.processor_metadata_for_key(self.final_store)
            if last is not None:
                self.emitted_close_time = last

    def process(self, record: Record) -> None:
        if record.key is None:  # the aggregation skips these (not late)
            return
        timestamp = record.timestamp
        if timestamp > self.observed_stream_time:
            self.observed_stream_time = timestamp
        close_time = max(self.observed_stream_time - self.grace_ms, self.emitted_close_time)
        if timestamp >= close_time:  # every window containing it ends after the close time
            return
        size, advance = self.size_ms, self.advance_ms
        first = max(0, timestamp - size + advance) // advance * advance
        for start in range(first, timestamp + 1, advance):
            if start + size <= close_time:
                value = {
                    **record.value,
                    "result": self.result,
                    "window_start": start,
                    "window_end": start + size,
                    "stream_time": self.observed_stream_time,
                }
                self.context.forward(record.with_value(value))


def report_late(
    stream: Any,
    *,
    result: str,
    windows: TimeWindows,
    topic: str,
    final_store: str | None = None,
    key_serde: Any = KEY_SERDE,
) -> None:
    """Write the records an aggregation of ``stream`` over ``windows`` drops to ``topic``.

    ``final_store``: the aggregation's store when it emits on window close (its emitted
    close time survives restarts in the task's processor metadata); ``key_serde``: the
    serde of the stream's keys."""
    stream.process(lambda: LateRecordTap(result, windows, final_store), named=f"late-{result}").to(
        topic, Produced(key_serde=key_serde, value_serde=VALUE_SERDE)
    )
