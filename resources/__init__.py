"""Dagster resources of the platform, chosen per deployment (``resources.deployment``).

=================  ==========================  ===========================================
key                class                       what
=================  ==========================  ===========================================
kafka              ``KafkaResource``           the cluster: bootstrap servers, TLS, SASL
stream_apps        ``StreamAppsResource``      how stream applications run (state, EOS)
pyspark            ``PySparkResource``         Spark on a master URL (``local[2]`` embedded)
pyspark_kafka      ``PySparkResource``         as pyspark + Spark's Kafka source jars
lake               ``LakeResource``            the Parquet lake and dbt's DuckDB database
dbt                ``DbtCliResource``          the dbt project over the lake
reconciliation     ``ReconciliationPolicy``    drift the reconciliation checks allow
=================  ==========================  ===========================================
"""

from resources.deployment import (
    deployment_name,
    partitions_start,
    platform_resources,
    resources_by_deployment_name,
)
from resources.kafka import KafkaResource
from resources.lake import LakeResource
from resources.reconciliation import ReconciliationPolicy
from resources.spark import kafka_spark_resource, spark_resource
from resources.stream_apps import StreamAppsResource

__all__ = [
    "KafkaResource",
    "LakeResource",
    "ReconciliationPolicy",
    "StreamAppsResource",
    "deployment_name",
    "kafka_spark_resource",
    "partitions_start",
    "platform_resources",
    "resources_by_deployment_name",
    "spark_resource",
]
