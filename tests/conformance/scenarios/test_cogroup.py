"""Cogrouped aggregations: ports of Kafka Streams 4.1's ``CogroupedKStreamImplTest``,
``TimeWindowedCogroupedKStreamImplTest``, ``SessionWindowedCogroupedKStreamImplTest`` and
``SlidingWindowedCogroupedKStreamImplTest`` (same inputs, expected records and timestamps), and
the cogroup topology (names, shared store, repartition topics) as Kafka 4.1.1 describes it.
"""

from __future__ import annotations

from typing import Any

import pytest

from streaming import (
    Grouped,
    Materialized,
    Named,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    TimeWindows,
    TopologyTestDriver,
    serdes,
)

S = serdes.String()
CACHE = pytest.mark.parametrize("cache_bytes", [0, 10 * 1024 * 1024], ids=["no-cache", "cache"])


def string_aggregator(key: Any, value: Any, agg: str) -> str:
    return agg + value


def tostring_adder(key: Any, value: Any, agg: Any) -> str:
    """MockAggregator.TOSTRING_ADDER."""
    return f"{agg}+{value}"


def tostring_remover(key: Any, value: Any, agg: Any) -> str:
    """MockAggregator.TOSTRING_REMOVER."""
    return f"{agg}-{value}"


def driver_for(b: StreamsBuilder, tmp_path: Any, cache_bytes: int) -> TopologyTestDriver:
    config = {
        "state.dir": str(tmp_path),
        "statestore.cache.max.bytes": cache_bytes,
        "default.key.serde": S,
        "default.value.serde": S,
    }
    return TopologyTestDriver(b.build(), config, initial_wall_clock_time_ms=0)


def kvt(records: list[Any]) -> list[tuple[Any, Any, int]]:
    return [(r.key, r.value, r.timestamp) for r in records]


def wkvt(records: list[Any]) -> list[tuple[Any, ...]]:
    return [
        (r.key.key, r.key.window.start, r.key.window.end, r.value, r.timestamp) for r in records
    ]


@CACHE
def test_cogroup_and_aggregate_single_kstream(tmp_path: Any, cache_bytes: int) -> None:
    """shouldCogroupAndAggregateSingleKStreams and testCogroupHandleNullValues."""
    b = StreamsBuilder()
    grouped = b.stream("one", key_serde=S, value_serde=S).group_by_key()
    grouped.cogroup(string_aggregator).aggregate(lambda: "").to_stream().to("output")
    with driver_for(b, tmp_path, cache_bytes) as driver:
        one = driver.create_input_topic("one", S, S)
        for key, value in [("k1", "A"), ("k2", "B"), ("k2", None), ("k2", "B"), ("k1", "A")]:
            one.pipe_input(key, value, timestamp=0)
        out = driver.create_output_topic("output", S, S)
        assert kvt(out.read_records_to_list()) == [
            ("k1", "A", 0),
            ("k2", "B", 0),
            ("k2", "BB", 0),
            ("k1", "AA", 0),
        ]


def _two_streams(b: StreamsBuilder) -> Any:
    g1 = b.stream("one", key_serde=S, value_serde=S).group_by_key()
    g2 = b.stream("two", key_serde=S, value_serde=S).group_by_key()
    return g1.cogroup(string_aggregator).cogroup(g2, string_aggregator)


@CACHE
def test_cogroup_two_kstreams_with_distinct_keys(tmp_path: Any, cache_bytes: int) -> None:
    """shouldCogroupAndAggregateTwoKStreamsWithDistinctKeys."""
    b = StreamsBuilder()
    _two_streams(b).aggregate(lambda: "").to_stream().to("output")
    with driver_for(b, tmp_path, cache_bytes) as driver:
        one = driver.create_input_topic("one", S, S)
        two = driver.create_input_topic("two", S, S)
        for ts in (0, 1, 10, 100):
            one.pipe_input("k1", "A", timestamp=ts)
        for ts in (100, 200, 1, 500, 500, 100):
            two.pipe_input("k2", "B", timestamp=ts)
        out = driver.create_output_topic("output", S, S)
        assert kvt(out.read_records_to_list()) == [
            ("k1", "A", 0),
            ("k1", "AA", 1),
            ("k1", "AAA", 10),
            ("k1", "AAAA", 100),
            ("k2", "B", 100),
            ("k2", "BB", 200),
            ("k2", "BBB", 200),
            ("k2", "BBBB", 500),
            ("k2", "BBBBB", 500),
            ("k2", "BBBBBB", 500),
        ]


