"""Runless materializations of the Kafka topic assets: the always-on generator and the
supervisor's stream applications write their topics outside any Dagster run.

Each tick reads the end offsets of the raw topics and of every application's outputs; a
topic that grew since the last tick (the cursor keeps the end offsets) is reported as
materialized, with how many records it holds and how many are new (and, for a raw topic in
Avro, the subject, version and fields of its registered schema). Lineage then shows the
topics as they are (not "never materialized"), launching a downstream asset needs no
"upstream not materialized" confirmation, and freshness policies have something to judge.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from dagster import (
    AssetMaterialization,
    DefaultSensorStatus,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from assets.keys import kafka_key
from assets.topic_schemas import registered_schema_metadata
from pipelines import domain
from pipelines.streams.apps import STREAM_APPS
from pipelines.streams.config import StreamAppConfig
from resources.kafka import KafkaResource


def platform_topics(config: StreamAppConfig | None = None) -> list[str]:
    """The raw topics and every application's outputs (not the dead-letter topics)."""
    config = config or StreamAppConfig()
    outputs = [t for app in STREAM_APPS.values() for t in app.output_topics(config)[:-1]]
    return list(dict.fromkeys([*domain.RAW_TOPICS, *outputs]))


def grown_topics(
    ends: dict[str, dict[int, int]],
    previous: dict[str, dict[str, int]],
    schema_of: Callable[[str], dict[str, Any]] = lambda topic: {},
) -> list[AssetMaterialization]:
    """A materialization per topic whose end offsets moved past ``previous`` (a topic
    re-created with fewer records counts as moved: its offsets are not comparable), with
    ``schema_of(topic)``'s metadata (the schema registered for it, if any)."""
    events = []
    for topic, offsets in ends.items():
        before = previous.get(topic, {})
        now = {str(p): o for p, o in offsets.items()}
        if now == before:
            continue
        records = sum(offsets.values())
        new = sum(o - before.get(p, 0) for p, o in now.items())
        if new <= 0 and before:
            new = records
        if records == 0:
            continue
        events.append(
            AssetMaterialization(
                asset_key=kafka_key(topic),
                description=f"{new:,} new records on {topic!r} (written outside Dagster runs)",
                metadata={
                    "records": records,
                    "new_records": new,
                    "partitions": len(offsets),
                    **schema_of(topic),
                },
            )
        )
    return events


def _schema_reader(
    context: SensorEvaluationContext, kafka: KafkaResource
) -> Callable[[str], dict[str, Any]]:
    """The registered schema's metadata of a raw topic in Avro (nothing for the other
    topics, or when the registry does not answer: a tick still reports the growth)."""

    def schema_of(topic: str) -> dict[str, Any]:
        if not kafka.raw_format.is_avro(topic):
            return {}
        try:
            return registered_schema_metadata(kafka.raw_format, topic)
        except Exception as exc:
            context.log.warning(f"no schema metadata for {topic}: {exc}")
            return {}

    return schema_of


def build_topic_materializations_sensor(
    *,
    minimum_interval_seconds: int = 60,
    default_status: DefaultSensorStatus = DefaultSensorStatus.RUNNING,
) -> Any:
    """The sensor reporting runless materializations of the Kafka topic assets."""

    @sensor(
        name="topic_materializations_sensor",
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        description="Reports the Kafka topics the generator and the stream applications "
        "write outside Dagster runs as materialized whenever they grow.",
    )
    def topic_materializations_sensor(context: SensorEvaluationContext, kafka: KafkaResource):
        previous: dict[str, dict[str, int]] = orjson.loads(context.cursor or "{}")
        error = kafka.reachable()
        if error is not None:
            return SkipReason(f"Kafka does not answer: {error}")
        ends: dict[str, dict[int, int]] = {}
        for topic in platform_topics():
            try:
                ends[topic] = kafka.end_offsets(topic)
            except Exception:  # not created yet
                continue
        events = grown_topics(ends, previous, _schema_reader(context, kafka))
        cursor = orjson.dumps(
            {**previous, **{t: {str(p): o for p, o in e.items()} for t, e in ends.items()}}
        ).decode()
        message = (
            f"{len(events)} of {len(ends)} topics grew: "
            + ", ".join(
                f"{e.asset_key.path[-1]} +{e.metadata['new_records'].value:,}" for e in events
            )
            if events
            else f"none of {len(ends)} topics grew since the last tick"
        )
        if not events:
            context.update_cursor(cursor)
            return SkipReason(message)
        return SensorResult(asset_events=events, cursor=cursor, skip_reason=SkipReason(message))

    return topic_materializations_sensor
