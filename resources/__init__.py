"""Dagster resources of the platform, configured by environment with embedded defaults.

=============  ==========================  =================================================
key            class                       environment
=============  ==========================  =================================================
kafka          ``KafkaResource``           KAFKA_BOOTSTRAP_SERVERS (default localhost:9092)
stream_apps    ``StreamAppsResource``      STREAM_STATE_DIR (.state), STREAM_PROCESSING_GUARANTEE
pyspark        ``PySparkResource``         (dagster-pyspark; local[2])
pyspark_kafka  ``PySparkResource``         as pyspark + Kafka source jars (SPARK_KAFKA_JARS)
lake           ``LakeResource``            LAKE_ROOT (.lake), DUCKDB_PATH
=============  ==========================  =================================================
"""

from typing import Any

from resources.kafka import KafkaResource
from resources.lake import LakeResource
from resources.spark import kafka_spark_resource, spark_resource
from resources.stream_apps import StreamAppsResource


def default_resources() -> dict[str, Any]:
    """The resources of the code location, read from the environment now."""
    return {
        "kafka": KafkaResource(),
        "stream_apps": StreamAppsResource(),
        "pyspark": spark_resource(),
        "pyspark_kafka": kafka_spark_resource(),
        "lake": LakeResource(),
    }


__all__ = [
    "KafkaResource",
    "LakeResource",
    "StreamAppsResource",
    "default_resources",
    "kafka_spark_resource",
    "spark_resource",
]
