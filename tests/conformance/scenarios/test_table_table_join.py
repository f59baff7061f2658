"""KTable-KTable joins on the primary key: ports of Kafka Streams 4.1's
``KTableKTableInnerJoinTest``, ``KTableKTableLeftJoinTest`` and ``KTableKTableOuterJoinTest``
(caching disabled, as ``StreamsTestUtils.getStreamsConfig`` does). The three tests share one
input script; a recording processor on the join node sees the ``Change``s where the Kafka test
uses ``MockApiProcessorSupplier``.
"""

from __future__ import annotations

from typing import Any

import pytest

from streaming import Materialized, Named, StreamsBuilder, TopologyTestDriver, serdes
from streaming.topology.processor import Processor, Record

I = serdes.Integer()  # noqa: E741
S = serdes.String()
NO_CACHE = {"statestore.cache.max.bytes": 0}
KEYS = [0, 1, 2, 3]


def tostring_joiner(left: Any, right: Any) -> str:
    """MockValueJoiner.TOSTRING_JOINER: ``left + "+" + right`` with Java's "null"."""
    return f"{'null' if left is None else left}+{'null' if right is None else right}"


class Recorder:
    """MockApiProcessorSupplier: (key, new, old, timestamp) of every Change it sees."""

    def __init__(self) -> None:
        self.processed: list[tuple[Any, Any, Any, int]] = []

    def __call__(self) -> Processor:
        rec = self

        class _P(Processor):
            def process(self, record: Record) -> None:
                c = record.value
                rec.processed.append((record.key, c.new_value, c.old_value, record.timestamp))

        return _P()

    def take(self) -> list[tuple[Any, Any, Any, int]]:
        out, self.processed = self.processed, []
        return out


def _script(pipe1: Any, pipe2: Any, check: Any) -> None:
    """The shared input script; ``check(step)`` is called after each step."""
    for i in range(2):
        pipe1(KEYS[i], f"X{KEYS[i]}", 5 + i)
    pipe1(None, "SomeVal", 42)  # null key: discarded by the join
    check(0)
    for i in range(2):
        pipe2(KEYS[i], f"Y{KEYS[i]}", 10 * i)
    pipe2(None, "AnotherVal", 73)
    check(1)
    for k in KEYS:
        pipe1(k, f"XX{k}", 7)
    check(2)
    for k in KEYS:
        pipe2(k, f"YY{k}", k * 5)
    check(3)
    for k in KEYS:
        pipe1(k, f"XXX{k}", 6)
    check(4)
    pipe2(KEYS[0], None, 5)
    pipe2(KEYS[1], None, 7)
    check(5)
    for k in KEYS:
        pipe1(k, f"XXXX{k}", 13)
    check(6)
    pipe1(KEYS[0], None, 0)
    pipe1(KEYS[1], None, 42)
    pipe1(KEYS[2], None, 5)
    pipe1(KEYS[3], None, 20)
    check(7)


# expected output records (key, value, timestamp) after each step of the script
OUTPUT = {
    "inner": [
        [],
        [(0, "X0+Y0", 5), (1, "X1+Y1", 10)],
        [(0, "XX0+Y0", 7), (1, "XX1+Y1", 10)],
        [(0, "XX0+YY0", 7), (1, "XX1+YY1", 7), (2, "XX2+YY2", 10), (3, "XX3+YY3", 15)],
        [(0, "XXX0+YY0", 6), (1, "XXX1+YY1", 6), (2, "XXX2+YY2", 10), (3, "XXX3+YY3", 15)],
        [(0, None, 6), (1, None, 7)],
        [(2, "XXXX2+YY2", 13), (3, "XXXX3+YY3", 15)],
        [(2, None, 10), (3, None, 20)],
    ],
    "left": [
        [(0, "X0+null", 5), (1, "X1+null", 6)],
        [(0, "X0+Y0", 5), (1, "X1+Y1", 10)],
        [(0, "XX0+Y0", 7), (1, "XX1+Y1", 10), (2, "XX2+null", 7), (3, "XX3+null", 7)],
        [(0, "XX0+YY0", 7), (1, "XX1+YY1", 7), (2, "XX2+YY2", 10), (3, "XX3+YY3", 15)],
        [(0, "XXX0+YY0", 6), (1, "XXX1+YY1", 6), (2, "XXX2+YY2", 10), (3, "XXX3+YY3", 15)],
        [(0, "XXX0+null", 6), (1, "XXX1+null", 7)],
        [(0, "XXXX0+null", 13), (1, "XXXX1+null", 13), (2, "XXXX2+YY2", 13),
         (3, "XXXX3+YY3", 15)],
        [(0, None, 0), (1, None, 42), (2, None, 10), (3, None, 20)],
    ],
    "outer": [
        [(0, "X0+null", 5), (1, "X1+null", 6)],
        [(0, "X0+Y0", 5), (1, "X1+Y1", 10)],
        [(0, "XX0+Y0", 7), (1, "XX1+Y1", 10), (2, "XX2+null", 7), (3, "XX3+null", 7)],
        [(0, "XX0+YY0", 7), (1, "XX1+YY1", 7), (2, "XX2+YY2", 10), (3, "XX3+YY3", 15)],
        [(0, "XXX0+YY0", 6), (1, "XXX1+YY1", 6), (2, "XXX2+YY2", 10), (3, "XXX3+YY3", 15)],
        [(0, "XXX0+null", 6), (1, "XXX1+null", 7)],
        [(0, "XXXX0+null", 13), (1, "XXXX1+null", 13), (2, "XXXX2+YY2", 13),
         (3, "XXXX3+YY3", 15)],
        [(0, None, 0), (1, None, 42), (2, "null+YY2", 10), (3, "null+YY3", 20)],
    ],
}  # fmt: skip


