"""Grouped-table aggregation: ports of Kafka Streams 4.1's ``KTableAggregateTest``,
``KTableReduceTest`` and the reduce case of ``KGroupedTableImplTest``.

The processors (``KTableRepartitionMap``, ``KTableAggregate``, ``KTableReduce``) are tested
three ways: directly with a recording context, in a hand-built processor topology shaped
exactly like the one the DSL builds (table source -> repartition map -> repartition topic
with ``ChangedSerde`` -> aggregate -> to_stream), and through the DSL once it is wired.
Expected outputs are the ones in Kafka's tests.
"""

from __future__ import annotations

from typing import Any

import pytest

from streaming import serdes
from streaming.dsl.change import Change, ChangedSerde
from streaming.dsl.processors.forwarding import TupleForwarder
from streaming.dsl.processors.table import TableSupplier
from streaming.dsl.processors.table_aggregate import (
    PUT_RETURN_CODE_IS_LATEST,
    PUT_RETURN_CODE_NOT_PUT,
    KTableAggregateSupplier,
    KTableReduceSupplier,
    KTableRepartitionMapSupplier,
)
from streaming.errors import StreamsException
from streaming.state import Stores, ValueAndTimestamp
from streaming.testing.driver import TopologyTestDriver
from streaming.topology.graph import Topology
from streaming.topology.processor import Processor, Record

S = serdes.String()
L = serdes.Long()

# MockInitializer.STRING_INIT, MockAggregator.TOSTRING_ADDER / TOSTRING_REMOVER
STRING_INIT = lambda: "0"  # noqa: E731
TOSTRING_ADDER = lambda k, v, agg: f"{agg}+{v}"  # noqa: E731
TOSTRING_REMOVER = lambda k, v, agg: f"{agg}-{v}"  # noqa: E731


def kvt(records: list[Any]) -> list[tuple[Any, Any, int]]:
    return [(r.key, r.value, r.timestamp) for r in records]


# -- a recording context and a plain store, for processor-level tests -------------------


class DictStore:
    """A timestamped key-value store without caching."""

    name = "store"

    def __init__(self) -> None:
        self.data: dict[Any, ValueAndTimestamp] = {}

    def get(self, key: Any) -> ValueAndTimestamp | None:
        return self.data.get(key)

    def put(self, key: Any, value: ValueAndTimestamp | None) -> None:
        if value is None:
            self.data.pop(key, None)
        else:
            self.data[key] = value

    def set_flush_listener(self, listener: Any, send_old_values: bool) -> bool:
        return False


class VersionedStore:
    """Just enough of a versioned store: ``put`` returns a chosen code."""

    is_versioned = True

    def __init__(self, code: int) -> None:
        self.code = code
        self.puts: list[tuple[Any, Any, int]] = []

    def get(self, key: Any) -> Any:
        return None

    def put(self, key: Any, value: Any, timestamp: int) -> int:
        self.puts.append((key, value, timestamp))
        return self.code

    def set_flush_listener(self, listener: Any, send_old_values: bool) -> bool:
        return False


class RecordingContext:
    def __init__(self, stores: dict[str, Any] | None = None, configs: dict | None = None):
        self.stores = stores or {}
        self.app_configs = configs or {}
        self.forwarded: list[Record] = []
        self.current_node = None

    def get_state_store(self, name: str) -> Any:
        return self.stores[name]

    def forward(self, record: Record, child_name: str | None = None) -> None:
        self.forwarded.append(record)

    def record_metadata(self) -> None:
        return None


class ParentSupplier(TableSupplier):
    def __init__(self) -> None:
        self.calls: list[bool] = []

    def enable_sending_old_values(self, force_materialization: bool) -> bool:
        self.calls.append(force_materialization)
        self.send_old_values = True
        return True


def changes(ctx: RecordingContext) -> list[tuple[Any, Any, Any, int]]:
    return [(r.key, r.value.new_value, r.value.old_value, r.timestamp) for r in ctx.forwarded]


def repartition_processor(mapper: Any, configs: dict | None = None, versioned: bool = False):
    supplier = KTableRepartitionMapSupplier(ParentSupplier(), mapper)
    supplier.set_use_versioned_semantics(versioned)
    proc = supplier()
    ctx = RecordingContext(configs=configs)
    proc.init(ctx)
    return proc, ctx


# -- KTableRepartitionMap ---------------------------------------------------------------


