"""Reconciliation of the SQL fraud application (``pipelines/streams/sql/fraud.sql``) with
its own SQL run by DuckDB over the lake's orders (``streaming.sql.batch``, both INSERTs).

The alerts of one hour (the completing order's ``event_time`` in the hour) are compared
per (rule, customer_id, order_id, first_order_id): the application's, landed in the lake
(``fraud-alerts-sql``), vs DuckDB's over the orders of the hour and of the hours either
side (a match may start in the hour before; a later order can complete an earlier partial
match, which then skips the ones it overlaps).

Held back: the stream emits a match once its watermark (the latest order time its task
read, less the WATERMARK delay) has passed the match's orders plus the pattern's WITHIN (a
partial match that started before it may still complete first), while the batch ends
every partial match at the end of its input. So only alerts whose orders are all behind
that are compared (``comparable``); the watermark is the lower of ``watermark_ms``
(``stream_watermark``) and the customer's latest order in the lake (the customer's task
read it, so its watermark is at least that); the rest count as ``pending_alerts``.

Late orders: the application drops an order behind its watermark when read (as Flink's CEP
operator does) and does not report it: ``FRAUD_SQL.reports_late`` is False (the compiler's
late topic takes what time-windowed aggregations leave out, not MATCH_RECOGNIZE's drops).
So the lake stands in (``possibly_late``): an order that arrived more than the WATERMARK
delay behind an order read before it from its partition of ``orders`` may have been
dropped. A missing alert (on either side: a dropped order also joins its neighbours into
a pair the batch does not see) of a customer with such an order between the alert's
first order less WITHIN and its last plus WITHIN is explained by late data; every other
difference (another value, written twice) is unexplained, and the policy's tolerance
decides how many pass. An order dropped because the application read other partitions far
ahead of its own is not visible in the lake: its alerts count as unexplained.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines import domain
from pipelines.lake.cut import LakeCut
from pipelines.lake.duck import read_topic_hours
from pipelines.lake.paths import HOUR_MS, hour_of, hour_start_ms, lake_root
from pipelines.reconcile.compare import (
    MATCH,
    MISSING_IN_BATCH,
    MISSING_IN_STREAM,
    Reconciliation,
    compare_keyed,
    explain_by_late_data,
)
from pipelines.reconcile.sql import run_batch_query
from pipelines.reconcile.tolerance import Tolerance
from pipelines.streams.sql import FRAUD_SQL
from streaming.sql.batch import BatchQuery, to_duckdb

if TYPE_CHECKING:  # imported where used: a Dagster code location loads without pandas
    import pandas as pd

NAME = "fraud_alerts_sql_vs_duckdb"
KEYS = ("rule", "customer_id", "order_id", "first_order_id")
VALUES = ("amount", "event_time", "first_amount", "first_event_time", "risk")
#: each rule's WITHIN in ``fraud.sql``
WITHIN_MS = {
    "small_then_large": domain.CARD_TESTING_WITHIN_MS,
    "impossible_travel": domain.IMPOSSIBLE_TRAVEL_WITHIN_MS,
}


@cache
def fraud_batch_query() -> BatchQuery:
    """``fraud.sql``'s INSERTs translated to DuckDB: the UNION ALL of both rules' alerts."""
    return to_duckdb(FRAUD_SQL.text)


def watermark_delay_ms() -> int:
    """The WATERMARK delay of ``fraud.sql``'s ``orders`` table."""
    (orders,) = fraud_batch_query().tables
    assert orders.watermark is not None, "fraud.sql matches on event time"
    return orders.watermark.delay_ms


def _of_hour(frame: pd.DataFrame, start: int) -> pd.DataFrame:
    if frame.empty:
        return frame
    return frame[(frame["event_time"] >= start) & (frame["event_time"] < start + HOUR_MS)]


def comparable(alerts: pd.DataFrame, orders: pd.DataFrame, watermark_ms: int | None) -> pd.Series:
    """Which ``alerts`` the stream has surely emitted: the completing order plus the
    rule's WITHIN behind the watermark of the customer's task (the lower of
    ``watermark_ms`` and the customer's latest order in ``orders``, less the WATERMARK
    delay)."""
    import pandas as pd

    if alerts.empty:
        return pd.Series(True, index=alerts.index, dtype=bool)
    latest = orders.groupby("customer_id")["event_time"].max()
    seen = alerts["customer_id"].map(latest).astype("float64")
    if watermark_ms is not None:
        seen = seen.clip(upper=watermark_ms)
    within = alerts["rule"].map(WITHIN_MS).fillna(max(WITHIN_MS.values()))
    passed = alerts["event_time"].astype("int64") + within + watermark_delay_ms()
    return (passed < seen).fillna(False).astype(bool)


