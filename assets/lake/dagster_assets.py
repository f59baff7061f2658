"""Lake assets: one per topic (``lake/<topic>``), each landing what is new in Kafka."""

from dagster import AssetExecutionContext, AssetsDefinition, MaterializeResult, MetadataValue, asset

from assets import domain
from assets.keys import kafka_key, lake_key
from assets.lake.paths import lake_root
from assets.lake.sink import sink_topic
from assets.lake.writer import ensure_layout
from assets.settings import kafka_bootstrap

LAKE_TOPICS = (*domain.RAW_TOPICS, *domain.DERIVED_TOPICS)


def lake_asset(topic: str) -> AssetsDefinition:
    """The asset landing ``topic`` in the lake (idempotent: offset ranges in a manifest)."""

    @asset(
        key=lake_key(topic),
        deps=[kafka_key(topic)],
        group_name="lake",
        kinds={"parquet", "duckdb"},
        description=f"Topic {topic!r} landed as Parquet by event hour (offsets in a manifest).",
    )
    def _land(context: AssetExecutionContext) -> MaterializeResult:
        lake = lake_root()
        ensure_layout(lake, [topic])
        result = sink_topic(kafka_bootstrap(), topic, lake)
        context.log.info(f"landed {result.records} records of {topic} in {len(result.files)} files")
        return MaterializeResult(
            metadata={
                "records_landed": result.records,
                "files_written": len(result.files),
                "total_rows": result.total_rows,
                "offset_ranges": MetadataValue.json(
                    {str(p): list(r) for p, r in sorted(result.ranges.items())}
                ),
                "path": MetadataValue.path(str(lake / topic)),
            }
        )

    return _land


LAKE_ASSETS = [lake_asset(topic) for topic in LAKE_TOPICS]
