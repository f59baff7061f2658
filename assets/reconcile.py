"""The reconciliation assets (hourly): stream vs batch, with blocking asset checks.

``reconcile/stream_vs_batch`` compares the stream with the batch recompute from the lake
(group ``reconciliation``), the SQL revenue application's results too (with the batch and
with the DSL application's); ``reconcile/stream_vs_kafka_batch`` with the one read
straight from Kafka (group ``kappa_batch``, checks ``<result>_stream_matches_kafka_batch``);
``reconcile/sql_vs_duckdb`` the SQL revenue application with its own query run by DuckDB
over the lake's orders, ``reconcile/fraud_sql_vs_duckdb`` the SQL fraud application's
alerts with its own SQL (both MATCH_RECOGNIZE rules) run the same way.
"""

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    BackfillPolicy,
    MaterializeResult,
    MetadataValue,
    TableColumn,
    TableRecord,
    TableSchema,
    asset,
)

from assets.batch import HOURLY
from assets.keys import (
    FRAUD_SQL_DUCKDB_KEY,
    KAFKA_RECONCILIATION_KEY,
    RECONCILIATION_KEY,
    SQL_DUCKDB_KEY,
    batch_key,
    kafka_batch_key,
    lake_key,
)
from pipelines import domain
from pipelines.batch.recompute import RESULTS
from pipelines.batch.store import KAFKA, LAKE
from pipelines.reconcile import sql as sql_reconcile
from pipelines.reconcile import sql_fraud
from pipelines.reconcile.compare import Reconciliation
from pipelines.reconcile.reconcile import reconcile_hour, stream_watermark
from resources.lake import LakeResource
from resources.reconciliation import ReconciliationPolicy

RECONCILED = ("revenue_5m", "revenue_hopping", "fraud_alerts", "click_sessions")
CHECK_NAMES = {name: f"{name}_stream_matches_batch" for name in RECONCILED}
KAFKA_CHECK_NAMES = {name: f"{name}_stream_matches_kafka_batch" for name in RECONCILED}
# the SQL revenue application (pipelines/streams/sql/revenue.sql), in stream_vs_batch
SQL_CHECK_NAMES = {
    "revenue_5m_sql": "revenue_5m_sql_stream_matches_batch",
    "revenue_5m_sql_vs_dsl": "revenue_5m_sql_matches_dsl",
}
DUCKDB_CHECK_NAMES = {"revenue_5m_sql_vs_duckdb": "revenue_5m_sql_matches_duckdb"}
FRAUD_DUCKDB_CHECK_NAMES = {sql_fraud.NAME: "fraud_alerts_sql_matches_duckdb"}

_LATE = (
    " A key that differs by exactly the records the stream reported dropping as late (its "
    "`<app>-late` topic: arrived after the window closed, so the stream skipped them and the "
    "batch counts them) is *explained by late data*; only late records of orders the batch "
    "read count. Anything else is unexplained and fails the check."
)
_ONCE = " A final result the stream wrote twice is a difference too."
#: what each reconciliation compares, for its check's description in the UI
COMPARES = {
    "revenue_5m": "Revenue and order count per region and closed 5-minute window: the "
    "`windowed-revenue` stream against the batch recompute of the hour." + _LATE + _ONCE,
    "revenue_hopping": "Revenue and order count per region and closed 10-minute window "
    "(every 5 minutes): the stream's latest value against the batch recompute." + _LATE,
    "fraud_alerts": "The fraud alerts of the hour per (rule, customer, order), bursts per "
    "(customer, window): on both sides, or a burst the stream could not see without the "
    "orders it reported late." + _ONCE,
    "click_sessions": "Click sessions starting in the hour per user: the same bounds and "
    "click count on both sides, for every closed session." + _ONCE,
    "revenue_5m_sql": "The SQL application's revenue per region and closed 5-minute window "
    "against the batch recompute." + _LATE + _ONCE,
    "revenue_5m_sql_vs_dsl": "The SQL application's windows against the DSL application's, "
    "leaving out the windows where either reported late records.",
    "revenue_5m_sql_vs_duckdb": "The SQL application's windows against its own query run by "
    "DuckDB over the lake's orders." + _LATE + _ONCE,
    sql_fraud.NAME: "The SQL fraud application's alerts of the hour per (rule, customer, "
    "order, first order) against its own MATCH_RECOGNIZE SQL run by DuckDB over the lake's "
    "orders, for the alerts whose orders are behind the stream's watermark plus the "
    "pattern's WITHIN (the later ones the stream may still hold back). The application "
    "does not report the orders it drops as late: an alert missing on a side is explained "
    "by late data when its customer has an order near it that arrived more than the "
    "WATERMARK delay behind an order before it in its partition (the stream may have "
    "dropped it). Anything else is unexplained. The check warns and blocks nothing: "
    "MATCH_RECOGNIZE drops a row behind its task's watermark without reporting it, and "
    "after the repartition by customer a task's watermark follows the most advanced of the "
    "orders partitions, so an on-time order of a partition read later can be dropped "
    "where the lake shows nothing late." + _ONCE,
}
_WORST_COLUMNS = 8


