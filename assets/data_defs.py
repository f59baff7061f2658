"""The data side's Dagster definitions, as lists for ``definitions.py``.

- ``LAKE_ASSETS``: ``lake/<topic>`` for every raw and derived topic (deps ``kafka/<topic>``)
- ``BATCH_ASSETS``: ``batch/<result>``, hourly partitions ``HOURLY`` (deps ``lake/...``)
- ``RECONCILE_ASSETS``: ``reconcile/stream_vs_batch`` (hourly, group ``reconciliation``) with blocking checks
  ``<result>_stream_matches_batch`` (worst keys as a metadata table)
- ``DBT_ASSETS``: ``dbt/<model>`` (staging + marts); dbt tests are asset checks
- ``GX_CHECKS``: Great Expectations suites on ``lake/orders``, ``lake/customers``,
  ``lake/enriched-orders``, ``lake/revenue-per-region-5m``, ``lake/orders-deduped``
- ``DATA_ASSETS`` / ``DATA_ASSET_CHECKS``: all of the above; ``BATCH_AND_RECONCILE_JOB``:
  one hour's batch recompute followed by the reconciliation (for schedules and sensors).

The ``kafka/<topic>`` assets (raw topics and the stream applications' outputs) are defined
by ``assets/streams``; no resources are needed (settings come from the environment:
``KAFKA_BOOTSTRAP_SERVERS``, ``LAKE_ROOT``, ``PLATFORM_PARTITIONS_START``, ``RECONCILE_*``).
"""

from __future__ import annotations

from dagster import AssetSelection, define_asset_job

from assets.batch.dagster_assets import BATCH_ASSETS, HOURLY
from assets.dbt_assets import DBT_ASSETS
from assets.keys import RECONCILIATION_KEY
from assets.lake.dagster_assets import LAKE_ASSETS
from assets.quality.dagster_checks import GX_CHECKS
from assets.reconcile.dagster_assets import RECONCILE_ASSETS

DATA_ASSETS = [*LAKE_ASSETS, *BATCH_ASSETS, *RECONCILE_ASSETS, *DBT_ASSETS]
DATA_ASSET_CHECKS = [*GX_CHECKS]

BATCH_AND_RECONCILE_JOB = define_asset_job(
    "batch_and_reconcile",
    selection=AssetSelection.groups("batch") | AssetSelection.keys(RECONCILIATION_KEY),
    partitions_def=HOURLY,
    description="Recompute one hour in batch (PySpark) and reconcile it with the stream.",
)

# The names definitions.py reads.
ASSETS = DATA_ASSETS
ASSET_CHECKS = DATA_ASSET_CHECKS
JOBS = [BATCH_AND_RECONCILE_JOB]
HOURLY_PARTITIONS = HOURLY
RESOURCES: dict = {}

__all__ = [
    "ASSETS",
    "ASSET_CHECKS",
    "BATCH_AND_RECONCILE_JOB",
    "BATCH_ASSETS",
    "DATA_ASSETS",
    "DATA_ASSET_CHECKS",
    "DBT_ASSETS",
    "GX_CHECKS",
    "HOURLY",
    "HOURLY_PARTITIONS",
    "JOBS",
    "LAKE_ASSETS",
    "RECONCILE_ASSETS",
    "RESOURCES",
]
