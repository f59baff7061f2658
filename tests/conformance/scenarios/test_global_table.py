"""GlobalKTable and stream-global joins: ports of Kafka Streams 4.1's
``KStreamGlobalKTableJoinTest`` and ``KStreamGlobalKTableLeftJoinTest`` (same inputs, same
expected records and timestamps), plus the global store's naming, ``describe()`` and the test
driver's handling of global topics.
"""

from __future__ import annotations

from typing import Any

import pytest

from streaming import Consumed, Materialized, StreamsBuilder, TopologyTestDriver, serdes
from streaming.errors import TopologyException
from streaming.topology import Processor, Record, Topology

I = serdes.Integer()  # noqa: E741
S = serdes.String()
EXPECTED_KEYS = (0, 1, 2, 3)


def key_mapper(key: Any, value: str) -> str | None:
    """The second comma-separated token is the global table's key (None when missing)."""
    tokens = value.split(",")
    return tokens[1] if len(tokens) > 1 else None


def tostring_joiner(left: Any, right: Any) -> str:
    """MockValueJoiner.TOSTRING_JOINER: ``left + "+" + right`` (null prints as "null")."""
    return f"{left}+{'null' if right is None else right}"


class Harness:
    def __init__(self, left: bool, tmp_path: Any) -> None:
        b = StreamsBuilder()
        stream = b.stream("streamTopic", key_serde=I, value_serde=S)
        table = b.global_table("globalTableTopic", key_serde=S, value_serde=S)
        joined = (stream.left_join if left else stream.join)(table, key_mapper, tostring_joiner)
        joined.to("out", key_serde=I, value_serde=S)
        self.topology = b.build()
        self.driver = TopologyTestDriver(
            self.topology, {"state.dir": str(tmp_path)}, initial_wall_clock_time_ms=0
        )
        # stream timestamps auto-advance from 0 by 1 ms; the global table's use the wall clock
        self.stream_in = self.driver.create_input_topic("streamTopic", I, S).auto_advance(0, 1)
        self.table_in = self.driver.create_input_topic("globalTableTopic", S, S)
        self.out = self.driver.create_output_topic("out", I, S)

    def push_to_stream(self, n: int, prefix: str, foreign_key: bool, null_key: bool) -> None:
        for i in range(n):
            value = f"{prefix}{EXPECTED_KEYS[i]}"
            if foreign_key:
                value += f",FKey{EXPECTED_KEYS[i]}"
            key = None if null_key and i == 0 else EXPECTED_KEYS[i]
            self.stream_in.pipe_input(key, value)

    def push_to_table(self, n: int, prefix: str) -> None:
        for i in range(n):
            self.table_in.pipe_input(f"FKey{EXPECTED_KEYS[i]}", f"{prefix}{EXPECTED_KEYS[i]}")

    def push_null_to_table(self, n: int) -> None:
        for i in range(n):
            self.table_in.pipe_input(f"FKey{EXPECTED_KEYS[i]}", None)

    def results(self) -> list[tuple[Any, Any, int]]:
        return [(r.key, r.value, r.timestamp) for r in self.out.read_records_to_list()]


@pytest.fixture(params=[False, True], ids=["inner", "left"])
def h(request: Any, tmp_path: Any) -> Any:
    harness = Harness(request.param, tmp_path)
    harness.left = request.param
    yield harness
    harness.driver.close()


def test_should_not_require_copartitioning(h: Harness) -> None:
    assert h.topology.copartition_groups == []


def test_not_join_with_empty_global_table_on_stream_updates(h: Harness) -> None:
    h.push_to_stream(2, "X", True, False)
    expected = [(0, "X0,FKey0+null", 0), (1, "X1,FKey1+null", 1)] if h.left else []
    assert h.results() == expected


def test_not_join_on_global_table_updates(h: Harness) -> None:
    h.push_to_stream(2, "X", True, False)
    h.results()
    h.push_to_table(2, "Y")
    assert h.results() == []
    h.push_to_stream(4, "X", True, False)
    expected = [(0, "X0,FKey0+Y0", 2), (1, "X1,FKey1+Y1", 3)]
    if h.left:
        expected += [(2, "X2,FKey2+null", 4), (3, "X3,FKey3+null", 5)]
    assert h.results() == expected
    h.push_to_table(4, "YY")
    assert h.results() == []
    h.push_to_stream(4, "X", True, False)
    assert h.results() == [
        (0, "X0,FKey0+YY0", 6),
        (1, "X1,FKey1+YY1", 7),
        (2, "X2,FKey2+YY2", 8),
        (3, "X3,FKey3+YY3", 9),
    ]
    h.push_to_table(4, "YYY")
    assert h.results() == []


