"""The late records a stream application dropped, per key and window, as reconciliation
uses them to explain a stream result that is lower than the batch recompute.

The stream applications report them themselves (``pipelines.streams.late``): one record per
dropped (order, window) on ``<application>-late``, written in the same transaction as the
windowed results. The lake lands those topics like any other, placed by window start.
"""

from __future__ import annotations

import pandas as pd

LATE_COLUMNS = ["window_start", "late_count", "late_cents", "max_lateness_ms"]


def late_report(
    late_records: pd.DataFrame,
    result: str,
    *,
    key: str = "region",
    value_column: str = "amount",
) -> pd.DataFrame:
    """Dropped records of ``result`` per ``(key, window_start)``: ``late_count``,
    ``late_cents`` and the largest lateness (stream time minus event time)."""
    columns = [key, *LATE_COLUMNS]
    if late_records.empty:
        return pd.DataFrame(columns=columns)
    late = late_records[late_records["result"] == result].copy()
    if late.empty:
        return pd.DataFrame(columns=columns)
    late["cents"] = (late[value_column] * 100).round().astype("int64")
    late["lateness"] = late["stream_time"] - late["event_time"]
    grouped = late.groupby([key, "window_start"], as_index=False).agg(
        late_count=("cents", "size"),
        late_cents=("cents", "sum"),
        max_lateness_ms=("lateness", "max"),
    )
    return grouped[columns]
