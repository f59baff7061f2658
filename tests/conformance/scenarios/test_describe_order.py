"""``Topology.describe()`` text identical to Kafka Streams 4.1.1's, list orders included.

Kafka prints store names and source topics in ``HashSet`` order and successors /
predecessors in the order of ``TreeSet``s built while node sizes were still growing
(``InternalTopologyBuilder.describeSubtopology``), so the order depends on String hash
buckets and red-black tree shapes; ``streaming.topology.describe`` replays both.

How ``JAVA_DESCRIBE`` was produced: a throwaway Java program built each case below with the
Java DSL (the Java calls are in each builder's docstring; ``S``/``L`` = String/Long serdes,
``J`` = a ValueJoiner, ``W`` = ``JoinWindows.ofTimeDifferenceWithNoGrace(10ms)``, ``nop()``
= a no-op Processor, ``kv(n)`` = ``Stores.keyValueStoreBuilder(inMemoryKeyValueStore(n))``)
and printed ``builder.build().describe()``; it ran with
``javac/java -cp '.jars/streams/*'`` (kafka-streams 4.1.1) on OpenJDK 17.0.15, the JVM of the
conformance harness. The texts are pasted verbatim.
"""

from __future__ import annotations

from typing import Any

import pytest

from streaming import (
    Consumed,
    Grouped,
    JoinWindows,
    Materialized,
    Processor,
    StreamJoined,
    StreamsBuilder,
    TimeWindows,
    Topology,
    serdes,
)
from streaming.state import Stores
from streaming.topology.describe import _java_string_hash, _JavaHashSet

S, L = serdes.String(), serdes.Long()
W = JoinWindows.of_time_difference_with_no_grace(10)


def joiner(a: Any, b: Any) -> Any:
    return a


def _stream(b: StreamsBuilder, topic: str) -> Any:
    return b.stream(topic, key_serde=S, value_serde=L)


def _table(b: StreamsBuilder, topic: str) -> Any:
    return b.table(topic, key_serde=S, value_serde=L)


class _Nop(Processor):
    def process(self, record: Any) -> None:
        pass


def _kv(name: str) -> Any:
    return Stores.key_value_store_builder(Stores.in_memory_key_value_store(name), S, L)


def ss_inner(b: StreamsBuilder) -> None:
    """s(b, "left").join(s(b, "right"), J, W).to("out")"""
    _stream(b, "left").join(_stream(b, "right"), joiner, W).to("out")


def ss_left(b: StreamsBuilder) -> None:
    """s(b, "left").leftJoin(s(b, "right"), J, W).to("out")"""
    _stream(b, "left").left_join(_stream(b, "right"), joiner, W).to("out")


def ss_outer(b: StreamsBuilder) -> None:
    """s(b, "left").outerJoin(s(b, "right"), J, W).to("out")"""
    _stream(b, "left").outer_join(_stream(b, "right"), joiner, W).to("out")


def ss_self(b: StreamsBuilder) -> None:
    """x = s(b, "in"); x.join(x, J, W).to("out")"""
    x = _stream(b, "in")
    x.join(x, joiner, W).to("out")


def ss_named_outer(b: StreamsBuilder) -> None:
    """s(b, "left").outerJoin(s(b, "right"), J, W,
    StreamJoined.with(S, L, L).withName("jn").withStoreName("st")).to("out")"""
    sj = StreamJoined.with_(S, L, L).with_name("jn").with_store_name("st")
    _stream(b, "left").outer_join(_stream(b, "right"), joiner, W, sj).to("out")


def ss_rekeyed_both(b: StreamsBuilder) -> None:
    """s(b, "left").selectKey((k, v) -> k + "x")
    .leftJoin(s(b, "right").selectKey((k, v) -> k + "y"), J, W).to("out")"""
    left = _stream(b, "left").select_key(lambda k, v: k + "x")
    right = _stream(b, "right").select_key(lambda k, v: k + "y")
    left.left_join(right, joiner, W).to("out")


def stream_table(b: StreamsBuilder) -> None:
    """x = s(b, "stream"); tb = t(b, "table"); x.join(tb, J).to("out");
    x.leftJoin(tb, J).to("out2")"""
    x = _stream(b, "stream")
    tb = _table(b, "table")
    x.join(tb, joiner).to("out")
    x.left_join(tb, joiner).to("out2")


def table_table(b: StreamsBuilder) -> None:
    """a = t(b, "ta"); c = t(b, "tb"); a.join(c, J).toStream().to("o1");
    a.leftJoin(c, J).toStream().to("o2");
    a.outerJoin(c, J, Materialized.as("outer-store")).toStream().to("o3")"""
    a = _table(b, "ta")
    c = _table(b, "tb")
    a.join(c, joiner).to_stream().to("o1")
    a.left_join(c, joiner).to_stream().to("o2")
    a.outer_join(c, joiner, materialized=Materialized.as_("outer-store")).to_stream().to("o3")


def global_tables(b: StreamsBuilder) -> None:
    """x = s(b, "stream"); g = b.globalTable("g", Consumed.with(S, L));
    x.join(g, (k, v) -> k, J).to("out"); x.outerJoin(s(b, "other"), J, W).to("out2");
    b.globalTable("g2", Consumed.with(S, L).withName("gt"), Materialized.as("gt-store"))"""
    x = _stream(b, "stream")
    g = b.global_table("g", key_serde=S, value_serde=L)
    x.join(g, lambda k, v: k, joiner).to("out")
    x.outer_join(_stream(b, "other"), joiner, W).to("out2")
    gt = Consumed(name="gt", key_serde=S, value_serde=L)
    b.global_table("g2", consumed=gt, materialized="gt-store")