@CACHE
def test_cogroup_two_kstreams_with_shared_keys(tmp_path: Any, cache_bytes: int) -> None:
    """shouldCogroupAndAggregateTwoKStreamsWithSharedKeys."""
    b = StreamsBuilder()
    _two_streams(b).aggregate(lambda: "").to_stream().to("output")
    with driver_for(b, tmp_path, cache_bytes) as driver:
        one = driver.create_input_topic("one", S, S)
        two = driver.create_input_topic("two", S, S)
        for key, ts in [("k1", 0), ("k2", 1), ("k1", 10), ("k2", 100)]:
            one.pipe_input(key, "A", timestamp=ts)
        for key, ts in [
            ("k2", 100), ("k2", 200), ("k1", 1), ("k2", 500),
            ("k1", 500), ("k2", 500), ("k3", 500), ("k2", 100),
        ]:  # fmt: skip
            two.pipe_input(key, "B", timestamp=ts)
        out = driver.create_output_topic("output", S, S)
        assert kvt(out.read_records_to_list())[:10] == [
            ("k1", "A", 0),
            ("k2", "A", 1),
            ("k1", "AA", 10),
            ("k2", "AA", 100),
            ("k2", "AAB", 100),
            ("k2", "AABB", 200),
            ("k1", "AAB", 10),
            ("k2", "AABBB", 500),
            ("k1", "AABB", 500),
            ("k2", "AABBBB", 500),
        ]


def _windowed_setup(b: StreamsBuilder) -> Any:
    g1 = b.stream("topic", key_serde=S, value_serde=S).group_by_key(Grouped.with_(S, S))
    g2 = b.stream("topic2", key_serde=S, value_serde=S).group_by_key(Grouped.with_(S, S))
    return g1.cogroup(tostring_adder).cogroup(g2, tostring_remover)


@CACHE
@pytest.mark.parametrize("second_topic", [False, True], ids=["one-stream", "mix"])
def test_time_window_aggregate(tmp_path: Any, cache_bytes: int, second_topic: bool) -> None:
    """timeWindowAggregateTestStreamsTest / timeWindowMixAggregatorsTest (window size 500)."""
    b = StreamsBuilder()
    (_windowed_setup(b).windowed_by(TimeWindows.of_size_with_no_grace(500))
     .aggregate(lambda: "0", Materialized.with_(S, S)).to_stream().to("output"))  # fmt: skip
    with driver_for(b, tmp_path, cache_bytes) as driver:
        t1 = driver.create_input_topic("topic", S, S)
        t2 = driver.create_input_topic("topic2", S, S) if second_topic else t1
        for key, value, ts in [("k1", "A", 0), ("k2", "A", 0), ("k2", "A", 1), ("k1", "A", 2)]:
            t1.pipe_input(key, value, timestamp=ts)
        for key, value, ts in [("k1", "B", 3), ("k2", "B", 3), ("k2", "B", 4), ("k1", "B", 4)]:
            t2.pipe_input(key, value, timestamp=ts)
        out = driver.create_output_topic("output", serdes.TimeWindowedSerde(S, 500), S)
        op = "-" if second_topic else "+"
        assert [(k, v, t) for k, _, _, v, t in wkvt(out.read_records_to_list())] == [
            ("k1", "0+A", 0),
            ("k2", "0+A", 0),
            ("k2", "0+A+A", 1),
            ("k1", "0+A+A", 2),
            ("k1", f"0+A+A{op}B", 3),
            ("k2", f"0+A+A{op}B", 3),
            ("k2", f"0+A+A{op}B{op}B", 4),
            ("k1", f"0+A+A{op}B{op}B", 4),
        ]


def test_session_window_mix_aggregators(tmp_path: Any) -> None:
    """sessionWindowMixAggregatorsTest: gap 100, grace 1 day, merger a1 + "+" + a2."""
    b = StreamsBuilder()
    (_windowed_setup(b).windowed_by(SessionWindows.of_inactivity_gap_and_grace(100, 86_400_000))
     .aggregate(lambda: "0", lambda k, a1, a2: f"{a1}+{a2}", Materialized.with_(S, S))
     .to_stream().to("output"))  # fmt: skip
    with driver_for(b, tmp_path, 0) as driver:
        t1 = driver.create_input_topic("topic", S, S)
        t2 = driver.create_input_topic("topic2", S, S)
        for key, ts in [("k1", 0), ("k2", 0), ("k2", 1), ("k1", 2)]:
            t1.pipe_input(key, "A", timestamp=ts)
        for key, ts in [("k1", 3), ("k2", 3), ("k2", 444), ("k1", 444)]:
            t2.pipe_input(key, "B", timestamp=ts)
        out = driver.create_output_topic("output", serdes.SessionWindowedSerde(S), S)
        assert [(k, v, t) for k, _, _, v, t in wkvt(out.read_records_to_list())] == [
            ("k1", "0+A", 0),
            ("k2", "0+A", 0),
            ("k2", None, 0),
            ("k2", "0+0+A+A", 1),
            ("k1", None, 0),
            ("k1", "0+0+A+A", 2),
            ("k1", None, 2),
            ("k1", "0+0+0+A+A-B", 3),
            ("k2", None, 1),
            ("k2", "0+0+0+A+A-B", 3),
            ("k2", "0-B", 444),
            ("k1", "0-B", 444),
        ]


