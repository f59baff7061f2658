"""The Dagster code location of the platform (``dg dev -w workspace.yaml``).

Assembles:

- raw topic assets (``kafka/<topic>``, materialised by the ``generator`` asset) and one
  long-running streaming asset per stream application (``assets.streams``),
  plus the kappa replay asset and job;
- the data side from ``assets.data_defs``: lake, hourly PySpark batch recompute,
  reconciliation (blocking checks), Great Expectations checks, dbt models and tests;
- the ``hourly_batch_reconcile`` job (asset groups ``lake`` + ``batch`` +
  ``reconciliation``, hourly partitions), its hourly schedule and the nightly backfill of the
  previous day;
- the dbt models built by the ``dbt_after_the_lake`` automation sensor once the lake they
  read was landed again;
- the ``stream_app_healthy`` check of every stream application (``assets.stream_health``),
  declared by its streaming asset;
- sensors: stream watermark -> reconciliation, stream health / consumer lag, late data ->
  batch re-runs, runless materializations of the topics written outside runs;
- whatever launches runs on its own (schedules, the watermark and late-data sensors, the dbt
  automation) starts running, or stopped with ``PLATFORM_AUTOMATION=off``;
- runs launched from the asset graph execute in one process, a streaming asset's run with
  a process per step (``assets.executor``);
- resources of the deployment ``DAGSTER_DEPLOYMENT`` names (``resources.platform_resources``:
  ``local`` embedded default, ``cluster``).
"""

from dagster import DefaultScheduleStatus, DefaultSensorStatus, Definitions

from assets import data_defs
from assets.dbt_assets import build_dbt_automation_sensor
from assets.executor import platform_executor
from assets.streams import STREAM_ASSETS, generator, kappa_replay, kappa_replay_job
from resources import platform_resources
from resources.deployment import automation_on
from sensors import (
    build_health_sensor,
    build_hourly_schedule,
    build_late_data_sensor,
    build_nightly_backfill,
    build_topic_materializations_sensor,
    build_watermark_sensor,
)


def build_definitions() -> Definitions:
    """Everything of the code location."""
    partitions = data_defs.HOURLY_PARTITIONS
    on = automation_on()
    schedules = DefaultScheduleStatus.RUNNING if on else DefaultScheduleStatus.STOPPED
    automation = DefaultSensorStatus.RUNNING if on else DefaultSensorStatus.STOPPED
    return Definitions(
        assets=[generator, *STREAM_ASSETS, kappa_replay, *data_defs.ASSETS],
        asset_checks=list(data_defs.ASSET_CHECKS),
        jobs=[kappa_replay_job, *data_defs.JOBS],
        schedules=[
            build_hourly_schedule(data_defs.HOURLY_JOB_DEF, partitions, default_status=schedules),
            build_nightly_backfill(partitions_def=partitions, default_status=schedules),
        ],
        sensors=[
            build_health_sensor(),
            build_watermark_sensor(partitions_def=partitions, default_status=automation),
            build_late_data_sensor(partitions_def=partitions, default_status=automation),
            build_topic_materializations_sensor(),
            build_dbt_automation_sensor(default_status=automation),
        ],
        resources=platform_resources(),
        executor=platform_executor,
    )


defs = build_definitions()