def cogroup(b: StreamsBuilder) -> None:
    """g1..g3 = s(b, "one"|"two"|"three").groupByKey();
    g1.cogroup(add).cogroup(g2, add).cogroup(g3, add)
    .windowedBy(TimeWindows.ofSizeWithNoGrace(10ms)).aggregate(() -> 0L).toStream().to("out")"""
    g1 = _stream(b, "one").group_by_key()
    g2 = _stream(b, "two").group_by_key()
    g3 = _stream(b, "three").group_by_key()

    def add(k: Any, v: Any, agg: Any) -> Any:
        return agg + v

    (g1.cogroup(add).cogroup(g2, add).cogroup(g3, add)
     .windowed_by(TimeWindows.of_size_with_no_grace(10))
     .aggregate(lambda: 0).to_stream().to("out"))  # fmt: skip


def process_stores(b: StreamsBuilder) -> None:
    """addStateStore(kv(n)) for s31, s20, s3, store-a, store-q, s8, s12, s1 (hash buckets
    0, 0, 0, 5, 5, 5, 5, 14 of 16); x = s(b, "in");
    x.process(nop(), "s31", "s20", "s3").to("o1");
    x.process(nop(), "s3", "s20", "s31", "store-q", "store-a", "s12", "s8", "s1").to("o2")"""
    for name in ["s31", "s20", "s3", "store-a", "store-q", "s8", "s12", "s1"]:
        b.add_state_store(_kv(name))
    x = _stream(b, "in")
    x.process(_Nop, "s31", "s20", "s3").to("o1")
    x.process(_Nop, "s3", "s20", "s31", "store-q", "store-a", "s12", "s8", "s1").to("o2")


def process_twelve_stores(b: StreamsBuilder) -> None:
    """12 stores st40, st37, .. st7 on one processor (the HashSet copy is pre-sized to 32
    while the original has 16 buckets), then 13 stores m50, m47, .. m14 on another:
    s(b, "in").process(nop(), names).to("out"); s(b, "in2").process(nop(), more).to("out2")"""
    names = [f"st{40 - 3 * i}" for i in range(12)]
    for name in names:
        b.add_state_store(_kv(name))
    _stream(b, "in").process(_Nop, *names).to("out")
    more = [f"m{50 - 3 * i}" for i in range(13)]
    for name in more:
        b.add_state_store(_kv(name))
    _stream(b, "in2").process(_Nop, *more).to("out2")


def colliding_stores(b: StreamsBuilder) -> None:
    """Nine and eleven names all in bucket 5 of 16 (a chain of 9 makes HashMap resize):
    addStateStore(kv(n)) for the eleven; x = s(b, "in");
    x.process(nop(), nine).to("o1"); x.process(nop(), eleven).to("o2")"""
    nine = ["k186", "k175", "k164", "k153", "k142", "k131", "k120", "k92", "k81"]
    eleven = ["k0", "k70", "k81", "k92", "k120", "k131", "k142", "k153", "k164", "k175", "k186"]
    for name in eleven:
        b.add_state_store(_kv(name))
    x = _stream(b, "in")
    x.process(_Nop, *nine).to("o1")
    x.process(_Nop, *eleven).to("o2")


def multi_topic_source(b: StreamsBuilder) -> None:
    """b.stream(List.of("t-c", "t-a", "t-b", "zeta", "s31", "s20", "s3"), Consumed.with(S, L))
    .to("out")"""
    topics = ["t-c", "t-a", "t-b", "zeta", "s31", "s20", "s3"]
    b.stream(topics, key_serde=S, value_serde=L).to("out")


def diamond_merge(b: StreamsBuilder) -> None:
    """x = s(b, "in"); a = x.filter(..); c = x.mapValues(..).filter(..).peek(..);
    m = a.merge(c).merge(x.filterNot(..)); m.mapValues(..).to("o1"); m.to("o2"); a.to("o3")"""
    x = _stream(b, "in")
    a = x.filter(lambda k, v: True)
    c = x.map_values(lambda v: v).filter(lambda k, v: True).peek(lambda k, v: None)
    m = a.merge(c).merge(x.filter_not(lambda k, v: True))
    m.map_values(lambda v: v).to("o1")
    m.to("o2")
    a.to("o3")


def wide(b: StreamsBuilder) -> None:
    """x = s(b, "in"); 9 times: x.filter(..).mapValues(..).to("o" + i)  (28 nodes)"""
    x = _stream(b, "in")
    for i in range(9):
        x.filter(lambda k, v: True).map_values(lambda v: v).to(f"o{i}")


def fk_join(b: StreamsBuilder) -> None:
    """t(b, "ta").join(t(b, "tb"), v -> String.valueOf(v), J).toStream().to("out")"""
    _table(b, "ta").join(_table(b, "tb"), lambda v: str(v), joiner).to_stream().to("out")


def aggregate_chain(b: StreamsBuilder) -> None:
    """s(b, "in").groupBy((k, v) -> k + "x", Grouped.with(S, L)).count().toStream()
    .mapValues(v -> v).to("out", Produced.with(S, L))"""
    (_stream(b, "in").group_by(lambda k, v: k + "x", Grouped.with_(S, L))
     .count().to_stream().map_values(lambda v: v).to("out", key_serde=S, value_serde=L))  # fmt: skip


CASES = {
    "ss_inner": ss_inner,
    "ss_left": ss_left,
    "ss_outer": ss_outer,
    "ss_self": ss_self,
    "ss_named_outer": ss_named_outer,
    "ss_rekeyed_both": ss_rekeyed_both,
    "stream_table": stream_table,
    "table_table": table_table,
    "global": global_tables,
    "cogroup": cogroup,
    "process_stores": process_stores,
    "process_twelve_stores": process_twelve_stores,
    "multi_topic_source": multi_topic_source,
    "diamond_merge": diamond_merge,
    "wide": wide,
    "fk_join": fk_join,
    "aggregate_chain": aggregate_chain,
    "colliding_stores": colliding_stores,
}

