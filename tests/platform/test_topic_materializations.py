"""``topic_materializations_sensor``: the topics written outside Dagster runs are reported
as materialized when they grow, and only then."""

from __future__ import annotations

from confluent_kafka import Producer
from dagster import DagsterInstance, build_sensor_context

from pipelines import domain
from pipelines.topics import create_topics
from resources.kafka import KafkaResource
from sensors.topic_materializations import (
    build_topic_materializations_sensor,
    grown_topics,
    platform_topics,
)


def test_grown_topics_reports_growth_only() -> None:
    previous = {"a": {"0": 5, "1": 2}, "b": {"0": 3}}
    events = grown_topics({"a": {0: 5, 1: 4}, "b": {0: 3}, "c": {0: 0}}, previous)
    assert [(e.asset_key.path, e.metadata["new_records"].value) for e in events] == [
        (["kafka", "a"], 2)
    ]
    assert events[0].metadata["records"].value == 9
    # a topic seen for the first time counts all its records; a re-created one too
    (first,) = grown_topics({"d": {0: 4}}, {})
    assert first.metadata["new_records"].value == 4
    (recreated,) = grown_topics({"a": {0: 1, 1: 0}}, previous)
    assert recreated.metadata["new_records"].value == 1


def test_platform_topics_cover_raw_and_outputs_once() -> None:
    topics = platform_topics()
    assert len(topics) == len(set(topics))
    assert set(domain.RAW_TOPICS) <= set(topics)
    assert {domain.REVENUE_5M, domain.FRAUD_ALERTS, domain.REVENUE_LATE} <= set(topics)
    assert not any(t.endswith(domain.DEAD_LETTER_SUFFIX) for t in topics)


def test_sensor_materializes_a_topic_that_grew(kafka_cluster) -> None:
    boot = kafka_cluster.bootstrap_servers
    create_topics(boot)  # the platform's topics (other tests of the session may have made them)
    sensor = build_topic_materializations_sensor()
    kafka = KafkaResource(bootstrap_servers=boot)
    with DagsterInstance.ephemeral() as instance:
        first = sensor(build_sensor_context(instance=instance, resources={"kafka": kafka}))
        cursor = first.cursor if hasattr(first, "cursor") and first.cursor else None
        producer = Producer({"bootstrap.servers": boot})
        for i in range(5):
            producer.produce(domain.CLICKS, value=b'{"user_id": "u", "event_time": %d}' % i)
        assert producer.flush(10) == 0
        context = build_sensor_context(instance=instance, resources={"kafka": kafka}, cursor=cursor)
        second = sensor(context)
        grown = [e for e in second.asset_events if e.asset_key.path == ["kafka", domain.CLICKS]]
        assert len(grown) == 1
        assert grown[0].metadata["new_records"].value == 5
        assert second.skip_reason is not None and "clicks +5" in second.skip_reason.skip_message
        # nothing new: a skipped tick that says so
        third = sensor(
            build_sensor_context(
                instance=instance, resources={"kafka": kafka}, cursor=second.cursor
            )
        )
        assert "grew since the last tick" in third.skip_message
