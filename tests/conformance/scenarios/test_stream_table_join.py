"""KStream-KTable joins: ports of Kafka Streams 4.1's ``KStreamKTableJoinTest`` and
``KStreamKTableLeftJoinTest`` (joined records captured from an output topic), including the
versioned-table grace-period tests.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from streaming import Joined, Materialized, StreamsBuilder, TopologyTestDriver, serdes
from streaming.state import Stores

I = serdes.Integer()  # noqa: E741
S = serdes.String()
KEYS = (0, 1, 2, 3)


def tostring_joiner(v1: Any, v2: Any) -> str:
    """MockValueJoiner.TOSTRING_JOINER."""
    return f"{'null' if v1 is None else v1}+{'null' if v2 is None else v2}"


class JoinRig:
    def __init__(self, left: bool, grace_ms: int | None = None) -> None:
        b = StreamsBuilder()
        stream = b.stream("streamTopic", key_serde=I, value_serde=S)
        if grace_ms is None:
            table = b.table("tableTopic", key_serde=I, value_serde=S)
            joined = None
        else:
            table = b.table(
                "tableTopic",
                key_serde=I,
                value_serde=S,
                materialized=Materialized.as_(
                    Stores.persistent_versioned_key_value_store("V-grace", timedelta(minutes=5))
                ),
            )
            joined = Joined.with_(I, S, S, "Grace", grace_ms)
        op = stream.left_join if left else stream.join
        op(table, tostring_joiner, joined=joined).to("out", key_serde=I, value_serde=S)
        self.topology = b.build()
        self.driver = TopologyTestDriver(self.topology)
        self.stream = self.driver.create_input_topic("streamTopic", key_serde=I, value_serde=S)
        self.table = self.driver.create_input_topic("tableTopic", key_serde=I, value_serde=S)
        self.out = self.driver.create_output_topic("out", key_serde=I, value_serde=S)

    def push_stream(self, n: int, prefix: str) -> None:
        for i in range(n):
            self.stream.pipe_input(KEYS[i], f"{prefix}{KEYS[i]}", timestamp=i)

    def push_table(self, n: int, prefix: str, ts: int = 0) -> None:
        for i in range(n):
            self.table.pipe_input(KEYS[i], f"{prefix}{KEYS[i]}", timestamp=ts)

    def push_null_to_table(self) -> None:
        for i in range(2):
            self.table.pipe_input(KEYS[i], None, timestamp=0)

    def take(self) -> list[tuple[Any, Any, int]]:
        return [(r.key, r.value, r.timestamp) for r in self.out.read_records_to_list()]

    def close(self) -> None:
        self.driver.close()


@pytest.fixture
def inner() -> Any:
    rig = JoinRig(left=False)
    yield rig
    rig.close()


@pytest.fixture
def left() -> Any:
    rig = JoinRig(left=True)
    yield rig
    rig.close()


# ----------------------------------------------------------------- KStreamKTableJoinTest


def test_should_not_join_with_empty_table_on_stream_updates(inner: JoinRig) -> None:
    inner.push_stream(2, "X")
    assert inner.take() == []


def test_should_not_join_on_table_updates(inner: JoinRig) -> None:
    inner.push_stream(2, "X")
    assert inner.take() == []
    inner.push_table(2, "Y", ts=1_000_000)
    assert inner.take() == []
    inner.push_stream(4, "X")
    assert inner.take() == [(0, "X0+Y0", 0), (1, "X1+Y1", 1)]
    inner.push_table(4, "YY", ts=77)
    assert inner.take() == []
    inner.push_stream(4, "X")
    assert inner.take() == [(0, "X0+YY0", 0), (1, "X1+YY1", 1), (2, "X2+YY2", 2), (3, "X3+YY3", 3)]
    inner.push_table(4, "YYY", ts=5)
    assert inner.take() == []


def test_should_join_only_if_match_found_on_stream_updates(inner: JoinRig) -> None:
    inner.push_table(2, "Y", ts=12345)
    assert inner.take() == []
    inner.push_stream(4, "X")
    assert inner.take() == [(0, "X0+Y0", 0), (1, "X1+Y1", 1)]


def test_should_clear_table_entry_on_null_value_updates(inner: JoinRig) -> None:
    inner.push_table(4, "Y")
    inner.push_stream(4, "X")
    assert inner.take() == [(0, "X0+Y0", 0), (1, "X1+Y1", 1), (2, "X2+Y2", 2), (3, "X3+Y3", 3)]
    inner.push_null_to_table()
    assert inner.take() == []
    inner.push_stream(4, "XX")
    assert inner.take() == [(2, "XX2+Y2", 2), (3, "XX3+Y3", 3)]


def test_should_skip_null_left_key_and_value(inner: JoinRig) -> None:
    inner.push_table(2, "Y")
    inner.stream.pipe_input(None, "A", timestamp=0)
    inner.stream.pipe_input(1, None, timestamp=0)
    assert inner.take() == []


def test_should_delay_join_by_grace_period() -> None:
    rig = JoinRig(left=False, grace_ms=2)
    try:
        rig.push_table(4, "Y")
        assert rig.take() == []
        rig.push_stream(4, "X")
        assert rig.take() == [(0, "X0+Y0", 0), (1, "X1+Y1", 1)]
        rig.push_table(4, "YY")
        assert rig.take() == []
        rig.push_stream(4, "X")
        assert rig.take() == [(0, "X0+YY0", 0), (1, "X1+YY1", 1)]
        rig.stream.pipe_input(5, "test", timestamp=7)
        assert rig.take() == [
            (2, "X2+YY2", 2),
            (2, "X2+YY2", 2),
            (3, "X3+YY3", 3),
            (3, "X3+YY3", 3),
        ]
        rig.push_table(4, "YYY")
        assert rig.take() == []
    finally:
        rig.close()


def test_should_handle_late_joins_with_grace_period() -> None:
    rig = JoinRig(left=False, grace_ms=2)
    try:
        rig.push_table(4, "Y")
        rig.push_stream(4, "X")
        assert rig.take() == [(0, "X0+Y0", 0), (1, "X1+Y1", 1)]
        rig.push_stream(1, "X")  # late: joined at once, evicts nothing
        assert rig.take() == [(0, "X0+Y0", 0)]
    finally:
        rig.close()


def test_grace_joins_the_table_version_as_of_the_stream_record() -> None:
    rig = JoinRig(left=True, grace_ms=10)
    try:
        rig.table.pipe_input(0, "v1", timestamp=1)
        rig.stream.pipe_input(0, "s5", timestamp=5)
        rig.table.pipe_input(0, "v2", timestamp=4)  # out of order, still before the stream record
        rig.table.pipe_input(0, "v3", timestamp=6)
        rig.stream.pipe_input(0, "s20", timestamp=20)  # evicts s5: joined as of 5 -> v2
        assert rig.take() == [(0, "s5+v2", 5)]
    finally:
        rig.close()


def _table(b: StreamsBuilder, topic: str, materialized: Any = None) -> Any:
    return b.table(topic, key_serde=S, value_serde=S, materialized=materialized)


def test_should_fail_if_table_is_not_versioned() -> None:
    b = StreamsBuilder()
    stream = b.stream("streamTopic", key_serde=S, value_serde=S)
    table = _table(b, "tableTopic")
    with pytest.raises(ValueError, match="KTable must be versioned to use a grace period"):
        stream.join(table, tostring_joiner, joined=Joined.with_(S, S, S, "Grace", 2))


def test_should_fail_if_grace_period_is_longer_than_history_retention() -> None:
    b = StreamsBuilder()
    stream = b.stream("streamTopic", key_serde=S, value_serde=S)
    table = _table(b, "tableTopic", Materialized.as_versioned("V-grace", 0))
    with pytest.raises(ValueError, match="History retention must be at least grace period"):
        stream.join(table, tostring_joiner, joined=Joined.as_("Grace").with_grace_period(5))


EXPECTED_GENERATED_REPARTITION = """Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [topic])
      --> KSTREAM-MAP-0000000007
    Processor: KSTREAM-MAP-0000000007 (stores: [])
      --> KSTREAM-FILTER-0000000009
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-FILTER-0000000009 (stores: [])
      --> KSTREAM-SINK-0000000008
      <-- KSTREAM-MAP-0000000007
    Sink: KSTREAM-SINK-0000000008 (topic: KSTREAM-MAP-0000000007-repartition)
      <-- KSTREAM-FILTER-0000000009

  Sub-topology: 1
    Source: KSTREAM-SOURCE-0000000010 (topics: [KSTREAM-MAP-0000000007-repartition])
      --> KSTREAM-JOIN-0000000011, KSTREAM-JOIN-0000000016
    Processor: KSTREAM-JOIN-0000000011 (stores: [topic2-STATE-STORE-0000000001])
      --> KSTREAM-SINK-0000000012
      <-- KSTREAM-SOURCE-0000000010
    Processor: KSTREAM-JOIN-0000000016 (stores: [topic3-STATE-STORE-0000000004])
      --> KSTREAM-SINK-0000000017
      <-- KSTREAM-SOURCE-0000000010
    Source: KSTREAM-SOURCE-0000000002 (topics: [topic2])
      --> KTABLE-SOURCE-0000000003
    Source: KSTREAM-SOURCE-0000000005 (topics: [topic3])
      --> KTABLE-SOURCE-0000000006
    Sink: KSTREAM-SINK-0000000012 (topic: out-one)
      <-- KSTREAM-JOIN-0000000011
    Sink: KSTREAM-SINK-0000000017 (topic: out-two)
      <-- KSTREAM-JOIN-0000000016
    Processor: KTABLE-SOURCE-0000000003 (stores: [topic2-STATE-STORE-0000000001])
      --> none
      <-- KSTREAM-SOURCE-0000000002
    Processor: KTABLE-SOURCE-0000000006 (stores: [topic3-STATE-STORE-0000000004])
      --> none
      <-- KSTREAM-SOURCE-0000000005