# Kafka Streams 4.1.1 Topology.describe() output, by case (see the module docstring)
JAVA_DESCRIBE = {
    "ss_inner": (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [left])\n"
        "      --> KSTREAM-WINDOWED-0000000002\n"
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [right])\n"
        "      --> KSTREAM-WINDOWED-0000000003\n"
        "    Processor: KSTREAM-WINDOWED-0000000002 (stores: [KSTREAM-JOINTHIS-0000000004-store])\n"
        "      --> KSTREAM-JOINTHIS-0000000004\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-WINDOWED-0000000003 (stores: [KSTREAM-JOINOTHER-0000000005-store])\n"
        "      --> KSTREAM-JOINOTHER-0000000005\n"
        "      <-- KSTREAM-SOURCE-0000000001\n"
        "    Processor: KSTREAM-JOINOTHER-0000000005 (stores: [KSTREAM-JOINTHIS-0000000004-store])\n"
        "      --> KSTREAM-MERGE-0000000006\n"
        "      <-- KSTREAM-WINDOWED-0000000003\n"
        "    Processor: KSTREAM-JOINTHIS-0000000004 (stores: [KSTREAM-JOINOTHER-0000000005-store])\n"
        "      --> KSTREAM-MERGE-0000000006\n"
        "      <-- KSTREAM-WINDOWED-0000000002\n"
        "    Processor: KSTREAM-MERGE-0000000006 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000007\n"
        "      <-- KSTREAM-JOINTHIS-0000000004, KSTREAM-JOINOTHER-0000000005\n"
        "    Sink: KSTREAM-SINK-0000000007 (topic: out)\n"
        "      <-- KSTREAM-MERGE-0000000006\n"
        "\n"
    ),
    "ss_left": (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [left])\n"
        "      --> KSTREAM-WINDOWED-0000000002\n"
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [right])\n"
        "      --> KSTREAM-WINDOWED-0000000003\n"
        "    Processor: KSTREAM-WINDOWED-0000000002 (stores: [KSTREAM-JOINTHIS-0000000004-store])\n"
        "      --> KSTREAM-JOINTHIS-0000000004\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-WINDOWED-0000000003 (stores: [KSTREAM-OUTEROTHER-0000000005-store])\n"
        "      --> KSTREAM-OUTEROTHER-0000000005\n"
        "      <-- KSTREAM-SOURCE-0000000001\n"
        "    Processor: KSTREAM-JOINTHIS-0000000004 (stores: [KSTREAM-OUTEROTHER-0000000005-store, KSTREAM-OUTERSHARED-0000000004-store])\n"
        "      --> KSTREAM-MERGE-0000000006\n"
        "      <-- KSTREAM-WINDOWED-0000000002\n"
        "    Processor: KSTREAM-OUTEROTHER-0000000005 (stores: [KSTREAM-JOINTHIS-0000000004-store, KSTREAM-OUTERSHARED-0000000004-store])\n"
        "      --> KSTREAM-MERGE-0000000006\n"
        "      <-- KSTREAM-WINDOWED-0000000003\n"
        "    Processor: KSTREAM-MERGE-0000000006 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000007\n"
        "      <-- KSTREAM-JOINTHIS-0000000004, KSTREAM-OUTEROTHER-0000000005\n"
        "    Sink: KSTREAM-SINK-0000000007 (topic: out)\n"
        "      <-- KSTREAM-MERGE-0000000006\n"
        "\n"
    ),
    "ss_outer": (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [left])\n"
        "      --> KSTREAM-WINDOWED-0000000002\n"
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [right])\n"
        "      --> KSTREAM-WINDOWED-0000000003\n"
        "    Processor: KSTREAM-WINDOWED-0000000002 (stores: [KSTREAM-OUTERTHIS-0000000004-store])\n"
        "      --> KSTREAM-OUTERTHIS-0000000004\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-WINDOWED-0000000003 (stores: [KSTREAM-OUTEROTHER-0000000005-store])\n"
        "      --> KSTREAM-OUTEROTHER-0000000005\n"
        "      <-- KSTREAM-SOURCE-0000000001\n"
        "    Processor: KSTREAM-OUTEROTHER-0000000005 (stores: [KSTREAM-OUTERTHIS-0000000004-store, KSTREAM-OUTERSHARED-0000000004-store])\n"
        "      --> KSTREAM-MERGE-0000000006\n"
        "      <-- KSTREAM-WINDOWED-0000000003\n"
        "    Processor: KSTREAM-OUTERTHIS-0000000004 (stores: [KSTREAM-OUTEROTHER-0000000005-store, KSTREAM-OUTERSHARED-0000000004-store])\n"
        "      --> KSTREAM-MERGE-0000000006\n"
        "      <-- KSTREAM-WINDOWED-0000000002\n"
        "    Processor: KSTREAM-MERGE-0000000006 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000007\n"
        "      <-- KSTREAM-OUTERTHIS-0000000004, KSTREAM-OUTEROTHER-0000000005\n"
        "    Sink: KSTREAM-SINK-0000000007 (topic: out)\n"
        "      <-- KSTREAM-MERGE-0000000006\n"
        "\n"
    ),
    "ss_self": (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [in])\n"
        "      --> KSTREAM-WINDOWED-0000000001, KSTREAM-WINDOWED-0000000002\n"
        "    Processor: KSTREAM-WINDOWED-0000000001 (stores: [KSTREAM-JOINTHIS-0000000003-store])\n"
        "      --> KSTREAM-JOINTHIS-0000000003\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-WINDOWED-0000000002 (stores: [KSTREAM-JOINOTHER-0000000004-store])\n"
        "      --> KSTREAM-JOINOTHER-0000000004\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-JOINOTHER-0000000004 (stores: [KSTREAM-JOINTHIS-0000000003-store])\n"
        "      --> KSTREAM-MERGE-0000000005\n"
        "      <-- KSTREAM-WINDOWED-0000000002\n"
        "    Processor: KSTREAM-JOINTHIS-0000000003 (stores: [KSTREAM-JOINOTHER-0000000004-store])\n"
        "      --> KSTREAM-MERGE-0000000005\n"
        "      <-- KSTREAM-WINDOWED-0000000001\n"
        "    Processor: KSTREAM-MERGE-0000000005 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000006\n"
        "      <-- KSTREAM-JOINTHIS-0000000003, KSTREAM-JOINOTHER-0000000004\n"
        "    Sink: KSTREAM-SINK-0000000006 (topic: out)\n"
        "      <-- KSTREAM-MERGE-0000000005\n"
        "\n"
    ),
    "ss_named_outer": (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [left])\n"
        "      --> jn-this-windowed\n"
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [right])\n"
        "      --> jn-other-windowed\n"
        "    Processor: jn-other-windowed (stores: [st-outer-other-join-store])\n"
        "      --> jn-outer-other-join\n"
        "      <-- KSTREAM-SOURCE-0000000001\n"
        "    Processor: jn-this-windowed (stores: [st-outer-this-join-store])\n"
        "      --> jn-outer-this-join\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: jn-outer-other-join (stores: [st-outer-shared-join-store, st-outer-this-join-store])\n"
        "      --> jn-merge\n"
        "      <-- jn-other-windowed\n"
        "    Processor: jn-outer-this-join (stores: [st-outer-shared-join-store, st-outer-other-join-store])\n"
        "      --> jn-merge\n"
        "      <-- jn-this-windowed\n"
        "    Processor: jn-merge (stores: [])\n"
        "      --> KSTREAM-SINK-0000000007\n"
        "      <-- jn-outer-this-join, jn-outer-other-join\n"
        "    Sink: KSTREAM-SINK-0000000007 (topic: out)\n"
        "      <-- jn-merge\n"
        "\n"
    ),
    "ss_rekeyed_both": (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [left])\n"
        "      --> KSTREAM-KEY-SELECT-0000000001\n"
        "    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])\n"
        "      --> KSTREAM-FILTER-0000000005\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-FILTER-0000000005 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000004\n"
        "      <-- KSTREAM-KEY-SELECT-0000000001\n"
        "    Sink: KSTREAM-SINK-0000000004 (topic: KSTREAM-KEY-SELECT-0000000001-repartition)\n"
        "      <-- KSTREAM-FILTER-0000000005\n"
        "\n"
        "  Sub-topology: 1\n"
        "    Source: KSTREAM-SOURCE-0000000002 (topics: [right])\n"
        "      --> KSTREAM-KEY-SELECT-0000000003\n"
        "    Processor: KSTREAM-KEY-SELECT-0000000003 (stores: [])\n"
        "      --> KSTREAM-FILTER-0000000008\n"
        "      <-- KSTREAM-SOURCE-0000000002\n"
        "    Processor: KSTREAM-FILTER-0000000008 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000007\n"
        "      <-- KSTREAM-KEY-SELECT-0000000003\n"
        "    Sink: KSTREAM-SINK-0000000007 (topic: KSTREAM-KEY-SELECT-0000000003-repartition)\n"
        "      <-- KSTREAM-FILTER-0000000008\n"
        "\n"
        "  Sub-topology: 2\n"
        "    Source: KSTREAM-SOURCE-0000000006 (topics: [KSTREAM-KEY-SELECT-0000000001-repartition])\n"
        "      --> KSTREAM-WINDOWED-0000000010\n"
        "    Source: KSTREAM-SOURCE-0000000009 (topics: [KSTREAM-KEY-SELECT-0000000003-repartition])\n"
        "      --> KSTREAM-WINDOWED-0000000011\n"
        "    Processor: KSTREAM-WINDOWED-0000000010 (stores: [KSTREAM-JOINTHIS-0000000012-store])\n"
        "      --> KSTREAM-JOINTHIS-0000000012\n"
        "      <-- KSTREAM-SOURCE-0000000006\n"
        "    Processor: KSTREAM-WINDOWED-0000000011 (stores: [KSTREAM-OUTEROTHER-0000000013-store])\n"
        "      --> KSTREAM-OUTEROTHER-0000000013\n"
        "      <-- KSTREAM-SOURCE-0000000009\n"
        "    Processor: KSTREAM-JOINTHIS-0000000012 (stores: [KSTREAM-OUTERSHARED-0000000012-store, KSTREAM-OUTEROTHER-0000000013-store])\n"
        "      --> KSTREAM-MERGE-0000000014\n"
        "      <-- KSTREAM-WINDOWED-0000000010\n"
        "    Processor: KSTREAM-OUTEROTHER-0000000013 (stores: [KSTREAM-OUTERSHARED-0000000012-store, KSTREAM-JOINTHIS-0000000012-store])\n"
        "      --> KSTREAM-MERGE-0000000014\n"
        "      <-- KSTREAM-WINDOWED-0000000011\n"
        "    Processor: KSTREAM-MERGE-0000000014 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000015\n"
        "      <-- KSTREAM-JOINTHIS-0000000012, KSTREAM-OUTEROTHER-0000000013\n"
        "    Sink: KSTREAM-SINK-0000000015 (topic: out)\n"
        "      <-- KSTREAM-MERGE-0000000014\n"
        "\n"
    ),
    "stream_table": (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [stream])\n"
        "      --> KSTREAM-JOIN-0000000004, KSTREAM-LEFTJOIN-0000000006\n"
        "    Processor: KSTREAM-JOIN-0000000004 (stores: [table-STATE-STORE-0000000001])\n"
        "      --> KSTREAM-SINK-0000000005\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-LEFTJOIN-0000000006 (stores: [table-STATE-STORE-0000000001])\n"
        "      --> KSTREAM-SINK-0000000007\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Source: KSTREAM-SOURCE-0000000002 (topics: [table])\n"
        "      --> KTABLE-SOURCE-0000000003\n"
        "    Sink: KSTREAM-SINK-0000000005 (topic: out)\n"
        "      <-- KSTREAM-JOIN-0000000004\n"
        "    Sink: KSTREAM-SINK-0000000007 (topic: out2)\n"
        "      <-- KSTREAM-LEFTJOIN-0000000006\n"
        "    Processor: KTABLE-SOURCE-0000000003 (stores: [table-STATE-STORE-0000000001])\n"
        "      --> none\n"
        "      <-- KSTREAM-SOURCE-0000000002\n"
        "\n"
    ),
    "table_table": (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [ta])\n"
        "      --> KTABLE-SOURCE-0000000002\n"
        "    Source: KSTREAM-SOURCE-0000000004 (topics: [tb])\n"
        "      --> KTABLE-SOURCE-0000000005\n"
        "    Processor: KTABLE-SOURCE-0000000002 (stores: [ta-STATE-STORE-0000000000])\n"
        "      --> KTABLE-JOINTHIS-0000000012, KTABLE-JOINTHIS-0000000007, KTABLE-JOINTHIS-0000000017\n"
        "      <-- KSTREAM-SOURCE-0000000001\n"
        "    Processor: KTABLE-SOURCE-0000000005 (stores: [tb-STATE-STORE-0000000003])\n"
        "      --> KTABLE-JOINOTHER-0000000013, KTABLE-JOINOTHER-0000000008, KTABLE-JOINOTHER-0000000018\n"
        "      <-- KSTREAM-SOURCE-0000000004\n"
        "    Processor: KTABLE-JOINOTHER-0000000008 (stores: [ta-STATE-STORE-0000000000])\n"
        "      --> KTABLE-MERGE-0000000006\n"
        "      <-- KTABLE-SOURCE-0000000005\n"
        "    Processor: KTABLE-JOINOTHER-0000000013 (stores: [ta-STATE-STORE-0000000000])\n"
        "      --> KTABLE-MERGE-0000000011\n"
        "      <-- KTABLE-SOURCE-0000000005\n"
        "    Processor: KTABLE-JOINOTHER-0000000018 (stores: [ta-STATE-STORE-0000000000])\n"
        "      --> KTABLE-MERGE-0000000016\n"
        "      <-- KTABLE-SOURCE-0000000005\n"
        "    Processor: KTABLE-JOINTHIS-0000000007 (stores: [tb-STATE-STORE-0000000003])\n"
        "      --> KTABLE-MERGE-0000000006\n"
        "      <-- KTABLE-SOURCE-0000000002\n"
        "    Processor: KTABLE-JOINTHIS-0000000012 (stores: [tb-STATE-STORE-0000000003])\n"
        "      --> KTABLE-MERGE-0000000011\n"
        "      <-- KTABLE-SOURCE-0000000002\n"
        "    Processor: KTABLE-JOINTHIS-0000000017 (stores: [tb-STATE-STORE-0000000003])\n"
        "      --> KTABLE-MERGE-0000000016\n"
        "      <-- KTABLE-SOURCE-0000000002\n"
        "    Processor: KTABLE-MERGE-0000000006 (stores: [])\n"
        "      --> KTABLE-TOSTREAM-0000000009\n"
        "      <-- KTABLE-JOINTHIS-0000000007, KTABLE-JOINOTHER-0000000008\n"
        "    Processor: KTABLE-MERGE-0000000011 (stores: [])\n"
        "      --> KTABLE-TOSTREAM-0000000014\n"
        "      <-- KTABLE-JOINTHIS-0000000012, KTABLE-JOINOTHER-0000000013\n"
        "    Processor: KTABLE-MERGE-0000000016 (stores: [outer-store])\n"
        "      --> KTABLE-TOSTREAM-0000000019\n"
        "      <-- KTABLE-JOINTHIS-0000000017, KTABLE-JOINOTHER-0000000018\n"
        "    Processor: KTABLE-TOSTREAM-0000000009 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000010\n"
        "      <-- KTABLE-MERGE-0000000006\n"
        "    Processor: KTABLE-TOSTREAM-0000000014 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000015\n"
        "      <-- KTABLE-MERGE-0000000011\n"
        "    Processor: KTABLE-TOSTREAM-0000000019 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000020\n"
        "      <-- KTABLE-MERGE-0000000016\n"
        "    Sink: KSTREAM-SINK-0000000010 (topic: o1)\n"
        "      <-- KTABLE-TOSTREAM-0000000009\n"
        "    Sink: KSTREAM-SINK-0000000015 (topic: o2)\n"
        "      <-- KTABLE-TOSTREAM-0000000014\n"
        "    Sink: KSTREAM-SINK-0000000020 (topic: o3)\n"
        "      <-- KTABLE-TOSTREAM-0000000019\n"
        "\n"
    ),
    "global": (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [stream])\n"
        "      --> KSTREAM-LEFTJOIN-0000000004, KSTREAM-WINDOWED-0000000007\n"
        "    Source: KSTREAM-SOURCE-0000000006 (topics: [other])\n"
        "      --> KSTREAM-WINDOWED-0000000008\n"
        "    Processor: KSTREAM-WINDOWED-0000000007 (stores: [KSTREAM-OUTERTHIS-0000000009-store])\n"
        "      --> KSTREAM-OUTERTHIS-0000000009\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-WINDOWED-0000000008 (stores: [KSTREAM-OUTEROTHER-0000000010-store])\n"
        "      --> KSTREAM-OUTEROTHER-0000000010\n"
        "      <-- KSTREAM-SOURCE-0000000006\n"
        "    Processor: KSTREAM-OUTEROTHER-0000000010 (stores: [KSTREAM-OUTERSHARED-0000000009-store, KSTREAM-OUTERTHIS-0000000009-store])\n"
        "      --> KSTREAM-MERGE-0000000011\n"
        "      <-- KSTREAM-WINDOWED-0000000008\n"
        "    Processor: KSTREAM-OUTERTHIS-0000000009 (stores: [KSTREAM-OUTERSHARED-0000000009-store, KSTREAM-OUTEROTHER-0000000010-store])\n"
        "      --> KSTREAM-MERGE-0000000011\n"
        "      <-- KSTREAM-WINDOWED-0000000007\n"
        "    Processor: KSTREAM-LEFTJOIN-0000000004 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000005\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-MERGE-0000000011 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000012\n"
        "      <-- KSTREAM-OUTERTHIS-0000000009, KSTREAM-OUTEROTHER-0000000010\n"
        "    Sink: KSTREAM-SINK-0000000005 (topic: out)\n"
        "      <-- KSTREAM-LEFTJOIN-0000000004\n"
        "    Sink: KSTREAM-SINK-0000000012 (topic: out2)\n"
        "      <-- KSTREAM-MERGE-0000000011\n"
        "\n"
        "  Sub-topology: 1 for global store (will not generate tasks)\n"
        "    Source: KSTREAM-SOURCE-0000000002 (topics: [g])\n"
        "      --> KTABLE-SOURCE-0000000003\n"
        "    Processor: KTABLE-SOURCE-0000000003 (stores: [g-STATE-STORE-0000000001])\n"
        "      --> none\n"
        "      <-- KSTREAM-SOURCE-0000000002\n"
        "  Sub-topology: 2 for global store (will not generate tasks)\n"
        "    Source: gt-source (topics: [g2])\n"
        "      --> gt\n"
        "    Processor: gt (stores: [gt-store])\n"
        "      --> none\n"
        "      <-- gt-source\n"
    ),
    "cogroup": (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [one])\n"
        "      --> COGROUPKSTREAM-AGGREGATE-0000000004\n"
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [two])\n"
        "      --> COGROUPKSTREAM-AGGREGATE-0000000005\n"
        "    Source: KSTREAM-SOURCE-0000000002 (topics: [three])\n"
        "      --> COGROUPKSTREAM-AGGREGATE-0000000006\n"
        "    Processor: COGROUPKSTREAM-AGGREGATE-0000000004 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003])\n"
        "      --> COGROUPKSTREAM-MERGE-0000000007\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: COGROUPKSTREAM-AGGREGATE-0000000005 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003])\n"
        "      --> COGROUPKSTREAM-MERGE-0000000007\n"
        "      <-- KSTREAM-SOURCE-0000000001\n"
        "    Processor: COGROUPKSTREAM-AGGREGATE-0000000006 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003])\n"
        "      --> COGROUPKSTREAM-MERGE-0000000007\n"
        "      <-- KSTREAM-SOURCE-0000000002\n"
        "    Processor: COGROUPKSTREAM-MERGE-0000000007 (stores: [])\n"
        "      --> KTABLE-TOSTREAM-0000000008\n"
        "      <-- COGROUPKSTREAM-AGGREGATE-0000000004, COGROUPKSTREAM-AGGREGATE-0000000005, COGROUPKSTREAM-AGGREGATE-0000000006\n"
        "    Processor: KTABLE-TOSTREAM-0000000008 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000009\n"
        "      <-- COGROUPKSTREAM-MERGE-0000000007\n"
        "    Sink: KSTREAM-SINK-0000000009 (topic: out)\n"
        "      <-- KTABLE-TOSTREAM-0000000008\n"
        "\n"
    ),
    "process_stores": (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [in])\n"
        "      --> KSTREAM-PROCESSOR-0000000001, KSTREAM-PROCESSOR-0000000003\n"
        "    Processor: KSTREAM-PROCESSOR-0000000001 (stores: [s31, s20, s3])\n"
        "      --> KSTREAM-SINK-0000000002\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-PROCESSOR-0000000003 (stores: [s3, s20, s31, store-q, store-a, s12, s8, s1])\n"
        "      --> KSTREAM-SINK-0000000004\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Sink: KSTREAM-SINK-0000000002 (topic: o1)\n"
        "      <-- KSTREAM-PROCESSOR-0000000001\n"
        "    Sink: KSTREAM-SINK-0000000004 (topic: o2)\n"
        "      <-- KSTREAM-PROCESSOR-0000000003\n"
        "\n"
    ),
    "process_twelve_stores": (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [in])\n"
        "      --> KSTREAM-PROCESSOR-0000000001\n"
        "    Processor: KSTREAM-PROCESSOR-0000000001 (stores: [st31, st40, st16, st28, st25, st37, st34, st13, st10, st22, st7, st19])\n"
        "      --> KSTREAM-SINK-0000000002\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Sink: KSTREAM-SINK-0000000002 (topic: out)\n"
        "      <-- KSTREAM-PROCESSOR-0000000001\n"
        "\n"
        "  Sub-topology: 1\n"
        "    Source: KSTREAM-SOURCE-0000000003 (topics: [in2])\n"
        "      --> KSTREAM-PROCESSOR-0000000004\n"
        "    Processor: KSTREAM-PROCESSOR-0000000004 (stores: [m50, m20, m41, m44, m32, m35, m23, m26, m47, m14, m17, m38, m29])\n"
        "      --> KSTREAM-SINK-0000000005\n"
        "      <-- KSTREAM-SOURCE-0000000003\n"
        "    Sink: KSTREAM-SINK-0000000005 (topic: out2)\n"
        "      <-- KSTREAM-PROCESSOR-0000000004\n"
        "\n"
    ),
    "multi_topic_source": (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [zeta, s31, s20, s3, t-b, t-a, t-c])\n"
        "      --> KSTREAM-SINK-0000000001\n"
        "    Sink: KSTREAM-SINK-0000000001 (topic: out)\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "\n"
    ),
    "diamond_merge": (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [in])\n"
        "      --> KSTREAM-FILTER-0000000006, KSTREAM-MAPVALUES-0000000002, KSTREAM-FILTER-0000000001\n"
        "    Processor: KSTREAM-MAPVALUES-0000000002 (stores: [])\n"
        "      --> KSTREAM-FILTER-0000000003\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-FILTER-0000000001 (stores: [])\n"
        "      --> KSTREAM-MERGE-0000000005, KSTREAM-SINK-0000000011\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-FILTER-0000000003 (stores: [])\n"
        "      --> KSTREAM-PEEK-0000000004\n"
        "      <-- KSTREAM-MAPVALUES-0000000002\n"
        "    Processor: KSTREAM-PEEK-0000000004 (stores: [])\n"
        "      --> KSTREAM-MERGE-0000000005\n"
        "      <-- KSTREAM-FILTER-0000000003\n"
        "    Processor: KSTREAM-FILTER-0000000006 (stores: [])\n"
        "      --> KSTREAM-MERGE-0000000007\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-MERGE-0000000005 (stores: [])\n"
        "      --> KSTREAM-MERGE-0000000007\n"
        "      <-- KSTREAM-FILTER-0000000001, KSTREAM-PEEK-0000000004\n"
        "    Processor: KSTREAM-MERGE-0000000007 (stores: [])\n"
        "      --> KSTREAM-MAPVALUES-0000000008, KSTREAM-SINK-0000000010\n"
        "      <-- KSTREAM-MERGE-0000000005, KSTREAM-FILTER-0000000006\n"
        "    Processor: KSTREAM-MAPVALUES-0000000008 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000009\n"
        "      <-- KSTREAM-MERGE-0000000007\n"
        "    Sink: KSTREAM-SINK-0000000009 (topic: o1)\n"
        "      <-- KSTREAM-MAPVALUES-0000000008\n"
        "    Sink: KSTREAM-SINK-0000000010 (topic: o2)\n"
        "      <-- KSTREAM-MERGE-0000000007\n"
        "    Sink: KSTREAM-SINK-0000000011 (topic: o3)\n"
        "      <-- KSTREAM-FILTER-0000000001\n"
        "\n"
    ),
    "wide": (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [in])\n"
        "      --> KSTREAM-FILTER-0000000022, KSTREAM-FILTER-0000000007, KSTREAM-FILTER-0000000010, KSTREAM-FILTER-0000000013, KSTREAM-FILTER-0000000001, KSTREAM-FILTER-0000000004, KSTREAM-FILTER-0000000019, KSTREAM-FILTER-0000000025, KSTREAM-FILTER-0000000016\n"
        "    Processor: KSTREAM-FILTER-0000000001 (stores: [])\n"
        "      --> KSTREAM-MAPVALUES-0000000002\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-FILTER-0000000004 (stores: [])\n"
        "      --> KSTREAM-MAPVALUES-0000000005\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-FILTER-0000000007 (stores: [])\n"
        "      --> KSTREAM-MAPVALUES-0000000008\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-FILTER-0000000010 (stores: [])\n"
        "      --> KSTREAM-MAPVALUES-0000000011\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-FILTER-0000000013 (stores: [])\n"
        "      --> KSTREAM-MAPVALUES-0000000014\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-FILTER-0000000016 (stores: [])\n"
        "      --> KSTREAM-MAPVALUES-0000000017\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-FILTER-0000000019 (stores: [])\n"
        "      --> KSTREAM-MAPVALUES-0000000020\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-FILTER-0000000022 (stores: [])\n"
        "      --> KSTREAM-MAPVALUES-0000000023\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-FILTER-0000000025 (stores: [])\n"
        "      --> KSTREAM-MAPVALUES-0000000026\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-MAPVALUES-0000000002 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000003\n"
        "      <-- KSTREAM-FILTER-0000000001\n"
        "    Processor: KSTREAM-MAPVALUES-0000000005 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000006\n"
        "      <-- KSTREAM-FILTER-0000000004\n"
        "    Processor: KSTREAM-MAPVALUES-0000000008 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000009\n"
        "      <-- KSTREAM-FILTER-0000000007\n"
        "    Processor: KSTREAM-MAPVALUES-0000000011 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000012\n"
        "      <-- KSTREAM-FILTER-0000000010\n"
        "    Processor: KSTREAM-MAPVALUES-0000000014 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000015\n"
        "      <-- KSTREAM-FILTER-0000000013\n"
        "    Processor: KSTREAM-MAPVALUES-0000000017 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000018\n"
        "      <-- KSTREAM-FILTER-0000000016\n"
        "    Processor: KSTREAM-MAPVALUES-0000000020 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000021\n"
        "      <-- KSTREAM-FILTER-0000000019\n"
        "    Processor: KSTREAM-MAPVALUES-0000000023 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000024\n"
        "      <-- KSTREAM-FILTER-0000000022\n"
        "    Processor: KSTREAM-MAPVALUES-0000000026 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000027\n"
        "      <-- KSTREAM-FILTER-0000000025\n"
        "    Sink: KSTREAM-SINK-0000000003 (topic: o0)\n"
        "      <-- KSTREAM-MAPVALUES-0000000002\n"
        "    Sink: KSTREAM-SINK-0000000006 (topic: o1)\n"
        "      <-- KSTREAM-MAPVALUES-0000000005\n"
        "    Sink: KSTREAM-SINK-0000000009 (topic: o2)\n"
        "      <-- KSTREAM-MAPVALUES-0000000008\n"
        "    Sink: KSTREAM-SINK-0000000012 (topic: o3)\n"
        "      <-- KSTREAM-MAPVALUES-0000000011\n"
        "    Sink: KSTREAM-SINK-0000000015 (topic: o4)\n"
        "      <-- KSTREAM-MAPVALUES-0000000014\n"
        "    Sink: KSTREAM-SINK-0000000018 (topic: o5)\n"
        "      <-- KSTREAM-MAPVALUES-0000000017\n"
        "    Sink: KSTREAM-SINK-0000000021 (topic: o6)\n"
        "      <-- KSTREAM-MAPVALUES-0000000020\n"
        "    Sink: KSTREAM-SINK-0000000024 (topic: o7)\n"
        "      <-- KSTREAM-MAPVALUES-0000000023\n"
        "    Sink: KSTREAM-SINK-0000000027 (topic: o8)\n"
        "      <-- KSTREAM-MAPVALUES-0000000026\n"
        "\n"
    ),
    "fk_join": (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KTABLE-SOURCE-0000000016 (topics: [KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic])\n"
        "      --> KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-0000000017\n"
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [ta])\n"
        "      --> KTABLE-SOURCE-0000000002\n"
        "    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-0000000017 (stores: [ta-STATE-STORE-0000000000])\n"
        "      --> KTABLE-FK-JOIN-OUTPUT-0000000018\n"
        "      <-- KTABLE-SOURCE-0000000016\n"
        "    Processor: KTABLE-FK-JOIN-OUTPUT-0000000018 (stores: [])\n"
        "      --> KTABLE-TOSTREAM-0000000020\n"
        "      <-- KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-0000000017\n"
        "    Processor: KTABLE-SOURCE-0000000002 (stores: [ta-STATE-STORE-0000000000])\n"
        "      --> KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007\n"
        "      <-- KSTREAM-SOURCE-0000000001\n"
        "    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007 (stores: [])\n"
        "      --> KTABLE-SINK-0000000008\n"
        "      <-- KTABLE-SOURCE-0000000002\n"
        "    Processor: KTABLE-TOSTREAM-0000000020 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000021\n"
        "      <-- KTABLE-FK-JOIN-OUTPUT-0000000018\n"
        "    Sink: KSTREAM-SINK-0000000021 (topic: out)\n"
        "      <-- KTABLE-TOSTREAM-0000000020\n"
        "    Sink: KTABLE-SINK-0000000008 (topic: KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic)\n"
        "      <-- KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007\n"
        "\n"
        "  Sub-topology: 1\n"
        "    Source: KSTREAM-SOURCE-0000000004 (topics: [tb])\n"
        "      --> KTABLE-SOURCE-0000000005\n"
        "    Source: KTABLE-SOURCE-0000000009 (topics: [KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic])\n"
        "      --> KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011\n"
        "    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011 (stores: [KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000010])\n"
        "      --> KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000012\n"
        "      <-- KTABLE-SOURCE-0000000009\n"
        "    Processor: KTABLE-SOURCE-0000000005 (stores: [tb-STATE-STORE-0000000003])\n"
        "      --> KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000013\n"
        "      <-- KSTREAM-SOURCE-0000000004\n"
        "    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000012 (stores: [tb-STATE-STORE-0000000003])\n"
        "      --> KTABLE-SINK-0000000015\n"
        "      <-- KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011\n"
        "    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000013 (stores: [KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000010])\n"
        "      --> KTABLE-SINK-0000000015\n"
        "      <-- KTABLE-SOURCE-0000000005\n"
        "    Sink: KTABLE-SINK-0000000015 (topic: KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic)\n"
        "      <-- KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000012, KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000013\n"
        "\n"
    ),
    "aggregate_chain": (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [in])\n"
        "      --> KSTREAM-KEY-SELECT-0000000001\n"
        "    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])\n"
        "      --> KSTREAM-FILTER-0000000005\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-FILTER-0000000005 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000004\n"
        "      <-- KSTREAM-KEY-SELECT-0000000001\n"
        "    Sink: KSTREAM-SINK-0000000004 (topic: KSTREAM-AGGREGATE-STATE-STORE-0000000002-repartition)\n"
        "      <-- KSTREAM-FILTER-0000000005\n"
        "\n"
        "  Sub-topology: 1\n"
        "    Source: KSTREAM-SOURCE-0000000006 (topics: [KSTREAM-AGGREGATE-STATE-STORE-0000000002-repartition])\n"
        "      --> KSTREAM-AGGREGATE-0000000003\n"
        "    Processor: KSTREAM-AGGREGATE-0000000003 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000002])\n"
        "      --> KTABLE-TOSTREAM-0000000007\n"
        "      <-- KSTREAM-SOURCE-0000000006\n"
        "    Processor: KTABLE-TOSTREAM-0000000007 (stores: [])\n"
        "      --> KSTREAM-MAPVALUES-0000000008\n"
        "      <-- KSTREAM-AGGREGATE-0000000003\n"
        "    Processor: KSTREAM-MAPVALUES-0000000008 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000009\n"
        "      <-- KTABLE-TOSTREAM-0000000007\n"
        "    Sink: KSTREAM-SINK-0000000009 (topic: out)\n"
        "      <-- KSTREAM-MAPVALUES-0000000008\n"
        "\n"
    ),
    "colliding_stores": (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [in])\n"
        "      --> KSTREAM-PROCESSOR-0000000001, KSTREAM-PROCESSOR-0000000003\n"
        "    Processor: KSTREAM-PROCESSOR-0000000001 (stores: [k92, k81, k186, k175, k164, k153, k142, k131, k120])\n"
        "      --> KSTREAM-SINK-0000000002\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-PROCESSOR-0000000003 (stores: [k0, k70, k81, k92, k120, k131, k142, k153, k164, k175, k186])\n"
        "      --> KSTREAM-SINK-0000000004\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Sink: KSTREAM-SINK-0000000002 (topic: o1)\n"
        "      <-- KSTREAM-PROCESSOR-0000000001\n"
        "    Sink: KSTREAM-SINK-0000000004 (topic: o2)\n"
        "      <-- KSTREAM-PROCESSOR-0000000003\n"
        "\n"
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_describe_text_is_kafkas(case: str) -> None:
    b = StreamsBuilder()
    CASES[case](b)
    assert str(b.build().describe()) == JAVA_DESCRIBE[case]


