"""Which records the stream saw too late: beyond a window's grace period.

Kafka Streams drops a record for a window when its stream time (the highest timestamp the
task has seen) has reached ``window_end + grace``. The lake keeps each record's source
partition and offset, so the stream time when a record arrived is approximated by the
highest event time seen before it in its source partition. (The stream's tasks see a
repartitioned mix, so this is a close approximation, not the exact drop decision.)
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from assets import domain


def flag_late(
    records: pd.DataFrame,
    *,
    size_ms: int = domain.REVENUE_WINDOW_MS,
    grace_ms: int = domain.REVENUE_GRACE_MS,
    time_column: str = "event_time",
) -> pd.DataFrame:
    """``records`` with ``window_start``, ``stream_time`` and ``late`` columns added."""
    frame = records.sort_values(["_partition", "_offset"], kind="stable").copy()
    times = frame[time_column].astype("int64")
    frame["window_start"] = times - times % size_ms
    previous_max = frame.groupby("_partition")[time_column].transform(lambda s: s.cummax().shift(1))
    frame["stream_time"] = previous_max
    frame["late"] = (frame["window_start"] + size_ms + grace_ms) <= previous_max.fillna(-1)
    return frame


def late_report(
    orders: pd.DataFrame,
    *,
    key: str = "region",
    size_ms: int = domain.REVENUE_WINDOW_MS,
    grace_ms: int = domain.REVENUE_GRACE_MS,
    value_column: str = "amount",
) -> pd.DataFrame:
    """Late records per ``(key, window_start)``: ``late_count``, ``late_cents``, max lateness."""
    columns = [key, "window_start", "late_count", "late_cents", "max_lateness_ms"]
    if orders.empty:
        return pd.DataFrame(columns=columns)
    flagged = flag_late(orders, size_ms=size_ms, grace_ms=grace_ms)
    late = flagged[flagged["late"]].copy()
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


def summarize(report: pd.DataFrame) -> dict[str, Any]:
    """Totals of a ``late_report``."""
    if report.empty:
        return {"late_records": 0, "late_windows": 0, "late_revenue": 0.0}
    return {
        "late_records": int(report["late_count"].sum()),
        "late_windows": len(report),
        "late_revenue": float(report["late_cents"].sum()) / 100,
    }
