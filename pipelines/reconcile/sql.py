"""Reconciliations of the SQL revenue application (``pipelines/streams/sql/revenue.sql``).

Its results (``revenue-per-region-5m-sql``, landed in the lake) are compared per region
and closed 5-minute window of one hour with

- the batch recompute (``revenue_5m``, as the DSL application's are): ``vs_batch``;
- the DSL application's results (``revenue-per-region-5m``): ``vs_dsl``;
- the same SQL query run by DuckDB over the lake's orders (``streaming.sql.batch``, the
  lambda check applied to SQL): ``vs_duckdb``.

Late data: the SQL application reports the rows its aggregation drops as late to
``windowed-revenue-sql-late`` (result ``revenue_5m``, its sink table), as the DSL
application does to ``windowed-revenue-late``. Each application decides on its own
interleaving of its own repartition topic, so the two can drop different records. Against
the batch and DuckDB, a window differing by exactly the records the SQL application
dropped is explained; against the DSL application, windows where either dropped records
are left out and counted as ``windows_with_late_data``.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from pipelines import domain
from pipelines.batch.store import LAKE
from pipelines.lake.cut import LakeCut
from pipelines.lake.duck import read_topic_hours
from pipelines.lake.paths import HOUR_MS, hour_of, hour_start_ms, lake_root
from pipelines.reconcile.compare import Reconciliation, compare_keyed
from pipelines.reconcile.late import late_report
from pipelines.reconcile.reconcile import (
    REVENUE_KEYS,
    REVENUE_VALUES,
    batch_orders_cut,
    batch_result,
    closed_mask,
    late_records_of_hour,
)
from pipelines.reconcile.tolerance import Tolerance
from pipelines.streams.sql import REVENUE_SQL
from streaming.sql.batch import BatchQuery, to_duckdb

if TYPE_CHECKING:  # imported where used: a Dagster code location loads without pandas
    import pandas as pd

#: the result both applications' late records name (the batch result, the SQL sink table)
RESULT = "revenue_5m"


@cache
def revenue_batch_query() -> BatchQuery:
    """``revenue.sql``'s INSERT translated to DuckDB (``streaming.sql.batch``)."""
    return to_duckdb(REVENUE_SQL.text)


def _windows_of_hour(frame: pd.DataFrame, start: int) -> pd.DataFrame:
    if frame.empty:
        return frame
    return frame[(frame["window_start"] >= start) & (frame["window_start"] < start + HOUR_MS)]


def _sql_results(hour: str, lake: Path | None) -> pd.DataFrame:
    start = hour_start_ms(hour)
    return _windows_of_hour(read_topic_hours(domain.REVENUE_5M_SQL, [hour_of(start)], lake), start)


def _late(
    hour: str,
    lake: Path | None,
    topic: str = domain.REVENUE_SQL_LATE,
    orders_cut: LakeCut | None = None,
) -> pd.DataFrame:
    """The records of ``hour``'s windows dropped as late, per window (by the SQL
    application, or by the application writing ``topic``), of the orders within
    ``orders_cut`` when given."""
    return late_report(late_records_of_hour(topic, hour_start_ms(hour), lake, orders_cut), RESULT)


def _compare(
    name: str,
    stream: pd.DataFrame,
    other: pd.DataFrame,
    late: pd.DataFrame | None,
    watermark_ms: int | None,
    tolerance: Tolerance | None,
) -> Reconciliation:
    """``stream`` vs ``other`` on the closed windows (end + grace at or before the
    watermark); ``late`` explains a stream shortfall of exactly the records dropped."""
    grace = domain.REVENUE_GRACE_MS
    closed_other = closed_mask(other, "window_end", grace, watermark_ms)
    report = compare_keyed(
        name,
        stream[closed_mask(stream, "window_end", grace, watermark_ms)],
        other[closed_other],
        keys=REVENUE_KEYS,
        values=REVENUE_VALUES,
        late=late,
        count_column="order_count",
        late_values={"revenue_cents": "late_cents"},
        tolerance=tolerance,
        final=True,  # a window aggregation emits one row per window
    )
    report.stats["pending_windows"] = int((~closed_other).sum())
    report.stats["late_records"] = (
        int(late["late_count"].sum()) if late is not None and not late.empty else 0
    )
    return report