def test_sliding_window_aggregate(tmp_path: Any) -> None:
    """slidingWindowAggregateStreamsTest: time difference 500, grace 2000."""
    b = StreamsBuilder()
    (_windowed_setup(b).windowed_by(SlidingWindows.of_time_difference_and_grace(500, 2000))
     .aggregate(lambda: "0", Materialized.with_(S, S)).to_stream().to("output"))  # fmt: skip
    with driver_for(b, tmp_path, 0) as driver:
        t1 = driver.create_input_topic("topic", S, S)
        for key, value, ts in [
            ("k1", "A", 500), ("k2", "A", 500), ("k2", "A", 501), ("k1", "A", 502),
            ("k1", "B", 503), ("k2", "B", 503), ("k2", "B", 504), ("k1", "B", 504),
        ]:  # fmt: skip
            t1.pipe_input(key, value, timestamp=ts)
        out = driver.create_output_topic("output", serdes.TimeWindowedSerde(S, 500), S)
        assert wkvt(out.read_records_to_list()) == [
            ("k1", 0, 500, "0+A", 500),
            ("k2", 0, 500, "0+A", 500),
            ("k2", 501, 1001, "0+A", 501),
            ("k2", 1, 501, "0+A+A", 501),
            ("k1", 501, 1001, "0+A", 502),
            ("k1", 2, 502, "0+A+A", 502),
            ("k1", 501, 1001, "0+A+B", 503),
            ("k1", 503, 1003, "0+B", 503),
            ("k1", 3, 503, "0+A+A+B", 503),
            ("k2", 501, 1001, "0+A+B", 503),
            ("k2", 502, 1002, "0+B", 503),
            ("k2", 3, 503, "0+A+A+B", 503),
            ("k2", 502, 1002, "0+B+B", 504),
            ("k2", 501, 1001, "0+A+B+B", 504),
            ("k2", 504, 1004, "0+B", 504),
            ("k2", 4, 504, "0+A+A+B+B", 504),
            ("k1", 503, 1003, "0+B+B", 504),
            ("k1", 501, 1001, "0+A+B+B", 504),
            ("k1", 504, 1004, "0+B", 504),
            ("k1", 4, 504, "0+A+A+B+B", 504),
        ]


# ---------------------------------------------------------------- topology (Kafka 4.1.1 describe)


