"""Grouped-stream count / reduce / aggregate: ports of Kafka Streams 4.1's
``KGroupedStreamImplTest`` (count, reduce, aggregate and their stores) plus the
``KStreamAggregate`` / ``KStreamReduce`` timestamp and old-value rules.
"""

from __future__ import annotations

from typing import Any

import pytest

from streaming import StreamsBuilder, TopologyTestDriver, serdes
from streaming.dsl.change import Change
from streaming.dsl.options import Materialized
from streaming.dsl.processors.aggregate import KStreamAggregateSupplier, KStreamReduceSupplier
from streaming.topology.processor import Processor, Record

S = serdes.String()
L = serdes.Long()
CACHE = pytest.mark.parametrize("cache_bytes", [0, 10 * 1024 * 1024], ids=["no-cache", "cache"])

# KGroupedStreamImplTest.processData (no explicit timestamps: wall-clock time 0)
PROCESS_DATA = [("1", "A"), ("3", "B"), ("1", "C"), ("2", "D"), ("3", "E"), ("1", "F"), ("3", None)]


def run(build: Any, inputs: list, tmp_path: Any, cache_bytes: int, out_serde: Any = S):
    b = StreamsBuilder()
    build(b)
    cfg = {"state.dir": str(tmp_path), "statestore.cache.max.bytes": cache_bytes}
    driver = TopologyTestDriver(b.build(), cfg, initial_wall_clock_time_ms=0)
    src = driver.create_input_topic("in", S, S)
    for item in inputs:
        src.pipe_input(*item)
    return driver, driver.create_output_topic("out", S, out_serde)


def kvt(records: list[Any]) -> list[tuple[Any, Any, int]]:
    return [(r.key, r.value, r.timestamp) for r in records]


@CACHE
def test_count_and_materialize_results(tmp_path: Any, cache_bytes: int) -> None:
    """KGroupedStreamImplTest.shouldCountAndMaterializeResults."""

    def build(b: StreamsBuilder) -> None:
        (b.stream("in", key_serde=S, value_serde=S).group_by_key()
         .count(Materialized.as_("count").with_key_serde(S)))  # fmt: skip

    driver, _ = run(build, PROCESS_DATA, tmp_path, cache_bytes)
    with driver:
        store = driver.get_key_value_store("count")
        assert (store.get("1"), store.get("2"), store.get("3")) == (3, 1, 2)
        ts_store = driver.get_timestamped_key_value_store("count")
        assert ts_store.get("1").timestamp == 0


@CACHE
def test_reduce_and_materialize_results(tmp_path: Any, cache_bytes: int) -> None:
    """KGroupedStreamImplTest.shouldReduceAndMaterializeResults (MockReducer.STRING_ADDER)."""

    def build(b: StreamsBuilder) -> None:
        (b.stream("in", key_serde=S, value_serde=S).group_by_key()
         .reduce(lambda a, v: f"{a}+{v}", Materialized.as_("reduce").with_value_serde(S)))  # fmt: skip

    driver, _ = run(build, PROCESS_DATA, tmp_path, cache_bytes)
    with driver:
        store = driver.get_key_value_store("reduce")
        assert (store.get("1"), store.get("2"), store.get("3")) == ("A+C+F", "D", "B+E")


@CACHE
def test_aggregate_and_materialize_results(tmp_path: Any, cache_bytes: int) -> None:
    """KGroupedStreamImplTest.shouldAggregateAndMaterializeResults."""

    def build(b: StreamsBuilder) -> None:
        (b.stream("in", key_serde=S, value_serde=S).group_by_key()
         .aggregate(lambda: "0", lambda k, v, a: f"{a}+{v}",
                    Materialized.as_("aggregate").with_value_serde(S)))  # fmt: skip

    driver, _ = run(build, PROCESS_DATA, tmp_path, cache_bytes)
    with driver:
        store = driver.get_key_value_store("aggregate")
        assert (store.get("1"), store.get("2"), store.get("3")) == ("0+A+C+F", "0+D", "0+B+E")


@CACHE
def test_count_output_timestamps_are_max(tmp_path: Any, cache_bytes: int) -> None:
    """KStreamAggregate: newTimestamp = max(record, previous aggregate); null key/value skipped."""

    def build(b: StreamsBuilder) -> None:
        (b.stream("in", key_serde=S, value_serde=S).group_by_key().count()
         .to_stream().to("out", key_serde=S, value_serde=L))  # fmt: skip

    inputs = [("a", "x", 10), ("a", "y", 5), ("b", "z", 7), (None, "n", 20), ("a", None, 30),
              ("a", "w", 12)]  # fmt: skip
    driver, out = run(build, inputs, tmp_path, cache_bytes, L)
    with driver:
        assert kvt(out.read_records_to_list()) == [
            ("a", 1, 10),
            ("a", 2, 10),
            ("b", 1, 7),
            ("a", 3, 12),
        ]


