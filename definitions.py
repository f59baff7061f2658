"""The Dagster code location of the platform (``dagster dev -w workspace.yaml``).

Assembles:

- raw topic assets (``kafka/<topic>``, materialised by the ``generator`` asset) and one
  long-running streaming asset per stream application (``assets.streams.dagster_assets``),
  plus the kappa replay asset and job;
- the data side from ``assets.data_defs``: lake, hourly PySpark batch recompute,
  reconciliation (blocking checks), Great Expectations checks, dbt models and tests;
- the ``hourly_batch_reconcile`` job (asset groups ``batch`` + ``reconciliation``, hourly
  partitions), its hourly schedule and the nightly backfill of the previous day;
- sensors: stream watermark -> reconciliation, stream health / consumer lag, late data ->
  batch re-runs;
- resources from the environment (``resources.default_resources``).
"""

import importlib

from dagster import AssetSelection, Definitions, define_asset_job

from assets.streams.dagster_assets import STREAM_ASSETS, generator, kappa_replay, kappa_replay_job
from resources import default_resources
from sensors import (
    HOURLY_JOB,
    build_health_sensor,
    build_hourly_schedule,
    build_late_data_sensor,
    build_nightly_backfill,
    build_watermark_sensor,
)


def _data_defs():
    """H7's data side (``assets.data_defs``), or None while it does not exist."""
    try:
        return importlib.import_module("assets.data_defs")
    except ModuleNotFoundError as exc:
        if exc.name != "assets.data_defs":
            raise
        return None


def build_definitions() -> Definitions:
    """Everything of the code location."""
    data = _data_defs()
    assets = [generator, *STREAM_ASSETS, kappa_replay]
    checks: list = []
    jobs: list = [kappa_replay_job]
    schedules: list = []
    resources = default_resources()
    partitions = None
    if data is not None:
        assets += list(data.ASSETS)
        checks += list(getattr(data, "ASSET_CHECKS", []))
        jobs += list(getattr(data, "JOBS", []))
        resources = {**getattr(data, "RESOURCES", {}), **resources}
        partitions = data.HOURLY_PARTITIONS
        hourly = define_asset_job(
            HOURLY_JOB,
            selection=AssetSelection.groups("batch", "reconciliation"),
            partitions_def=partitions,
            description="Batch recompute (PySpark) + stream-vs-batch reconciliation of one hour",
        )
        jobs.append(hourly)
        schedules += [
            build_hourly_schedule(hourly),
            build_nightly_backfill(partitions_def=partitions),
        ]
    sensors = [build_health_sensor()]
    if data is not None:
        sensors += [
            build_watermark_sensor(partitions_def=partitions),
            build_late_data_sensor(partitions_def=partitions),
        ]
    return Definitions(
        assets=assets,
        asset_checks=checks,
        jobs=jobs,
        schedules=schedules,
        sensors=sensors,
        resources=resources,
    )


defs = build_definitions()
