"""Hourly-partitioned batch assets recomputed with local PySpark.

``batch/<result>`` reads the hour from the Parquet lake (group ``batch``);
``kappa_batch/<result>`` reads it straight from the Kafka topics with Spark's Kafka source
(group ``kappa_batch``, ``pipelines.batch.kafka_source``), stored apart
(``<lake>/batch/<result>_from_kafka``).
"""

from collections.abc import Sequence
from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetsDefinition,
    BackfillPolicy,
    Config,
    HourlyPartitionsDefinition,
    MaterializeResult,
    MetadataValue,
    asset,
)
from dagster_pyspark import PySparkResource
from pydantic import Field

from assets.keys import batch_key, kafka_batch_key, kafka_key, lake_key
from pipelines import domain
from pipelines.batch.recompute import RESULTS, BatchOutput, recompute
from resources.deployment import partitions_start
from resources.kafka import KafkaResource
from resources.lake import LakeResource

HOURLY = HourlyPartitionsDefinition(start_date=partitions_start())

_INPUTS = {
    "revenue_5m": (domain.ORDERS,),
    "revenue_hopping": (domain.ORDERS,),
    "fraud_alerts": (domain.ORDERS, domain.CUSTOMERS),
    "click_sessions": (domain.CLICKS,),
    "orders_deduped": (domain.ORDERS,),
}


def _materialized(
    context: AssetExecutionContext, result: str, outputs: Sequence[BatchOutput], **extra: Any
) -> MaterializeResult:
    for out in outputs:
        context.log.info(f"{result} {out.hour}: {len(out.frame)} rows")
    if len(outputs) > 1:
        return MaterializeResult(
            metadata={
                "rows": sum(len(o.frame) for o in outputs),
                "hours": len(outputs),
                "rows_per_hour": MetadataValue.json({o.hour: len(o.frame) for o in outputs}),
                **extra,
            }
        )
    (out,) = outputs
    return MaterializeResult(
        metadata={
            "rows": len(out.frame),
            "event_hour": out.hour,
            "path": MetadataValue.path(str(out.path)),
            "preview": MetadataValue.md(out.frame.head(10).to_markdown(index=False)),
            **extra,
        }
    )


def batch_asset(result: str) -> AssetsDefinition:
    """The hourly asset recomputing ``result`` (the batch twin of a stream topic)."""

    @asset(
        key=batch_key(result),
        deps=[lake_key(t) for t in _INPUTS[result]],
        partitions_def=HOURLY,
        backfill_policy=BackfillPolicy.single_run(),
        group_name="batch",
        kinds={"spark", "parquet"},
        description=f"Batch recompute of {RESULTS[result]!r} for one event hour (PySpark).",
    )
    def _recompute(
        context: AssetExecutionContext, pyspark: PySparkResource, lake: LakeResource
    ) -> MaterializeResult:
        # one hour, or a backfilled range in this one run and Spark session
        outputs = [
            recompute(result, key, lake.path, pyspark.spark_session)
            for key in context.partition_keys
        ]
        return _materialized(context, result, outputs)

    return _recompute


class KafkaBatchConfig(Config):
    """Run config of a ``kappa_batch`` asset."""

    topics: dict[str, str] = Field(
        default_factory=dict,
        description="platform topic -> the Kafka topic to read it from (default: the same "
        "name), e.g. a renamed copy",
    )


def kafka_batch_asset(result: str) -> AssetsDefinition:
    """The hourly asset recomputing ``result`` from the Kafka topics (the kappa path)."""

    @asset(
        key=kafka_batch_key(result),
        deps=[kafka_key(t) for t in _INPUTS[result]],
        partitions_def=HOURLY,
        backfill_policy=BackfillPolicy.single_run(),
        group_name="kappa_batch",
        kinds={"spark", "kafka", "parquet"},
        description=(
            f"Batch recompute of {RESULTS[result]!r} for one event hour, read straight from "
            "Kafka (Spark's Kafka source over the offsets of the hour, read_committed). Built "
            "by hand, for the hours you want the kappa comparison of: Jobs -> "
            "kafka_batch_reconcile -> pick the partitions."
        ),
    )
    def _recompute(
        context: AssetExecutionContext,
        config: KafkaBatchConfig,
        pyspark_kafka: PySparkResource,
        kafka: KafkaResource,
        lake: LakeResource,
    ) -> MaterializeResult:
        from pipelines.batch.kafka_source import KafkaSource
        from pipelines.batch.session import ensure_kafka_source

        spark = ensure_kafka_source(pyspark_kafka.spark_session)
        source = KafkaSource(kafka.connection, dict(config.topics), raw_format=kafka.raw_format)
        outputs = [
            recompute(result, key, lake.path, spark, source=source)
            for key in context.partition_keys
        ]
        for offsets in source.ranges:
            context.log.info(f"read {offsets.topic} offsets {offsets.summary()['offsets']}")
        read = MetadataValue.json([r.summary() for r in source.ranges])
        return _materialized(context, result, outputs, kafka_offsets=read)

    return _recompute


BATCH_ASSETS = [batch_asset(result) for result in RESULTS]
KAFKA_BATCH_ASSETS = [kafka_batch_asset(result) for result in RESULTS]