def test_repartition_map_enables_old_values_on_parent_with_force() -> None:
    parent = ParentSupplier()
    supplier = KTableRepartitionMapSupplier(parent, lambda k, v: (v, v))
    assert parent.calls == [True]
    with pytest.raises(RuntimeError, match="always require sending old values"):
        supplier.enable_sending_old_values(True)


def test_repartition_map_null_table_key_raises() -> None:
    proc, _ = repartition_processor(lambda k, v: (v, v))
    with pytest.raises(StreamsException, match="grouping KTable should not be null"):
        proc.process(Record(None, Change("1", None), 0))


def test_repartition_map_same_key_forwards_one_change() -> None:
    proc, ctx = repartition_processor(lambda k, v: (k, v))
    proc.process(Record("A", Change("2", "1"), 7))
    assert changes(ctx) == [("A", "2", "1", 7)]


def test_repartition_map_new_key_sends_old_pair_first() -> None:
    proc, ctx = repartition_processor(lambda k, v: (v, v))
    proc.process(Record("A", Change("2", "1"), 7))
    assert changes(ctx) == [("1", None, "1", 7), ("2", "2", None, 7)]


def test_repartition_map_skips_null_pairs() -> None:
    def mapper(key: str, value: str) -> Any:
        if value == "nullkey":
            return (None, value)
        if value == "nullvalue":
            return (key, None)
        if value == "nullpair":
            return None
        return (value, value)

    proc, ctx = repartition_processor(mapper)
    for old in ("nullkey", "nullvalue", "nullpair"):
        proc.process(Record("A", Change("x", old), 1))
    proc.process(Record("A", Change(None, "nullkey"), 2))
    proc.process(Record("A", Change(None, None), 3))
    assert changes(ctx) == [("x", "x", None, 1)] * 3


def test_repartition_map_keeps_is_latest_and_headers() -> None:
    proc, ctx = repartition_processor(lambda k, v: (v, v))
    headers = (("h", b"1"),)
    proc.process(Record("A", Change("2", "1", is_latest=False), 7, headers))
    assert [r.value.is_latest for r in ctx.forwarded] == [False, False]
    assert all(r.headers is headers for r in ctx.forwarded)


def test_repartition_map_versioned_semantics_drops_out_of_order() -> None:
    proc, ctx = repartition_processor(lambda k, v: (v, v), versioned=True)
    proc.process(Record("A", Change("2", "1", is_latest=False), 7))
    assert ctx.forwarded == []
    proc.process(Record("A", Change("2", "1", is_latest=True), 8))
    assert len(ctx.forwarded) == 2


@pytest.mark.parametrize(
    ("upgrade_from", "split"),
    [(None, False), ("3.3", True), ("3.4", True), ("0.10.0", True), ("3.5", False), ("4.0", False)],
)
def test_repartition_map_upgrade_from_splits_same_key(
    upgrade_from: str | None, split: bool
) -> None:
    configs = {} if upgrade_from is None else {"upgrade.from": upgrade_from}
    proc, ctx = repartition_processor(lambda k, v: (k, v), configs=configs)
    proc.process(Record("A", Change("2", "1"), 7))
    if split:
        assert changes(ctx) == [("A", None, "1", 7), ("A", "2", None, 7)]
    else:
        assert changes(ctx) == [("A", "2", "1", 7)]


# -- KTableAggregate / KTableReduce processors --------------------------------------------


def aggregate_processor(send_old: bool = False, **kw: Any):
    calls = {"init": 0}

    def init() -> str:
        calls["init"] += 1
        return "0"

    supplier = KTableAggregateSupplier(
        "agg", kw.get("init", init), kw.get("add", TOSTRING_ADDER), kw.get("sub", TOSTRING_REMOVER)
    )
    if send_old:
        assert supplier.enable_sending_old_values(False) is True
    store = kw.get("store", DictStore())
    ctx = RecordingContext({"agg": store})
    proc = supplier()
    proc.init(ctx)
    return proc, ctx, store, calls


def test_aggregate_null_key_raises() -> None:
    proc, *_ = aggregate_processor()
    with pytest.raises(StreamsException, match="KTable aggregate operator with state agg"):
        proc.process(Record(None, Change("1", None), 0))


