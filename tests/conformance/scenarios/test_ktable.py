"""KTable source, filter and map_values: ports of Kafka Streams 4.1's ``KTableSourceTest``,
``KTableFilterTest`` and ``KTableMapValuesTest`` (caching disabled at the config level, as
those tests do). A recording processor attached to a table node sees its ``Change``s.
"""

from __future__ import annotations

from typing import Any

import pytest

from streaming import StreamsBuilder, TopologyTestDriver, serdes
from streaming.dsl.options import Materialized
from streaming.topology.processor import Processor, Record

S = serdes.String()
I = serdes.Integer()  # noqa: E741
NO_CACHE = {"statestore.cache.max.bytes": 0}


def even(key: Any, value: int) -> bool:
    return value % 2 == 0


class Recorder:
    """MockApiProcessorSupplier: every processor it makes appends to ``processed``."""

    def __init__(self) -> None:
        self.processed: list[tuple[Any, Any, Any, int]] = []

    def __call__(self) -> Processor:
        rec = self

        class _P(Processor):
            def process(self, record: Record) -> None:
                change = record.value
                rec.processed.append(
                    (record.key, change.new_value, change.old_value, record.timestamp)
                )

        return _P()

    def take(self) -> list[tuple[Any, Any, Any, int]]:
        out, self.processed = self.processed, []
        return out


def attach(builder: StreamsBuilder, table: Any, name: str) -> Recorder:
    recorder = Recorder()
    builder.build().add_processor(name, recorder, table.name)
    return recorder


def driver_for(builder: StreamsBuilder, tmp_path: Any, config: dict | None = None):
    cfg = {"state.dir": str(tmp_path), **NO_CACHE, **(config or {})}
    return TopologyTestDriver(builder.build(), cfg, initial_wall_clock_time_ms=0)


def kvt(records: list[Any]) -> list[tuple[Any, Any, int]]:
    return [(r.key, r.value, r.timestamp) for r in records]


# -- KTableSourceTest ---------------------------------------------------------------------


def test_source_ktable_to_stream(tmp_path: Any) -> None:
    """KTableSourceTest.testKTable: tombstones included, null keys skipped."""
    b = StreamsBuilder()
    b.table("in", key_serde=S, value_serde=I).to_stream().to("out", key_serde=S, value_serde=I)
    with driver_for(b, tmp_path) as d:
        src = d.create_input_topic("in", S, I)
        for k, v, ts in [("A", 1, 10), ("B", 2, 11), ("C", 3, 12), ("D", 4, 13), ("A", None, 14),
                         ("B", None, 15), (None, 5, 16)]:  # fmt: skip
            src.pipe_input(k, v, ts)
        out = kvt(d.create_output_topic("out", S, I).read_records_to_list())
    assert out == [("A", 1, 10), ("B", 2, 11), ("C", 3, 12), ("D", 4, 13), ("A", None, 14),
                   ("B", None, 15)]  # fmt: skip


def test_source_does_not_drop_idempotent_updates(tmp_path: Any) -> None:
    """KIP-557 emit-on-change is disabled in Kafka (KAFKA-12508): duplicates are forwarded.

    KTableSourceTest.testKTableSourceEmitOnChange is @Disabled in Kafka 4.1.
    """
    b = StreamsBuilder()
    (b.table("in", key_serde=S, value_serde=I, materialized=Materialized.as_("store"))
     .to_stream().to("out", key_serde=S, value_serde=I))  # fmt: skip
    with driver_for(b, tmp_path, {"statestore.cache.max.bytes": 10 * 1024 * 1024}) as d:
        src = d.create_input_topic("in", S, I)
        for k, v, ts in [("A", 1, 10), ("B", 2, 11), ("A", 1, 12), ("B", 3, 13), ("A", 1, 11)]:
            src.pipe_input(k, v, ts)
        out = kvt(d.create_output_topic("out", S, I).read_records_to_list())
    assert out == [("A", 1, 10), ("B", 2, 11), ("A", 1, 12), ("B", 3, 13), ("A", 1, 11)]


SOURCE_OLD_VALUES_IN = [
    [("A", "01", 10), ("B", "01", 20), ("C", "01", 15)],
    [("A", "02", 8), ("B", "02", 22)],
    [("A", "03", 12)],
    [("A", None, 15), ("B", None, 20)],
]


