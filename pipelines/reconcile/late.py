"""The late records a stream application dropped, per key and window, as reconciliation
uses them to explain a stream result that is lower than the batch recompute.

The stream applications report them themselves (``pipelines.streams.late``): one record per
dropped (order, window) on ``<application>-late``, written in the same transaction as the
windowed results. The lake lands those topics like any other, placed by window start.

A batch result is computed from the orders landed when it read them (its lake cut); a late
record explains a batch/stream difference only when its order is among those
(``of_orders``): a record the stream reported about an order that landed after the batch
read would otherwise be counted against a batch that never saw the order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: a Dagster code location loads without pandas
    import pandas as pd


LATE_COLUMNS = ["window_start", "late_count", "late_cents", "max_lateness_ms"]


def of_orders(late_records: pd.DataFrame, orders: pd.DataFrame) -> pd.DataFrame:
    """The late records whose order is among ``orders``: per result, order and window, at
    most as many as ``orders`` holds copies of that order (a duplicate order is dropped,
    and reported, once per copy)."""
    import pandas as pd

    if late_records.empty:
        return late_records
    copies = orders["order_id"].value_counts() if not orders.empty else pd.Series(dtype="int64")
    allowed = late_records["order_id"].map(copies).fillna(0)
    nth = late_records.groupby(["result", "order_id", "window_start"]).cumcount()
    return late_records[nth < allowed]


def late_report(
    late_records: pd.DataFrame,
    result: str,
    *,
    key: str = "region",
    value_column: str = "amount",
) -> pd.DataFrame:
    """Dropped records of ``result`` per ``(key, window_start)``: ``late_count``,
    ``late_cents`` and the largest lateness (stream time minus event time)."""
    import pandas as pd

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