@CACHE
def test_reduce_output_and_timestamps(tmp_path: Any, cache_bytes: int) -> None:
    def build(b: StreamsBuilder) -> None:
        (b.stream("in", key_serde=S, value_serde=S).group_by_key()
         .reduce(lambda a, v: a + v).to_stream().to("out", key_serde=S, value_serde=S))  # fmt: skip

    inputs = [("a", "1", 10), ("a", "2", 4), ("b", "3", 8), ("a", "4", 11)]
    driver, out = run(build, inputs, tmp_path, cache_bytes)
    with driver:
        assert kvt(out.read_records_to_list()) == [
            ("a", "1", 10),
            ("a", "12", 10),
            ("b", "3", 8),
            ("a", "124", 11),
        ]


@CACHE
def test_count_of_counts_uses_old_values(tmp_path: Any, cache_bytes: int) -> None:
    """A grouped table over a stream aggregate asks KStreamAggregate for old values.

    Without a cache Kafka forwards ``Change(1, initializer())`` for a new key, so the old
    pair ("0", key) is removed from an empty aggregate: a (null<-null) update, emitted as a
    tombstone for "0". With a cache the old value comes from the store (null) instead.
    """

    def build(b: StreamsBuilder) -> None:
        (b.stream("in", key_serde=S, value_serde=S).group_by_key().count()
         .group_by(lambda k, v: (str(v), k), key_serde=S, value_serde=S).count()
         .to_stream().to("out", key_serde=S, value_serde=L))  # fmt: skip

    inputs = [("a", "x", 1), ("b", "x", 2), ("a", "x", 3)]
    driver, out = run(build, inputs, tmp_path, cache_bytes, L)
    tail = [("1", 1, 3), ("2", 1, 3)]
    if cache_bytes:
        expected = [("1", 1, 1), ("1", 2, 2), *tail]
    else:
        expected = [("0", None, 1), ("1", 1, 1), ("0", None, 2), ("1", 2, 2), *tail]
    with driver:
        assert kvt(out.read_records_to_list()) == expected


# -- the processors directly --------------------------------------------------------------


class DictStore:
    def __init__(self) -> None:
        self.data: dict[Any, Any] = {}

    def get(self, key: Any) -> Any:
        return self.data.get(key)

    def put(self, key: Any, value: Any) -> None:
        if value is None or value.value is None:
            self.data.pop(key, None)
        else:
            self.data[key] = value

    def set_flush_listener(self, listener: Any, send_old_values: bool) -> bool:
        return False


class Ctx:
    def __init__(self, store: DictStore) -> None:
        self.store = store
        self.forwarded: list[Record] = []
        self.current_node = None

    def get_state_store(self, name: str) -> DictStore:
        return self.store

    def forward(self, record: Record, child_name: str | None = None) -> None:
        self.forwarded.append(record)

    def record_metadata(self) -> None:
        return None


def _init(supplier: Any, send_old: bool) -> tuple[Processor, Ctx]:
    if send_old:
        supplier.enable_sending_old_values(True)
    ctx = Ctx(DictStore())
    proc = supplier()
    proc.init(ctx)
    return proc, ctx


def test_stream_aggregate_old_value_is_the_initialized_aggregate() -> None:
    """Kafka forwards ``Change(newAgg, sendOldValues ? oldAgg : null)`` where oldAgg has
    already been replaced by ``initializer.apply()`` for a new key."""
    proc, ctx = _init(KStreamAggregateSupplier("s", lambda: 0, lambda k, v, a: a + v), True)
    proc.process(Record("a", 5, 10))
    proc.process(Record("a", 2, 3))
    assert [(r.value, r.timestamp) for r in ctx.forwarded] == [
        (Change(5, 0), 10),
        (Change(7, 5), 10),
    ]


def test_stream_reduce_old_value_none_for_first() -> None:
    proc, ctx = _init(KStreamReduceSupplier("s", lambda a, v: a + v), True)
    proc.process(Record("a", 5, 10))
    proc.process(Record("a", 2, 13))
    proc.process(Record(None, 2, 13))
    proc.process(Record("a", None, 13))
    assert [(r.value, r.timestamp) for r in ctx.forwarded] == [
        (Change(5, None), 10),
        (Change(7, 5), 13),
    ]
