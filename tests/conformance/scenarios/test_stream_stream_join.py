"""KStream-KStream joins: ports of Kafka's ``KStreamKStreamJoinTest``, ``KStreamKStreamLeftJoinTest``
and ``KStreamKStreamOuterJoinTest`` (Kafka 4.1), plus the topology they build.

Kafka's tests read the joined records with a MockApiProcessor; here the join writes to "out"
and the test reads that topic: same records, same order. Keys are Integers, values Strings,
the joiner is Kafka's ``MockValueJoiner.TOSTRING_JOINER`` (``v1 + "+" + v2``, null -> "null").
Kafka's TopologyTestDriver does not throttle the emission of left/outer results; the config
below says so explicitly.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from streaming import JoinWindows, StreamJoined, StreamsBuilder, TopologyTestDriver, serdes
from streaming.dsl.processors.stream_stream_join import (
    EMIT_INTERVAL_MS_KSTREAMS_OUTER_JOIN_SPURIOUS_RESULTS_FIX,
)
from streaming.state import Stores

INT, S = serdes.Integer, serdes.String
CONFIG = {EMIT_INTERVAL_MS_KSTREAMS_OUTER_JOIN_SPURIOUS_RESULTS_FIX: 0}
KEYS = (0, 1, 2, 3)


def tostring_joiner(v1: Any, v2: Any) -> str:
    return f"{'null' if v1 is None else v1}+{'null' if v2 is None else v2}"


class Join:
    """A join of topic1 with topic2 in a TopologyTestDriver; ``read()`` drains "out"."""

    def __init__(
        self,
        kind: str,
        windows: JoinWindows,
        stream_joined: StreamJoined | None = None,
    ) -> None:
        b = StreamsBuilder()
        s1 = b.stream("topic1", key_serde=INT(), value_serde=S())
        s2 = b.stream("topic2", key_serde=INT(), value_serde=S())
        sj = stream_joined or StreamJoined.with_(INT(), S(), S())
        joined = getattr(s1, kind)(s2, tostring_joiner, windows, sj)
        joined.to("out", key_serde=INT(), value_serde=S())
        self.topology = b.build()
        self.driver = TopologyTestDriver(self.topology, CONFIG, initial_wall_clock_time_ms=0)
        self.in1 = self.driver.create_input_topic("topic1", key_serde=INT(), value_serde=S())
        self.in2 = self.driver.create_input_topic("topic2", key_serde=INT(), value_serde=S())
        self.out = self.driver.create_output_topic("out", key_serde=INT(), value_serde=S())

    def pipe1(self, key: int, value: str, ts: int) -> None:
        self.in1.pipe_input(key, value, timestamp=ts)

    def pipe2(self, key: int, value: str, ts: int) -> None:
        self.in2.pipe_input(key, value, timestamp=ts)

    def read(self) -> list[tuple[Any, Any, int]]:
        return [(r.key, r.value, r.timestamp) for r in self.out.read_records_to_list()]


@pytest.fixture
def joins() -> Iterator[list[Join]]:
    made: list[Join] = []
    yield made
    for j in made:
        j.driver.close()


def make(joins: list[Join], kind: str, windows: JoinWindows, sj: StreamJoined | None = None):
    j = Join(kind, windows, sj)
    joins.append(j)
    return j


def ms(x: int) -> int:
    return x


# ====================================================================== KStreamKStreamJoinTest


def test_inner_join(joins: list[Join]) -> None:
    """``testJoin`` (the first steps): joins of both directions, all at ts 0."""
    j = make(joins, "join", JoinWindows.of_time_difference_with_no_grace(100))
    for k in KEYS[:2]:
        j.pipe1(k, f"A{k}", 0)
    assert j.read() == []
    for k in KEYS[:2]:
        j.pipe2(k, f"a{k}", 0)
    assert j.read() == [(0, "A0+a0", 0), (1, "A1+a1", 0)]
    for k in KEYS:
        j.pipe1(k, f"B{k}", 0)
    assert j.read() == [(0, "B0+a0", 0), (1, "B1+a1", 0)]
    for k in KEYS:
        j.pipe2(k, f"b{k}", 0)
    assert j.read() == [
        (0, "A0+b0", 0),
        (0, "B0+b0", 0),
        (1, "A1+b1", 0),
        (1, "B1+b1", 0),
        (2, "B2+b2", 0),
        (3, "B3+b3", 0),
    ]


def test_asymmetric_windowing_before(joins: list[Join]) -> None:
    """``testAsymmetricWindowingBefore``: window [ts - 100, ts + 0]."""
    j = make(joins, "join", JoinWindows.of_time_difference_with_no_grace(0).before(100))
    for i, k in enumerate(KEYS):
        j.pipe1(k, f"A{k}", 1000 + i)
    assert j.read() == []
    time = 1000 - 100 - 1
    for k in KEYS:
        j.pipe2(k, f"a{k}", time)
    assert j.read() == []
    expected_by_step = [
        [(0, "A0+b0", 1000)],
        [(0, "A0+c0", 1000), (1, "A1+c1", 1001)],
        [(0, "A0+d0", 1000), (1, "A1+d1", 1001), (2, "A2+d2", 1002)],
        [(0, "A0+e0", 1000), (1, "A1+e1", 1001), (2, "A2+e2", 1002), (3, "A3+e3", 1003)],
    ]
    for letter, expected in zip("bcde", expected_by_step, strict=True):
        time += 1
        for k in KEYS:
            j.pipe2(k, f"{letter}{k}", time)
        assert j.read() == expected
    time = 1000
    expected_by_step = [
        [(0, "A0+f0", 1000), (1, "A1+f1", 1001), (2, "A2+f2", 1002), (3, "A3+f3", 1003)],
        [(1, "A1+g1", 1001), (2, "A2+g2", 1002), (3, "A3+g3", 1003)],
        [(2, "A2+h2", 1002), (3, "A3+h3", 1003)],
        [(3, "A3+i3", 1003)],
        [],
    ]
    for step, (letter, expected) in enumerate(zip("fghij", expected_by_step, strict=True)):
        if step:
            time += 1
        for k in KEYS:
            j.pipe2(k, f"{letter}{k}", time)
        assert j.read() == expected


def test_null_keys_and_values_are_dropped_by_inner_join(joins: list[Join]) -> None:
    j = make(joins, "join", JoinWindows.of_time_difference_with_no_grace(100))
    j.in1.pipe_input(None, "A", timestamp=0)
    j.pipe1(0, None, 0)  # type: ignore[arg-type]
    j.pipe2(0, "a0", 0)
    j.in2.pipe_input(None, "b", timestamp=0)
    assert j.read() == []


# ====================================================================== KStreamKStreamLeftJoinTest


def test_left_join_duplicates(joins: list[Join]) -> None:
    """``testLeftJoinDuplicates``."""
    j = make(joins, "left_join", JoinWindows.of_time_difference_and_grace(100, 10))
    # non-joined duplicates are emitted when the window has closed
    j.pipe1(0, "A0", 0)
    j.pipe1(0, "A0-0", 0)
    j.pipe2(1, "a0", 111)
    j.pipe2(2, "dummy", 500)  # bump stream time
    assert j.read() == [(0, "A0+null", 0), (0, "A0-0+null", 0)]
    # joined duplicates are emitted
    j.pipe1(2, "A2", 1000)
    j.pipe1(2, "A2-0", 1000)
    j.pipe2(2, "a2", 1001)
    assert j.read() == [(2, "A2+a2", 1001), (2, "A2-0+a2", 1001)]
    # expires non-joined records, but A2 and A2-0 were joined already
    j.pipe2(3, "a3", 315)
    assert j.read() == []


@pytest.mark.parametrize("dummy_side", [1, 2])
def test_left_expired_non_joined_records_are_emitted_by_either_processor(
    joins: list[Join], dummy_side: int
) -> None:
    """``testLeftExpiredNonJoinedRecordsAreEmittedByTheLeftProcessor`` / ``...RightProcessor``."""
    j = make(joins, "left_join", JoinWindows.of_time_difference_and_grace(100, 0))
    j.pipe1(0, "A0", 1)
    j.pipe1(1, "A1", 2)
    j.pipe1(0, "A0-0", 3)
    assert j.read() == []
    j.pipe2(1, "a1", 3)
    assert j.read() == [(1, "A1+a1", 3)]
    (j.pipe1 if dummy_side == 1 else j.pipe2)(2, "dummy", 401)
    assert j.read() == [(0, "A0+null", 1), (0, "A0-0+null", 3)]
    if dummy_side == 1:
        j.pipe2(2, "dummy", 401)
        assert j.read() == [(2, "dummy+dummy", 401)]
    else:
        j.pipe1(2, "dummy", 402)
        assert j.read() == [(2, "dummy+dummy", 402)]


@pytest.mark.parametrize("dummy_side", [1, 2])
def test_right_non_joined_records_are_never_emitted(joins: list[Join], dummy_side: int) -> None:
    """``testRightNonJoinedRecordsAreNeverEmittedByTheLeftProcessor`` / ``...RightProcessor``."""
    windows = (
        JoinWindows.of_time_difference_and_grace(100, 0)
        if dummy_side == 1
        else JoinWindows.of_time_difference_with_no_grace(100)
    )
    j = make(joins, "left_join", windows)
    j.pipe2(0, "A0", 1)
    j.pipe2(1, "A1", 2)
    j.pipe2(0, "A0-0", 3)
    assert j.read() == []
    j.pipe1(1, "a1", 3)
    assert j.read() == [(1, "a1+A1", 3)]
    (j.pipe1 if dummy_side == 1 else j.pipe2)(2, "dummy", 401)
    assert j.read() == []
    (j.pipe2 if dummy_side == 1 else j.pipe1)(2, "dummy", 402)
    assert j.read() == [(2, "dummy+dummy", 402)]


def test_left_joined_records_with_zero_after_are_emitted(joins: list[Join]) -> None:
    """``testLeftJoinedRecordsWithZeroAfterAreEmitted``."""
    j = make(joins, "left_join", JoinWindows.of_time_difference_with_no_grace(100).after(0))
    for i, k in enumerate(KEYS):
        j.pipe1(k, f"A{k}", 1000 + i)
    assert j.read() == [(0, "A0+null", 1000), (1, "A1+null", 1001), (2, "A2+null", 1002)]
    time = 999
    for k in KEYS:
        j.pipe2(k, f"a{k}", time)
    assert j.read() == [(k, f"A{k}+a{k}", 1000 + k) for k in KEYS]
    expected = [KEYS, KEYS[1:], KEYS[2:], KEYS[3:]]
    for letter, keys in zip("bcde", expected, strict=True):
        time += 1
        for k in KEYS:
            j.pipe2(k, f"{letter}{k}", time)
        assert j.read() == [(k, f"A{k}+{letter}{k}", 1000 + k) for k in keys]
    for k in KEYS:
        j.pipe2(k, f"f{k}", 1100)
    assert j.read() == []


# ====================================================================== KStreamKStreamOuterJoinTest


def test_outer_join_duplicates(joins: list[Join]) -> None:
    """``testOuterJoinDuplicates``."""
    j = make(joins, "outer_join", JoinWindows.of_time_difference_and_grace(100, 10))
    j.pipe1(0, "A0", 0)
    j.pipe1(0, "A0-0", 0)
    j.pipe2(1, "a1", 0)
    j.pipe2(1, "a1-0", 0)
    j.pipe2(1, "a0", 111)
    j.pipe2(3, "dummy", 211)  # bump stream time
    # right before left at the same timestamp: the store orders by <ts><side><key>
    assert j.read() == [
        (1, "null+a1", 0),
        (1, "null+a1-0", 0),
        (0, "A0+null", 0),
        (0, "A0-0+null", 0),
    ]
    j.pipe1(2, "A2", 200)
    j.pipe1(2, "A2-0", 200)
    j.pipe2(2, "a2", 201)
    j.pipe2(2, "a2-0", 201)
    assert j.read() == [
        (2, "A2+a2", 201),
        (2, "A2-0+a2", 201),
        (2, "A2+a2-0", 201),
        (2, "A2-0+a2-0", 201),
    ]
    j.pipe2(3, "dummy", 1500)
    assert j.read() == [(1, "null+a0", 111), (3, "null+dummy", 211)]


@pytest.mark.parametrize("dummy_side", [1, 2])
def test_outer_left_expired_records_are_emitted_by_either_processor(
    joins: list[Join], dummy_side: int
) -> None:
    """Outer ``testLeftExpiredNonJoinedRecordsAreEmittedByTheLeftProcessor`` / ``...Right...``."""
    windows = (
        JoinWindows.of_time_difference_with_no_grace(100)
        if dummy_side == 1
        else JoinWindows.of_time_difference_and_grace(100, 0)
    )
    j = make(joins, "outer_join", windows)
    j.pipe1(0, "A0", 1)
    j.pipe1(1, "A1", 2)
    j.pipe1(0, "A0-0", 3)
    assert j.read() == []
    j.pipe2(1, "a1", 3)
    assert j.read() == [(1, "A1+a1", 3)]
    (j.pipe1 if dummy_side == 1 else j.pipe2)(2, "dummy", 401)
    assert j.read() == [(0, "A0+null", 1), (0, "A0-0+null", 3)]
    if dummy_side == 1:
        j.pipe2(2, "dummy", 401)
        assert j.read() == [(2, "dummy+dummy", 401)]
    else:
        j.pipe1(2, "dummy", 402)
        assert j.read() == [(2, "dummy+dummy", 402)]


@pytest.mark.parametrize("dummy_side", [1, 2])
def test_outer_right_expired_records_are_emitted_by_either_processor(
    joins: list[Join], dummy_side: int
) -> None:
    """``testRightExpiredNonJoinedRecordsAreEmittedByTheLeftProcessor`` / ``...Right...``."""
    windows = (
        JoinWindows.of_time_difference_with_no_grace(100)
        if dummy_side == 1
        else JoinWindows.of_time_difference_and_grace(100, 0)
    )
    j = make(joins, "outer_join", windows)
    j.pipe2(0, "A0", 1)
    j.pipe2(1, "A1", 2)
    j.pipe2(0, "A0-0", 3)
    assert j.read() == []
    j.pipe1(1, "a1", 3)
    assert j.read() == [(1, "a1+A1", 3)]
    (j.pipe1 if dummy_side == 1 else j.pipe2)(2, "dummy", 401)
    assert j.read() == [(0, "null+A0", 1), (0, "null+A0-0", 3)]
    (j.pipe2 if dummy_side == 1 else j.pipe1)(2, "dummy", 402)
    assert j.read() == [(2, "dummy+dummy", 402)]


def test_outer_ordering(joins: list[Join]) -> None:
    """``testOrdering``: non-joined records whose window closed come before the new join."""
    j = make(joins, "outer_join", JoinWindows.of_time_difference_with_no_grace(100))
    j.pipe1(0, "A0", 0)
    j.pipe1(1, "A1", 100)
    assert j.read() == []
    j.pipe2(1, "a1", 110)
    assert j.read() == [(0, "A0+null", 0), (1, "A1+a1", 110)]


def test_outer_grace_period(joins: list[Join]) -> None:
    """``testGracePeriod``: nothing is emitted before window end + grace."""
    j = make(joins, "outer_join", JoinWindows.of_time_difference_and_grace(100, 10))
    j.pipe1(0, "A0", 0)
    j.pipe2(1, "a1", 0)
    assert j.read() == []
    j.pipe2(0, "a0", 101)
    j.pipe1(1, "A1", 101)
    assert j.read() == []
    j.pipe2(0, "dummy", 211)
    assert j.read() == [(1, "null+a1", 0), (0, "A0+null", 0)]


@pytest.mark.parametrize("suppliers", ["default", "in_memory_custom"])
def test_run_outer_join(joins: list[Join], suppliers: str) -> None:
    """``testOuterJoinWithDefaultSuppliers`` / ``testOuterJoinWithInMemoryCustomSuppliers``."""
    windows = JoinWindows.of_time_difference_with_no_grace(100)
    sj = StreamJoined.with_(INT(), S(), S())
    if suppliers == "in_memory_custom":
        size = windows.size()
        retention = size + windows.grace_period_ms()
        sj = sj.with_this_store_supplier(
            Stores.in_memory_window_store("in-memory-join-store", retention, size, True)
        ).with_other_store_supplier(
            Stores.in_memory_window_store("in-memory-join-store-other", retention, size, True)
        )
    j = make(joins, "outer_join", windows, sj)
    assert len(j.topology.store_builders) == 3  # 2 window stores + the shared outer store
    for k in KEYS[:2]:
        j.pipe1(k, f"A{k}", 0)
    assert j.read() == []
    for k in KEYS[:2]:
        j.pipe2(k, f"a{k}", 0)
    assert j.read() == [(0, "A0+a0", 0), (1, "A1+a1", 0)]
    for k in KEYS[:3]:
        j.pipe1(k, f"B{k}", 0)
    assert j.read() == [(0, "B0+a0", 0), (1, "B1+a1", 0)]
    for k in KEYS:
        j.pipe2(k, f"b{k}", 0)
    assert j.read() == [
        (0, "A0+b0", 0),
        (0, "B0+b0", 0),
        (1, "A1+b1", 0),
        (1, "B1+b1", 0),
        (2, "B2+b2", 0),
    ]
    for k in KEYS:
        j.pipe1(k, f"C{k}", 0)
    assert j.read() == [
        (0, "C0+a0", 0),
        (0, "C0+b0", 0),
        (1, "C1+a1", 0),
        (1, "C1+b1", 0),
        (2, "C2+b2", 0),
        (3, "C3+b3", 0),
    ]
    # everything was joined: expiring the store emits nothing
    j.pipe1(0, "dummy", 400)
    assert j.read() == []
    if suppliers == "in_memory_custom":
        assert "in-memory-join-store-outer-shared-join-store" in j.topology.store_builders


def test_outer_null_key_is_joined_with_null_at_once(joins: list[Join]) -> None:
    """KIP-962: left/outer joins forward a null-key record joined with null right away."""
    j = make(joins, "outer_join", JoinWindows.of_time_difference_with_no_grace(100))
    j.in1.pipe_input(None, "A", timestamp=5)
    j.in2.pipe_input(None, "b", timestamp=6)
    j.pipe1(0, None, 7)  # type: ignore[arg-type]  # null values are dropped
    assert j.read() == [(None, "A+null", 5), (None, "null+b", 6)]


def test_emit_throttle_uses_the_wall_clock() -> None:
    """With the default interval (1000 ms), a sweep runs at most once per wall-clock second."""
    b = StreamsBuilder()
    s1 = b.stream("topic1", key_serde=INT(), value_serde=S())
    s2 = b.stream("topic2", key_serde=INT(), value_serde=S())
    s1.left_join(
        s2,
        tostring_joiner,
        JoinWindows.of_time_difference_with_no_grace(10),
        StreamJoined.with_(INT(), S(), S()),
    ).to("out", key_serde=INT(), value_serde=S())
    config = {EMIT_INTERVAL_MS_KSTREAMS_OUTER_JOIN_SPURIOUS_RESULTS_FIX: 1000}
    with TopologyTestDriver(b.build(), config, initial_wall_clock_time_ms=0) as driver:
        in1 = driver.create_input_topic("topic1", key_serde=INT(), value_serde=S())
        out = driver.create_output_topic("out", key_serde=INT(), value_serde=S())

        def read() -> list[tuple[Any, Any, int]]:
            return [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]

        in1.pipe_input(0, "A", timestamp=0)
        in1.pipe_input(1, "B", timestamp=100)  # first sweep: emits A
        assert read() == [(0, "A+null", 0)]
        in1.pipe_input(2, "C", timestamp=200)  # throttled: B waits
        assert read() == []
        driver.advance_wall_clock_time(1000)
        in1.pipe_input(3, "D", timestamp=300)
        assert read() == [(1, "B+null", 100), (2, "C+null", 200)]


# ====================================================================== describe()
# The Java texts below were produced once with Kafka Streams 4.1.1 (the jars of
# tests/conformance/java/pom.xml): a small Java program built each topology exactly like the
# Python twin in DESCRIBE_CASES and printed ``builder.build().describe()``.

JAVA_DESCRIBE = {
    "inner": (
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
    "left_named_rekey": (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [left])\n"
        "      --> KSTREAM-KEY-SELECT-0000000002\n"
        "    Processor: KSTREAM-KEY-SELECT-0000000002 (stores: [])\n"
        "      --> j-left-repartition-filter\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: j-left-repartition-filter (stores: [])\n"
        "      --> j-left-repartition-sink\n"
        "      <-- KSTREAM-KEY-SELECT-0000000002\n"
        "    Sink: j-left-repartition-sink (topic: j-left-repartition)\n"
        "      <-- j-left-repartition-filter\n"
        "\n"
        "  Sub-topology: 1\n"
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [right])\n"
        "      --> j-other-windowed\n"
        "    Source: j-left-repartition-source (topics: [j-left-repartition])\n"
        "      --> j-this-windowed\n"
        "    Processor: j-other-windowed (stores: [js-outer-other-join-store])\n"
        "      --> j-outer-other-join\n"
        "      <-- KSTREAM-SOURCE-0000000001\n"
        "    Processor: j-this-windowed (stores: [js-this-join-store])\n"
        "      --> j-this-join\n"
        "      <-- j-left-repartition-source\n"
        "    Processor: j-outer-other-join (stores: [js-left-shared-join-store, js-this-join-store])\n"
        "      --> j-merge\n"
        "      <-- j-other-windowed\n"
        "    Processor: j-this-join (stores: [js-left-shared-join-store, js-outer-other-join-store])\n"
        "      --> j-merge\n"
        "      <-- j-this-windowed\n"
        "    Processor: j-merge (stores: [])\n"
        "      --> KSTREAM-SINK-0000000011\n"
        "      <-- j-this-join, j-outer-other-join\n"
        "    Sink: KSTREAM-SINK-0000000011 (topic: out)\n"
        "      <-- j-merge\n"
        "\n"
    ),
    "outer_self_rekey": (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [left])\n"
        "      --> KSTREAM-KEY-SELECT-0000000001\n"
        "    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])\n"
        "      --> KSTREAM-FILTER-0000000003\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-FILTER-0000000003 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000002\n"
        "      <-- KSTREAM-KEY-SELECT-0000000001\n"
        "    Sink: KSTREAM-SINK-0000000002 (topic: KSTREAM-KEY-SELECT-0000000001-repartition)\n"
        "      <-- KSTREAM-FILTER-0000000003\n"
        "\n"
        "  Sub-topology: 1\n"
        "    Source: KSTREAM-SOURCE-0000000004 (topics: [KSTREAM-KEY-SELECT-0000000001-repartition])\n"
        "      --> KSTREAM-WINDOWED-0000000008, KSTREAM-WINDOWED-0000000009\n"
        "    Processor: KSTREAM-WINDOWED-0000000008 (stores: [KSTREAM-OUTERTHIS-0000000010-store])\n"
        "      --> KSTREAM-OUTERTHIS-0000000010\n"
        "      <-- KSTREAM-SOURCE-0000000004\n"
        "    Processor: KSTREAM-WINDOWED-0000000009 (stores: [KSTREAM-OUTEROTHER-0000000011-store])\n"
        "      --> KSTREAM-OUTEROTHER-0000000011\n"
        "      <-- KSTREAM-SOURCE-0000000004\n"
        "    Processor: KSTREAM-OUTEROTHER-0000000011 (stores: [KSTREAM-OUTERSHARED-0000000010-store, KSTREAM-OUTERTHIS-0000000010-store])\n"
        "      --> KSTREAM-MERGE-0000000012\n"
        "      <-- KSTREAM-WINDOWED-0000000009\n"
        "    Processor: KSTREAM-OUTERTHIS-0000000010 (stores: [KSTREAM-OUTERSHARED-0000000010-store, KSTREAM-OUTEROTHER-0000000011-store])\n"
        "      --> KSTREAM-MERGE-0000000012\n"
        "      <-- KSTREAM-WINDOWED-0000000008\n"
        "    Processor: KSTREAM-MERGE-0000000012 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000013\n"
        "      <-- KSTREAM-OUTERTHIS-0000000010, KSTREAM-OUTEROTHER-0000000011\n"
        "    Sink: KSTREAM-SINK-0000000013 (topic: out)\n"
        "      <-- KSTREAM-MERGE-0000000012\n"
        "\n"
    ),
    "reuse_right_repartition": (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [left])\n"
        "      --> KSTREAM-WINDOWED-0000000006, KSTREAM-WINDOWED-0000000015\n"
        "    Source: KSTREAM-SOURCE-0000000005 (topics: [KSTREAM-KEY-SELECT-0000000002-repartition])\n"
        "      --> KSTREAM-WINDOWED-0000000007, KSTREAM-WINDOWED-0000000016\n"
        "    Processor: KSTREAM-WINDOWED-0000000006 (stores: [KSTREAM-JOINTHIS-0000000008-store])\n"
        "      --> KSTREAM-JOINTHIS-0000000008\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-WINDOWED-0000000007 (stores: [KSTREAM-JOINOTHER-0000000009-store])\n"
        "      --> KSTREAM-JOINOTHER-0000000009\n"
        "      <-- KSTREAM-SOURCE-0000000005\n"
        "    Processor: KSTREAM-WINDOWED-0000000015 (stores: [KSTREAM-JOINTHIS-0000000017-store])\n"
        "      --> KSTREAM-JOINTHIS-0000000017\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        "    Processor: KSTREAM-WINDOWED-0000000016 (stores: [KSTREAM-OUTEROTHER-0000000018-store])\n"
        "      --> KSTREAM-OUTEROTHER-0000000018\n"
        "      <-- KSTREAM-SOURCE-0000000005\n"
        "    Processor: KSTREAM-JOINOTHER-0000000009 (stores: [KSTREAM-JOINTHIS-0000000008-store])\n"
        "      --> KSTREAM-MERGE-0000000010\n"
        "      <-- KSTREAM-WINDOWED-0000000007\n"
        "    Processor: KSTREAM-JOINTHIS-0000000008 (stores: [KSTREAM-JOINOTHER-0000000009-store])\n"
        "      --> KSTREAM-MERGE-0000000010\n"
        "      <-- KSTREAM-WINDOWED-0000000006\n"
        "    Processor: KSTREAM-JOINTHIS-0000000017 (stores: [KSTREAM-OUTEROTHER-0000000018-store, KSTREAM-OUTERSHARED-0000000017-store])\n"
        "      --> KSTREAM-MERGE-0000000019\n"
        "      <-- KSTREAM-WINDOWED-0000000015\n"
        "    Processor: KSTREAM-OUTEROTHER-0000000018 (stores: [KSTREAM-JOINTHIS-0000000017-store, KSTREAM-OUTERSHARED-0000000017-store])\n"
        "      --> KSTREAM-MERGE-0000000019\n"
        "      <-- KSTREAM-WINDOWED-0000000016\n"
        "    Processor: KSTREAM-MERGE-0000000010 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000011\n"
        "      <-- KSTREAM-JOINTHIS-0000000008, KSTREAM-JOINOTHER-0000000009\n"
        "    Processor: KSTREAM-MERGE-0000000019 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000020\n"
        "      <-- KSTREAM-JOINTHIS-0000000017, KSTREAM-OUTEROTHER-0000000018\n"
        "    Sink: KSTREAM-SINK-0000000011 (topic: out)\n"
        "      <-- KSTREAM-MERGE-0000000010\n"
        "    Sink: KSTREAM-SINK-0000000020 (topic: out2)\n"
        "      <-- KSTREAM-MERGE-0000000019\n"
        "\n"
        "  Sub-topology: 1\n"
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [right])\n"
        "      --> KSTREAM-KEY-SELECT-0000000002\n"
        "    Processor: KSTREAM-KEY-SELECT-0000000002 (stores: [])\n"
        "      --> KSTREAM-FILTER-0000000004\n"
        "      <-- KSTREAM-SOURCE-0000000001\n"
        "    Processor: KSTREAM-FILTER-0000000004 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000003\n"
        "      <-- KSTREAM-KEY-SELECT-0000000002\n"
        "    Sink: KSTREAM-SINK-0000000003 (topic: KSTREAM-KEY-SELECT-0000000002-repartition)\n"
        "      <-- KSTREAM-FILTER-0000000004\n"
        "\n"
    ),
}


def _describe_inner(b: StreamsBuilder) -> None:
    left = b.stream("left", key_serde=S(), value_serde=serdes.Long())
    right = b.stream("right", key_serde=S(), value_serde=serdes.Long())
    left.join(right, lambda x, y: x + y, JoinWindows.of_time_difference_with_no_grace(10)).to("out")


def _describe_left_named_rekey(b: StreamsBuilder) -> None:
    left = b.stream("left", key_serde=S(), value_serde=serdes.Long())
    right = b.stream("right", key_serde=S(), value_serde=serdes.Long())
    sj = StreamJoined.with_(S(), serdes.Long(), serdes.Long()).with_name("j").with_store_name("js")
    left.select_key(lambda k, v: k + "x").left_join(
        right, lambda x, y: x, JoinWindows.of_time_difference_and_grace(10, 5), sj
    ).to("out")


def _describe_outer_self_rekey(b: StreamsBuilder) -> None:
    keyed = b.stream("left", key_serde=S(), value_serde=serdes.Long()).select_key(
        lambda k, v: k + "x"
    )
    keyed.outer_join(keyed, lambda x, y: x, JoinWindows.of_time_difference_with_no_grace(10)).to(
        "out"
    )


def _describe_reuse_right_repartition(b: StreamsBuilder) -> None:
    left = b.stream("left", key_serde=S(), value_serde=serdes.Long())
    keyed = b.stream("right", key_serde=S(), value_serde=serdes.Long()).select_key(
        lambda k, v: k + "x"
    )
    windows = JoinWindows.of_time_difference_with_no_grace(10)
    left.join(keyed, lambda x, y: x, windows).to("out")
    left.left_join(keyed, lambda x, y: x, windows).to("out2")


DESCRIBE_CASES = {
    "inner": _describe_inner,
    "left_named_rekey": _describe_left_named_rekey,
    "outer_self_rekey": _describe_outer_self_rekey,
    "reuse_right_repartition": _describe_reuse_right_repartition,
}


def _normalized(text: str) -> list[str]:
    """The description with every list (stores, successors, predecessors) sorted: Kafka prints
    them in HashSet / mutated-TreeSet order, which says nothing about the topology."""
    lines = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("-->", "<--")):
            head, names = stripped[:3], stripped[4:]
            line = f"{head} {', '.join(sorted(names.split(', ')))}"
        elif "(stores: [" in stripped:
            head, stores = stripped.split("(stores: [", 1)
            stores = stores.rstrip("])")
            line = f"{head}(stores: [{', '.join(sorted(stores.split(', ')))}])"
        lines.append(line)
    return lines


def _describe(case: str) -> str:
    b = StreamsBuilder()
    DESCRIBE_CASES[case](b)
    return str(b.build().describe())


@pytest.mark.parametrize("case", list(DESCRIBE_CASES))
def test_describe_has_kafkas_nodes_names_stores_and_subtopologies(case: str) -> None:
    assert _normalized(_describe(case)) == _normalized(JAVA_DESCRIBE[case])


@pytest.mark.parametrize("case", list(DESCRIBE_CASES))
def test_describe_text_is_kafkas(case: str) -> None:
    """Exactly Kafka's text, list order included."""
    assert _describe(case) == JAVA_DESCRIBE[case]