def _join(kind: str, t1: Any, t2: Any, **kwargs: Any) -> Any:
    op = {"inner": t1.join, "left": t1.left_join, "outer": t1.outer_join}[kind]
    return op(t2, tostring_joiner, **kwargs)


def _run(b: StreamsBuilder, tmp_path: Any, check: Any) -> None:
    cfg = {"state.dir": str(tmp_path), **NO_CACHE}
    with TopologyTestDriver(b.build(), cfg, initial_wall_clock_time_ms=0) as d:
        in1 = d.create_input_topic("topic1", I, S)
        in2 = d.create_input_topic("topic2", I, S)
        out = d.create_output_topic("output", I, S)
        _script(
            lambda k, v, ts: in1.pipe_input(k, v, ts),
            lambda k, v, ts: in2.pipe_input(k, v, ts),
            lambda step: check(step, out),
        )


@pytest.mark.parametrize("kind", ["inner", "left", "outer"])
@pytest.mark.parametrize("variant", ["plain", "queryable", "named"])
def test_join(kind: str, variant: str, tmp_path: Any) -> None:
    """testJoin / testQueryableJoin: the joined table's changelog, tombstones included."""
    b = StreamsBuilder()
    t1 = b.table("topic1", key_serde=I, value_serde=S)
    t2 = b.table("topic2", key_serde=I, value_serde=S)
    kwargs: dict[str, Any] = {}
    if variant == "queryable":
        kwargs["materialized"] = Materialized.with_(I, S)
    elif variant == "named":
        kwargs["named"] = Named.as_("my-join")
    _join(kind, t1, t2, **kwargs).to_stream().to("output", key_serde=I, value_serde=S)

    def check(step: int, out: Any) -> None:
        got = [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]
        assert got == OUTPUT[kind][step], f"step {step}"

    _run(b, tmp_path, check)


# testNotSendingOldValue(s): the join forwards Change(new, null)
# testSendingOldValue(s): after enableSendingOldValues the join forwards Change(new, old)
CHANGES_WITH_OLD = {
    "inner": [
        [],
        [(0, "X0+Y0", None, 5), (1, "X1+Y1", None, 10)],
        [(0, "XX0+Y0", "X0+Y0", 7), (1, "XX1+Y1", "X1+Y1", 10)],
        [(0, "XX0+YY0", "XX0+Y0", 7), (1, "XX1+YY1", "XX1+Y1", 7), (2, "XX2+YY2", None, 10),
         (3, "XX3+YY3", None, 15)],
        [(0, "XXX0+YY0", "XX0+YY0", 6), (1, "XXX1+YY1", "XX1+YY1", 6),
         (2, "XXX2+YY2", "XX2+YY2", 10), (3, "XXX3+YY3", "XX3+YY3", 15)],
        [(0, None, "XXX0+YY0", 6), (1, None, "XXX1+YY1", 7)],
        [(2, "XXXX2+YY2", "XXX2+YY2", 13), (3, "XXXX3+YY3", "XXX3+YY3", 15)],
        [(2, None, "XXXX2+YY2", 10), (3, None, "XXXX3+YY3", 20)],
    ],
    "outer_first_steps": [
        [(0, "X0+null", None, 5), (1, "X1+null", None, 6)],
        [(0, "X0+Y0", "X0+null", 5), (1, "X1+Y1", "X1+null", 10)],
    ],
}  # fmt: skip