def test_join_only_if_match_found_on_stream_updates(h: Harness) -> None:
    h.push_to_table(2, "Y")
    assert h.results() == []
    h.push_to_stream(4, "X", True, False)
    expected = [(0, "X0,FKey0+Y0", 0), (1, "X1,FKey1+Y1", 1)]
    if h.left:
        expected += [(2, "X2,FKey2+null", 2), (3, "X3,FKey3+null", 3)]
    assert h.results() == expected


def test_clear_global_table_entry_on_null_value_updates(h: Harness) -> None:
    h.push_to_table(4, "Y")
    h.push_to_stream(4, "X", True, False)
    assert h.results() == [
        (0, "X0,FKey0+Y0", 0),
        (1, "X1,FKey1+Y1", 1),
        (2, "X2,FKey2+Y2", 2),
        (3, "X3,FKey3+Y3", 3),
    ]
    h.push_null_to_table(2)
    assert h.results() == []
    prefix = "X" if h.left else "XX"
    h.push_to_stream(4, prefix, True, False)
    expected = [(2, f"{prefix}2,FKey2+Y2", 6), (3, f"{prefix}3,FKey3+Y3", 7)]
    if h.left:
        expected = [(0, "X0,FKey0+null", 4), (1, "X1,FKey1+null", 5), *expected]
    assert h.results() == expected


@pytest.mark.parametrize("null_key", [False, True])
def test_null_key_mapper_values(h: Harness, null_key: bool) -> None:
    """Inner: dropped (shouldNotJoinOnNullKeyMapperValues[WithNullKeys]); left: joined with
    null (shouldJoinOnNullKeyMapperValues[WithNullKeys])."""
    h.push_to_table(4, "Y")
    h.push_to_stream(4, "XXX", False, null_key)
    expected = []
    if h.left:
        expected = [(None if null_key else 0, "XXX0+null", 0)] + [
            (i, f"XXX{i}+null", i) for i in (1, 2, 3)
        ]
    assert h.results() == expected


def test_join_on_null_key(h: Harness) -> None:
    n = 4 if h.left else 2
    h.push_to_table(n, "Y")
    h.push_to_stream(4, "X", True, True)
    expected = [(None, "X0,FKey0+Y0", 0), (1, "X1,FKey1+Y1", 1)]
    if h.left:
        expected += [(2, "X2,FKey2+Y2", 2), (3, "X3,FKey3+Y3", 3)]
    assert h.results() == expected


# ---------------------------------------------------------------- store, names, describe


def test_global_store_is_queryable_through_the_driver(tmp_path: Any) -> None:
    b = StreamsBuilder()
    b.global_table("g", materialized=Materialized.as_("g-store"), key_serde=S, value_serde=S)
    with TopologyTestDriver(b.build(), {"state.dir": str(tmp_path)}) as driver:
        topic = driver.create_input_topic("g", S, S)
        topic.pipe_input("k", "v1", timestamp=5)
        topic.pipe_input("k", "v2", timestamp=3)
        topic.pipe_input("gone", "x", timestamp=7)
        topic.pipe_input("gone", None, timestamp=8)
        store = driver.get_key_value_store("g-store")
        assert store.get("k") == "v2"
        assert store.get("gone") is None
        assert driver.get_timestamped_key_value_store("g-store").get("k").timestamp == 3
        assert "g-store" in driver.get_all_state_stores()