def test_aggregate_subtracts_then_adds_with_max_timestamp() -> None:
    proc, ctx, store, calls = aggregate_processor(send_old=True)
    proc.process(Record("A", Change("1", None), 10))
    proc.process(Record("A", Change("3", "1"), 5))
    proc.process(Record("A", Change(None, "3"), 20))
    assert changes(ctx) == [
        ("A", "0+1", None, 10),
        ("A", "0+1-1+3", "0+1", 10),
        ("A", "0+1-1+3-3", "0+1-1+3", 20),
    ]
    assert store.get("A") == ValueAndTimestamp("0+1-1+3-3", 20)
    assert calls["init"] == 1


def test_aggregate_without_old_values_forwards_none_as_old() -> None:
    proc, ctx, *_ = aggregate_processor(send_old=False)
    proc.process(Record("A", Change("1", None), 10))
    proc.process(Record("A", Change("2", "1"), 11))
    assert changes(ctx) == [("A", "0+1", None, 10), ("A", "0+1-1+2", None, 11)]


def test_aggregate_initializer_only_when_adding_to_nothing() -> None:
    proc, ctx, store, calls = aggregate_processor(send_old=True)
    # subtracting from an empty aggregate: no initializer, nothing stored, (null, null) sent
    proc.process(Record("A", Change(None, "1"), 10))
    assert calls["init"] == 0
    assert changes(ctx) == [("A", None, None, 10)]
    assert store.get("A") is None
    # a subtractor returning None empties the aggregate; the next add initializes again
    proc2, ctx2, store2, calls2 = aggregate_processor(send_old=True, sub=lambda k, v, agg: None)
    proc2.process(Record("A", Change("1", None), 10))
    proc2.process(Record("A", Change("2", "1"), 5))
    assert calls2["init"] == 2
    assert changes(ctx2) == [("A", "0+1", None, 10), ("A", "0+2", "0+1", 10)]
    proc2.process(Record("A", Change(None, "2"), 30))
    assert changes(ctx2)[-1] == ("A", None, "0+2", 30)
    assert store2.get("A") is None


def test_aggregate_forwards_headers() -> None:
    proc, ctx, *_ = aggregate_processor()
    headers = (("h", b"x"),)
    proc.process(Record("A", Change("1", None), 10, headers))
    assert ctx.forwarded[0].headers is headers


@pytest.mark.parametrize(
    ("code", "forwarded", "latest"),
    [
        (PUT_RETURN_CODE_NOT_PUT, False, None),
        (PUT_RETURN_CODE_IS_LATEST, True, True),
        (42, True, False),
    ],
)
def test_aggregate_on_versioned_store(code: int, forwarded: bool, latest: bool | None) -> None:
    store = VersionedStore(code)
    proc, ctx, *_ = aggregate_processor(store=store)
    proc.process(Record("A", Change("1", None), 10))
    assert store.puts == [("A", "0+1", 10)]
    if forwarded:
        assert [r.value.is_latest for r in ctx.forwarded] == [latest]
    else:
        assert ctx.forwarded == []


def reduce_processor(adder: Any, subtractor: Any, send_old: bool = True):
    supplier = KTableReduceSupplier("myStore", adder, subtractor)
    if send_old:
        supplier.enable_sending_old_values(True)
    store = DictStore()
    ctx = RecordingContext({"myStore": store})
    proc = supplier()
    proc.init(ctx)
    return proc, ctx, store


def test_reduce_should_add_and_subtract() -> None:
    """KTableReduceTest.shouldAddAndSubtract."""
    proc, _, store = reduce_processor(
        lambda a, b: a | b,
        lambda a, b: a - b,
    )
    proc.process(Record("A", Change(frozenset("a"), None), 10))
    assert store.get("A") == ValueAndTimestamp(frozenset("a"), 10)
    proc.process(Record("A", Change(frozenset("b"), frozenset("a")), 15))
    assert store.get("A") == ValueAndTimestamp(frozenset("b"), 15)
    proc.process(Record("A", Change(None, frozenset("b")), 12))
    assert store.get("A") == ValueAndTimestamp(frozenset(), 15)


def test_reduce_null_key_raises() -> None:
    proc, _, _ = reduce_processor(lambda a, b: a + b, lambda a, b: a - b)
    with pytest.raises(StreamsException, match="KTable reduce operator with state myStore"):
        proc.process(Record(None, Change(1, None), 0))