@pytest.mark.parametrize("kind", ["inner", "left", "outer"])
@pytest.mark.parametrize("materialized", [False, True])
def test_not_sending_old_values(kind: str, materialized: bool, tmp_path: Any) -> None:
    """testNotSendingOldValues / testQueryableNotSendingOldValues."""
    b = StreamsBuilder()
    t1 = b.table("topic1", key_serde=I, value_serde=S)
    t2 = b.table("topic2", key_serde=I, value_serde=S)
    kwargs = {"materialized": Materialized.with_(I, S)} if materialized else {}
    joined = _join(kind, t1, t2, **kwargs)
    recorder = Recorder()
    b.build().add_processor("proc", recorder, joined.name)
    # left and outer joins need the left side's old values; nobody asked for the join's
    assert t1.supplier.send_old_values is (kind != "inner")
    assert t2.supplier.send_old_values is (kind == "outer")
    assert joined.supplier.send_old_values is False

    def check(step: int, out: Any) -> None:
        expected = [(k, v, None, ts) for k, v, ts in OUTPUT[kind][step]]
        assert recorder.take() == expected, f"step {step}"

    _run(b, tmp_path, check)


def test_inner_join_sending_old_values(tmp_path: Any) -> None:
    """KTableKTableInnerJoinTest.testSendingOldValues."""
    b = StreamsBuilder()
    t1 = b.table("topic1", key_serde=I, value_serde=S)
    t2 = b.table("topic2", key_serde=I, value_serde=S)
    joined = t1.join(t2, tostring_joiner)
    joined.supplier.enable_sending_old_values(True)
    recorder = Recorder()
    b.build().add_processor("proc", recorder, joined.name)
    assert t1.supplier.send_old_values and t2.supplier.send_old_values

    def check(step: int, out: Any) -> None:
        assert recorder.take() == CHANGES_WITH_OLD["inner"][step], f"step {step}"

    _run(b, tmp_path, check)


def test_outer_join_sending_old_values_first_steps(tmp_path: Any) -> None:
    """KTableKTableOuterJoinTest.testSendingOldValue (its first two steps)."""
    b = StreamsBuilder()
    t1 = b.table("topic1", key_serde=I, value_serde=S)
    t2 = b.table("topic2", key_serde=I, value_serde=S)
    joined = t1.outer_join(t2, tostring_joiner)
    joined.supplier.enable_sending_old_values(True)
    recorder = Recorder()
    b.build().add_processor("proc", recorder, joined.name)

    def check(step: int, out: Any) -> None:
        if step < 2:
            assert recorder.take() == CHANGES_WITH_OLD["outer_first_steps"][step], f"step {step}"
        else:
            recorder.take()

    _run(b, tmp_path, check)


def test_join_names_and_stores() -> None:
    """KTableImpl.doJoin naming: MERGE first, then JOINTHIS / JOINOTHER; each side is
    connected to the other table's (materialised) source store."""
    b = StreamsBuilder()
    t1 = b.table("topic1", key_serde=I, value_serde=S)
    t2 = b.table("topic2", key_serde=I, value_serde=S)
    joined = t1.join(t2, tostring_joiner)
    topo = b.build()
    assert joined.name == "KTABLE-MERGE-0000000006"
    assert topo.nodes["KTABLE-JOINTHIS-0000000007"].stores == ["topic2-STATE-STORE-0000000003"]
    assert topo.nodes["KTABLE-JOINOTHER-0000000008"].stores == ["topic1-STATE-STORE-0000000000"]
    named = t1.left_join(t2, tostring_joiner, named="jn", materialized=Materialized.with_(I, S))
    assert named.name == "jn"
    assert {"jn-join-this", "jn-join-other"} <= set(topo.nodes)
    assert topo.nodes["jn"].stores == ["KTABLE-MERGE-STATE-STORE-0000000009"]


# -- TableTableJoinIntegrationTest (AbstractJoinIntegrationTest's input script) -------------

from join_scripts import INPUT, LEFT, RIGHT  # noqa: E402