@pytest.mark.parametrize("send_old", [False, True], ids=["not-sending", "sending"])
def test_source_old_values(tmp_path: Any, send_old: bool) -> None:
    """KTableSourceTest.testNotSendingOldValue / testSendingOldValue."""
    b = StreamsBuilder()
    table = b.table("in", key_serde=S, value_serde=S)
    if send_old:
        assert table.supplier.enable_sending_old_values(True) is True
    proc = attach(b, table, "proc1")
    old = (lambda v: v) if send_old else (lambda v: None)
    expected = [
        [("A", "01", None, 10), ("B", "01", None, 20), ("C", "01", None, 15)],
        [("A", "02", old("01"), 8), ("B", "02", old("01"), 22)],
        [("A", "03", old("02"), 12)],
        [("A", None, old("03"), 15), ("B", None, old("02"), 20)],
    ]
    with driver_for(b, tmp_path) as d:
        src = d.create_input_topic("in", S, S)
        for batch, want in zip(SOURCE_OLD_VALUES_IN, expected, strict=True):
            for k, v, ts in batch:
                src.pipe_input(k, v, ts)
            assert proc.take() == want


# -- KTableFilterTest ---------------------------------------------------------------------

FILTER_IN = [("A", 1, 10), ("B", 2, 5), ("C", 3, 8), ("D", 4, 14), ("A", None, 18), ("B", None, 15)]
FILTER_OUT = [("A", None, 10), ("B", 2, 5), ("C", None, 8), ("D", 4, 14), ("A", None, 18),
              ("B", None, 15)]  # fmt: skip
FILTER_NOT_OUT = [("A", 1, 10), ("B", None, 5), ("C", 3, 8), ("D", None, 14), ("A", None, 18),
                  ("B", None, 15)]  # fmt: skip


@pytest.mark.parametrize("materialized", [None, "store2"], ids=["plain", "materialized"])
def test_filter_pass_through(tmp_path: Any, materialized: str | None) -> None:
    """KTableFilterTest.shouldPassThroughWithoutMaterialization / OnMaterialization."""
    b = StreamsBuilder()
    table1 = b.table("in", key_serde=S, value_serde=I)
    table2 = table1.filter(even, materialized=materialized)
    table3 = table1.filter_not(even)
    assert table2.queryable_store_name == materialized
    table2.to_stream().to("out2", key_serde=S, value_serde=I)
    table3.to_stream().to("out3", key_serde=S, value_serde=I)
    with driver_for(b, tmp_path) as d:
        src = d.create_input_topic("in", S, I)
        for k, v, ts in FILTER_IN:
            src.pipe_input(k, v, ts)
        assert kvt(d.create_output_topic("out2", S, I).read_records_to_list()) == FILTER_OUT
        assert kvt(d.create_output_topic("out3", S, I).read_records_to_list()) == FILTER_NOT_OUT
        if materialized:
            store = d.get_timestamped_key_value_store(materialized)
            assert store.get("D").value == 4
            assert store.get("B") is None


@pytest.mark.parametrize(
    ("materialized", "enable_false"),
    [(None, False), ("store2", False), (None, True)],
    ids=["without-materialization", "on-materialization", "enable-false-not-materialized"],
)
def test_filter_not_sending_old_values(
    tmp_path: Any, materialized: str | None, enable_false: bool
) -> None:
    """KTableFilterTest.shouldNotSendOldValues* / shouldNotEnableSendingOldValuesIf..."""
    b = StreamsBuilder()
    table1 = b.table("in", key_serde=S, value_serde=I)
    table2 = table1.filter(even, materialized=materialized)
    if enable_false:
        assert table2.supplier.enable_sending_old_values(False) is False
    proc1 = attach(b, table1, "proc1")
    proc2 = attach(b, table2, "proc2")
    with driver_for(b, tmp_path) as d:
        src = d.create_input_topic("in", S, I)
        for k, v, ts in [("A", 1, 5), ("B", 1, 10), ("C", 1, 15)]:
            src.pipe_input(k, v, ts)
        assert proc1.take() == [("A", 1, None, 5), ("B", 1, None, 10), ("C", 1, None, 15)]
        assert proc2.take() == [("A", None, None, 5), ("B", None, None, 10), ("C", None, None, 15)]
        src.pipe_input("A", 2, 15)
        src.pipe_input("B", 2, 8)
        assert proc1.take() == [("A", 2, None, 15), ("B", 2, None, 8)]
        assert proc2.take() == [("A", 2, None, 15), ("B", 2, None, 8)]
        src.pipe_input("A", 3, 20)
        assert proc1.take() == [("A", 3, None, 20)]
        assert proc2.take() == [("A", None, None, 20)]
        src.pipe_input("A", None, 10)
        src.pipe_input("B", None, 20)
        assert proc1.take() == [("A", None, None, 10), ("B", None, None, 20)]
        assert proc2.take() == [("A", None, None, 10), ("B", None, None, 20)]