def test_reduce_first_value_and_timestamps() -> None:
    proc, ctx, _ = reduce_processor(lambda a, b: a + b, lambda a, b: a - b)
    proc.process(Record("A", Change(5, None), 10))  # first value is the aggregate
    proc.process(Record("A", Change(7, None), 4))  # add: max(4, 10)
    proc.process(Record("A", Change(None, 5), 3))  # subtract: max(3, 10)
    proc.process(Record("B", Change(None, 1), 30))  # nothing to subtract from
    assert changes(ctx) == [
        ("A", 5, None, 10),
        ("A", 12, 5, 10),
        ("A", 7, 12, 10),
        ("B", None, None, 30),
    ]


def test_reduce_subtractor_returning_none_restarts_with_new_value() -> None:
    proc, ctx, store = reduce_processor(lambda a, b: a + b, lambda a, b: None)
    proc.process(Record("A", Change(5, None), 10))
    proc.process(Record("A", Change(7, 5), 20))
    # intermediate None: the new value becomes the aggregate, timestamp from the subtract step
    assert changes(ctx)[-1] == ("A", 7, 5, 20)
    assert store.get("A") == ValueAndTimestamp(7, 20)


# -- the topology the DSL builds, by hand ---------------------------------------------------


class KafkaTableSourceSupplier(TableSupplier):
    """Kafka 4.1's KTableSource (always materialised here): put, then forward (new, old)."""

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def __call__(self) -> Processor:
        supplier = self

        class _Source(Processor):
            def init(self, context: Any) -> None:
                super().init(context)
                self.store = context.get_state_store(supplier.store_name)
                self.forwarder = TupleForwarder(self.store, context, supplier.send_old_values)

            def process(self, record: Record) -> None:
                if record.key is None:
                    return
                old = self.store.get(record.key)
                self.store.put(record.key, ValueAndTimestamp.make(record.value, record.timestamp))
                old_value = old.value if old is not None and supplier.send_old_values else None
                self.forwarder.maybe_forward(record.with_value(Change(record.value, old_value)))

        return _Source()


class ToStream(Processor):
    def process(self, record: Record) -> None:
        self.context.forward(record.with_value(record.value.new_value))


def kv_store(name: str, key_serde: Any, value_serde: Any, caching: bool) -> Any:
    builder = Stores.timestamped_key_value_store_builder(
        Stores.persistent_timestamped_key_value_store(name), key_serde, value_serde
    )
    return builder.with_caching_enabled() if caching else builder


def grouped_table_topology(
    selector: Any,
    op: str,
    *args: Any,
    caching: bool = False,
    key_serde: Any = S,
    value_serde: Any = S,
    agg_serde: Any = S,
    grouped_value_serde: Any = None,
) -> Topology:
    """``builder.table("in").group_by(selector).<op>(*args).to_stream().to("out")``."""
    t = Topology()
    source = KafkaTableSourceSupplier("in-STATE-STORE")
    t.add_source("KSTREAM-SOURCE", "in", key_serde=key_serde, value_serde=value_serde)
    t.add_processor("KTABLE-SOURCE", source, "KSTREAM-SOURCE")
    t.add_state_store(kv_store("in-STATE-STORE", key_serde, value_serde, caching), "KTABLE-SOURCE")
    t.add_processor(
        "KTABLE-SELECT", KTableRepartitionMapSupplier(source, selector), "KTABLE-SOURCE"
    )
    topic = "agg-repartition"
    grouped = ChangedSerde(grouped_value_serde or value_serde)
    t.add_internal_topic(topic)
    t.add_sink("REPARTITION-SINK", topic, "KTABLE-SELECT", key_serde=key_serde, value_serde=grouped)
    t.add_source("REPARTITION-SOURCE", topic, key_serde=key_serde, value_serde=grouped)
    if op == "aggregate":
        supplier: TableSupplier = KTableAggregateSupplier("agg", *args)
    elif op == "count":
        supplier = KTableAggregateSupplier(
            "agg", lambda: 0, lambda k, v, a: a + 1, lambda k, v, a: a - 1
        )
        agg_serde = L
    else:
        supplier = KTableReduceSupplier("agg", *args)
    t.add_processor("KTABLE-AGGREGATE", supplier, "REPARTITION-SOURCE")
    t.add_state_store(kv_store("agg", key_serde, agg_serde, caching), "KTABLE-AGGREGATE")
    t.add_processor("KTABLE-TOSTREAM", ToStream, "KTABLE-AGGREGATE")
    t.add_sink("SINK", "out", "KTABLE-TOSTREAM", key_serde=key_serde, value_serde=agg_serde)
    return t