# expected (value, timestamp) output after each input, caching disabled (None: no output)
IT_EXPECTED = {
    "inner": [
        None, None, None, ("A-a", 4), ("B-a", 5), ("B-b", 6), (None, 7), None, None,
        ("C-c", 10), (None, 11), None, None, None, ("D-d", 7), (None, 7), None, None,
        ("E-e", 15), (None, 14), None, None, ("F-f", 4),
    ],
    "left": [
        None, None, ("A-null", 3), ("A-a", 4), ("B-a", 5), ("B-b", 6), (None, 7), None,
        ("C-null", 9), ("C-c", 10), ("C-null", 11), (None, 12), None, None, ("D-d", 7),
        (None, 7), None, None, ("E-e", 15), (None, 14), None, ("F-null", 4), ("F-f", 4),
    ],
    "outer": [
        None, None, ("A-null", 3), ("A-a", 4), ("B-a", 5), ("B-b", 6), ("null-b", 7),
        (None, 8), ("C-null", 9), ("C-c", 10), ("C-null", 11), (None, 12), None,
        ("null-d", 7), ("D-d", 7), ("null-d", 7), (None, 3), ("null-e", 14), ("E-e", 15),
        ("null-e", 14), (None, 9), ("F-null", 4), ("F-f", 4),
    ],
}  # fmt: skip

STORE = "table-table-join-integration-test-store"


def _dash_joiner(left: Any, right: Any) -> str:
    return f"{'null' if left is None else left}-{'null' if right is None else right}"


@pytest.mark.parametrize("kind", ["inner", "left", "outer"])
@pytest.mark.parametrize("cache_enabled", [False, True])
def test_integration_script(kind: str, cache_enabled: bool, tmp_path: Any) -> None:
    """TableTableJoinIntegrationTest.testInner / testLeft / testOuter: with caching, only the
    final result and the queryable store are checked (as the Kafka test does)."""
    L = serdes.Long()
    b = StreamsBuilder()
    left = b.table(LEFT, materialized=Materialized.as_("left").with_logging_disabled())
    right = b.table(RIGHT, materialized=Materialized.as_("right").with_logging_disabled())
    mat = (
        Materialized.as_(STORE)
        .with_key_serde(L)
        .with_value_serde(S)
        .with_caching_disabled()
        .with_logging_disabled()
    )
    op = {"inner": left.join, "left": left.left_join, "outer": left.outer_join}[kind]
    op(right, _dash_joiner, materialized=mat).to_stream().to("outputTopic")
    config = {
        "default.key.serde": "long",
        "default.value.serde": "string",
        "state.dir": str(tmp_path),
        "statestore.cache.max.bytes": 10 * 1024 * 1024 if cache_enabled else 0,
    }
    base = 1_700_000_000_000  # the Kafka test's MockTime base; any base works
    with TopologyTestDriver(b.build(), config) as d:
        inputs = {t: d.create_input_topic(t, L, S) for t in (LEFT, RIGHT)}
        out = d.create_output_topic("outputTopic", L, S)
        final = None
        for (topic, value, ts), expected in zip(INPUT, IT_EXPECTED[kind], strict=True):
            inputs[topic].pipe_input(0, value, base + ts)
            got = [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]
            if not cache_enabled:
                want = [] if expected is None else [(0, expected[0], base + expected[1])]
                assert got == want, f"after {(topic, value, ts)}"
            if got:
                final = got[-1]
        # the last result is F-f at 4 for every kind; the store holds it
        assert final == (0, "F-f", base + 4)
        rows = list(d.get_timestamped_key_value_store(STORE).all())
        assert [(k, v.value, v.timestamp) for k, v in rows] == [(0, "F-f", base + 4)]


