"""Repartition topologies: ``describe()`` as Kafka Streams 4.1.1 prints it for the same DSL
calls (the expected texts were printed by the Java ``Topology.describe()``), repartition
topic names, and the co-partition groups the join and cogroup builders record.

Also covered by the differential family ``repartition`` (tests/conformance/fam_more.py).
"""

from __future__ import annotations

import pytest

from streaming import (
    Consumed,
    Grouped,
    Materialized,
    Named,
    Repartitioned,
    StreamsBuilder,
    TopologyTestDriver,
    serdes,
)

# Kafka Streams 4.1.1 Topology.describe() output, by case
KAFKA_DESCRIBE = {
    "repartition": (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [in])\n"
        "      --> KSTREAM-KEY-SELECT-0000000001, KSTREAM-KEY-SELECT-0000000010\n"
        "    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])\n"
        "      --> KSTREAM-FILTER-0000000004\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-KEY-SELECT-0000000010 (stores: [])\n"
        "      --> KSTREAM-FILTER-0000000014\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-FILTER-0000000004 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000003\n"
        "      <-- KSTREAM-KEY-SELECT-0000000001\n"
        "    Processor: KSTREAM-FILTER-0000000014 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000013\n"
        "      <-- KSTREAM-KEY-SELECT-0000000010\n"
        "    Sink: KSTREAM-SINK-0000000003 (topic: KSTREAM-REPARTITION-0000000002-repartition)\n"
        "      <-- KSTREAM-FILTER-0000000004\n"
        "    Sink: KSTREAM-SINK-0000000013 (topic: KSTREAM-REDUCE-STATE-STORE-0000000011-repartition)\n"
        "      <-- KSTREAM-FILTER-0000000014\n"
        "\n"
        "  Sub-topology: 1\n"
        "    Source: KSTREAM-SOURCE-0000000005 (topics: [KSTREAM-REPARTITION-0000000002-repartition])\n"
        "      --> KSTREAM-AGGREGATE-0000000007\n"
        "    Processor: KSTREAM-AGGREGATE-0000000007 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000006])\n"
        "      --> KTABLE-TOSTREAM-0000000008\n"
        "      <-- KSTREAM-SOURCE-0000000005\n"
        "    Processor: KTABLE-TOSTREAM-0000000008 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000009\n"
        "      <-- KSTREAM-AGGREGATE-0000000007\n"
        "    Sink: KSTREAM-SINK-0000000009 (topic: out)\n"
        "      <-- KTABLE-TOSTREAM-0000000008\n"
        "\n"
        "  Sub-topology: 2\n"
        "    Source: KSTREAM-SOURCE-0000000015 (topics: [KSTREAM-REDUCE-STATE-STORE-0000000011-repartition])\n"
        "      --> KSTREAM-REDUCE-0000000012\n"
        "    Processor: KSTREAM-REDUCE-0000000012 (stores: [KSTREAM-REDUCE-STATE-STORE-0000000011])\n"
        "      --> KTABLE-SELECT-0000000016\n"
        "      <-- KSTREAM-SOURCE-0000000015\n"
        "    Processor: KTABLE-SELECT-0000000016 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000018\n"
        "      <-- KSTREAM-REDUCE-0000000012\n"
        "    Sink: KSTREAM-SINK-0000000018 (topic: KTABLE-AGGREGATE-STATE-STORE-0000000017-repartition)\n"
        "      <-- KTABLE-SELECT-0000000016\n"
        "\n"
        "  Sub-topology: 3\n"
        "    Source: KSTREAM-SOURCE-0000000019 (topics: [KTABLE-AGGREGATE-STATE-STORE-0000000017-repartition])\n"
        "      --> KTABLE-REDUCE-0000000020\n"
        "    Processor: KTABLE-REDUCE-0000000020 (stores: [KTABLE-AGGREGATE-STATE-STORE-0000000017])\n"
        "      --> KTABLE-TOSTREAM-0000000021\n"
        "      <-- KSTREAM-SOURCE-0000000019\n"
        "    Processor: KTABLE-TOSTREAM-0000000021 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000022\n"
        "      <-- KTABLE-REDUCE-0000000020\n"
        "    Sink: KSTREAM-SINK-0000000022 (topic: out2)\n"
        "      <-- KTABLE-TOSTREAM-0000000021\n"
        "\n"
    ),
    "repartition_named": (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [in])\n"
        "      --> KSTREAM-KEY-SELECT-0000000001, KSTREAM-KEY-SELECT-0000000022, KSTREAM-MAP-0000000015\n"
        "    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])\n"
        "      --> grp-repartition-filter\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-KEY-SELECT-0000000022 (stores: [])\n"
        "      --> A-store-repartition-filter\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-MAP-0000000015 (stores: [])\n"
        "      --> rp-repartition-filter\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: A-store-repartition-filter (stores: [])\n"
        "      --> A-store-repartition-sink\n"
        "      <-- KSTREAM-KEY-SELECT-0000000022\n"
        "    Processor: grp-repartition-filter (stores: [])\n"
        "      --> grp-repartition-sink\n"
        "      <-- KSTREAM-KEY-SELECT-0000000001\n"
        "    Processor: rp-repartition-filter (stores: [])\n"
        "      --> rp-repartition-sink\n"
        "      <-- KSTREAM-MAP-0000000015\n"
        "    Sink: A-store-repartition-sink (topic: A-store-repartition)\n"
        "      <-- A-store-repartition-filter\n"
        "    Sink: grp-repartition-sink (topic: grp-repartition)\n"
        "      <-- grp-repartition-filter\n"
        "    Sink: rp-repartition-sink (topic: rp-repartition)\n"
        "      <-- rp-repartition-filter\n"
        "\n"
        "  Sub-topology: 1\n"
        "    Source: grp-repartition-source (topics: [grp-repartition])\n"
        "      --> KSTREAM-AGGREGATE-0000000003, KSTREAM-REDUCE-0000000009\n"
        "    Processor: KSTREAM-AGGREGATE-0000000003 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000002])\n"
        "      --> KTABLE-TOSTREAM-0000000007\n"
        "      <-- grp-repartition-source\n"
        "    Processor: KSTREAM-REDUCE-0000000009 (stores: [red])\n"
        "      --> KTABLE-TOSTREAM-0000000013\n"
        "      <-- grp-repartition-source\n"
        "    Processor: KTABLE-TOSTREAM-0000000007 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000008\n"
        "      <-- KSTREAM-AGGREGATE-0000000003\n"
        "    Processor: KTABLE-TOSTREAM-0000000013 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000014\n"
        "      <-- KSTREAM-REDUCE-0000000009\n"
        "    Sink: KSTREAM-SINK-0000000008 (topic: out)\n"
        "      <-- KTABLE-TOSTREAM-0000000007\n"
        "    Sink: KSTREAM-SINK-0000000014 (topic: out2)\n"
        "      <-- KTABLE-TOSTREAM-0000000013\n"
        "\n"
        "  Sub-topology: 2\n"
        "    Source: rp-repartition-source (topics: [rp-repartition])\n"
        "      --> KSTREAM-AGGREGATE-0000000019\n"
        "    Processor: KSTREAM-AGGREGATE-0000000019 (stores: [Abc])\n"
        "      --> KTABLE-TOSTREAM-0000000020\n"
        "      <-- rp-repartition-source\n"
        "    Processor: KTABLE-TOSTREAM-0000000020 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000021\n"
        "      <-- KSTREAM-AGGREGATE-0000000019\n"
        "    Sink: KSTREAM-SINK-0000000021 (topic: out3)\n"
        "      <-- KTABLE-TOSTREAM-0000000020\n"
        "\n"
        "  Sub-topology: 3\n"
        "    Source: A-store-repartition-source (topics: [A-store-repartition])\n"
        "      --> KSTREAM-AGGREGATE-0000000023\n"
        "    Processor: KSTREAM-AGGREGATE-0000000023 (stores: [A-store])\n"
        "      --> KTABLE-TOSTREAM-0000000027\n"
        "      <-- A-store-repartition-source\n"
        "    Processor: KTABLE-TOSTREAM-0000000027 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000028\n"
        "      <-- KSTREAM-AGGREGATE-0000000023\n"
        "    Sink: KSTREAM-SINK-0000000028 (topic: out4)\n"
        "      <-- KTABLE-TOSTREAM-0000000027\n"
        "\n"
    ),
    "repartition_unnamed_twice": (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [in])\n"
        "      --> KSTREAM-KEY-SELECT-0000000001\n"
        "    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])\n"
        "      --> KSTREAM-FILTER-0000000005, KSTREAM-FILTER-0000000012\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-FILTER-0000000005 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000004\n"
        "      <-- KSTREAM-KEY-SELECT-0000000001\n"
        "    Processor: KSTREAM-FILTER-0000000012 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000011\n"
        "      <-- KSTREAM-KEY-SELECT-0000000001\n"
        "    Sink: KSTREAM-SINK-0000000004 (topic: KSTREAM-AGGREGATE-STATE-STORE-0000000002-repartition)\n"
        "      <-- KSTREAM-FILTER-0000000005\n"
        "    Sink: KSTREAM-SINK-0000000011 (topic: KSTREAM-AGGREGATE-STATE-STORE-0000000009-repartition)\n"
        "      <-- KSTREAM-FILTER-0000000012\n"
        "\n"
        "  Sub-topology: 1\n"
        "    Source: KSTREAM-SOURCE-0000000006 (topics: [KSTREAM-AGGREGATE-STATE-STORE-0000000002-repartition])\n"
        "      --> KSTREAM-AGGREGATE-0000000003\n"
        "    Processor: KSTREAM-AGGREGATE-0000000003 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000002])\n"
        "      --> KTABLE-TOSTREAM-0000000007\n"
        "      <-- KSTREAM-SOURCE-0000000006\n"
        "    Processor: KTABLE-TOSTREAM-0000000007 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000008\n"
        "      <-- KSTREAM-AGGREGATE-0000000003\n"
        "    Sink: KSTREAM-SINK-0000000008 (topic: out)\n"
        "      <-- KTABLE-TOSTREAM-0000000007\n"
        "\n"
        "  Sub-topology: 2\n"
        "    Source: KSTREAM-SOURCE-0000000013 (topics: [KSTREAM-AGGREGATE-STATE-STORE-0000000009-repartition])\n"
        "      --> KSTREAM-AGGREGATE-0000000010\n"
        "    Processor: KSTREAM-AGGREGATE-0000000010 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000009])\n"
        "      --> KTABLE-TOSTREAM-0000000014\n"
        "      <-- KSTREAM-SOURCE-0000000013\n"
        "    Processor: KTABLE-TOSTREAM-0000000014 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000015\n"
        "      <-- KSTREAM-AGGREGATE-0000000010\n"
        "    Sink: KSTREAM-SINK-0000000015 (topic: out2)\n"
        "      <-- KTABLE-TOSTREAM-0000000014\n"
        "\n"
    ),
    "table_named": (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: tn-source (topics: [t])\n"
        "      --> tn\n"
        "    Processor: tn (stores: [])\n"
        "      --> KTABLE-TOSTREAM-0000000003\n"
        "      <-- tn-source\n"
        "    Processor: KTABLE-TOSTREAM-0000000003 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000004\n"
        "      <-- tn\n"
        "    Sink: KSTREAM-SINK-0000000004 (topic: out)\n"
        "      <-- KTABLE-TOSTREAM-0000000003\n"
        "\n"
    ),
    "named_ops": (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [in])\n"
        "      --> f\n"
        "    Processor: f (stores: [])\n"
        "      --> KSTREAM-MAPVALUES-0000000002\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-MAPVALUES-0000000002 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000003\n"
        "      <-- f\n"
        "    Sink: KSTREAM-SINK-0000000003 (topic: out)\n"
        "      <-- KSTREAM-MAPVALUES-0000000002\n"
        "\n"
    ),
    "global_first": (
        "Topologies:\n"
        "   Sub-topology: 0 for global store (will not generate tasks)\n"
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [global])\n"
        "      --> KTABLE-SOURCE-0000000002\n"
        "    Processor: KTABLE-SOURCE-0000000002 (stores: [global-STATE-STORE-0000000000])\n"
        "      --> none\n"
        "      <-- KSTREAM-SOURCE-0000000001\n"
        "  Sub-topology: 1\n"
        "    Source: KSTREAM-SOURCE-0000000003 (topics: [in])\n"
        "      --> KSTREAM-SINK-0000000004\n"
        "    Sink: KSTREAM-SINK-0000000004 (topic: out)\n"
        "      <-- KSTREAM-SOURCE-0000000003\n"
        "\n"
    ),
}