def test_global_table_names_and_describe_like_kafka() -> None:
    """Checked against Kafka Streams 4.1.1's ``Topology.describe()`` for the same DSL calls."""
    b = StreamsBuilder()
    stream = b.stream("stream", key_serde=S, value_serde=S)
    table = b.global_table("global", key_serde=S, value_serde=S)
    stream.join(table, lambda k, v: v, lambda v1, v2: v1 + v2).to("out")
    stream.left_join(table, lambda k, v: k, lambda v1, v2: v1).to("out2")
    b.global_table("global2", consumed=Consumed(name="gt"), materialized="gt-store")
    assert str(b.build().describe()) == (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [stream])\n"
        "      --> KSTREAM-LEFTJOIN-0000000004, KSTREAM-LEFTJOIN-0000000006\n"
        "    Processor: KSTREAM-LEFTJOIN-0000000004 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000005\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-LEFTJOIN-0000000006 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000007\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Sink: KSTREAM-SINK-0000000005 (topic: out)\n"
        "      <-- KSTREAM-LEFTJOIN-0000000004\n"
        "    Sink: KSTREAM-SINK-0000000007 (topic: out2)\n"
        "      <-- KSTREAM-LEFTJOIN-0000000006\n"
        "\n"
        "  Sub-topology: 1 for global store (will not generate tasks)\n"
        "    Source: KSTREAM-SOURCE-0000000002 (topics: [global])\n"
        "      --> KTABLE-SOURCE-0000000003\n"
        "    Processor: KTABLE-SOURCE-0000000003 (stores: [global-STATE-STORE-0000000001])\n"
        "      --> none\n"
        "      <-- KSTREAM-SOURCE-0000000002\n"
        "  Sub-topology: 2 for global store (will not generate tasks)\n"
        "    Source: gt-source (topics: [global2])\n"
        "      --> gt\n"
        "    Processor: gt (stores: [gt-store])\n"
        "      --> none\n"
        "      <-- gt-source\n"
    )


def test_global_group_takes_a_sub_topology_id_in_node_order() -> None:
    """Kafka numbers node groups in insertion order, global ones included."""
    b = StreamsBuilder()
    b.global_table("global", key_serde=S, value_serde=S)
    b.stream("in").to("out")
    text = str(b.build().describe())
    assert text.index("Sub-topology: 0 for global store") < text.index("Sub-topology: 1\n")


class _Updater(Processor):
    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store("papi-store")

    def process(self, record: Record) -> None:
        self.store.put(record.key, record.value.upper())


def test_processor_api_global_store(tmp_path: Any) -> None:
    from streaming.state import Stores

    topology = Topology()
    builder = Stores.key_value_store_builder(
        Stores.in_memory_key_value_store("papi-store"), S, S
    ).with_logging_enabled({})
    topology.add_global_store(builder, "gsource", S, S, "gtopic", "gproc", _Updater)
    assert not builder.logging_enabled  # the topic is the changelog
    with pytest.raises(TopologyException, match="already been registered"):
        topology.add_source("other", "gtopic")
    with TopologyTestDriver(topology, {"state.dir": str(tmp_path)}) as driver:
        driver.create_input_topic("gtopic", S, S).pipe_input("a", "x", timestamp=1)
        assert driver.get_key_value_store("papi-store").get("a") == "X"


def test_processor_api_reads_a_global_store() -> None:
    """Like Kafka's ProcessorContextImpl: a global store is readable from any processor."""

    class Lookup(Processor):
        def init(self, context) -> None:
            super().init(context)
            self.store = context.get_state_store("profiles")

        def process(self, record: Record) -> None:
            vat = self.store.get(record.key)
            found = None if vat is None else getattr(vat, "value", vat)
            self.context.forward(record.with_value(f"{record.value}:{found}"))

    b = StreamsBuilder()
    b.global_table(
        "profiles-topic",
        materialized="profiles",
        key_serde=serdes.String(),
        value_serde=serdes.String(),
    )
    b.stream("in", key_serde=serdes.String(), value_serde=serdes.String()).process(Lookup).to(
        "out", key_serde=serdes.String(), value_serde=serdes.String()
    )
    with TopologyTestDriver(b.build()) as driver:
        string = serdes.String()
        driver.create_input_topic("profiles-topic", string, string).pipe_input("k", "gold")
        orders = driver.create_input_topic("in", string, string)
        orders.pipe_input("k", "order")
        orders.pipe_input("z", "order")
        out = driver.create_output_topic("out", string, string).read_key_values_to_list()
    assert [tuple(kv) for kv in out] == [("k", "order:gold"), ("z", "order:None")]
