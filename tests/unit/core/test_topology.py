"""Topology building: Kafka's names, describe() text, sub-topologies and clear errors."""

import pytest

from streaming import Processor, StreamsBuilder, Topology, TopologyException, serdes


def test_describe_matches_kafka_format():
    builder = StreamsBuilder()
    builder.stream("input").filter(lambda k, v: True).to("output")
    expected = (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n"
        "      --> KSTREAM-FILTER-0000000001\n"
        "    Processor: KSTREAM-FILTER-0000000001 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000002\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Sink: KSTREAM-SINK-0000000002 (topic: output)\n"
        "      <-- KSTREAM-FILTER-0000000001\n\n"
    )
    assert str(builder.build().describe()) == expected


def test_group_by_splits_into_two_subtopologies_at_the_repartition_topic():
    builder = StreamsBuilder()
    builder.stream("input").group_by(lambda k, v: v).count().to_stream().to("out")
    topology = builder.build()
    text = str(topology.describe())
    assert "Sub-topology: 0" in text and "Sub-topology: 1" in text
    # Kafka's naming: store index first, then the aggregate, then three repartition nodes
    assert "KSTREAM-AGGREGATE-STATE-STORE-0000000002-repartition" in topology.internal_topics
    assert (
        "Processor: KSTREAM-AGGREGATE-0000000003 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000002])"
        in text
    )
    assert (
        "Source: KSTREAM-SOURCE-0000000006 (topics: [KSTREAM-AGGREGATE-STATE-STORE-0000000002-repartition])"
        in text
    )


def test_named_grouping_names_the_repartition_topic():
    from streaming import Grouped

    builder = StreamsBuilder()
    builder.stream("input").group_by(lambda k, v: v, Grouped.as_("by-value")).count("counts")
    assert "by-value-repartition" in builder.build().internal_topics


def test_table_source_names_like_kafka():
    builder = StreamsBuilder()
    builder.table("input", materialized="t").to_stream().to("out")
    text = str(builder.build().describe())
    assert "Processor: KTABLE-SOURCE-0000000001 (stores: [t])" in text


def test_processor_api_errors_are_clear():
    topology = Topology()
    with pytest.raises(TopologyException, match="at least one topic"):
        topology.add_source("src")
    topology.add_source("src", "in")
    with pytest.raises(TopologyException, match="already been registered"):
        topology.add_source("src2", "in")
    with pytest.raises(TopologyException, match="not added yet"):
        topology.add_processor("p", Processor, "nope")
    with pytest.raises(TopologyException, match="already added"):
        topology.add_source("src", "other")


def test_store_access_requires_connection():
    from streaming import TopologyTestDriver
    from streaming.errors import StreamsException
    from streaming.state import Stores

    class Peeker(Processor):
        def process(self, record):
            self.context.get_state_store("kv")

    topology = Topology()
    topology.add_source("src", "in", key_serde=serdes.String(), value_serde=serdes.String())
    topology.add_processor("p", Peeker, "src")
    topology.add_processor("q", Processor, "src")
    topology.add_state_store(
        Stores.key_value_store_builder(Stores.in_memory_key_value_store("kv"), None, None), "q"
    )
    with TopologyTestDriver(topology) as driver, pytest.raises(StreamsException, match="no access"):
        driver.create_input_topic("in", serdes.String(), serdes.String()).pipe_input("k", "v", 0)