def vs_batch(
    hour: str,
    lake: Path | None = None,
    *,
    tolerance: Tolerance | None = None,
    watermark_ms: int | None = None,
    source: str = LAKE,
) -> Reconciliation:
    """The SQL application's windows of ``hour`` vs the batch recompute's ``revenue_5m``."""
    lake_hour = hour_of(hour_start_ms(hour))
    batch = batch_result(RESULT, lake_hour, lake, source)
    cut = batch_orders_cut(RESULT, lake_hour, lake, source)
    return _compare(
        "revenue_5m_sql",
        _sql_results(hour, lake),
        batch,
        _late(hour, lake, orders_cut=cut),
        watermark_ms,
        tolerance,
    )


def vs_dsl(
    hour: str,
    lake: Path | None = None,
    *,
    tolerance: Tolerance | None = None,
    watermark_ms: int | None = None,
) -> Reconciliation:
    """The SQL application's windows of ``hour`` vs the DSL application's; windows where
    either dropped late records are left out of both (counted as
    ``windows_with_late_data``)."""
    start = hour_start_ms(hour)
    dsl = _windows_of_hour(read_topic_hours(domain.REVENUE_5M, [hour_of(start)], lake), start)
    sql = _sql_results(hour, lake)
    late_keys = {
        (region, int(window_start))
        for late in (_late(hour, lake), _late(hour, lake, domain.REVENUE_LATE))
        for region, window_start in zip(late["region"], late["window_start"], strict=True)
    }

    def on_time(frame: pd.DataFrame) -> pd.DataFrame:
        if frame.empty or not late_keys:
            return frame
        keys = zip(frame["region"], frame["window_start"].astype("int64"), strict=True)
        return frame[[k not in late_keys for k in keys]]

    report = _compare(
        "revenue_5m_sql_vs_dsl", on_time(sql), on_time(dsl), None, watermark_ms, tolerance
    )
    report.stats["windows_with_late_data"] = len(late_keys)
    return report


def run_batch_query(query: BatchQuery, orders: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``query`` (a SQL application's INSERTs translated by ``to_duckdb``) run
    by DuckDB over ``orders`` (the lake's, as its ``orders`` table), in the sink's columns."""
    import duckdb
    import pandas as pd

    columns = list(query.columns)
    if orders.empty:
        return pd.DataFrame(columns=columns)
    relation = orders[list(domain.SCHEMAS[domain.ORDERS])]
    con = duckdb.connect()
    try:
        rows = query.run(con, {"orders": relation})
    finally:
        con.close()
    return pd.DataFrame(rows, columns=columns)


def duckdb_revenue(
    hour: str, lake: Path | None = None, orders_cut: LakeCut | None = None
) -> pd.DataFrame:
    """``revenue.sql``'s query run by DuckDB over the lake's valid orders of ``hour``
    (every window starting in the hour, whose orders all lie in the hour; only the files
    within ``orders_cut``, when given)."""
    start = hour_start_ms(hour)
    orders = read_topic_hours(domain.ORDERS, [hour_of(start)], lake, cut=orders_cut)
    return _windows_of_hour(run_batch_query(revenue_batch_query(), orders), start)


def vs_duckdb(
    hour: str,
    lake: Path | None = None,
    *,
    tolerance: Tolerance | None = None,
    watermark_ms: int | None = None,
) -> Reconciliation:
    """The SQL application's windows of ``hour`` vs its own query run by DuckDB, both sides
    over the orders landed when it starts (one cut)."""
    cut = LakeCut.now(lake_root(lake), domain.ORDERS)
    return _compare(
        "revenue_5m_sql_vs_duckdb",
        _sql_results(hour, lake),
        duckdb_revenue(hour, lake, cut),
        _late(hour, lake, orders_cut=cut),
        watermark_ms,
        tolerance,
    )
