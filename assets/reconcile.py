"""The reconciliation assets (hourly): stream vs batch, with blocking asset checks.

``reconcile/stream_vs_batch`` compares the stream with the batch recompute from the lake
(group ``reconciliation``); ``reconcile/stream_vs_kafka_batch`` with the one read straight
from Kafka (group ``kappa_batch``, checks ``<result>_stream_matches_kafka_batch``).
"""

from collections.abc import Iterator, Mapping
from typing import Any

import pandas as pd
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
    KAFKA_RECONCILIATION_KEY,
    RECONCILIATION_KEY,
    batch_key,
    kafka_batch_key,
    lake_key,
)
from pipelines import domain
from pipelines.batch.recompute import RESULTS
from pipelines.batch.store import KAFKA, LAKE
from pipelines.reconcile.compare import Reconciliation
from pipelines.reconcile.reconcile import reconcile_hour, stream_watermark
from resources.lake import LakeResource
from resources.reconciliation import ReconciliationPolicy

RECONCILED = ("revenue_5m", "revenue_hopping", "fraud_alerts", "click_sessions")
CHECK_NAMES = {name: f"{name}_stream_matches_batch" for name in RECONCILED}
KAFKA_CHECK_NAMES = {name: f"{name}_stream_matches_kafka_batch" for name in RECONCILED}
_WORST_COLUMNS = 8


# epoch-millisecond columns, shown as UTC times
_TIME_COLUMNS = frozenset(
    {"window_start", "window_end", "session_start", "session_end", "event_time", "stream_time"}
)


def _cell(column: str, value: Any) -> str:
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
) -> AssetCheckResult:
    """The blocking check result of one reconciliation over the hours of a run (one, or a
    backfilled range). Hours without data are reported as such; if no hour had data the
    check fails with WARN severity (blocking nothing), never passes. ``check_names``: the
    check of each reconciliation (``KAFKA_CHECK_NAMES`` for the kappa batch's)."""
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
        severity=AssetCheckSeverity.ERROR,
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


def _reconcile(
    context: AssetExecutionContext,
    source: str,
    check_names: Mapping[str, str],
    lake: LakeResource,
    policy: ReconciliationPolicy,
) -> Iterator[Any]:
    """Compare every stream result of the run's hours with their batch recompute from
    ``source``; the materialization, then one check result per reconciliation."""
    root = lake.path
    watermark = stream_watermark(root)
    tolerance = policy.tolerance
    by_hour = {
        hour: reconcile_hour(hour, root, tolerance=tolerance, watermark_ms=watermark, source=source)
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
    for name in RECONCILED:
        yield check_result(
            name, {hour: reports[name] for hour, reports in by_hour.items()}, check_names
        )


@asset(
    key=RECONCILIATION_KEY,
    deps=[*(batch_key(r) for r in RECONCILED), *_STREAM_DEPS],
    partitions_def=HOURLY,
    backfill_policy=BackfillPolicy.single_run(),
    group_name="reconciliation",
    kinds={"pandas"},
    check_specs=[
        AssetCheckSpec(CHECK_NAMES[name], asset=RECONCILIATION_KEY, blocking=True)
        for name in RECONCILED
    ],
    description=(
        "Lambda reconciliation of each hour of the run: stream results (lake) vs batch recompute. A "
        "difference is explained only by the records the stream reported dropping as late "
        "(`<app>-late` topics); the batch result is the corrected value. An hour without "
        "data is reported as such."
    ),
)
def stream_vs_batch(
    context: AssetExecutionContext, lake: LakeResource, reconciliation: ReconciliationPolicy
) -> Iterator[Any]:
    """Compare every stream result of the run's hours with their batch recompute."""
    yield from _reconcile(context, LAKE, CHECK_NAMES, lake, reconciliation)


@asset(
    key=KAFKA_RECONCILIATION_KEY,
    deps=[*(kafka_batch_key(r) for r in RECONCILED), *_STREAM_DEPS],
    partitions_def=HOURLY,
    backfill_policy=BackfillPolicy.single_run(),
    group_name="kappa_batch",
    kinds={"pandas"},
    check_specs=[
        AssetCheckSpec(KAFKA_CHECK_NAMES[name], asset=KAFKA_RECONCILIATION_KEY, blocking=True)
        for name in RECONCILED
    ],
    description=(
        "Reconciliation of each hour of the run: stream results (lake) vs the batch recompute "
        "read straight from Kafka (`kappa_batch/<result>`), with the same rules as "
        "`reconcile/stream_vs_batch`."
    ),
)
def stream_vs_kafka_batch(
    context: AssetExecutionContext, lake: LakeResource, reconciliation: ReconciliationPolicy
) -> Iterator[Any]:
    """Compare every stream result of the run's hours with their recompute from Kafka."""
    yield from _reconcile(context, KAFKA, KAFKA_CHECK_NAMES, lake, reconciliation)


assert set(RECONCILED) <= set(RESULTS)
RECONCILE_ASSETS = [stream_vs_batch]
KAFKA_RECONCILE_ASSETS = [stream_vs_kafka_batch]
