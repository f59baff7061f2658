"""The rows a time-windowed SQL aggregation leaves out as late, as written to a late topic.

``compile(text, late_topic=...)`` sends them there: per (input row, closed window), the
input row with ``result`` (the sink table the aggregation writes), ``window_start``,
``window_end`` and ``stream_time`` (the aggregation's stream time then), keyed by the
grouping key. The records come from the aggregation itself (``KTable.late_records``), so
they are exactly what it left out.
"""

from __future__ import annotations

from typing import Any

from streaming.dsl import LateRecord


def late_row(late: LateRecord, result: str) -> dict[str, Any]:
    """The late-topic row of ``late`` left out of an aggregation into ``result``."""
    return {
        **late.value,
        "result": result,
        "window_start": late.window.start,
        "window_end": late.window.end,
        "stream_time": late.stream_time,
    }