def test_named_cogroup_with_repartitions_describes_like_kafka() -> None:
    """Printed by Kafka Streams 4.1.1 for the same DSL calls (cf. shouldNameRepartitionTopic)."""
    b = StreamsBuilder()
    g1 = b.stream("one").select_key(lambda k, v: v).group_by_key()
    g2 = b.stream("two").group_by(lambda k, v: v, Grouped.as_("two-grouped"))
    g3 = b.stream("three").group_by_key()
    (g1.cogroup(tostring_adder).cogroup(g2, tostring_adder).cogroup(g3, tostring_adder)
     .aggregate(lambda: "", named=Named.as_("cog"), materialized=Materialized.as_("cog-store"))
     .to_stream().to("out"))  # fmt: skip
    topology = b.build()
    assert str(topology.describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [one])\n"
        "      --> KSTREAM-KEY-SELECT-0000000001\n"
        "    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])\n"
        "      --> cog-store-repartition-filter\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: cog-store-repartition-filter (stores: [])\n"
        "      --> cog-store-repartition-sink\n"
        "      <-- KSTREAM-KEY-SELECT-0000000001\n"
        "    Sink: cog-store-repartition-sink (topic: cog-store-repartition)\n"
        "      <-- cog-store-repartition-filter\n"
        "\n"
        "  Sub-topology: 1\n"
        "    Source: KSTREAM-SOURCE-0000000002 (topics: [two])\n"
        "      --> two-grouped\n"
        "    Processor: two-grouped (stores: [])\n"
        "      --> two-grouped-repartition-filter\n"
        "      <-- KSTREAM-SOURCE-0000000002\n"
        "    Processor: two-grouped-repartition-filter (stores: [])\n"
        "      --> two-grouped-repartition-sink\n"
        "      <-- two-grouped\n"
        "    Sink: two-grouped-repartition-sink (topic: two-grouped-repartition)\n"
        "      <-- two-grouped-repartition-filter\n"
        "\n"
        "  Sub-topology: 2\n"
        "    Source: KSTREAM-SOURCE-0000000004 (topics: [three])\n"
        "      --> cog-cogroup-agg-2\n"
        "    Source: cog-store-repartition-source (topics: [cog-store-repartition])\n"
        "      --> cog-cogroup-agg-0\n"
        "    Source: two-grouped-repartition-source (topics: [two-grouped-repartition])\n"
        "      --> cog-cogroup-agg-1\n"
        "    Processor: cog-cogroup-agg-0 (stores: [cog-store])\n"
        "      --> cog-cogroup-merge\n"
        "      <-- cog-store-repartition-source\n"
        "    Processor: cog-cogroup-agg-1 (stores: [cog-store])\n"
        "      --> cog-cogroup-merge\n"
        "      <-- two-grouped-repartition-source\n"
        "    Processor: cog-cogroup-agg-2 (stores: [cog-store])\n"
        "      --> cog-cogroup-merge\n"
        "      <-- KSTREAM-SOURCE-0000000004\n"
        "    Processor: cog-cogroup-merge (stores: [])\n"
        "      --> KTABLE-TOSTREAM-0000000015\n"
        "      <-- cog-cogroup-agg-0, cog-cogroup-agg-1, cog-cogroup-agg-2\n"
        "    Processor: KTABLE-TOSTREAM-0000000015 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000016\n"
        "      <-- cog-cogroup-merge\n"
        "    Sink: KSTREAM-SINK-0000000016 (topic: out)\n"
        "      <-- KTABLE-TOSTREAM-0000000015\n"
        "\n"
    )
    assert set(topology.internal_topics) == {"cog-store-repartition", "two-grouped-repartition"}
    # Kafka co-partitions the grouped streams' own sources (before any repartition)
    assert {
        "KSTREAM-SOURCE-0000000000",
        "KSTREAM-SOURCE-0000000002",
        "KSTREAM-SOURCE-0000000004",
    } in topology.copartition_groups


def test_cogroup_used_twice_reuses_its_repartition_topic() -> None:
    """One cogroup aggregated twice (windowed and session): one repartition topic, whose names
    Kafka still generates (burning counter values) the second time."""
    b = StreamsBuilder()
    g1 = b.stream("one").select_key(lambda k, v: v).group_by_key()
    g2 = b.stream("two").group_by_key()
    c = g1.cogroup(tostring_adder).cogroup(g2, tostring_adder)
    c.windowed_by(TimeWindows.of_size_with_no_grace(10)).aggregate(lambda: "").to_stream().to("o1")
    (c.windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(10))
     .aggregate(lambda: "", lambda k, a, b: a + b).to_stream().to("out2"))  # fmt: skip
    topology = b.build()
    assert list(topology.internal_topics) == [
        "COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition"
    ]
    text = str(topology.describe())
    assert (
        "Processor: COGROUPKSTREAM-AGGREGATE-0000000016 "
        "(stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000012])"
    ) in text
    assert (
        "      <-- COGROUPKSTREAM-AGGREGATE-0000000016, COGROUPKSTREAM-AGGREGATE-0000000017\n"
    ) in text


def test_session_cogroup_input_behind_the_other_merges_through_the_cache(tmp_path: Any) -> None:
    """Each cogrouped aggregate keeps its own stream time over one shared store: an input
    two retention periods behind the other still merges into the session it has just
    written, which the store dropped as expired and Kafka's cache still holds (Kafka 4.1.1
    emits "y" then "yy"; a differential run found the cache purged it and emitted "y" twice).
    """
    b = StreamsBuilder()
    (_two_streams(b)
     .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(2000))
     .aggregate(lambda: "", lambda k, a1, a2: a1 + a2, Materialized.with_(S, S))
     .to_stream().to("output"))  # fmt: skip
    with driver_for(b, tmp_path, 10 * 1024 * 1024) as driver:
        driver.create_input_topic("two", S, S).pipe_input("a", "x", timestamp=66_000)
        one = driver.create_input_topic("one", S, S)
        one.pipe_input("k", "y", timestamp=56_000)
        one.pipe_input("k", "y", timestamp=56_000)
        out = driver.create_output_topic("output", serdes.SessionWindowedSerde(S), S)
        assert wkvt(out.read_records_to_list()) == [
            ("a", 66_000, 66_000, "x", 66_000),
            ("k", 56_000, 56_000, "y", 56_000),
            ("k", 56_000, 56_000, "yy", 56_000),
        ]