# epoch-millisecond columns, shown as UTC times
_TIME_COLUMNS = frozenset(
    {"window_start", "window_end", "session_start", "session_end", "event_time", "stream_time"}
)


def _cell(column: str, value: Any) -> str:
    import pandas as pd

    if pd.isna(value):
        return ""
    if column in _TIME_COLUMNS:
        return pd.Timestamp(int(value), unit="ms", tz="UTC").strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    return str(value)


def worst_keys_table(report: Reconciliation) -> Any:
    """The worst keys of ``report`` as a Dagster table (strings, for any column mix; times
    as UTC times)."""
    frame = report.worst
    columns = [c for c in frame.columns if c not in ("severity",)][: _WORST_COLUMNS + 6]
    records = [
        TableRecord({c: _cell(c, v) for c, v in row.items()})
        for row in frame[columns].to_dict("records")
    ]
    return MetadataValue.table(
        records=records,
        schema=TableSchema(columns=[TableColumn(name=c, type="string") for c in columns]),
    )


def is_empty(report: Reconciliation) -> bool:
    """Neither side has a single key: there was nothing to compare."""
    return report.stats["batch_rows"] == 0 and report.stats["stream_rows"] == 0


def check_result(
    name: str,
    reports: dict[str, Reconciliation],
    check_names: Mapping[str, str] = CHECK_NAMES,
    severity: AssetCheckSeverity = AssetCheckSeverity.ERROR,
) -> AssetCheckResult:
    """The check result of one reconciliation over the hours of a run (one, or a
    backfilled range), failing with ``severity``. Hours without data are reported as such;
    if no hour had data the check fails with WARN severity (blocking nothing), never
    passes. ``check_names``: the check of each reconciliation (``KAFKA_CHECK_NAMES`` for
    the kappa batch's)."""
    with_data = {hour: r for hour, r in reports.items() if not is_empty(r)}
    empty = sorted(set(reports) - set(with_data))
    no_data = f"no data for hour(s) {', '.join(empty)}" if empty else ""
    if not with_data:
        return AssetCheckResult(
            check_name=check_names[name],
            passed=False,
            severity=AssetCheckSeverity.WARN,
            description=(
                f"{name}: {no_data}: neither the stream nor the batch has a result (no events "
                "in the lake for them, or not landed yet)"
            ),
            metadata={"no_data": True, "hours_without_data": len(empty)},
        )
    totals: dict[str, Any] = {}
    for report in with_data.values():
        for stat, value in report.stats.items():
            if isinstance(value, int) and not isinstance(value, bool):
                totals[stat] = totals.get(stat, 0) + value
    lines = [f"{hour}: {r.summary()}" for hour, r in sorted(with_data.items())]
    if no_data:
        lines.append(no_data)
    worst = next((r for _, r in sorted(with_data.items()) if not r.passed), None)
    worst = worst or next(iter(with_data.values()))
    return AssetCheckResult(
        check_name=check_names[name],
        passed=all(r.passed for r in with_data.values()),
        severity=severity,
        description="\n".join(lines) if len(reports) > 1 else worst.summary(),
        metadata={
            **totals,
            "hours": len(reports),
            "hours_without_data": len(empty),
            "worst_keys": worst_keys_table(worst),
        },
    )


_STREAM_DEPS = [
    lake_key(domain.REVENUE_5M),
    lake_key(domain.REVENUE_HOPPING),
    lake_key(domain.FRAUD_ALERTS),
    lake_key(domain.CLICK_SESSIONS),
    lake_key(domain.ORDERS),
    *(lake_key(t) for t in domain.LATE_TOPICS),
]
_SQL_DEPS = [lake_key(domain.REVENUE_5M_SQL), lake_key(domain.REVENUE_5M)]


def _sql_reports(
    hour: str, root: Any, tolerance: Any, watermark: int | None
) -> dict[str, Reconciliation]:
    """The SQL revenue application's reconciliations of ``hour`` with the batch recompute
    from the lake and with the DSL application."""
    common = {"tolerance": tolerance, "watermark_ms": watermark}
    return {
        "revenue_5m_sql": sql_reconcile.vs_batch(hour, root, **common),
        "revenue_5m_sql_vs_dsl": sql_reconcile.vs_dsl(hour, root, **common),
    }


