"""Clear errors for misuse of global stores, global tables and cogroup (Kafka's messages)."""

from __future__ import annotations

import pytest

from streaming import Materialized, StreamsBuilder, Topology, TopologyException, serdes
from streaming.state import Stores
from streaming.topology import Processor


class _Noop(Processor):
    def process(self, record) -> None:
        pass


def _store(name: str):
    return Stores.key_value_store_builder(
        Stores.in_memory_key_value_store(name), serdes.String(), serdes.String()
    )


def test_global_store_cannot_be_connected_explicitly() -> None:
    topology = Topology()
    topology.add_global_store(_store("g"), "gs", None, None, "gt", "gp", _Noop)
    topology.add_source("src", "in")
    topology.add_processor("p", _Noop, "src")
    with pytest.raises(TopologyException, match="Global StateStore g can be used"):
        topology.connect_processor_and_state_stores("p", "g")


def test_global_store_name_and_node_names_must_be_new() -> None:
    topology = Topology()
    topology.add_global_store(_store("g"), "gs", None, None, "gt", "gp", _Noop)
    with pytest.raises(TopologyException, match="already been added with the name g"):
        topology.add_global_store(_store("g"), "gs2", None, None, "gt2", "gp2", _Noop)
    with pytest.raises(TopologyException, match="must be different"):
        topology.add_global_store(_store("h"), "same", None, None, "gt3", "same", _Noop)
    with pytest.raises(TopologyException, match="already been registered"):
        topology.add_global_store(_store("i"), "gs4", None, None, "gt", "gp4", _Noop)


def test_global_nodes_are_not_in_subtopologies() -> None:
    topology = Topology()
    topology.add_global_store(_store("g"), "gs", None, None, "gt", "gp", _Noop)
    topology.add_source("src", "in")
    assert topology.subtopologies() == [["src"]]
    assert topology.global_node_names() == {"gs", "gp"}
    assert topology.global_topics() == ["gt"]
    assert [(i, g) for i, _, g in topology.node_groups()] == [(0, True), (1, False)]


def test_global_table_cannot_be_versioned() -> None:
    with pytest.raises(TopologyException, match="cannot be versioned"):
        StreamsBuilder().global_table("t", materialized=Materialized.as_versioned("v", 10))


def test_cogroup_needs_streams_of_one_builder() -> None:
    g1 = StreamsBuilder().stream("a").group_by_key()
    g2 = StreamsBuilder().stream("b").group_by_key()
    with pytest.raises(ValueError, match="same StreamsBuilder"):
        g1.cogroup(lambda k, v, a: a).cogroup(g2, lambda k, v, a: a)


def test_stream_global_join_needs_a_key_selector_and_joiner() -> None:
    b = StreamsBuilder()
    g = b.global_table("g")
    with pytest.raises(TypeError, match="keySelector"):
        b.stream("s").join(g, None, lambda a, c: a)
