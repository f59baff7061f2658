"""Lake assets: one per topic (``lake/<topic>``), each landing what is new in Kafka."""

from typing import Any

from dagster import AssetExecutionContext, AssetsDefinition, MaterializeResult, MetadataValue, asset

from assets.keys import kafka_key, lake_key
from pipelines import domain
from pipelines.lake.sink import sink_topic
from pipelines.lake.writer import ensure_layout
from resources.kafka import KafkaResource
from resources.lake import LakeResource

LAKE_TOPICS = (*domain.RAW_TOPICS, *domain.DERIVED_TOPICS)


def lake_asset(topic: str) -> AssetsDefinition:
    """The asset landing ``topic`` in the lake (idempotent: offset ranges in a manifest).

    Its metadata names the Kafka cluster read; when that cluster is not the one the lake's
    offsets came from, a warning and ``cluster_change`` say so and everything is re-landed
    from the earliest offset."""

    # a derived topic lands after the raw topics, so the lake never holds a stream result
    # or late report about an order that it does not hold yet
    raw = () if topic in domain.RAW_TOPICS else domain.RAW_TOPICS

    @asset(
        key=lake_key(topic),
        deps=[kafka_key(topic), *(lake_key(t) for t in raw)],
        group_name="lake",
        kinds={"parquet", "duckdb"},
        description=f"Topic {topic!r} landed as Parquet by event hour (offsets in a manifest).",
    )
    def _land(
        context: AssetExecutionContext, kafka: KafkaResource, lake: LakeResource
    ) -> MaterializeResult:
        kafka.connection.verify()  # a refused login fails here, saying why
        root = lake.path
        ensure_layout(root, [topic])
        result = sink_topic(kafka.connection, topic, root, raw_format=kafka.raw_format)
        if result.cluster_change:
            # loud: the offsets in the lake referred to another cluster (or topic)
            context.log.warning(f"{topic}: {result.cluster_change}")
        context.log.info(result.summary())
        metadata: dict[str, Any] = {
            "records_landed": result.records,
            "files_written": len(result.files),
            "total_rows": result.total_rows,
            "offset_ranges": MetadataValue.json(
                {str(p): list(r) for p, r in sorted(result.ranges.items())}
            ),
            "kafka_cluster_id": result.cluster_id or "unknown",
            "next_offsets": MetadataValue.json({str(p): o for p, o in result.next_offsets.items()}),
            "path": MetadataValue.path(str(root / topic)),
        }
        if result.cluster_change:
            metadata["cluster_change"] = result.cluster_change
        if result.gaps:
            context.log.warning(f"{topic}: offsets deleted before they were landed: {result.gaps}")
            metadata["retention_gaps"] = MetadataValue.json(
                {str(p): list(g) for p, g in sorted(result.gaps.items())}
            )
        return MaterializeResult(metadata=metadata)

    return _land


LAKE_ASSETS = [lake_asset(topic) for topic in LAKE_TOPICS]