def build_repartition(b: StreamsBuilder) -> None:
    """select_key -> repartition() -> group_by_key().count(), and group_by -> reduce -> table group_by -> reduce: four sub-topologies split at three repartition topics."""
    s = b.stream("in")
    s.select_key(lambda k, v: v).repartition().group_by_key().count().to_stream().to("out")
    (
        s.group_by(lambda k, v: v)
        .reduce(lambda a, v: a + v)
        .group_by(lambda k, v: (v, v))
        .reduce(lambda a, v: a + v, lambda a, v: a)
        .to_stream()
        .to("out2")
    )


def build_repartition_named(b: StreamsBuilder) -> None:
    """A Grouped name makes one repartition topic shared by both aggregations of the grouped stream (the names are generated again, burning counter values); Repartitioned and store names name the others."""
    s = b.stream("in")
    g = s.select_key(lambda k, v: v).group_by_key(Grouped.as_("grp"))
    g.count().to_stream().to("out")
    g.reduce(lambda a, v: a + v, Materialized.as_("red")).to_stream().to("out2")
    (
        s.map(lambda k, v: (v, k))
        .repartition(Repartitioned.as_("rp"))
        .group_by_key()
        .count(Materialized.as_("Abc"))
        .to_stream()
        .to("out3")
    )
    (
        s.select_key(lambda k, v: v)
        .group_by_key()
        .count(Materialized.as_("A-store"))
        .to_stream()
        .to("out4")
    )


