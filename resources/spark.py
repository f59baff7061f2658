"""The Spark resources of the batch recompute: dagster-pyspark's ``PySparkResource`` on a
master URL (``local[2]`` embedded, ``spark://host:7077``, ``yarn`` or ``k8s://...`` on a
cluster) with deploy settings on top of the platform's defaults
(``pipelines.batch.session.DEFAULT_CONF``).

``spark_resource`` (key ``pyspark``) serves the lake path and loads no Kafka jars;
``kafka_spark_resource`` (key ``pyspark_kafka``) serves the Kafka path (the kappa batch,
``pipelines.batch.kafka_source``) and puts the spark-sql-kafka jars on ``spark.jars``. A
process has one Spark session, created by whichever resource is set up first; a Kafka path
step that finds it without the jars adds them (``session.ensure_kafka_source``).
"""

from collections.abc import Mapping
from typing import Any

from dagster import InitResourceContext
from dagster_pyspark import PySparkResource

from pipelines.batch.session import get_spark, spark_config

LOCAL_MASTER = "local[2]"


def _settings(master: str, settings: Mapping[str, Any] | None) -> dict[str, str]:
    return {"spark.master": master, **{k: str(v) for k, v in (settings or {}).items()}}


class SparkResource(PySparkResource):
    """dagster-pyspark's resource on the process's one Spark session
    (``session.get_spark``): a session on another master is stopped, never joined."""

    def setup_for_execution(self, context: InitResourceContext) -> None:
        self._spark_session = get_spark(dict(self.spark_config))


def spark_resource(
    master: str = LOCAL_MASTER, settings: Mapping[str, Any] | None = None
) -> SparkResource:
    """``SparkResource`` on ``master``; ``settings`` are Spark settings (deploy mode,
    executor memory and cores, ...) over the platform's defaults."""
    return SparkResource(spark_config=spark_config(_settings(master, settings)))


def kafka_spark_resource(
    master: str = LOCAL_MASTER, settings: Mapping[str, Any] | None = None
) -> SparkResource:
    """``spark_resource`` with Spark's Kafka source (the spark-sql-kafka jars)."""
    return SparkResource(spark_config=spark_config(_settings(master, settings), kafka=True))