def _reconcile(
    context: AssetExecutionContext,
    source: str,
    check_names: Mapping[str, str],
    lake: LakeResource,
    policy: ReconciliationPolicy,
    *,
    with_sql: bool = False,
) -> Iterator[Any]:
    """Compare every stream result of the run's hours with their batch recompute from
    ``source`` (``with_sql``: the SQL revenue application's too, checks
    ``SQL_CHECK_NAMES``); the materialization, then one check result per reconciliation."""
    root = lake.path
    watermark = stream_watermark(root)
    tolerance = policy.tolerance
    by_hour = {
        hour: {
            **reconcile_hour(
                hour, root, tolerance=tolerance, watermark_ms=watermark, source=source
            ),
            **(_sql_reports(hour, root, tolerance, watermark) if with_sql else {}),
        }
        for hour in context.partition_keys
    }
    metadata: dict[str, Any] = {"watermark_ms": watermark or 0}
    if watermark is not None:
        metadata["watermark"] = _cell("stream_time", watermark)
    for hour, reports in by_hour.items():
        for name, report in reports.items():
            context.log.info(f"{hour} {report.summary()}")
            if len(by_hour) == 1:
                for stat, value in report.stats.items():
                    if isinstance(value, int | float):
                        metadata[f"{name}.{stat}"] = value
    yield MaterializeResult(metadata=metadata)
    names = {**check_names, **(SQL_CHECK_NAMES if with_sql else {})}
    for name in names:
        yield check_result(name, {hour: reports[name] for hour, reports in by_hour.items()}, names)


@asset(
    key=RECONCILIATION_KEY,
    deps=[*(batch_key(r) for r in RECONCILED), *_STREAM_DEPS, *_SQL_DEPS],
    partitions_def=HOURLY,
    backfill_policy=BackfillPolicy.single_run(),
    group_name="reconciliation",
    kinds={"pandas"},
    check_specs=[
        AssetCheckSpec(check, asset=RECONCILIATION_KEY, blocking=True, description=COMPARES[name])
        for name, check in {**CHECK_NAMES, **SQL_CHECK_NAMES}.items()
    ],
    description=(
        "Lambda reconciliation of each hour of the run: stream results (lake) vs batch recompute. A "
        "difference is explained only by the records the stream reported dropping as late "
        "(`<app>-late` topics); the batch result is the corrected value. The SQL revenue "
        "application's results are compared with the batch and with the DSL application's. "
        "An hour without data is reported as such."
    ),
)
def stream_vs_batch(
    context: AssetExecutionContext, lake: LakeResource, reconciliation: ReconciliationPolicy
) -> Iterator[Any]:
    """Compare every stream result of the run's hours with their batch recompute."""
    yield from _reconcile(context, LAKE, CHECK_NAMES, lake, reconciliation, with_sql=True)


@asset(
    key=KAFKA_RECONCILIATION_KEY,
    deps=[*(kafka_batch_key(r) for r in RECONCILED), *_STREAM_DEPS],
    partitions_def=HOURLY,
    backfill_policy=BackfillPolicy.single_run(),
    group_name="kappa_batch",
    kinds={"pandas"},
    check_specs=[
        AssetCheckSpec(
            KAFKA_CHECK_NAMES[name],
            asset=KAFKA_RECONCILIATION_KEY,
            blocking=True,
            description=COMPARES[name].replace("the batch recompute", "the batch read from Kafka"),
        )
        for name in RECONCILED
    ],
    description=(
        "Reconciliation of each hour of the run: stream results (lake) vs the batch recompute "
        "read straight from Kafka (`kappa_batch/<result>`), with the same rules as "
        "`reconcile/stream_vs_batch`. Built by hand: Jobs -> kafka_batch_reconcile, "
        "for the hours you pick."
    ),
)
def stream_vs_kafka_batch(
    context: AssetExecutionContext, lake: LakeResource, reconciliation: ReconciliationPolicy
) -> Iterator[Any]:
    """Compare every stream result of the run's hours with their recompute from Kafka."""
    yield from _reconcile(context, KAFKA, KAFKA_CHECK_NAMES, lake, reconciliation)