def run(
    topology: Topology,
    inputs: list[tuple[Any, Any, int]],
    tmp_path: Any,
    config: dict | None = None,
    key_serde: Any = S,
    value_serde: Any = S,
    out_value_serde: Any = S,
) -> list[Any]:
    cfg = {"state.dir": str(tmp_path)}
    cfg.update(config or {})
    with TopologyTestDriver(topology, cfg, initial_wall_clock_time_ms=0) as driver:
        src = driver.create_input_topic("in", key_serde, value_serde)
        out = driver.create_output_topic("out", key_serde, out_value_serde)
        for key, value, ts in inputs:
            src.pipe_input(key, value, ts)
        return out.read_records_to_list()


AGG_BASIC_IN = [
    ("A", "1", 10), ("B", "2", 15), ("A", "3", 20), ("B", "4", 18),
    ("C", "5", 5), ("D", "6", 25), ("B", "7", 15), ("C", "8", 10),
]  # fmt: skip
AGG_BASIC_OUT = [
    ("A", "0+1", 10), ("B", "0+2", 15), ("A", "0+1-1+3", 20), ("B", "0+2-2+4", 18),
    ("C", "0+5", 5), ("D", "0+6", 25), ("B", "0+2-2+4-4+7", 18), ("C", "0+5-5+8", 10),
]  # fmt: skip


def agg_repartition_selector(key: str, value: str) -> Any:
    if key == "null":
        return (None, value)
    if key == "NULL":
        return None
    return (value, value)


AGG_REPARTITION_IN = [
    ("A", "1", 10), ("A", None, 15), ("A", "1", 12), ("B", "2", 20),
    ("null", "3", 25), ("B", "4", 23), ("NULL", "5", 24), ("B", "7", 22),
]  # fmt: skip
AGG_REPARTITION_OUT = [
    ("1", "0+1", 10), ("1", "0+1-1", 15), ("1", "0+1-1+1", 15), ("2", "0+2", 20),
    ("2", "0+2-2", 23), ("4", "0+4", 23), ("4", "0+4-4", 23), ("7", "0+7", 22),
]  # fmt: skip

COUNT_IN = [("A", "green", 10), ("B", "green", 9), ("A", "blue", 12), ("C", "yellow", 15),
            ("D", "green", 11)]  # fmt: skip
COUNT_OUT = [("green", 1, 10), ("green", 2, 10), ("green", 1, 12), ("blue", 1, 12),
             ("yellow", 1, 15), ("green", 2, 12)]  # fmt: skip

REMOVE_OLD_IN = [("11", "A", 10), ("12", "B", 8), ("11", None, 12), ("12", "C", 6)]
REMOVE_OLD_OUT = [("1", "1", 10), ("1", "12", 10), ("1", "2", 12), ("1", "2", 12)]


def remove_old_topology(caching: bool) -> Topology:
    return grouped_table_topology(
        lambda k, v: (k[0], k[1]),
        "aggregate",
        lambda: "",
        lambda k, v, agg: agg + v,
        lambda k, v, agg: agg.replace(v, ""),
        caching=caching,
    )


CACHING = pytest.mark.parametrize("caching", [False, True], ids=["no-cache", "cache"])


@CACHING
def test_agg_basic(tmp_path: Any, caching: bool) -> None:
    t = grouped_table_topology(
        lambda k, v: (k, v), "aggregate", STRING_INIT, TOSTRING_ADDER, TOSTRING_REMOVER,
        caching=caching,
    )  # fmt: skip
    assert kvt(run(t, AGG_BASIC_IN, tmp_path)) == AGG_BASIC_OUT


@CACHING
def test_agg_repartition(tmp_path: Any, caching: bool) -> None:
    t = grouped_table_topology(
        agg_repartition_selector, "aggregate", STRING_INIT, TOSTRING_ADDER, TOSTRING_REMOVER,
        caching=caching,
    )  # fmt: skip
    assert kvt(run(t, AGG_REPARTITION_IN, tmp_path)) == AGG_REPARTITION_OUT