def test_processor_api_merge_node_lists_predecessors_in_kafkas_order() -> None:
    """The same stale-TreeSet order through the Processor API (shape of a stream-stream join)."""
    t = Topology()
    t.add_source("src-l", "left").add_source("src-r", "right")
    t.add_processor("w-l", _Nop, "src-l").add_processor("w-r", _Nop, "src-r")
    t.add_processor("JOINTHIS", _Nop, "w-l").add_processor("JOINOTHER", _Nop, "w-r")
    t.add_processor("merge", _Nop, "JOINTHIS", "JOINOTHER").add_sink("sink", "out", "merge")
    assert "      <-- JOINTHIS, JOINOTHER\n" in str(t.describe())


def test_java_string_hash_and_hash_set_order() -> None:
    """String.hashCode values (incl. int overflow) and a HashSet's bucket order."""
    assert _java_string_hash("hello") == 99162322
    assert _java_string_hash("polygenelubricants") == 0x80000000  # Integer.MIN_VALUE
    assert _java_string_hash("") == 0
    # buckets of 16: s31/s20/s3 -> 0 (insertion order kept), store-a -> 5, s1 -> 14
    assert list(_JavaHashSet(["s1", "store-a", "s20", "s3", "s31"])) == [
        "s20",
        "s3",
        "s31",
        "store-a",
        "s1",
    ]
