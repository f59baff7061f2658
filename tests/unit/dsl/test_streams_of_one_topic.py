"""Two ``builder.stream(...)`` calls on the same topics share one source node, as Kafka's
``mergeDuplicateSourceNodes`` (KAFKA-6687) does: ports of ``StreamsBuilderTest``'s
same-topic cases and ``KStreamKStreamSelfJoinTest.shouldMatchInnerJoinWithSelfJoinWithTwoStreams``."""

from __future__ import annotations

import re

import pytest

from streaming import JoinWindows, StreamsBuilder, TopologyException, TopologyTestDriver, serdes
from streaming.topology.nodes import SourceNode

S = serdes.String()


def _sources(builder: StreamsBuilder) -> list[SourceNode]:
    topology = builder.build()
    return [n for n in topology.nodes.values() if isinstance(n, SourceNode)]


def test_two_streams_of_one_topic_read_it_through_one_source() -> None:
    b = StreamsBuilder()
    b.stream("topic", key_serde=S, value_serde=S).map_values(str.upper).to("upper", value_serde=S)
    b.stream("topic", key_serde=S, value_serde=S).map_values(lambda v: str(len(v))).to(
        "length", value_serde=S
    )
    (source,) = _sources(b)
    assert source.name == "KSTREAM-SOURCE-0000000000" and len(source.children) == 2
    # the second source's generated name was taken, as in Kafka, so later names match
    nodes = b.build().nodes
    assert "KSTREAM-SOURCE-0000000003" not in nodes and "KSTREAM-MAPVALUES-0000000004" in nodes
    with TopologyTestDriver(b.build(), {"application.id": "same-topic"}) as driver:
        driver.create_input_topic("topic", S, S).pipe_input("k", "abc", timestamp=5)
        upper = driver.create_output_topic("upper", S, S).read_values_to_list()
        length = driver.create_output_topic("length", S, S).read_values_to_list()
    assert upper == ["ABC"] and length == ["3"]


def test_the_same_pattern_and_the_same_topics_in_another_order_share_a_source() -> None:
    b = StreamsBuilder()
    b.stream(re.compile("some-regex")).to("a")
    b.stream(re.compile("some-regex")).to("b")
    b.stream(["topic1", "topic2"]).to("c")
    b.stream(["topic2", "topic1"]).to("d")
    assert len(_sources(b)) == 2


def test_overlapping_but_unequal_topics_are_refused() -> None:
    b = StreamsBuilder()
    b.stream(["topic"])
    with pytest.raises(TopologyException, match="overlapping but not equal input topics"):
        b.stream(["topic", "anotherTopic"])


@pytest.mark.parametrize(
    "first, second", [("table", "table"), ("stream", "table"), ("table", "stream")]
)
def test_a_table_never_shares_its_topic(first: str, second: str) -> None:
    b = StreamsBuilder()
    getattr(b, first)("topic")
    with pytest.raises(TopologyException, match="already been registered"):
        getattr(b, second)("topic")


def _join_output(two_streams: bool, optimization: str) -> tuple[list, str]:
    b = StreamsBuilder()
    left = b.stream("t1", key_serde=S, value_serde=S)
    right = b.stream("t1", key_serde=S, value_serde=S) if two_streams else left
    window = JoinWindows.of_time_difference_with_no_grace(100)
    left.join(right, lambda v1, v2: v1 + v2, window).to("out", key_serde=S, value_serde=S)
    topology = b.build({"topology.optimization": optimization})
    with TopologyTestDriver(topology, {"application.id": "self"}) as driver:
        source = driver.create_input_topic("t1", S, S)
        for key, value, ts in [
            ("A", "1", 1),
            ("B", "1", 2),
            ("A", "2", 3),
            ("B", "2", 4),
            ("B", "3", 5),
        ]:
            source.pipe_input(key, value, ts)
        out = driver.create_output_topic("out", S, S).read_records_to_list()
    return [(r.key, r.value, r.timestamp) for r in out], str(topology.describe())


def test_a_join_of_two_streams_of_one_topic_is_a_self_join() -> None:
    expected, _ = _join_output(two_streams=False, optimization="none")
    assert len(expected) == 13  # each record with itself and every earlier one, both ways
    plain, described = _join_output(two_streams=True, optimization="none")
    assert plain == expected and "JOINOTHER" in described
    optimized, described = _join_output(two_streams=True, optimization="all")
    assert optimized == expected
    # single.store.self.join: one windowed store, no other-side join processor
    assert "JOINOTHER" not in described and described.count("Source:") == 1