@asset(
    key=SQL_DUCKDB_KEY,
    deps=[
        lake_key(domain.ORDERS),
        lake_key(domain.REVENUE_5M_SQL),
        lake_key(domain.REVENUE_SQL_LATE),
    ],
    partitions_def=HOURLY,
    backfill_policy=BackfillPolicy.single_run(),
    group_name="reconciliation",
    kinds={"duckdb", "sql"},
    check_specs=[
        AssetCheckSpec(check, asset=SQL_DUCKDB_KEY, blocking=True, description=COMPARES[name])
        for name, check in DUCKDB_CHECK_NAMES.items()
    ],
    description=(
        "The lambda check applied to SQL: the SELECT of `pipelines/streams/sql/revenue.sql`, "
        "translated to DuckDB (`streaming.sql.batch`) and run over the lake's orders of each "
        "hour, agrees with what the SQL application wrote for every closed window; a window "
        "that differs by exactly the orders reported dropped as late is explained."
    ),
)
def sql_vs_duckdb(
    context: AssetExecutionContext, lake: LakeResource, reconciliation: ReconciliationPolicy
) -> Iterator[Any]:
    """Compare the SQL revenue application's windows with its query run by DuckDB."""
    yield from _vs_duckdb(
        context,
        lake,
        reconciliation,
        sql_reconcile.vs_duckdb,
        sql_reconcile.revenue_batch_query().sql,
        DUCKDB_CHECK_NAMES,
    )


def _vs_duckdb(
    context: AssetExecutionContext,
    lake: LakeResource,
    policy: ReconciliationPolicy,
    compare: Callable[..., Reconciliation],
    duckdb_sql: str,
    check_names: Mapping[str, str],
    severity: AssetCheckSeverity = AssetCheckSeverity.ERROR,
) -> Iterator[Any]:
    """A SQL application's results of the run's hours vs its SQL run by DuckDB
    (``compare(hour, root, tolerance=..., watermark_ms=...)``): the materialization
    (with the DuckDB SQL), then its check's result."""
    root = lake.path
    watermark = stream_watermark(root)
    by_hour = {
        hour: compare(hour, root, tolerance=policy.tolerance, watermark_ms=watermark)
        for hour in context.partition_keys
    }
    metadata: dict[str, Any] = {
        "watermark_ms": watermark or 0,
        "duckdb_sql": MetadataValue.md(f"```sql\n{duckdb_sql}\n```"),
    }
    for hour, report in by_hour.items():
        context.log.info(f"{hour} {report.summary()}")
        if len(by_hour) == 1:
            metadata.update({k: v for k, v in report.stats.items() if isinstance(v, int | float)})
    yield MaterializeResult(metadata=metadata)
    for name, check in check_names.items():
        yield check_result(name, by_hour, {name: check}, severity)


@asset(
    key=FRAUD_SQL_DUCKDB_KEY,
    deps=[lake_key(domain.ORDERS), lake_key(domain.FRAUD_ALERTS_SQL)],
    partitions_def=HOURLY,
    backfill_policy=BackfillPolicy.single_run(),
    group_name="reconciliation",
    kinds={"duckdb", "sql"},
    check_specs=[
        AssetCheckSpec(
            check, asset=FRAUD_SQL_DUCKDB_KEY, blocking=False, description=COMPARES[name]
        )
        for name, check in FRAUD_DUCKDB_CHECK_NAMES.items()
    ],
    description=(
        "The lambda check applied to the SQL fraud application: both INSERTs of "
        "`pipelines/streams/sql/fraud.sql` (MATCH_RECOGNIZE), translated to DuckDB "
        "(`streaming.sql.batch`) and run over the lake's orders around each hour, give the "
        "alerts the application wrote, for every alert the stream's watermark has passed."
    ),
)
def fraud_sql_vs_duckdb(
    context: AssetExecutionContext, lake: LakeResource, reconciliation: ReconciliationPolicy
) -> Iterator[Any]:
    """Compare the SQL fraud application's alerts with its SQL run by DuckDB."""
    yield from _vs_duckdb(
        context,
        lake,
        reconciliation,
        sql_fraud.vs_duckdb,
        sql_fraud.fraud_batch_query().sql,
        FRAUD_DUCKDB_CHECK_NAMES,
        AssetCheckSeverity.WARN,
    )


assert set(RECONCILED) <= set(RESULTS)
RECONCILE_ASSETS = [stream_vs_batch, sql_vs_duckdb]
#: the SQL fraud application's reconciliation (its own list: the batch recompute's lakes
#: hold no fraud-alerts-sql)
FRAUD_SQL_RECONCILE_ASSETS = [fraud_sql_vs_duckdb]
KAFKA_RECONCILE_ASSETS = [stream_vs_kafka_batch]