@CACHING
def test_count(tmp_path: Any, caching: bool) -> None:
    t = grouped_table_topology(lambda k, v: (v, v), "count", caching=caching)
    assert kvt(run(t, COUNT_IN, tmp_path, out_value_serde=L)) == COUNT_OUT


@CACHING
def test_remove_old_before_add_new(tmp_path: Any, caching: bool) -> None:
    assert kvt(run(remove_old_topology(caching), REMOVE_OLD_IN, tmp_path)) == REMOVE_OLD_OUT


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"upgrade.from": "3.3"}, [("1", 1, 8), ("1", 0, 9), ("1", 1, 9)]),
        ({}, [("1", 1, 8), ("1", 1, 9)]),
    ],
    ids=["upgrading-sends-transient-state", "not-upgrading"],
)
def test_upgrade_from_config(tmp_path: Any, config: dict, expected: list) -> None:
    t = grouped_table_topology(lambda k, v: (k, v), "count")
    out = run(t, [("1", "", 8), ("1", "", 9)], tmp_path, config, out_value_serde=L)
    assert kvt(out) == expected


class NoEqualsImpl:
    def __init__(self, x: str) -> None:
        self.x = x


class NoEqualsImplSerde:
    def serialize(self, topic: str | None, data: NoEqualsImpl | None) -> bytes | None:
        return None if data is None else data.x.encode()

    def deserialize(self, topic: str | None, data: bytes | None) -> NoEqualsImpl | None:
        return None if data is None else NoEqualsImpl(data.decode())


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        # key changes, different object reference (the deserializer makes a new object)
        (lambda k, v: (v, v), [("1", 1, 8), ("1", 0, 9), ("1", 1, 9)]),
        # key does not change, same object reference
        (lambda k, v: (k, v), [("1", 1, 8), ("1", 1, 9)]),
    ],
    ids=["no-equals-not-same-object", "no-equals-same-object"],
)
def test_key_with_no_equals(tmp_path: Any, selector: Any, expected: list) -> None:
    serde = NoEqualsImplSerde()
    t = grouped_table_topology(selector, "count", key_serde=serde, value_serde=serde)
    a, b = NoEqualsImpl("1"), NoEqualsImpl("1")
    assert a != b
    out = run(t, [(a, a, 8), (b, b, 9)], tmp_path, key_serde=serde, value_serde=serde,
              out_value_serde=L)  # fmt: skip
    assert [(r.key.x, r.value, r.timestamp) for r in out] == expected


@CACHING
def test_grouped_table_reduce(tmp_path: Any, caching: bool) -> None:
    """KGroupedTableImplTest.shouldReduce: int projection, INTEGER_ADDER / SUBTRACTOR."""
    d = serdes.Double()
    t = grouped_table_topology(
        lambda k, v: (k, int(v)), "reduce", lambda a, b: a + b, lambda a, b: a - b,
        caching=caching, value_serde=d, agg_serde=serdes.Integer(),
        grouped_value_serde=serdes.Integer(),
    )  # fmt: skip
    out = run(
        t,
        [("A", 1.1, 10), ("B", 2.2, 11), ("A", 2.6, 30), ("B", 1.3, 30), ("A", 5.7, 50),
         ("B", 6.2, 20)],
        tmp_path, value_serde=d, out_value_serde=serdes.Integer(),
    )  # fmt: skip
    last = {r.key: (r.value, r.timestamp) for r in out}
    assert last == {"A": (5, 50), "B": (6, 30)}
    assert kvt(out) == [("A", 1, 10), ("B", 2, 11), ("A", 2, 30), ("B", 1, 30), ("A", 5, 50),
                        ("B", 6, 30)]  # fmt: skip


def test_changed_serde_round_trips_single_same_key_update() -> None:
    serde = ChangedSerde(S)
    for change in (Change("n", "o"), Change("n", None), Change(None, "o")):
        assert serde.deserialize("t", serde.serialize("t", change)) == change


# -- through the DSL ------------------------------------------------------------------------

DSL_CACHING = pytest.mark.parametrize(
    "cache_bytes", [0, 10 * 1024 * 1024], ids=["no-cache", "cache"]
)