"""


def test_should_reuse_repartition_topic_with_generated_name() -> None:
    b = StreamsBuilder()
    stream_a = b.stream("topic", key_serde=S, value_serde=S)
    table_b = _table(b, "topic2")
    table_c = _table(b, "topic3")
    rekeyed = stream_a.map(lambda k, v: (v, k))
    rekeyed.join(table_b, lambda v1, v2: v1 + v2).to("out-one")
    rekeyed.join(table_c, lambda v1, v2: v1 + v2).to("out-two")
    assert str(b.build().describe()) == EXPECTED_GENERATED_REPARTITION


def test_should_create_repartition_topics_with_user_provided_name() -> None:
    b = StreamsBuilder()
    stream_a = b.stream("topic", key_serde=S, value_serde=S)
    table_b = _table(b, "topic2")
    table_c = _table(b, "topic3")
    rekeyed = stream_a.map(lambda k, v: (v, k))
    rekeyed.join(table_b, lambda v1, v2: v1 + v2, joined=Joined.with_(S, S, S, "first-join"))
    rekeyed.join(table_c, lambda v1, v2: v1 + v2, joined=Joined.with_(S, S, S, "second-join"))
    described = str(b.build().describe())
    for name in ("first-join", "second-join"):
        assert f"Sink: {name}-repartition-sink (topic: {name}-repartition)" in described
        assert f"Source: {name}-repartition-source (topics: [{name}-repartition])" in described
        assert f"Processor: {name} (stores:" in described


# ------------------------------------------------------------- KStreamKTableLeftJoinTest


def test_left_join_with_empty_table_on_stream_updates(left: JoinRig) -> None:
    left.push_stream(2, "X")
    assert left.take() == [(0, "X0+null", 0), (1, "X1+null", 1)]


def test_left_join_regardless_of_match(left: JoinRig) -> None:
    left.push_table(2, "Y")
    assert left.take() == []
    left.push_stream(4, "X")
    assert left.take() == [(0, "X0+Y0", 0), (1, "X1+Y1", 1), (2, "X2+null", 2), (3, "X3+null", 3)]


def test_left_join_clears_table_entry_on_null_value_updates(left: JoinRig) -> None:
    left.push_table(4, "Y")
    left.push_stream(4, "X")
    assert left.take() == [(0, "X0+Y0", 0), (1, "X1+Y1", 1), (2, "X2+Y2", 2), (3, "X3+Y3", 3)]
    left.push_null_to_table()
    left.push_stream(4, "XX")
    assert left.take() == [
        (0, "XX0+null", 0),
        (1, "XX1+null", 1),
        (2, "XX2+Y2", 2),
        (3, "XX3+Y3", 3),
    ]


def test_left_join_should_not_drop_left_null_key(left: JoinRig) -> None:
    left.push_table(1, "Y")
    left.stream.pipe_input(None, "A", timestamp=0)
    assert left.take() == [(None, "A+null", 0)]


def test_left_join_skips_null_left_value(left: JoinRig) -> None:
    left.stream.pipe_input(1, None, timestamp=0)
    assert left.take() == []


def test_left_join_with_grace_fails_on_null_key_like_kafka() -> None:
    rig = JoinRig(left=True, grace_ms=2)
    try:
        with pytest.raises(Exception, match="key cannot be null"):
            rig.stream.pipe_input(None, "A", timestamp=0)
    finally:
        rig.close()


def test_stream_table_join_records_its_copartition_group() -> None:
    """Kafka's ensureCopartitionWith: the runtime checks these topics' partition counts."""
    b = StreamsBuilder()
    table = b.table("table-topic", key_serde=serdes.String(), value_serde=serdes.String())
    stream = b.stream("stream-topic", key_serde=serdes.String(), value_serde=serdes.String())
    stream.join(table, lambda v, t: v + t).to("out")
    topology = b.build()
    groups = [set(g) for g in topology.copartition_groups]
    assert any(
        {topology.nodes[n].topics[0] for n in g} == {"table-topic", "stream-topic"} for g in groups
    ), groups


# -- StreamTableJoinIntegrationTest (AbstractJoinIntegrationTest's input script) ------------

# expected (value, timestamp) output after each input of join_scripts.INPUT (None: none)
_ = None
STREAM_TABLE_IT_EXPECTED = {
    ("inner", False): [
        _, _, _, _, ("B-a", 5), _, _, _, _, _, _, _, _, _, ("D-d", 6), _, _, _,
        ("E-e", 15), _, _, _, _,
    ],
    ("left", False): [
        _, _, ("A-null", 3), _, ("B-a", 5), _, _, _, ("C-null", 9), _, _, _, _, _,
        ("D-d", 6), _, _, _, ("E-e", 15), _, _, ("F-null", 4), _,
    ],
    ("inner", True): [
        _, _, _, _, ("B-a", 5), _, _, _, _, _, _, _, _, _, ("D-b", 6), _, _, _,
        ("E-e", 15), _, _, ("F-a", 4), _,
    ],
    ("left", True): [
        _, _, ("A-null", 3), _, ("B-a", 5), _, _, _, ("C-null", 9), _, _, _, _, _,
        ("D-b", 6), _, _, _, ("E-e", 15), _, _, ("F-a", 4), _,
    ],
}  # fmt: skip


@pytest.mark.parametrize("kind", ["inner", "left"])
@pytest.mark.parametrize("versioned", [False, True], ids=["plain", "versioned"])
@pytest.mark.parametrize("cache_enabled", [False, True])
def test_integration_script(kind: str, versioned: bool, cache_enabled: bool, tmp_path) -> None:
    """StreamTableJoinIntegrationTest.testInner / testLeft / test*WithVersionedStore: every
    step's output (the stream side is never cached, so caching changes nothing)."""
    from join_scripts import INPUT, LEFT, RIGHT

    long_serde, string_serde = serdes.Long(), serdes.String()
    b = StreamsBuilder()
    left = b.stream(LEFT)
    if versioned:
        table = b.table(
            RIGHT,
            materialized=Materialized.as_(
                Stores.persistent_versioned_key_value_store("table-store", 5 * 60_000)
            ),
        )
    else:
        table = b.table(RIGHT)
    joiner = lambda v, t: f"{v}-{'null' if t is None else t}"  # noqa: E731
    (left.join if kind == "inner" else left.left_join)(table, joiner).to("outputTopic")
    config = {
        "default.key.serde": "long",
        "default.value.serde": "string",
        "state.dir": str(tmp_path),
        "statestore.cache.max.bytes": 10 * 1024 * 1024 if cache_enabled else 0,
    }
    base = 1_700_000_000_000
    expected_steps = STREAM_TABLE_IT_EXPECTED[(kind, versioned)]
    with TopologyTestDriver(b.build(), config) as driver:
        inputs = {t: driver.create_input_topic(t, long_serde, string_serde) for t in (LEFT, RIGHT)}
        out = driver.create_output_topic("outputTopic", long_serde, string_serde)
        for (topic, value, ts), expected in zip(INPUT, expected_steps, strict=True):
            inputs[topic].pipe_input(0, value, base + ts)
            got = [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]
            want = [] if expected is None else [(0, expected[0], base + expected[1])]
            assert got == want, f"after {(topic, value, ts)}"
