"""``topology.optimization``: the topologies Kafka Streams 4.1.1 prints for the same DSL
programs (ports of ``RepartitionOptimizingTest``, ``StreamsGraphTest`` and
``InternalStreamsBuilderTest``; the self-join and ``processValues`` strings were printed by
Kafka 4.1.1 itself), and the optimized topology computing what the plain one computes."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming import (
    Consumed,
    Grouped,
    JoinWindows,
    Materialized,
    Named,
    Produced,
    StreamJoined,
    StreamsBuilder,
    TimeWindows,
    TopologyTestDriver,
    serdes,
)
from streaming.errors import ConfigException
from streaming.state import Stores
from streaming.topology.processor import Processor

S = serdes.String()
EXPECTED = Path(__file__).parent / "expected"


def _expected(name: str) -> str:
    return (EXPECTED / name).read_text()


class _Forward(Processor):
    def process(self, record):
        self.context.forward(record)


class _Upper(Processor):
    def process(self, record):
        self.context.forward(record.with_value(record.value.upper()))


# ------------------------------------------------------------ RepartitionOptimizingTest


def _repartition_optimizing(optimization: str) -> StreamsBuilder:
    b = StreamsBuilder()
    mapped = b.stream("input", consumed=Consumed.with_(S, S).with_name("sourceStream")).map(
        lambda k, v: (k.upper(), v), Named.as_("source-map")
    )
    (
        mapped.filter(lambda k, v: k == "B", Named.as_("process-filter"))
        .map_values(lambda v: v.upper(), Named.as_("process-mapValues"))
        .process(_Forward, named=Named.as_("process"))
    )
    counts = (
        mapped.group_by_key(Grouped.as_("count-groupByKey"))
        .count(
            Materialized.as_(Stores.in_memory_key_value_store("count-store"))
            .with_key_serde(S)
            .with_value_serde(serdes.Long()),
            named=Named.as_("count"),
        )
        .to_stream(Named.as_("count-toStream"))
    )
    counts.to("outputTopic_0", Produced.with_(S, serdes.Long()).with_name("count-to"))
    (
        mapped.group_by_key(Grouped.as_("aggregate-groupByKey"))
        .aggregate(
            lambda: 0,
            lambda k, v, agg: agg + len(v),
            Materialized.as_(Stores.in_memory_key_value_store("aggregate-store"))
            .with_key_serde(S)
            .with_value_serde(serdes.Integer()),
            named=Named.as_("aggregate"),
        )
        .to_stream(Named.as_("aggregate-toStream"))
        .to("outputTopic_1", Produced.with_(S, serdes.Integer()).with_name("reduce-to"))
    )
    (
        mapped.filter(lambda k, v: True, Named.as_("reduce-filter"))
        .peek(lambda k, v: None, Named.as_("reduce-peek"))
        .group_by_key(Grouped.as_("reduce-groupByKey"))
        .reduce(
            lambda a, v: a + v,
            Materialized.as_(Stores.in_memory_key_value_store("reduce-store")),
            named=Named.as_("reducer"),
        )
        .to_stream(Named.as_("reduce-toStream"))
        .to("outputTopic_2", Produced.with_(S, S))
    )
    (
        mapped.filter(lambda k, v: k == "A", Named.as_("join-filter"))
        .join(
            counts,
            lambda v1, v2: f"{v1}:{v2}",
            JoinWindows.of(5000),
            StreamJoined.with_store_suppliers(
                Stores.in_memory_window_store("join-store", 86_400_000, 10_000, True),
                Stores.in_memory_window_store("other-join-store", 86_400_000, 10_000, True),
            )
            .with_name("join")
            .with_key_serde(S)
            .with_value_serde(S)
            .with_other_value_serde(serdes.Long()),
        )
        .to("joinedOutputTopic", Produced.as_("join-to"))
    )
    b.build({"topology.optimization": optimization})
    return b


@pytest.mark.parametrize("optimization", ["none", "all"])
def test_repartition_optimizing_topology_is_kafkas(optimization):
    topology = _repartition_optimizing(optimization).build()
    assert str(topology.describe()) == _expected(f"repartition_optimizing_{optimization}.txt")
    expected_topics = 1 if optimization == "all" else 4
    assert len(topology.internal_topics) == expected_topics


def _run_repartition_optimizing(optimization: str) -> dict[str, list]:
    topology = _repartition_optimizing(optimization).build()
    inputs = [("a", "aa", 1), ("b", "bb", 2), ("c", "cc", 3), ("a", "x", 4), ("b", "y", 5)]
    inputs += [("a", "z", 10_000 + i) for i in range(3)]
    with TopologyTestDriver(topology, {"application.id": "opt"}) as driver:
        source = driver.create_input_topic("input", S, S)
        for key, value, ts in inputs:
            source.pipe_input(key, value, ts)
        outputs = {
            "outputTopic_0": (S, serdes.Long()),
            "outputTopic_1": (S, serdes.Integer()),
            "outputTopic_2": (S, S),
            "joinedOutputTopic": (S, S),
        }
        return {
            topic: driver.create_output_topic(topic, k, v).read_records_to_list()
            for topic, (k, v) in outputs.items()
        }


def test_merged_repartition_topic_computes_what_four_topics_compute():
    plain, optimized = _run_repartition_optimizing("none"), _run_repartition_optimizing("all")
    assert all(plain.values())
    # keys, values and timestamps per output topic (one topic reorders records of one input)
    for topic in plain:
        as_set = lambda rows: sorted((r.key, r.value, r.timestamp) for r in rows)  # noqa: E731
        assert as_set(optimized[topic]) == as_set(plain[topic]), topic


def test_explicit_repartitions_are_never_merged():
    def build(optimization):
        b = StreamsBuilder()
        stream = b.stream("input", key_serde=S, value_serde=S).select_key(lambda k, v: k + v)
        stream.repartition().group_by_key().count().to_stream().to("output")
        stream.repartition().group_by_key().windowed_by(
            TimeWindows.of_size_with_no_grace(5000)
        ).count().to_stream().to("windowed-output")
        return str(b.build({"topology.optimization": optimization}).describe())

    assert build("all") == build("none")
    assert build("all").count("-repartition)") == 2


# ------------------------------------------------------------------------ StreamsGraphTest


def test_merge_nodes_with_a_common_key_changing_parent():
    b = StreamsBuilder()
    parent = b.stream(
        "input_topic", consumed=Consumed.with_(serdes.Integer(), serdes.Integer())
    ).select_key(lambda k, v: k + v)
    children = [parent.map_values(lambda v, i=i: v + i) for i in (1, 2, 3)]
    children[0].merge(children[1]).merge(children[2]).to("output_topic")
    topology = b.build({"topology.optimization": "all"})
    assert str(topology.describe()) == _expected("merge_nodes_all.txt")


def _changing_values_after_changing_key(optimization: str, fix: bool) -> str:
    b = StreamsBuilder()
    mapped = b.stream("input", key_serde=S, value_serde=S).select_key(lambda k, v: k + v)
    mapped.map_values(str.upper).group_by_key().count().to_stream().to("output")
    mapped.flat_map_values(str.split).group_by_key().windowed_by(
        TimeWindows.of_size_with_no_grace(5000)
    ).count().to_stream().to("windowed-output")
    mapped.process_values(_Upper).group_by_key().count().to_stream().to("output")
    config = {
        "topology.optimization": optimization,
        "__enable.process.processValue.fix__": fix,
    }
    return str(b.build(config).describe())


def test_process_values_without_the_fix_lets_a_repartition_move_across_it():
    # Kafka 4.1.1's default (KAFKA-19668): processValues is not value-changing, so its
    # repartition merges under the key change; mapValues and flatMapValues keep theirs
    assert _changing_values_after_changing_key("all", False) == _expected(
        "process_values_all_fix_off.txt"
    )


def test_process_values_with_the_fix_keeps_every_repartition():
    optimized = _changing_values_after_changing_key("all", True)
    assert optimized == _changing_values_after_changing_key("none", True)
    assert optimized.count("-repartition)") == 3  # three repartition sinks


# ---------------------------------------------------------------- single.store.self.join


def _self_join(optimization: str, joined: StreamJoined | None = None, kind: str = "join"):
    b = StreamsBuilder()
    s = b.stream("t1", key_serde=S, value_serde=S)
    join = getattr(s, kind)
    window = JoinWindows.of_time_difference_with_no_grace(100)
    args = (s, lambda v1, v2: v1 + v2, window) + ((joined,) if joined is not None else ())
    join(*args).to("out", key_serde=S, value_serde=S)
    return b.build({"topology.optimization": optimization})


def test_self_join_topologies_are_kafkas():
    assert str(_self_join("none").describe()) == _expected("self_join_none.txt")
    optimized = _expected("self_join_optimized.txt")
    assert str(_self_join("single.store.self.join").describe()) == optimized
    assert str(_self_join("all").describe()) == optimized
    # Kafka rewrites a left self-join the same way (it always finds the record itself)
    assert str(_self_join("all", kind="left_join").describe()) == optimized
    named = StreamJoined.as_("my-store").with_name("my-join")
    assert str(_self_join("single.store.self.join", named).describe()) == _expected(
        "self_join_named.txt"
    )


def _self_join_output(optimization: str, inputs: list[tuple[str, str, int]]) -> list:
    with TopologyTestDriver(_self_join(optimization), {"application.id": "self"}) as driver:
        source = driver.create_input_topic("t1", S, S)
        for key, value, ts in inputs:
            source.pipe_input(key, value, ts)
        out = driver.create_output_topic("out", S, S).read_records_to_list()
        return [(r.key, r.value, r.timestamp) for r in out]


def test_single_store_self_join_emits_what_the_inner_join_emits():
    # KStreamKStreamSelfJoinTest: same records in the same order, with out-of-order input,
    # duplicates, another key and a record outside the window
    inputs = [
        ("A", "1", 0),
        ("A", "2", 50),
        ("B", "x", 60),
        ("A", "3", 20),
        ("A", "3", 20),
        ("A", "4", 300),
        ("A", "5", 250),
        ("B", "y", 120),
    ]
    plain = _self_join_output("none", inputs)
    assert len(plain) > len(inputs)
    assert _self_join_output("all", inputs) == plain


# ------------------------------------------------------------- reuse.ktable.source.topics


def test_source_table_store_restores_from_its_topic_instead_of_a_changelog():
    def run(optimization: str):
        b = StreamsBuilder()
        b.table("topic", materialized=Materialized.as_("store"), key_serde=S, value_serde=S)
        topology = b.build({"topology.optimization": optimization})
        with TopologyTestDriver(topology, {"application.id": "app"}) as driver:
            driver.create_input_topic("topic", S, S).pipe_input("k", "v", 1)
            return topology, driver.produced_topic_names()

    plain, produced = run("none")
    assert "app-store-changelog" in produced and not plain.source_changelogs
    optimized, produced = run("all")
    assert "app-store-changelog" not in produced
    assert optimized.source_changelogs == {"store": "topic"}
    assert not optimized.store_builders["store"].logging_enabled


# ------------------------------------------------------------------------------ config


@pytest.mark.parametrize(
    "value",
    [
        "all",
        "none",
        "reuse.ktable.source.topics,merge.repartition.topics",
        "single.store.self.join",
    ],
)
def test_optimization_values_kafka_accepts(value):
    StreamsBuilder().build({"topology.optimization": value})


@pytest.mark.parametrize("value", ["everything", "all,none", "merge.repartition.topics,bogus"])
def test_optimization_values_kafka_rejects(value):
    with pytest.raises(ConfigException, match=r"topology\.optimization"):
        StreamsBuilder().build({"topology.optimization": value})


def test_named_join_of_a_rekeyed_stream_with_itself_becomes_a_self_join_once_merged():
    # the "-left" and "-right" repartitions of one key change merge into one topic, so
    # both windowed nodes read the same stream: Kafka then rewrites the join too
    b = StreamsBuilder()
    rekeyed = b.stream("in", key_serde=S, value_serde=S).select_key(lambda k, v: v)
    rekeyed.join(
        rekeyed,
        lambda a, c: a + c,
        JoinWindows.of_time_difference_with_no_grace(10),
        StreamJoined.with_(S, S, S).with_name("sj").with_store_name("sjs"),
    ).to("out")
    topology = b.build({"topology.optimization": "all"})
    assert sorted(topology.internal_topics) == ["sj-left-repartition"]
    assert sorted(topology.store_builders) == ["sjs-this-join-store"]
    assert "sj-merge (stores: [sjs-this-join-store])" in str(topology.describe())
