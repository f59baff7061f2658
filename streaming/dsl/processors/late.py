"""Late records of windowed aggregations, reported by the processor that drops them.

A windowed aggregation does not count a record in a window that has closed (its end is at
or before the aggregation's stream time minus the grace period). The processor that makes
that decision reports it, once per (record, window):

- on the task's dropped-records sensor (``context.record_dropped("late")``: Kafka's
  ``droppedRecordsSensor``; the runtime's ``late-records-dropped-total`` metric);
- as Kafka logs it (a warning per record), unless the application asked for the late
  records as a stream: then they go to the aggregation's late side output
  (``KTable.late_records()``, like Flink's ``sideOutputLateData``) and the log says so at
  debug level only.

Under emit-on-close, a record for a window already emitted as final (before a restart: the
processor's stream time starts over while the emitted close time is kept) still updates the
store, as in Kafka, but never reaches the output again; it goes to the side output too.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from streaming.topology.processor import Record
from streaming.windowed import Window


@dataclasses.dataclass(frozen=True)
class LateRecord:
    """A record a windowed aggregation left out of ``window``, and its stream time then."""

    value: Any
    window: Window
    stream_time: int


class LateRecordReporter:
    """Reports one aggregation processor's late records (see the module docstring)."""

    def __init__(self, context: Any, side_output: str | None) -> None:
        self._context = context
        self._side_output = side_output
        # a context of the runtime or the test driver counts drops; another may not
        self._dropped = getattr(context, "record_dropped", None)

    @property
    def log_level(self) -> int:
        """The level a late record is logged at: Kafka's warning, or debug when the records
        go to a side output."""
        return logging.WARNING if self._side_output is None else logging.DEBUG

    def dropped(self, record: Record, window: Window, stream_time: int) -> None:
        """``record`` was not counted in ``window``, closed at ``stream_time``."""
        if self._dropped is not None:
            self._dropped("late")
        self.left_out(record, window, stream_time)

    def left_out(self, record: Record, window: Window, stream_time: int) -> None:
        """``record`` will not reach the output of ``window`` (sent to the side output)."""
        if self._side_output is not None:
            late = LateRecord(record.value, window, stream_time)
            self._context.forward(
                Record(record.key, late, record.timestamp, record.headers), self._side_output
            )