@pytest.mark.parametrize(
    ("case", "parent_sends"),
    [("forced", True), ("materialized-forced", False), ("upstream-materialized", True)],
)
def test_filter_sending_old_values(tmp_path: Any, case: str, parent_sends: bool) -> None:
    """KTableFilterTest.shouldEnableSendOldValuesWhenNotMaterializedAlreadyButForcedToMaterialize,
    ...WhenMaterializedAlreadyAndForcedToMaterialize, shouldSendOldValuesWhenEnabledOnUpStream..."""
    b = StreamsBuilder()
    if case == "upstream-materialized":
        table1 = b.table("in", key_serde=S, value_serde=I, materialized=Materialized.as_("store2"))
        table2 = table1.filter(even)
        assert table2.supplier.enable_sending_old_values(False) is True
    elif case == "forced":
        table1 = b.table("in", key_serde=S, value_serde=I)
        table2 = table1.filter(even)
        assert table2.supplier.enable_sending_old_values(True) is True
    else:
        table1 = b.table("in", key_serde=S, value_serde=I)
        table2 = table1.filter(even, materialized="store2")
        assert table2.supplier.enable_sending_old_values(True) is True
    assert table1.supplier.send_old_values is parent_sends
    assert table2.supplier.send_old_values is True
    proc1 = attach(b, table1, "proc1")
    proc2 = attach(b, table2, "proc2")

    def old(v: int) -> int | None:
        return v if parent_sends else None

    with driver_for(b, tmp_path) as d:
        src = d.create_input_topic("in", S, I)
        for k, v, ts in [("A", 1, 5), ("B", 1, 10), ("C", 1, 15)]:
            src.pipe_input(k, v, ts)
        assert proc1.take() == [("A", 1, None, 5), ("B", 1, None, 10), ("C", 1, None, 15)]
        assert proc2.take() == []
        src.pipe_input("A", 2, 15)
        src.pipe_input("B", 2, 8)
        assert proc1.take() == [("A", 2, old(1), 15), ("B", 2, old(1), 8)]
        assert proc2.take() == [("A", 2, None, 15), ("B", 2, None, 8)]
        src.pipe_input("A", 3, 20)
        assert proc1.take() == [("A", 3, old(2), 20)]
        assert proc2.take() == [("A", None, 2, 20)]
        src.pipe_input("A", None, 10)
        src.pipe_input("B", None, 20)
        assert proc1.take() == [("A", None, old(3), 10), ("B", None, old(2), 20)]
        assert proc2.take() == [("B", None, 2, 20)]


@pytest.mark.parametrize("materialized", [None, "store2"], ids=["plain", "materialized"])
def test_filter_skips_null_to_repartition(tmp_path: Any, materialized: str | None) -> None:
    """KTableFilterTest.shouldSkipNullToRepartitionWithoutMaterialization / OnMaterialization:
    a downstream group_by turns on old values, so rejected rows send nothing."""
    b = StreamsBuilder()
    table1 = b.table("in", key_serde=S, value_serde=S)
    table2 = table1.filter(lambda k, v: v.lower() == "accept", materialized=materialized)
    table2.group_by(lambda k, v: (k, v), key_serde=S, value_serde=S).reduce(
        lambda a, v: a + v, lambda a, v: a.replace(v, "")
    )
    proc1 = attach(b, table1, "proc1")
    proc2 = attach(b, table2, "proc2")
    with driver_for(b, tmp_path) as d:
        src = d.create_input_topic("in", S, S)
        for k, v, ts in [("A", "reject", 5), ("B", "reject", 10), ("C", "reject", 20)]:
            src.pipe_input(k, v, ts)
    assert proc1.take() == [("A", "reject", None, 5), ("B", "reject", None, 10),
                            ("C", "reject", None, 20)]  # fmt: skip
    assert proc2.take() == []


