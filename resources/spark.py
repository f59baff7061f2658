"""The Spark resources of the batch recompute: dagster-pyspark's ``PySparkResource`` with the
platform's local settings (``assets.batch.session.DEFAULT_CONF``: ``local[2]``, small
shuffles).

``spark_resource`` (key ``pyspark``) serves the lake path and loads no Kafka jars;
``kafka_spark_resource`` (key ``pyspark_kafka``) serves the Kafka path (the kappa batch,
``assets.batch.kafka_source``) and puts the spark-sql-kafka jars on ``spark.jars``. A
process has one Spark session, created by whichever resource is set up first; a Kafka path
step that finds it without the jars adds them (``session.ensure_kafka_source``).
"""

from typing import Any

from dagster_pyspark import PySparkResource


def spark_resource(**overrides: Any) -> PySparkResource:
    """``PySparkResource`` configured for this machine; ``overrides`` are Spark settings."""
    from assets.batch.session import spark_config

    return PySparkResource(spark_config=spark_config({k: str(v) for k, v in overrides.items()}))


def kafka_spark_resource(**overrides: Any) -> PySparkResource:
    """``spark_resource`` with Spark's Kafka source (the spark-sql-kafka jars)."""
    from assets.batch.session import spark_config

    settings = {k: str(v) for k, v in overrides.items()}
    return PySparkResource(spark_config=spark_config(settings, kafka=True))