def build_repartition_unnamed_twice(b: StreamsBuilder) -> None:
    """Without a Grouped name every aggregation gets its own repartition topic, named after its store."""
    g = b.stream("in").select_key(lambda k, v: v).group_by_key()
    g.count().to_stream().to("out")
    g.count().to_stream().to("out2")


def build_table_named(b: StreamsBuilder) -> None:
    """A Consumed name: "<name>-source" for the source, "<name>" for the table processor, counter values burnt."""
    b.table("t", consumed=Consumed(name="tn")).to_stream().to("out")


def build_named_ops(b: StreamsBuilder) -> None:
    """A user-named operator still advances the name counter (Kafka's orElseGenerateWithPrefix)."""
    (b.stream("in").filter(lambda k, v: True, Named.as_("f")).map_values(lambda v: v).to("out"))


def build_global_first(b: StreamsBuilder) -> None:
    """A global store's node group takes a sub-topology id in insertion order."""
    b.global_table("global", key_serde=serdes.String(), value_serde=serdes.String())
    b.stream("in").to("out")


BUILDERS = {
    "repartition": build_repartition,
    "repartition_named": build_repartition_named,
    "repartition_unnamed_twice": build_repartition_unnamed_twice,
    "table_named": build_table_named,
    "named_ops": build_named_ops,
    "global_first": build_global_first,
}