def test_filter_over_materialized_source_sends_no_needless_tombstones(tmp_path: Any) -> None:
    """KTableFilter's constructor: ``sendOldValues = parent.enableSendingOldValues(false)``;
    over a materialised source the filter drops (null, null) updates."""
    b = StreamsBuilder()
    table1 = b.table("in", key_serde=S, value_serde=I, materialized=Materialized.as_("src"))
    table1.filter(even).to_stream().to("out", key_serde=S, value_serde=I)
    with driver_for(b, tmp_path) as d:
        src = d.create_input_topic("in", S, I)
        for k, v, ts in [("A", 1, 1), ("B", 2, 2), ("B", 3, 3), ("A", None, 4)]:
            src.pipe_input(k, v, ts)
        out = kvt(d.create_output_topic("out", S, I).read_records_to_list())
    assert out == [("B", 2, 2), ("B", None, 3)]


# -- KTableMapValuesTest ------------------------------------------------------------------


@pytest.mark.parametrize("materialized", [None, "anyName"], ids=["plain", "materialized"])
def test_map_values_ktable(tmp_path: Any, materialized: str | None) -> None:
    """KTableMapValuesTest.testKTable / testQueryableKTable."""
    b = StreamsBuilder()
    table1 = b.table("in", key_serde=S, value_serde=S)
    mat = Materialized.as_(materialized).with_value_serde(I) if materialized else None
    table1.map_values(int, materialized=mat).to_stream().to("out", key_serde=S, value_serde=I)
    with driver_for(b, tmp_path) as d:
        src = d.create_input_topic("in", S, S)
        for k, v, ts in [("A", "1", 5), ("B", "2", 25), ("C", "3", 20), ("D", "4", 10),
                         ("A", None, 30)]:  # fmt: skip
            src.pipe_input(k, v, ts)
        out = kvt(d.create_output_topic("out", S, I).read_records_to_list())
        if materialized:
            assert d.get_timestamped_key_value_store(materialized).get("C").value == 3
    assert out == [("A", 1, 5), ("B", 2, 25), ("C", 3, 20), ("D", 4, 10), ("A", None, 30)]


@pytest.mark.parametrize(
    ("materialized", "parent_sends"), [(None, True), ("store2", False)],
    ids=["not-materialized", "materialized"],
)  # fmt: skip
def test_map_values_sending_old_values(
    tmp_path: Any, materialized: str | None, parent_sends: bool
) -> None:
    """KTableMapValuesTest.shouldEnableSendingOldValuesWhen(Not)MaterializedAlready...:
    a materialised map_values reads the old value from its own store."""
    calls: list[str] = []

    def mapper(v: str) -> int:
        calls.append(v)
        return int(v)

    b = StreamsBuilder()
    table1 = b.table("in", key_serde=S, value_serde=S)
    mat = Materialized.as_(materialized).with_value_serde(I) if materialized else None
    table2 = table1.map_values(mapper, materialized=mat)
    assert table2.supplier.enable_sending_old_values(True) is True
    assert table1.supplier.send_old_values is parent_sends
    proc = attach(b, table2, "proc")
    with driver_for(b, tmp_path) as d:
        src = d.create_input_topic("in", S, S)
        for k, v, ts in [("A", "01", 5), ("B", "01", 10), ("C", "01", 15)]:
            src.pipe_input(k, v, ts)
        assert proc.take() == [("A", 1, None, 5), ("B", 1, None, 10), ("C", 1, None, 15)]
        src.pipe_input("A", "02", 10)
        src.pipe_input("B", "02", 8)
        assert proc.take() == [("A", 2, 1, 10), ("B", 2, 1, 8)]
        src.pipe_input("A", "03", 20)
        assert proc.take() == [("A", 3, 2, 20)]
        src.pipe_input("A", None, 30)
        assert proc.take() == [("A", None, 3, 30)]
    # materialised: the mapper runs once per update; otherwise also on the old value
    assert len(calls) == (6 if materialized else 10)
