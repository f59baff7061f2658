"""The data side's Dagster definitions, as lists for ``definitions.py``.

- ``LAKE_ASSETS``: ``lake/<topic>`` for every raw and derived topic (deps ``kafka/<topic>``)
- ``BATCH_ASSETS``: ``batch/<result>``, hourly partitions ``HOURLY`` (deps ``lake/...``)
- ``RECONCILE_ASSETS``: ``reconcile/stream_vs_batch`` (hourly, group ``reconciliation``) with blocking checks
  ``<result>_stream_matches_batch`` (worst keys as a metadata table), the SQL revenue
  application's ``revenue_5m_sql_stream_matches_batch`` and ``revenue_5m_sql_matches_dsl``;
  ``reconcile/sql_vs_duckdb`` with ``revenue_5m_sql_matches_duckdb`` (the SQL app vs its
  query run by DuckDB over the lake's orders)
- ``FRAUD_SQL_RECONCILE_ASSETS``: ``reconcile/fraud_sql_vs_duckdb`` (hourly, group
  ``reconciliation``) with ``fraud_alerts_sql_matches_duckdb`` (the SQL fraud app's alerts
  vs its MATCH_RECOGNIZE SQL run by DuckDB over the lake's orders)
- ``KAFKA_BATCH_ASSETS`` + ``KAFKA_RECONCILE_ASSETS`` (group ``kappa_batch``): the same
  recompute read straight from the Kafka topics (``kappa_batch/<result>``, deps
  ``kafka/...``; resource ``pyspark_kafka``) and ``reconcile/stream_vs_kafka_batch`` with
  checks ``<result>_stream_matches_kafka_batch``; job ``KAFKA_BATCH_JOB_DEF``
  (``kafka_batch_reconcile``: land the lake's stream results, recompute from Kafka,
  reconcile)
- ``DBT_ASSETS``: ``dbt/<model>`` (staging + marts); dbt tests are asset checks
- ``GX_CHECKS``: Great Expectations suites on ``lake/orders``, ``lake/customers``,
  ``lake/enriched-orders``, ``lake/revenue-per-region-5m``, ``lake/orders-deduped``
- ``DATA_ASSETS`` / ``DATA_ASSET_CHECKS``: all of the above; ``HOURLY_JOB_DEF``
  (``hourly_batch_reconcile``): one hour's run for schedules, sensors and backfills: land
  what is new in Kafka, recompute the hour in batch, then reconcile it with the stream.

The ``kafka/<topic>`` assets (raw topics and the stream applications' outputs) are defined
by ``assets.streams``. Jobs that run Spark carry the run tag ``platform/compute: spark``
(``SPARK_TAGS``), which the cluster deployment's run queue limits.
"""

from __future__ import annotations

from dagster import AssetSelection, define_asset_job, in_process_executor

from assets.batch import BATCH_ASSETS, HOURLY, KAFKA_BATCH_ASSETS
from assets.dbt_assets import DBT_ASSETS
from assets.keys import HOURLY_JOB
from assets.lake import LAKE_ASSETS
from assets.quality import GX_CHECKS
from assets.reconcile import (
    FRAUD_SQL_RECONCILE_ASSETS,
    KAFKA_RECONCILE_ASSETS,
    RECONCILE_ASSETS,
)

DATA_ASSETS = [
    *LAKE_ASSETS,
    *BATCH_ASSETS,
    *RECONCILE_ASSETS,
    *FRAUD_SQL_RECONCILE_ASSETS,
    *KAFKA_BATCH_ASSETS,
    *KAFKA_RECONCILE_ASSETS,
    *DBT_ASSETS,
]
DATA_ASSET_CHECKS = [*GX_CHECKS]

# The lake lands first (upstream of the batch assets), so an hour is never reconciled
# against whatever was landed by hand; landing is idempotent and locked per topic.
SPARK_TAGS = {"platform/compute": "spark"}

HOURLY_JOB_DEF = define_asset_job(
    HOURLY_JOB,
    tags=SPARK_TAGS,
    selection=AssetSelection.groups("lake", "batch", "reconciliation"),
    # one process: every step shares one Spark session (a JVM start costs ~50 s here)
    executor_def=in_process_executor,
    description="Land the lake, recompute one hour in batch (PySpark), reconcile it with the "
    "stream",
)

# The kappa path's batch: the hour recomputed straight from Kafka (its own Spark session,
# with the Kafka source jars), reconciled with the stream results the lake landed.
KAFKA_BATCH_JOB = "kafka_batch_reconcile"
KAFKA_BATCH_JOB_DEF = define_asset_job(
    KAFKA_BATCH_JOB,
    tags=SPARK_TAGS,
    selection=AssetSelection.groups("lake", "kappa_batch"),
    executor_def=in_process_executor,
    description="Land the lake, recompute one hour in batch straight from Kafka (PySpark's "
    "Kafka source), reconcile it with the stream",
)

# The names definitions.py reads.
ASSETS = DATA_ASSETS
ASSET_CHECKS = DATA_ASSET_CHECKS
JOBS = [HOURLY_JOB_DEF, KAFKA_BATCH_JOB_DEF]
HOURLY_PARTITIONS = HOURLY

__all__ = [
    "ASSETS",
    "ASSET_CHECKS",
    "BATCH_ASSETS",
    "DATA_ASSETS",
    "DATA_ASSET_CHECKS",
    "DBT_ASSETS",
    "FRAUD_SQL_RECONCILE_ASSETS",
    "GX_CHECKS",
    "HOURLY",
    "HOURLY_JOB_DEF",
    "HOURLY_PARTITIONS",
    "JOBS",
    "KAFKA_BATCH_ASSETS",
    "KAFKA_BATCH_JOB_DEF",
    "KAFKA_RECONCILE_ASSETS",
    "LAKE_ASSETS",
    "RECONCILE_ASSETS",
    "SPARK_TAGS",
]
