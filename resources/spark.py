"""The Spark resource of the batch recompute: dagster-pyspark's ``PySparkResource`` with the
platform's local settings (``assets.batch.session.DEFAULT_CONF``: ``local[2]``, small
shuffles, the spark-sql-kafka jars)."""

from typing import Any

from dagster_pyspark import PySparkResource


def spark_resource(**overrides: Any) -> PySparkResource:
    """``PySparkResource`` configured for this machine; ``overrides`` are Spark settings."""
    from assets.batch.session import spark_config

    return PySparkResource(spark_config=spark_config({k: str(v) for k, v in overrides.items()}))
