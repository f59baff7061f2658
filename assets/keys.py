"""Asset keys and job names shared by every part of the platform (lineage: kafka -> lake ->
batch/dbt; the sensors and schedules target the jobs by these names)."""

from __future__ import annotations

from dagster import AssetKey

HOURLY_JOB = "hourly_batch_reconcile"
KAPPA_JOB = "kappa_replay_job"


def kafka_key(topic: str) -> AssetKey:
    """A Kafka topic: ``kafka/<topic>`` (raw topics and stream application outputs)."""
    return AssetKey(["kafka", topic])


def lake_key(topic: str) -> AssetKey:
    """A topic landed in the lake: ``lake/<topic>``."""
    return AssetKey(["lake", topic])


def batch_key(result: str) -> AssetKey:
    """A batch recompute result: ``batch/<result>``."""
    return AssetKey(["batch", result])


def kafka_batch_key(result: str) -> AssetKey:
    """A batch recompute result read straight from Kafka (the kappa path):
    ``kappa_batch/<result>``."""
    return AssetKey(["kappa_batch", result])


RECONCILIATION_KEY = AssetKey(["reconcile", "stream_vs_batch"])
KAFKA_RECONCILIATION_KEY = AssetKey(["reconcile", "stream_vs_kafka_batch"])
SQL_DUCKDB_KEY = AssetKey(["reconcile", "sql_vs_duckdb"])
FRAUD_SQL_DUCKDB_KEY = AssetKey(["reconcile", "fraud_sql_vs_duckdb"])


def dbt_key(model: str) -> AssetKey:
    """A dbt model: ``dbt/<model>``."""
    return AssetKey(["dbt", model])