@pytest.mark.parametrize("case", sorted(BUILDERS))
def test_describe_matches_kafka(case: str) -> None:
    b = StreamsBuilder()
    BUILDERS[case](b)
    assert str(b.build().describe()) == KAFKA_DESCRIBE[case]


def test_chained_repartitions_run_through_the_driver(tmp_path) -> None:
    """Two repartition topics in a row (group_by -> reduce -> group_by -> reduce): records go
    through ``<application.id>-<name>-repartition`` twice before ``pipe_input`` returns."""
    S, L = serdes.String(), serdes.Long()
    b = StreamsBuilder()
    first = (
        b.stream("in", key_serde=S, value_serde=L)
        .group_by(lambda k, v: str(v % 3), Grouped.with_(S, L, "first"))
        .reduce(lambda a, v: a + v, Materialized.as_("r1").with_key_serde(S).with_value_serde(L))
    )
    (first.to_stream()
     .group_by(lambda k, v: str(v % 2), Grouped.with_(S, L, "second"))
     .reduce(lambda a, v: a + v, Materialized.as_("r2").with_key_serde(S).with_value_serde(L))
     .to_stream().to("out", key_serde=S, value_serde=L))  # fmt: skip
    config = {"application.id": "app", "state.dir": str(tmp_path), "statestore.cache.max.bytes": 0}
    with TopologyTestDriver(b.build(), config) as driver:
        src = driver.create_input_topic("in", S, L)
        src.pipe_input("x", 4, timestamp=1)  # first "1" -> 4; second "0" -> 4
        src.pipe_input("y", 7, timestamp=2)  # first "1" -> 11; second "1" -> 11
        src.pipe_input("z", 3, timestamp=3)  # first "0" -> 3; second "1" -> 14
        out = driver.create_output_topic("out", S, L)
        assert [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()] == [
            ("0", 4, 1),
            ("1", 11, 2),
            ("1", 14, 3),
        ]
        topics = {t for t, *_ in driver.producer_history()}
        assert {"app-first-repartition", "app-second-repartition"} <= topics


def test_stream_global_join_records_no_copartition_group() -> None:
    """KStreamGlobalKTableJoinTest.shouldNotRequireCopartitioning."""
    b = StreamsBuilder()
    g = b.global_table("g")
    b.stream("s").join(g, lambda k, v: k, lambda a, c: a).to("out")
    assert b.build().copartition_groups == []