def dsl_run(
    build: Any, inputs: list, tmp_path: Any, cache_bytes: int, config=None, value_serde=None
) -> list:
    """Output of ``build`` for ``inputs``; ``value_serde`` reads the output (a count writes
    longs: Kafka's ``count()`` defaults its value serde to ``Serdes.Long()``)."""
    from streaming import StreamsBuilder

    builder = StreamsBuilder()
    build(builder)
    cfg = {"state.dir": str(tmp_path), "statestore.cache.max.bytes": cache_bytes}
    cfg.update(config or {})
    with TopologyTestDriver(builder.build(), cfg, initial_wall_clock_time_ms=0) as driver:
        src = driver.create_input_topic("in")
        out = driver.create_output_topic("out", value_serde=value_serde)
        for key, value, ts in inputs:
            src.pipe_input(key, value, ts)
        return kvt(out.read_records_to_list())


@DSL_CACHING
def test_dsl_agg_basic(tmp_path: Any, cache_bytes: int) -> None:
    def build(b: Any) -> None:
        from streaming.dsl.options import Materialized

        (b.table("in").group_by(lambda k, v: (k, v))
         .aggregate(STRING_INIT, TOSTRING_ADDER, TOSTRING_REMOVER,
                    materialized=Materialized.as_("topic1-Canonized"))
         .to_stream().to("out"))  # fmt: skip

    assert dsl_run(build, AGG_BASIC_IN, tmp_path, cache_bytes) == AGG_BASIC_OUT


@DSL_CACHING
def test_dsl_agg_repartition(tmp_path: Any, cache_bytes: int) -> None:
    def build(b: Any) -> None:
        (b.table("in").group_by(agg_repartition_selector)
         .aggregate(STRING_INIT, TOSTRING_ADDER, TOSTRING_REMOVER).to_stream().to("out"))  # fmt: skip

    assert dsl_run(build, AGG_REPARTITION_IN, tmp_path, cache_bytes) == AGG_REPARTITION_OUT


@DSL_CACHING
@pytest.mark.parametrize("materialized", [None, "t"], ids=["source-unnamed", "source-named"])
def test_dsl_count(tmp_path: Any, cache_bytes: int, materialized: str | None) -> None:
    def build(b: Any) -> None:
        from streaming.dsl.options import Materialized

        mat = Materialized.as_(materialized) if materialized else None
        (b.table("in", materialized=mat).group_by(lambda k, v: (v, v)).count()
         .to_stream().to("out"))  # fmt: skip

    assert dsl_run(build, COUNT_IN, tmp_path, cache_bytes, value_serde=serdes.Long()) == COUNT_OUT


@DSL_CACHING
def test_dsl_remove_old_before_add_new(tmp_path: Any, cache_bytes: int) -> None:
    def build(b: Any) -> None:
        (b.table("in").group_by(lambda k, v: (k[0], k[1]))
         .aggregate(lambda: "", lambda k, v, a: a + v, lambda k, v, a: a.replace(v, ""))
         .to_stream().to("out"))  # fmt: skip

    assert dsl_run(build, REMOVE_OLD_IN, tmp_path, cache_bytes) == REMOVE_OLD_OUT


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"upgrade.from": "3.3"}, [("1", 1, 8), ("1", 0, 9), ("1", 1, 9)]),
        ({}, [("1", 1, 8), ("1", 1, 9)]),
    ],
    ids=["upgrading", "not-upgrading"],
)
def test_dsl_upgrade_from_config(tmp_path: Any, config: dict, expected: list) -> None:
    def build(b: Any) -> None:
        b.table("in").group_by(lambda k, v: (k, v)).count().to_stream().to("out")

    out = dsl_run(
        build, [("1", "", 8), ("1", "", 9)], tmp_path, 10 * 1024 * 1024, config, serdes.Long()
    )
    assert out == expected


@DSL_CACHING
def test_dsl_reduce(tmp_path: Any, cache_bytes: int) -> None:
    def build(b: Any) -> None:
        (b.table("in").group_by(lambda k, v: (k, int(v)))
         .reduce(lambda a, v: a + v, lambda a, v: a - v).to_stream().to("out"))  # fmt: skip

    out = dsl_run(
        build,
        [("A", 1.1, 10), ("B", 2.2, 11), ("A", 2.6, 30), ("B", 1.3, 30), ("A", 5.7, 50),
         ("B", 6.2, 20)],
        tmp_path, cache_bytes,
    )  # fmt: skip
    assert out == [("A", 1, 10), ("B", 2, 11), ("A", 2, 30), ("B", 1, 30), ("A", 5, 50),
                   ("B", 6, 30)]  # fmt: skip
