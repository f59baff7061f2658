"""The reconciliation asset (hourly): stream vs batch, with blocking asset checks."""

from collections.abc import Iterator
from typing import Any

import pandas as pd
from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    MaterializeResult,
    MetadataValue,
    TableColumn,
    TableRecord,
    TableSchema,
    asset,
)

from assets import domain
from assets.batch.dagster_assets import HOURLY
from assets.batch.recompute import RESULTS
from assets.keys import RECONCILIATION_KEY, batch_key, lake_key
from assets.lake.paths import lake_root
from assets.reconcile.compare import Reconciliation
from assets.reconcile.reconcile import reconcile_hour, stream_watermark
from assets.reconcile.tolerance import Tolerance

RECONCILED = ("revenue_5m", "revenue_hopping", "fraud_alerts", "click_sessions")
CHECK_NAMES = {name: f"{name}_stream_matches_batch" for name in RECONCILED}
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


def check_result(name: str, report: Reconciliation, hour: str = "") -> AssetCheckResult:
    """The blocking check result of one reconciliation. An hour without data is reported
    as such (a failed WARN check, which blocks nothing), never as a pass."""
    if is_empty(report):
        return AssetCheckResult(
            check_name=CHECK_NAMES[name],
            passed=False,
            severity=AssetCheckSeverity.WARN,
            description=(
                f"{name}: no data for hour {hour}: neither the stream nor the batch has a "
                "result (no events in the lake for it, or not landed yet)"
            ),
            metadata={"no_data": True},
        )
    return AssetCheckResult(
        check_name=CHECK_NAMES[name],
        passed=report.passed,
        severity=AssetCheckSeverity.ERROR,
        description=report.summary(),
        metadata={
            **{k: v for k, v in report.stats.items() if isinstance(v, int | float)},
            "worst_keys": worst_keys_table(report),
        },
    )


@asset(
    key=RECONCILIATION_KEY,
    deps=[
        *(batch_key(r) for r in RECONCILED),
        lake_key(domain.REVENUE_5M),
        lake_key(domain.REVENUE_HOPPING),
        lake_key(domain.FRAUD_ALERTS),
        lake_key(domain.CLICK_SESSIONS),
        lake_key(domain.ORDERS),
        *(lake_key(t) for t in domain.LATE_TOPICS),
    ],
    partitions_def=HOURLY,
    group_name="reconciliation",
    kinds={"pandas"},
    check_specs=[
        AssetCheckSpec(CHECK_NAMES[name], asset=RECONCILIATION_KEY, blocking=True)
        for name in RECONCILED
    ],
    description=(
        "Lambda reconciliation of one hour: stream results (lake) vs batch recompute. A "
        "difference is explained only by the records the stream reported dropping as late "
        "(`<app>-late` topics); the batch result is the corrected value. An hour without "
        "data is reported as such."
    ),
)
def stream_vs_batch(context: AssetExecutionContext) -> Iterator[Any]:
    """Compare every stream result of the partition's hour with its batch recompute."""
    lake = lake_root()
    watermark = stream_watermark(lake)
    reports = reconcile_hour(
        context.partition_key, lake, tolerance=Tolerance.from_env(), watermark_ms=watermark
    )
    metadata: dict[str, Any] = {"watermark_ms": watermark or 0}
    for name, report in reports.items():
        context.log.info(report.summary())
        for stat, value in report.stats.items():
            if isinstance(value, int | float):
                metadata[f"{name}.{stat}"] = value
    yield MaterializeResult(metadata=metadata)
    for name, report in reports.items():
        yield check_result(name, report, context.partition_key)


assert set(RECONCILED) <= set(RESULTS)
RECONCILE_ASSETS = [stream_vs_batch]
