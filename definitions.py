"""The Dagster code location of the platform (``dg dev -w workspace.yaml``).

Assembles:

- raw topic assets (``kafka/<topic>``, materialised by the ``generator`` asset) and one
  long-running streaming asset per stream application (``assets.streams``),
  plus the kappa replay asset and job;
- the data side from ``assets.data_defs``: lake, hourly PySpark batch recompute,
  reconciliation (blocking checks), Great Expectations checks, dbt models and tests;
- the ``hourly_batch_reconcile`` job (asset groups ``lake`` + ``batch`` +
  ``reconciliation``, hourly partitions), its hourly schedule and the nightly backfill of the previous day;
- sensors: stream watermark -> reconciliation, stream health / consumer lag, late data ->
  batch re-runs, runless materializations of the topics written outside runs;
- resources of the deployment ``DAGSTER_DEPLOYMENT`` names (``resources.platform_resources``:
  ``local`` embedded default, ``cluster``).
"""

from dagster import Definitions

from assets import data_defs
from assets.streams import STREAM_ASSETS, generator, kappa_replay, kappa_replay_job
from resources import platform_resources
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
    return Definitions(
        assets=[generator, *STREAM_ASSETS, kappa_replay, *data_defs.ASSETS],
        asset_checks=list(data_defs.ASSET_CHECKS),
        jobs=[kappa_replay_job, *data_defs.JOBS],
        schedules=[
            build_hourly_schedule(data_defs.HOURLY_JOB_DEF),
            build_nightly_backfill(partitions_def=partitions),
        ],
        sensors=[
            build_health_sensor(),
            build_watermark_sensor(partitions_def=partitions),
            build_late_data_sensor(partitions_def=partitions),
            build_topic_materializations_sensor(),
        ],
        resources=platform_resources(),
    )


defs = build_definitions()