def possibly_late(orders: pd.DataFrame) -> pd.DataFrame:
    """The ``orders`` (the lake's, with ``_partition`` and ``_offset``) that arrived more
    than the WATERMARK delay behind an order read before them from their partition: the
    stream may have dropped them as late (its watermark had passed them)."""
    if orders.empty:
        return orders
    ordered = orders.sort_values(["_partition", "_offset"], kind="stable")
    seen = ordered.groupby("_partition")["event_time"].cummax()
    before = seen.groupby(ordered["_partition"]).shift(1)
    return ordered[ordered["event_time"] <= before - watermark_delay_ms() - 1]


def _near_late_orders(table: pd.DataFrame, late: pd.DataFrame) -> pd.Series:
    """Which alerts of a comparison ``table`` missing on a side have a ``late`` order of
    their customer between their first order less WITHIN and their last plus WITHIN."""
    import pandas as pd

    missing = table["status"].isin([MISSING_IN_STREAM, MISSING_IN_BATCH])
    if late.empty or not missing.any():
        return pd.Series(False, index=table.index, dtype=bool)
    first = table["first_event_time_batch"].fillna(table["first_event_time_stream"])
    last = table["event_time_batch"].fillna(table["event_time_stream"])
    within = table["rule"].map(WITHIN_MS).fillna(max(WITHIN_MS.values()))
    times = late.groupby("customer_id")["event_time"].apply(list)

    def near(i: int) -> bool:
        late_times = times.get(table.at[i, "customer_id"], [])
        low, high = first[i] - within[i], last[i] + within[i]
        return any(low <= t <= high for t in late_times)

    return pd.Series([bool(m) and near(i) for i, m in missing.items()], index=table.index)


def compare_alerts(
    stream: pd.DataFrame,
    batch: pd.DataFrame,
    orders: pd.DataFrame,
    watermark_ms: int | None,
    tolerance: Tolerance | None = None,
) -> Reconciliation:
    """The stream's alerts vs the batch's, both of one hour, on the alerts the stream has
    surely emitted (``comparable``: ``orders`` are the lake's, the customers' latest
    times); an alert missing on a side near an order the stream may have dropped as late
    (``possibly_late``) is explained by late data."""
    stream_due = comparable(stream, orders, watermark_ms)
    batch_due = comparable(batch, orders, watermark_ms)
    report = compare_keyed(
        NAME,
        stream[stream_due],
        batch[batch_due],
        keys=KEYS,
        values=VALUES,
        tolerance=tolerance,
        final=True,  # a match is emitted once
    )
    late = possibly_late(orders)
    report = explain_by_late_data(report, _near_late_orders(report.table, late), tolerance)
    report.stats["pending_alerts"] = int((~batch_due).sum())
    report.stats["possibly_late_orders"] = len(late)
    matched = report.table[report.table["status"] == MATCH]
    for rule in WITHIN_MS:
        report.stats[f"matched_{rule}"] = int((matched["rule"] == rule).sum())
    return report


def duckdb_alerts(orders: pd.DataFrame, hour: str) -> pd.DataFrame:
    """``fraud.sql``'s alerts of ``hour`` computed by DuckDB over ``orders``."""
    return _of_hour(run_batch_query(fraud_batch_query(), orders), hour_start_ms(hour))


def vs_duckdb(
    hour: str,
    lake: Path | None = None,
    *,
    tolerance: Tolerance | None = None,
    watermark_ms: int | None = None,
) -> Reconciliation:
    """The SQL fraud application's alerts of ``hour`` vs its own SQL run by DuckDB over
    the lake's orders of the hour and the hours either side, landed when it starts (one
    cut)."""
    start = hour_start_ms(hour)
    cut = LakeCut.now(lake_root(lake), domain.ORDERS)
    hours = [hour_of(start - HOUR_MS), hour_of(start), hour_of(start + HOUR_MS)]
    orders = read_topic_hours(domain.ORDERS, hours, lake, cut=cut)
    stream = _of_hour(read_topic_hours(domain.FRAUD_ALERTS_SQL, [hour_of(start)], lake), start)
    return compare_alerts(stream, duckdb_alerts(orders, hour), orders, watermark_ms, tolerance)
