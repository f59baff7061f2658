"""The topology families of the conformance suite, built with our engine.

Each family is the exact twin of the Java one in tests/conformance/java/Families.java (same
operators in the same order, same lambdas, same store names); keep the two in step. Keys are
strings, values longs; helper lambdas mirror Java's semantics where Python's differ (string
concatenation with null gives "null", ``%`` is ``Math.floorMod``).

Catalogue (params drawn by traces.PARAMS):

1. ``stateless``: filter/mapValues -> out1; filterNot/selectKey(k + "x") -> out2;
   flatMapValues(v repeated v mod 3 times) -> out3; map((k + ":" + v, v + 1)) -> out4;
   split(Named "br-") into neg / zero / default "rest" -> out-neg, out-zero, out-rest;
   merge(neg, zero) -> out-merged; merge(input, input2).mapValues(v - 1) -> out5.
2. ``agg`` {op, rekey}: groupByKey (or groupBy(v mod 3) with a repartition) then
   count / reduce(sum) / aggregate(0, agg + v), Materialized "agg-store" -> out.
3. ``tumbling`` / ``hopping`` {op, emit, size, grace|None, advance}: TimeWindows
   (ofSizeAndGrace / ofSizeWithNoGrace, advanceBy), emit eager / suppress(untilWindowCloses
   (unbounded)) / emitStrategy(onWindowClose), store "win-store" -> out (TimeWindowedSerde).
4. ``sliding`` {op, emit, diff, grace|None}: SlidingWindows, as 3.
5. ``session`` {op, emit, gap, grace|None}: SessionWindows, merger a + b, store
   "sess-store" -> out (SessionWindowedSerde).
6. ``suppress_time_limit`` {limit, buffer, n}: groupByKey().count() then
   suppress(untilTimeLimit(limit, unbounded / maxRecords(n) / maxRecords(n)
   .emitEarlyWhenFull() / unbounded().withMaxRecords(n) (strict: shuts down when full)))
   -> out. The strict variant is expected to fail on both sides once the buffer is full.
7. ``table_groupby`` {op, variant}: table("input") (materialized "src-table", or not, or
   materialized then filter(v >= 0)) -> groupBy((v mod 3, v)) -> count / reduce(+, -) /
   aggregate(0, +, -) in "gb-store" -> out.
8. ``table_ops`` {variant, source_materialized}: table("input") -> filter(v even) /
   filter(v even, Materialized) / filterNot / mapValues(v + 1) (materialized or not), or
   stream("input").toTable() (materialized or not) -> toStream -> out.
9. ``process`` {api, interval}: a Processor API processor summing values per key in the
   persistent KeyValueStore "sum-store" and forwarding the sum; ``process`` also has a
   stream-time punctuator every ``interval`` ms forwarding ("count", number of keys);
   ``process_values`` (a FixedKeyProcessor, which cannot forward from a punctuator) has a
   punctuator that resets every sum to 0.

Every stateful family also takes ``store`` ("rocksdb" | "in_memory": Materialized
withStoreType / Stores.inMemoryKeyValueStore), and the window and session families
``retention_extra`` (None = Kafka's default retention; else Materialized.withRetention of the
minimum Kafka accepts plus extra: size + grace, 2 * diff + grace, gap + grace).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from streaming import (
    BufferConfig,
    EmitStrategy,
    Grouped,
    Materialized,
    Named,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    TopologyTestDriver,
    serdes,
)
from streaming.state import Stores
from streaming.topology import FixedKeyProcessor, Processor, PunctuationType, Record

CACHE_BYTES = 10485760

S = serdes.String
L = serdes.Long

# Families whose output depends on record caching (all with materialized aggregations/tables).
CACHING_FAMILIES = set(
    {
        "agg",
        "tumbling",
        "hopping",
        "sliding",
        "session",
        "suppress_time_limit",
        "table_groupby",
        "table_ops",
    }
)


def caching_matters(family: str) -> bool:
    return family in CACHING_FAMILIES


def expected_error(family: str, params: dict[str, Any]) -> Callable[[str], bool] | None:
    """For runs where Kafka Streams is documented to fail: a predicate on the Java error."""
    if family == "suppress_time_limit" and params.get("buffer") == "strict_max_records":
        return lambda error: "buffer exceeded its max capacity" in error.lower()
    return None


# ------------------------------------------------------------------ Java-semantics helpers


def jstr(x: Any) -> str:
    """``String.valueOf`` / string concatenation: null -> "null"."""
    return "null" if x is None else str(x)


def is_even(v: int | None) -> bool:
    return v is not None and v % 2 == 0


def mod3(v: int | None) -> str | None:
    return None if v is None else str(v % 3)  # Python % is Math.floorMod


def plus(a: int | None, b: int | None) -> int | None:
    """Null-safe sum (Kafka hands null values to some aggregators, e.g. windowed ones)."""
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def minus(a: int | None, b: int | None) -> int | None:
    if a is None:
        return None if b is None else -b
    if b is None:
        return a
    return a - b


def _mat(store: str, p: dict[str, Any], min_retention: int = 0) -> Materialized:
    """Params "store" ("rocksdb" default, "in_memory") and, for window/session stores,
    "retention_extra" (retention = the minimum Kafka accepts + extra)."""
    m = Materialized.as_(store).with_key_serde(S()).with_value_serde(L())
    if p.get("store", "rocksdb") == "in_memory":
        m = m.with_store_type("in_memory")
    if p.get("retention_extra") is not None:
        m = m.with_retention(min_retention + p["retention_extra"])
    return m


def _grace(p: dict[str, Any]) -> int:
    return 0 if p.get("grace") is None else p["grace"]


def _input(b: StreamsBuilder, topic: str = "input") -> Any:
    return b.stream(topic, key_serde=S(), value_serde=L())


# topic -> how its keys are laid out: "string", ("time", window size) or "session".
Outputs = dict[str, Any]


def _to(stream: Any, topic: str, outs: Outputs) -> None:
    stream.to(topic, key_serde=S(), value_serde=L())
    outs[topic] = "string"


# ------------------------------------------------------------------ 1. stateless


def stateless(b: StreamsBuilder, p: dict[str, Any], outs: Outputs) -> None:
    s = _input(b)
    _to(s.filter(lambda k, v: is_even(v)).map_values(lambda v: v * 10), "out1", outs)
    _to(s.filter_not(lambda k, v: is_even(v)).select_key(lambda k, v: jstr(k) + "x"), "out2", outs)
    _to(s.flat_map_values(lambda v: [] if v is None else [v] * (v % 3)), "out3", outs)
    _to(
        s.map(lambda k, v: (jstr(k) + ":" + jstr(v), None if v is None else v + 1)),
        "out4",
        outs,
    )
    br = (
        s.split(named="br-")
        .branch(lambda k, v: v is not None and v < 0, named="neg")
        .branch(lambda k, v: v is not None and v == 0, named="zero")
        .default_branch(named="rest")
    )
    _to(br["br-neg"], "out-neg", outs)
    _to(br["br-zero"], "out-zero", outs)
    _to(br["br-rest"], "out-rest", outs)
    _to(br["br-neg"].merge(br["br-zero"]), "out-merged", outs)
    s2 = _input(b, "input2")
    _to(s.merge(s2).map_values(lambda v: None if v is None else v - 1), "out5", outs)


# ------------------------------------------------------------------ 2. agg


def _aggregate_grouped(g: Any, op: str, m: Materialized) -> Any:
    if op == "count":
        return g.count(materialized=m)
    if op == "reduce":
        return g.reduce(plus, materialized=m)
    if op == "aggregate":
        return g.aggregate(lambda: 0, lambda k, v, a: plus(a, v), materialized=m)
    raise ValueError(op)


def agg(b: StreamsBuilder, p: dict[str, Any], outs: Outputs) -> None:
    s = _input(b)
    if p.get("rekey"):
        g = s.group_by(lambda k, v: mod3(v), grouped=Grouped.with_(S(), L()))
    else:
        g = s.group_by_key(Grouped.with_(S(), L()))
    _to(_aggregate_grouped(g, p["op"], _mat("agg-store", p)).to_stream(), "out", outs)


# ------------------------------------------------------------------ 3./4. time windows


def _windowed_op(w: Any, op: str, emit: str, m: Materialized) -> Any:
    if emit == "on_window_close":
        w = w.emit_strategy(EmitStrategy.on_window_close())
    if op == "count":
        t = w.count(materialized=m)
    elif op == "reduce":
        t = w.reduce(plus, materialized=m)
    elif op == "aggregate":
        t = w.aggregate(lambda: 0, lambda k, v, a: plus(a, v), materialized=m)
    else:
        raise ValueError(op)
    if emit == "suppress":
        t = t.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
    return t


def time_windowed(b: StreamsBuilder, p: dict[str, Any], outs: Outputs, hopping: bool) -> None:
    size = p["size"]
    if p.get("grace") is not None:
        windows = TimeWindows.of_size_and_grace(size, p["grace"])
    else:
        windows = TimeWindows.of_size_with_no_grace(size)
    if hopping:
        windows = windows.advance_by(p["advance"])
    m = _mat("win-store", p, size + _grace(p))
    t = _windowed_op(_input(b).group_by_key().windowed_by(windows), p["op"], p["emit"], m)
    t.to_stream().to("out", key_serde=serdes.TimeWindowedSerde(S(), size), value_serde=L())
    outs["out"] = ("time", size)


def sliding(b: StreamsBuilder, p: dict[str, Any], outs: Outputs) -> None:
    diff = p["diff"]
    if p.get("grace") is not None:
        windows = SlidingWindows.of_time_difference_and_grace(diff, p["grace"])
    else:
        windows = SlidingWindows.of_time_difference_with_no_grace(diff)
    m = _mat("win-store", p, 2 * diff + _grace(p))
    t = _windowed_op(_input(b).group_by_key().windowed_by(windows), p["op"], p["emit"], m)
    t.to_stream().to("out", key_serde=serdes.TimeWindowedSerde(S(), diff), value_serde=L())
    outs["out"] = ("time", diff)


# ------------------------------------------------------------------ 5. session


def session(b: StreamsBuilder, p: dict[str, Any], outs: Outputs) -> None:
    gap = p["gap"]
    if p.get("grace") is not None:
        windows = SessionWindows.of_inactivity_gap_and_grace(gap, p["grace"])
    else:
        windows = SessionWindows.of_inactivity_gap_with_no_grace(gap)
    w = _input(b).group_by_key().windowed_by(windows)
    if p["emit"] == "on_window_close":
        w = w.emit_strategy(EmitStrategy.on_window_close())
    m = _mat("sess-store", p, gap + _grace(p))
    op = p["op"]
    if op == "count":
        t = w.count(materialized=m)
    elif op == "reduce":
        t = w.reduce(plus, materialized=m)
    elif op == "aggregate":
        t = w.aggregate(
            lambda: 0, lambda k, v, a: plus(a, v), lambda k, a1, a2: plus(a1, a2), materialized=m
        )
    else:
        raise ValueError(op)
    if p["emit"] == "suppress":
        t = t.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
    t.to_stream().to("out", key_serde=serdes.SessionWindowedSerde(S()), value_serde=L())
    outs["out"] = "session"


# ------------------------------------------------------------------ 6. suppress untilTimeLimit


def suppress_time_limit(b: StreamsBuilder, p: dict[str, Any], outs: Outputs) -> None:
    kind = p["buffer"]
    if kind == "unbounded":
        buffer = BufferConfig.unbounded()
    elif kind == "max_records":
        buffer = BufferConfig.max_records(p["n"])
    elif kind == "max_records_eager":
        buffer = BufferConfig.max_records(p["n"]).emit_early_when_full()
    elif kind == "strict_max_records":
        buffer = BufferConfig.unbounded().with_max_records(p["n"])
    else:
        raise ValueError(kind)
    counts = _input(b).group_by_key().count(materialized=_mat("cnt-store", p))
    _to(counts.suppress(Suppressed.until_time_limit(p["limit"], buffer)).to_stream(), "out", outs)


# ------------------------------------------------------------------ 7. table groupBy


def table_groupby(b: StreamsBuilder, p: dict[str, Any], outs: Outputs) -> None:
    variant = p["variant"]
    if variant == "unmaterialized":
        t = b.table("input", key_serde=S(), value_serde=L())
    else:
        t = b.table("input", key_serde=S(), value_serde=L(), materialized=_mat("src-table", p))
    if variant == "filtered":
        t = t.filter(lambda k, v: v is not None and v >= 0)
    g = t.group_by(lambda k, v: (mod3(v), v), grouped=Grouped.with_(S(), L()))
    m = _mat("gb-store", p)
    op = p["op"]
    if op == "count":
        r = g.count(materialized=m)
    elif op == "reduce":
        r = g.reduce(plus, minus, materialized=m)
    elif op == "aggregate":
        r = g.aggregate(
            lambda: 0, lambda k, v, a: plus(a, v), lambda k, v, a: minus(a, v), materialized=m
        )
    else:
        raise ValueError(op)
    _to(r.to_stream(), "out", outs)


# ------------------------------------------------------------------ 8. table ops


def table_ops(b: StreamsBuilder, p: dict[str, Any], outs: Outputs) -> None:
    variant = p["variant"]
    if variant.startswith("to_table"):
        s = _input(b)
        if variant == "to_table_materialized":
            t = s.to_table(materialized=_mat("tt-store", p))
        else:
            t = s.to_table()
    else:
        if p.get("source_materialized"):
            src = b.table(
                "input", key_serde=S(), value_serde=L(), materialized=_mat("src-table", p)
            )
        else:
            src = b.table("input", key_serde=S(), value_serde=L())
        m = _mat("op-store", p)
        plus_one = lambda v: None if v is None else v + 1  # noqa: E731
        if variant == "filter":
            t = src.filter(lambda k, v: is_even(v))
        elif variant == "filter_materialized":
            t = src.filter(lambda k, v: is_even(v), materialized=m)
        elif variant == "filter_not":
            t = src.filter_not(lambda k, v: is_even(v))
        elif variant == "map_values":
            t = src.map_values(plus_one)
        elif variant == "map_values_materialized":
            t = src.map_values(plus_one, materialized=m)
        else:
            raise ValueError(variant)
    _to(t.to_stream(), "out", outs)


# ------------------------------------------------------------------ 9. Processor API


class SumProcessor(Processor):
    def __init__(self, interval: int) -> None:
        self.interval = interval

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store("sum-store")
        context.schedule(self.interval, PunctuationType.STREAM_TIME, self._punctuate)

    def _punctuate(self, ts: int) -> None:
        n = sum(1 for _ in self.store.all())
        self.context.forward(Record("count", n, ts))

    def process(self, record: Record) -> None:
        if record.key is None or record.value is None:
            return
        old = self.store.get(record.key)
        total = (0 if old is None else old) + record.value
        self.store.put(record.key, total)
        self.context.forward(record.with_value(total))


class SumValuesProcessor(FixedKeyProcessor):
    def __init__(self, interval: int) -> None:
        self.interval = interval

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store("sum-store")
        # A FixedKeyProcessor cannot forward new records from a punctuator: reset the sums.
        context.schedule(self.interval, PunctuationType.STREAM_TIME, self._punctuate)

    def _punctuate(self, ts: int) -> None:
        keys = [k for k, _ in self.store.all()]
        for k in keys:
            self.store.put(k, 0)

    def process(self, record: Record) -> None:
        if record.key is None or record.value is None:
            return
        old = self.store.get(record.key)
        total = (0 if old is None else old) + record.value
        self.store.put(record.key, total)
        self.context.forward(record.with_value(total))


def process(b: StreamsBuilder, p: dict[str, Any], outs: Outputs) -> None:
    interval = p["interval"]
    if p.get("store", "rocksdb") == "in_memory":
        supplier = Stores.in_memory_key_value_store("sum-store")
    else:
        supplier = Stores.persistent_key_value_store("sum-store")
    b.add_state_store(Stores.key_value_store_builder(supplier, S(), L()))
    s = _input(b)
    if p["api"] == "process_values":
        r = s.process_values(lambda: SumValuesProcessor(interval), "sum-store")
    else:
        r = s.process(lambda: SumProcessor(interval), "sum-store")
    _to(r, "out", outs)


# ------------------------------------------------------------------ registry and runner

BUILDERS: dict[str, Callable[[StreamsBuilder, dict[str, Any], Outputs], None]] = {
    "stateless": stateless,
    "agg": agg,
    "tumbling": lambda b, p, o: time_windowed(b, p, o, hopping=False),
    "hopping": lambda b, p, o: time_windowed(b, p, o, hopping=True),
    "sliding": sliding,
    "session": session,
    "suppress_time_limit": suppress_time_limit,
    "table_groupby": table_groupby,
    "table_ops": table_ops,
    "process": process,
}

# Named is re-exported for families that want explicit names; keep the import used.
_ = Named


def register(
    family: str,
    builder: Callable[[StreamsBuilder, dict[str, Any], Outputs], None],
    params: Any,
    *,
    input_topics: tuple[str, ...] = ("input",),
    caching: bool = False,
    scaled: bool = False,
) -> None:
    """Add a family defined in another module (fam_*.py, imported by conftest.py).

    ``params`` is its hypothesis strategy; ``input_topics`` the topics traces draw from (repeat
    a topic to weight it); ``caching`` runs every trace with and without record caching;
    ``scaled`` also runs a quarter of the traces in seconds (see traces.SCALED_FAMILIES).
    """
    import traces

    if family in BUILDERS:
        raise ValueError(f"family {family!r} is registered twice")
    BUILDERS[family] = builder
    traces.PARAMS[family] = params
    traces.INPUT_TOPICS[family] = input_topics
    if caching:
        CACHING_FAMILIES.add(family)
    if scaled:
        traces.SCALED_FAMILIES.add(family)


#: the default (key, value) serdes of each ``defaults`` mode
DEFAULT_SERDES = {
    "string-long": ("string", "long"),
    "string-string": ("string", "string"),
    "json": ("json", "json"),
}


def build(family: str, params: dict[str, Any], optimize: bool = False) -> tuple[Any, Outputs]:
    """The topology of a family and its output topics (topic -> key layout)."""
    b = StreamsBuilder()
    outs: Outputs = {}
    BUILDERS[family](b, params, outs)
    return b.build({"topology.optimization": "all" if optimize else "none"}), outs


# The output bytes are decoded here, independently of the engine's deserializers, exactly as
# Kafka's StringDeserializer / LongDeserializer / TimeWindowedDeserializer /
# SessionWindowedDeserializer read them: the byte layout is part of what is compared.
_LONG = struct.Struct(">q")
LONG_MAX = (1 << 63) - 1


class DecodeError(ValueError):
    pass


def _decode_string(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8")


def decode_value(data: bytes | None) -> int | None:
    if data is None:
        return None
    if len(data) != 8:
        raise DecodeError(f"Size of data received by LongDeserializer is not 8: {data.hex()}")
    return _LONG.unpack(data)[0]


def decode_key(layout: Any, data: bytes | None) -> str | None:
    """A key as the Java harness prints it: the string, or ``Windowed.toString()``."""
    if layout == "string":
        return _decode_string(data)
    if data is None:
        return None
    if layout == "session":
        if len(data) < 16:
            raise DecodeError(f"session-windowed key too short: {data.hex()}")
        end = _LONG.unpack_from(data, len(data) - 16)[0]
        start = _LONG.unpack_from(data, len(data) - 8)[0]
        return f"[{jstr(_decode_string(data[:-16]))}@{start}/{end}]"
    kind, size = layout
    assert kind == "time"
    if len(data) < 8:
        raise DecodeError(f"time-windowed key too short: {data.hex()}")
    start = _LONG.unpack_from(data, len(data) - 8)[0]
    end = start + size
    if end > LONG_MAX or end < start:
        end = LONG_MAX
    return f"[{jstr(_decode_string(data[:-8]))}@{start}/{end}]"


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}"


def run_python(
    family: str,
    params: dict[str, Any],
    inputs: list[dict[str, Any]],
    caching: bool,
    optimize: bool = False,
    defaults: str = "string-long",
    extra_config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run one trace through streaming.TopologyTestDriver; same shape as a Java response
    (``extra_config``: more driver settings, e.g. ``processing.batch.enabled``)."""
    try:
        topology, outs = build(family, params, optimize)
    except Exception as exc:
        return {"outputs": None, "error": _describe(exc)}
    outputs: dict[str, list[list[Any]]] = {}
    raw_rows: dict[str, list[list[Any]]] = {}
    error = None
    config = {
        # as the Java side: its application id and the drawn default serdes
        "application.id": "conformance",
        "default.key.serde": DEFAULT_SERDES[defaults][0],
        "default.value.serde": DEFAULT_SERDES[defaults][1],
        "statestore.cache.max.bytes": CACHE_BYTES if caching else 0,
        **(extra_config or {}),
    }
    driver = None
    try:
        driver = TopologyTestDriver(topology, config=config, initial_wall_clock_time_ms=0)
        topics: dict[str, Any] = {}
        for rec in inputs:
            topic = rec["topic"]
            if topic not in topics:
                topics[topic] = driver.create_input_topic(topic, key_serde=S(), value_serde=L())
            topics[topic].pipe_input(rec["key"], rec["value"], timestamp=rec["ts"])
    except Exception as exc:
        error = _describe(exc)
    if driver is not None:
        try:
            raw = serdes.Bytes()
            # every topic written, byte for byte; the outputs are decoded from the same records
            written = {
                topic: driver.create_output_topic(topic, raw, raw).read_records_to_list()
                for topic in sorted(driver.produced_topic_names())
            }
            raw_rows = {
                topic: [
                    [
                        None if r.key is None else r.key.hex(),
                        None if r.value is None else r.value.hex(),
                        0 if r.timestamp is None else r.timestamp,  # as the Java side
                        [[k, None if v is None else bytes(v).hex()] for k, v in r.headers],
                    ]
                    for r in records
                ]
                for topic, records in written.items()
            }
            for topic, layout in outs.items():
                outputs[topic] = [
                    [decode_key(layout, r.key), decode_value(r.value), r.timestamp]
                    for r in written.get(topic, [])
                ]
        except Exception as exc:
            error = error or _describe(exc)
        try:
            driver.close()
        except Exception as exc:
            error = error or _describe(exc)
    return {
        "outputs": outputs if driver is not None else None,
        "raw": raw_rows if driver is not None else None,
        "error": error,
    }
