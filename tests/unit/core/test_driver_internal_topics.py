"""The test driver shows what an application writes to its internal topics, as Kafka's
``TopologyTestDriver`` does: repartition topics and store changelogs are output topics
named ``<application.id>-<name>-repartition`` / ``<application.id>-<store>-changelog``."""

from __future__ import annotations

from streaming import Materialized, StreamsBuilder, TopologyTestDriver, serdes

S, L = serdes.String(), serdes.Long()


def test_changelog_and_repartition_topics_are_output_topics():
    builder = StreamsBuilder()
    (
        builder.stream("in", key_serde=S, value_serde=S)
        .group_by(lambda k, v: v, key_serde=S)
        .count(Materialized.as_("counts"))
    )
    config = {"application.id": "app", "statestore.cache.max.bytes": 0}
    with TopologyTestDriver(builder.build(), config) as driver:
        source = driver.create_input_topic("in", S, S)
        source.pipe_input("k1", "x", 5)
        source.pipe_input("k2", "x", 7)
        source.pipe_input("k3", "y", 6)
        repartition = driver.create_output_topic("app-counts-repartition", S, S)
        assert [(r.key, r.value, r.timestamp) for r in repartition.read_records_to_list()] == [
            ("x", "x", 5),
            ("x", "x", 7),
            ("y", "y", 6),
        ]
        changelog = driver.create_output_topic("app-counts-changelog", S, serdes.Bytes())
        # the count's changelog carries longs (Serdes.Long()), timestamps from the records
        assert [(r.key, r.value, r.timestamp) for r in changelog.read_records_to_list()] == [
            ("x", L.serialize("t", 1), 5),
            ("x", L.serialize("t", 2), 7),
            ("y", L.serialize("t", 1), 6),
        ]


def test_a_store_without_logging_writes_no_changelog():
    builder = StreamsBuilder()
    builder.stream("in", key_serde=S, value_serde=S).group_by_key().count(
        Materialized.as_("counts").with_logging_disabled()
    )
    with TopologyTestDriver(builder.build(), {"application.id": "app"}) as driver:
        driver.create_input_topic("in", S, S).pipe_input("k", "v", 1)
        assert driver.create_output_topic("app-counts-changelog", S, L).read_records_to_list() == []