_ = None
# TableTableJoinIntegrationTest.test{Inner,Left,Outer}With{Versioned,LeftVersionedOnly,
# RightVersionedOnly}: out-of-order updates of a versioned side are not joined (KIP-914)
VERSIONED_EXPECTED = {
    ("both", "inner"): [
        _, _, _, ("A-a", 4), ("B-a", 5), ("B-b", 6), (None, 7), _, _, ("C-c", 10), (None, 11),
        _, _, _, _, _, _, _, ("E-e", 15), _, _, _, _,
    ],
    ("both", "left"): [
        _, _, ("A-null", 3), ("A-a", 4), ("B-a", 5), ("B-b", 6), (None, 7), _, ("C-null", 9),
        ("C-c", 10), ("C-null", 11), (None, 12), _, _, _, _, _, _, ("E-e", 15), _, _, _, _,
    ],
    ("both", "outer"): [
        _, _, ("A-null", 3), ("A-a", 4), ("B-a", 5), ("B-b", 6), ("null-b", 7), (None, 8),
        ("C-null", 9), ("C-c", 10), ("C-null", 11), (None, 12), _, _, _, _, _,
        ("null-e", 14), ("E-e", 15), _, _, _, _,
    ],
    ("left", "inner"): [
        _, _, _, ("A-a", 4), ("B-a", 5), ("B-b", 6), (None, 7), _, _, ("C-c", 10), (None, 11),
        _, _, _, _, _, _, _, ("E-e", 15), _, (None, 15), _, ("E-f", 15),
    ],
    ("left", "left"): [
        _, _, ("A-null", 3), ("A-a", 4), ("B-a", 5), ("B-b", 6), (None, 7), _, ("C-null", 9),
        ("C-c", 10), ("C-null", 11), (None, 12), _, _, _, _, _, _, ("E-e", 15), _,
        ("E-null", 15), _, ("E-f", 15),
    ],
    ("left", "outer"): [
        _, _, ("A-null", 3), ("A-a", 4), ("B-a", 5), ("B-b", 6), ("null-b", 7), (None, 8),
        ("C-null", 9), ("C-c", 10), ("C-null", 11), (None, 12), _, ("null-d", 7), _, _,
        (None, 3), ("null-e", 14), ("E-e", 15), _, ("E-null", 15), _, ("E-f", 15),
    ],
    ("right", "inner"): [
        _, _, _, ("A-a", 4), ("B-a", 5), ("B-b", 6), (None, 7), _, _, ("C-c", 10), (None, 11),
        _, _, _, _, _, _, _, ("E-e", 15), (None, 14), _, ("F-e", 14), _,
    ],
    ("right", "left"): [
        _, _, ("A-null", 3), ("A-a", 4), ("B-a", 5), ("B-b", 6), (None, 7), _, ("C-null", 9),
        ("C-c", 10), ("C-null", 11), (None, 12), _, _, ("D-null", 6), (None, 2), _, _,
        ("E-e", 15), (None, 14), _, ("F-e", 14), _,
    ],
}  # fmt: skip
VERSIONED_FINAL = {"both": None, "left": ("E-f", 15), "right": ("F-e", 14)}


@pytest.mark.parametrize(("versioned", "kind"), list(VERSIONED_EXPECTED))
@pytest.mark.parametrize("cache_enabled", [False, True])
def test_integration_script_versioned(
    versioned: str, kind: str, cache_enabled: bool, tmp_path: Any
) -> None:
    """Versioned sources: with both sides versioned nothing is cached (same output either
    way); with one versioned side and caching, the final result and the store are checked."""
    from streaming.state import Stores

    L = serdes.Long()
    b = StreamsBuilder()

    def source(topic: str, name: str, is_versioned: bool) -> Any:
        if is_versioned:
            supplier = Stores.persistent_versioned_key_value_store(name, 5 * 60_000)
            mat = Materialized.as_(supplier)
        else:
            mat = Materialized.as_(name)
        return b.table(topic, materialized=mat.with_logging_disabled())

    left = source(LEFT, "left", versioned in ("both", "left"))
    right = source(RIGHT, "right", versioned in ("both", "right"))
    mat = (
        Materialized.as_(STORE)
        .with_key_serde(L)
        .with_value_serde(S)
        .with_caching_disabled()
        .with_logging_disabled()
    )
    op = {"inner": left.join, "left": left.left_join, "outer": left.outer_join}[kind]
    op(right, _dash_joiner, materialized=mat).to_stream().to("outputTopic")
    config = {
        "default.key.serde": "long",
        "default.value.serde": "string",
        "state.dir": str(tmp_path),
        "statestore.cache.max.bytes": 10 * 1024 * 1024 if cache_enabled else 0,
    }
    base = 1_700_000_000_000
    check_each = not cache_enabled or versioned == "both"
    expected_steps = VERSIONED_EXPECTED[(versioned, kind)]
    with TopologyTestDriver(b.build(), config) as d:
        inputs = {t: d.create_input_topic(t, L, S) for t in (LEFT, RIGHT)}
        out = d.create_output_topic("outputTopic", L, S)
        final = None
        for (topic, value, ts), expected in zip(INPUT, expected_steps, strict=True):
            inputs[topic].pipe_input(0, value, base + ts)
            got = [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]
            if check_each:
                want = [] if expected is None else [(0, expected[0], base + expected[1])]
                assert got == want, f"after {(topic, value, ts)}"
            if got:
                final = got[-1]
        want_final = VERSIONED_FINAL[versioned]
        if want_final is not None:
            assert final == (0, want_final[0], base + want_final[1])
            rows = list(d.get_timestamped_key_value_store(STORE).all())
            assert [(k, v.value, v.timestamp) for k, v in rows] == [
                (0, want_final[0], base + want_final[1])
            ]
