"""The batch entry against the per-record path: the conformance suite's topology families
(tests/conformance) on random traces, run both ways, must write the same records (keys,
values, timestamps, headers, byte for byte) and the same changelog bytes.

Each case runs twice per path: through the TopologyTestDriver (one record per ``process``,
a commit after each, as Kafka's driver does) and through a ``StreamTask`` driven directly
with the trace cut into random batches, committed at random points (a whole batch per
``process`` call, as the runtime does), with random headers on the input records.
"""

from __future__ import annotations

import logging
import random
import struct
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streaming import TopologyTestDriver, serdes
from streaming.runtime import ConsumerRecord, StreamTask
from streaming.runtime.config_keys import PROCESSING_BATCH_ENABLED
from streaming.state import ThreadCache
from streaming.testing.global_state import GlobalStateTask

_CONFORMANCE = str(Path(__file__).resolve().parents[2] / "conformance")
if _CONFORMANCE not in sys.path:
    sys.path.insert(0, _CONFORMANCE)

import fam_foreign_key  # noqa: E402, F401
import fam_more  # noqa: E402, F401
import fam_parity  # noqa: E402, F401
import fam_stream_joins  # noqa: E402, F401
import fam_table_joins  # noqa: E402, F401
import families  # noqa: E402
import traces  # noqa: E402

FAMILIES = sorted(families.BUILDERS)
_LONG = struct.Struct(">q")
EXAMPLES = 6


@pytest.fixture(autouse=True)
def _quiet_and_on_tmpfs() -> Iterator[None]:
    """Stores in /dev/shm when it is writable (RocksDB flushes on every driver commit);
    the engine's skipped-record warnings silenced."""
    old_tempdir = tempfile.tempdir
    shm = Path("/dev/shm")
    scratch = None
    if shm.is_dir():
        try:
            scratch = tempfile.mkdtemp(prefix="batch-diff-", dir=shm)
            tempfile.tempdir = scratch
        except OSError:
            scratch = None
    log = logging.getLogger("streaming")
    old_level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(old_level)
        tempfile.tempdir = old_tempdir
        if scratch is not None:
            import shutil

            shutil.rmtree(scratch, ignore_errors=True)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}"


def run_task(
    family: str | Any,
    params: dict[str, Any],
    trace: list[dict[str, Any]],
    *,
    caching: bool,
    optimize: bool,
    batched: bool,
    cuts: random.Random,
    cache_bytes: int = families.CACHE_BYTES,
    extra_config: dict[str, Any] | None = None,
    skip_failures: bool = False,
    encode: Any = None,
) -> dict[str, Any]:
    """The trace through one ``StreamTask`` of the whole topology (a family's, or the given
    topology), in random batches with random commits (``cuts`` decides them, the same way
    for both paths): every record sent and every changelog write, in order, plus the error
    that stopped the run, if any (``skip_failures``: a failing record is noted, as the
    exception handlers of a running application do, and the run goes on). ``encode`` gives
    the bytes of a trace record's key and value (default: UTF-8 and a Long)."""
    if isinstance(family, str):
        topology, _ = families.build(family, params, optimize)
    else:
        topology = family
    sent: list[tuple[Any, ...]] = []
    changelog: list[tuple[Any, ...]] = []
    pending: list[ConsumerRecord] = []
    offsets: dict[str, int] = {}
    error = None
    skipped: list[str] = []

    def skip(rec: Any, exc: Exception) -> None:
        skipped.append(f"{rec.offset}: {_describe(exc)}")

    def consumed(topic: str, key: bytes | None, value: bytes | None, ts: int, headers: Any):
        offset = offsets.get(topic, 0)
        offsets[topic] = offset + 1
        return ConsumerRecord(topic, 0, offset, ts, key, value, tuple(headers))

    def send(
        topic: str,
        key: Any,
        value: Any,
        ts: int,
        headers: Any,
        record: Any = None,
        partitioner: Any = None,
    ) -> None:
        # a sink's partitioner sees the record's key and value (the collector's call)
        chosen = None if partitioner is None else partitioner(topic, record.key, record.value, 4)
        # and where the collector sees the record come from (its dead letters' source)
        source = task.context.record_context()
        sent.append((topic, key, value, ts, tuple(headers), chosen, source))
        if task.source_for(topic) is not None:
            pending.append(consumed(topic, key, value, ts, headers))

    def log_change(store: str, key: bytes, value: bytes | None, ts: int, headers: Any) -> None:
        changelog.append((store, key, value, ts, tuple(headers or ())))

    config = {
        "application.id": "batch-diff",
        "default.key.serde": "string",
        "default.value.serde": "long",
        PROCESSING_BATCH_ENABLED: batched,
        **(extra_config or {}),
    }
    global_nodes = topology.global_node_names()
    with tempfile.TemporaryDirectory() as state_dir:
        cache = ThreadCache(cache_bytes) if caching else None
        # global stores are updated by a global task of their own, as in the driver
        global_task = None
        if global_nodes:
            global_task = GlobalStateTask(
                topology,
                application_id="batch-diff",
                config=config,
                clock=lambda: 0,
                cache=cache,
                caching_enabled=caching,
                state_dir=Path(state_dir) / "global",
            )
        task = StreamTask(
            "0_0",
            topology,
            [name for name in topology.nodes if name not in global_nodes],
            application_id="batch-diff",
            config=config,
            send=send,
            clock=lambda: 0,
            state_dir=Path(state_dir) / "0_0",
            cache=cache,
            caching_enabled=caching,
        )
        task.context.changelog_writer = log_change

        def drain(aligned: bool = True) -> None:
            """Process what is queued (and what the task writes to its own repartition
            topics); ``aligned``: sometimes only up to a random event time, as the runtime's
            event-time alignment does (the rest waits for a later drain)."""
            until = None
            if aligned and cuts.random() < 0.3:
                until = cuts.randint(0, 200) * (1000 if params.get("scale") else 1)
            while True:
                if pending:
                    task.add_records(list(pending))
                    pending.clear()
                on_error = skip if skip_failures else None
                if (
                    not task.process(cuts.randint(1, 40), until=until, on_error=on_error)
                    and not pending
                ):
                    return

        try:
            if global_task is not None:
                global_task.initialize()
                task.context.global_stores = global_task.stores
            task.initialize()
            assert (task.batch_plan is not None) is batched
            i = 0
            while i < len(trace):
                batch = trace[i : i + cuts.randint(1, 12)]
                i += len(batch)
                records = []
                for r in batch:
                    if encode is not None:
                        key, value = encode(r)
                    else:
                        key = None if r["key"] is None else r["key"].encode()
                        value = None if r["value"] is None else _LONG.pack(r["value"])
                    if global_task is not None and r["topic"] in global_task.topics:
                        global_task.update(r["topic"], key, value, r["ts"], ())
                        continue
                    headers = (
                        (("h", str(cuts.randint(0, 3)).encode()),) if cuts.random() < 0.3 else ()
                    )
                    records.append(consumed(r["topic"], key, value, r["ts"], headers))
                task.add_records(records)
                drain()
                if cuts.random() < 0.4:
                    task.commit()
                    drain()
            drain(aligned=False)
            task.commit()
            drain(aligned=False)
        except Exception as exc:
            error = _describe(exc)
        try:
            task.close(flush=error is None)
        except Exception as exc:
            error = error or _describe(exc)
        if global_task is not None:
            global_task.close()
    return {"sent": sent, "changelog": changelog, "error": error, "skipped": skipped}


@pytest.mark.parametrize("family", FAMILIES)
def test_batch_path_writes_what_the_per_record_path_writes(family: str) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(
        case=traces.cases(family),
        caching=st.booleans(),
        optimize=st.booleans(),
        defaults=st.sampled_from(sorted(families.DEFAULT_SERDES)),
        cut_seed=st.integers(0, 2**32 - 1),
    )
    def check(
        case: tuple[dict[str, Any], list[dict[str, Any]]],
        caching: bool,
        optimize: bool,
        defaults: str,
        cut_seed: int,
    ) -> None:
        params, trace = case
        through_driver = [
            families.run_python(
                family,
                params,
                trace,
                caching,
                optimize,
                defaults,
                extra_config={PROCESSING_BATCH_ENABLED: batched},
            )
            for batched in (True, False)
        ]
        assert through_driver[0] == through_driver[1]
        through_task = [
            run_task(
                family,
                params,
                trace,
                caching=caching,
                optimize=optimize,
                batched=batched,
                cuts=random.Random(cut_seed),
                extra_config=dict(
                    zip(
                        ("default.key.serde", "default.value.serde"),
                        families.DEFAULT_SERDES[defaults],
                        strict=True,
                    )
                ),
            )
            for batched in (True, False)
        ]
        assert through_task[0] == through_task[1]

    check()


def _fused(topology: Any) -> list[tuple[str, list[str], list[str]]]:
    with TopologyTestDriver(topology) as driver:
        plan = driver._task.batch_plan
        assert plan is not None
        return sorted(plan.chains)


_STATELESS = ("FILTER", "MAPVALUES", "MAP", "KEY", "FLATMAP", "FLATMAPVALUES", "MERGE")


def test_built_in_stateless_nodes_are_fused_up_to_the_first_other_node() -> None:
    topology, _ = families.build("stateless", {})
    chains = _fused(topology)
    fused = [name for _, inline, _ in chains for name in inline]
    tails = [name for _, _, receivers in chains for name in receivers]
    assert {name.split("-")[1] for name in fused} >= {"FILTER", "MAPVALUES", "KEY", "MAP"}
    # what receives the fused records: sinks and the split's branch node, none of the above
    assert tails and not [name for name in tails if name.split("-")[1] in _STATELESS]


def test_the_flag_turns_the_batch_entry_off() -> None:
    topology, _ = families.build("stateless", {})
    with TopologyTestDriver(topology, config={PROCESSING_BATCH_ENABLED: "false"}) as driver:
        assert driver._task.batch_plan is None


def test_user_processors_and_peek_end_a_chain() -> None:
    from streaming import StreamsBuilder
    from streaming.topology import Processor, Record

    class Upper(Processor):
        def process(self, record: Record) -> None:
            self.context.forward(record.with_value(record.value.upper()))

    b = StreamsBuilder()
    (
        b.stream("in", key_serde=serdes.String(), value_serde=serdes.String())
        .map_values(lambda v: v + "!")
        .peek(lambda k, v: None)
        .map_values(lambda v: v + "?")
        .process(Upper)
        .to("out", key_serde=serdes.String(), value_serde=serdes.String())
    )
    ((_, fused, tails),) = _fused(b.build())
    assert [n.split("-")[1] for n in fused] == ["MAPVALUES"]
    assert [n.split("-")[1] for n in tails] == ["PEEK"]


def _run_failing_chain(batched: bool, handler: str) -> tuple[list[Any], str | None]:
    """A fused chain whose user functions fail on some records (ZeroDivisionError on a 0,
    the map returns None for 7, the flat_map yields a triple for 14), with dead letters;
    the rows written, the dead letters' stack trace header masked (its frames are those of
    the code that ran: the fused function's or the processors')."""
    from streaming import StreamsBuilder

    b = StreamsBuilder()
    (
        b.stream("in", key_serde=serdes.String(), value_serde=serdes.Long())
        .filter(lambda k, v: v is not None)
        .map_values(lambda v: 100 // v)
        .map(lambda k, v: None if v == 14 else (k + "!", v))
        .flat_map(lambda k, v: [(k, v), (k, v + 1)] if v != 7 else [(k, v, 0)])
        .to("out", key_serde=serdes.String(), value_serde=serdes.Long())
    )
    config = {
        PROCESSING_BATCH_ENABLED: batched,
        "processing.exception.handler": handler,
        "errors.dead.letter.queue.topic.name": "dlq",
    }
    rows: list[Any] = []
    error = None
    with TopologyTestDriver(b.build(), config=config, initial_wall_clock_time_ms=0) as driver:
        source = driver.create_input_topic(
            "in", key_serde=serdes.String(), value_serde=serdes.Long()
        )
        try:
            for i, value in enumerate([5, 0, 7, 14, None, 3, 0, 100, 1]):
                source.pipe_input("k", value, timestamp=i, headers=[("n", str(i).encode())])
        except Exception as exc:
            error = _describe(exc)
        raw = serdes.Bytes()
        for topic in sorted(driver.produced_topic_names()):
            for r in driver.create_output_topic(topic, raw, raw).read_records_to_list():
                headers = [
                    (k, v if k != "__streams.errors.stacktrace" else b"<stack>")
                    for k, v in r.headers
                ]
                rows.append((topic, r.key, r.value, r.timestamp, headers))
    return rows, error


@pytest.mark.parametrize("handler", ["log_and_continue", "log_and_fail"])
def test_failures_inside_a_fused_chain_surface_as_on_the_per_record_path(handler: str) -> None:
    batched, per_record = _run_failing_chain(True, handler), _run_failing_chain(False, handler)
    assert batched == per_record
    rows, error = batched
    if handler == "log_and_continue":
        assert error is None
        dead = [row for row in rows if row[0] == "dlq"]
        # 0 twice (ZeroDivisionError), 7 (map returned None), 14 (a triple, not a pair)
        assert len(dead) == 4
    else:
        assert error is not None and "ZeroDivisionError" in error


# -- per-window pre-aggregation (window_fold) ----------------------------------------------


class _StoreReader:
    """Every ``interval`` of stream time, writes a digest of the whole window store: a
    punctuator reading what the batch's folds hold back (they must be written first)."""

    def __init__(self, interval: int) -> None:
        self.interval = interval

    def __call__(self) -> Any:
        from streaming.topology import Processor, PunctuationType, Record

        interval = self.interval

        class Reader(Processor):
            def init(self, context: Any) -> None:
                super().init(context)
                self.store = context.get_state_store("fold-store")
                context.schedule(interval, PunctuationType.STREAM_TIME, self.punctuate)

            def punctuate(self, now: int) -> None:
                rows = [
                    f"{w.key}@{w.window.start}={vat.value}:{vat.timestamp}"
                    for w, vat in self.store.fetch_all(0, 2**62)
                ]
                self.context.forward(Record("digest", ";".join(rows), now))

            def process(self, record: Record) -> None:
                pass

        return Reader()


def _fold_aggregation(op: str) -> tuple[Any, Any, Any]:
    """(initializer, aggregator, value serde) of a windowed aggregate: Long scalars (kept
    as they are between records), a JSON list and a string (serialized and read back), a
    failing one and one that deletes its window now and then."""
    if op == "long":
        return (lambda: 0), (lambda k, v, a: a + (v or 0)), serdes.Long()
    if op == "json":
        return (
            (lambda: []),
            (lambda k, v, a: ([*a, v] if v is None or v % 3 else a[-2:])),
            (serdes.Json()),
        )
    if op == "string":
        return (lambda: ""), (lambda k, v, a: f"{a[-6:]}{k}{v}"), serdes.String()
    if op == "fails":
        # a 0 fails the record (ZeroDivisionError) and so the run
        return (lambda: 0), (lambda k, v, a: a + (0 if v is None else 100 // v)), serdes.Long()
    if op == "deletes":
        return (lambda: 1), (lambda k, v, a: None if v == 4 else a * 2 + (v or 0)), serdes.Json()
    raise ValueError(op)


def fold_topology(p: dict[str, Any]) -> Any:
    """input -> group by key -> time windows (count, reduce or aggregate) -> out, with,
    as drawn, the late records as a side output and a punctuator reading the store."""
    from streaming import (
        BufferConfig,
        EmitStrategy,
        Materialized,
        StreamsBuilder,
        Suppressed,
        TimeWindows,
    )

    b = StreamsBuilder()
    size = p["size"]
    windows = (
        TimeWindows.of_size_and_grace(size, p["grace"])
        if p["grace"] is not None
        else TimeWindows.of_size_with_no_grace(size)
    )
    if p["advance"] is not None:
        windows = windows.advance_by(p["advance"])
    grouped = b.stream("input", key_serde=serdes.String(), value_serde=serdes.Long())
    w = grouped.group_by_key().windowed_by(windows)
    if p["emit"] == "on_window_close":
        w = w.emit_strategy(EmitStrategy.on_window_close())
    m = Materialized.as_("fold-store").with_key_serde(serdes.String())
    if p["store"] == "in_memory":
        m = m.with_store_type("in_memory")
    op = p["op"]
    if op == "count":
        value_serde: Any = serdes.Long()
        table = w.count(materialized=m.with_value_serde(value_serde))
    elif op == "reduce":
        value_serde = serdes.Long()
        table = w.reduce(families.plus, materialized=m.with_value_serde(value_serde))
    else:
        init, agg, value_serde = _fold_aggregation(op)
        table = w.aggregate(init, agg, materialized=m.with_value_serde(value_serde))
    if p["late"]:
        table.late_records().map_values(lambda r: f"{r.value}:{r.window.start}:{r.stream_time}").to(
            "late", key_serde=serdes.String(), value_serde=serdes.String()
        )
    out = table
    if p["emit"] == "suppress":
        out = table.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
    stream = out.to_stream()
    stream.to(
        "out", key_serde=serdes.TimeWindowedSerde(serdes.String(), size), value_serde=value_serde
    )
    if p["reader"] is not None:
        stream.process(_StoreReader(p["reader"]), "fold-store").to(
            "digests", key_serde=serdes.String(), value_serde=serdes.String()
        )
    return b.build()


@st.composite
def fold_params(draw: st.DrawFn) -> dict[str, Any]:
    size = draw(st.integers(3, 30))
    return {
        "size": size,
        "advance": draw(st.one_of(st.none(), st.integers(1, size))),
        "grace": draw(st.one_of(st.none(), st.integers(0, 15))),
        "emit": draw(st.sampled_from(("eager", "suppress", "on_window_close"))),
        "op": draw(
            st.sampled_from(("count", "reduce", "long", "json", "string", "fails", "deletes"))
        ),
        "store": draw(st.sampled_from(("rocksdb", "in_memory"))),
        "late": draw(st.booleans()),
        "reader": draw(st.one_of(st.none(), st.integers(1, 40))),
    }


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(
    params=fold_params(),
    trace=traces.traces(("input",), max_records=60),
    caching=st.booleans(),
    # from a cache that holds a few windows (its puts evict mid-batch) to one that never fills
    cache_bytes=st.one_of(st.integers(150, 3000), st.just(families.CACHE_BYTES)),
    emit_interval=st.sampled_from((0, 1000)),
    skip_failures=st.booleans(),
    cut_seed=st.integers(0, 2**32 - 1),
)
def test_folded_windows_write_what_the_per_record_path_writes(
    params: dict[str, Any],
    trace: list[dict[str, Any]],
    caching: bool,
    cache_bytes: int,
    emit_interval: int,
    skip_failures: bool,
    cut_seed: int,
) -> None:
    from streaming.dsl.processors.window_aggregate import (
        EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION as EMIT_INTERVAL,
    )

    runs = [
        run_task(
            fold_topology(params),
            params,
            trace,
            caching=caching,
            optimize=False,
            batched=batched,
            cuts=random.Random(cut_seed),
            cache_bytes=cache_bytes,
            extra_config={EMIT_INTERVAL: emit_interval},
            skip_failures=skip_failures,
        )
        for batched in (True, False)
    ]
    assert runs[0] == runs[1]


def _folds(params: dict[str, Any], caching: bool) -> Any:
    config = {"statestore.cache.max.bytes": families.CACHE_BYTES if caching else 0}
    with TopologyTestDriver(fold_topology(params), config=config) as driver:
        plan = driver._task.batch_plan
        assert plan is not None
        return plan.folds


_BASE = {
    "size": 10,
    "advance": None,
    "grace": 5,
    "emit": "eager",
    "op": "count",
    "store": "rocksdb",
    "late": True,
    "reader": 5,
}


def test_a_cached_time_window_aggregation_folds_its_windows() -> None:
    for params in (_BASE, {**_BASE, "emit": "on_window_close", "op": "json", "advance": 3}):
        folds = _folds(params, caching=True)
        assert folds is not None and len(folds.folds) == 1


def test_no_folding_without_a_cache_or_behind_another_node() -> None:
    # updates forwarded per record, or no cache to absorb the puts
    assert _folds(_BASE, caching=False) is None
    assert _folds({**_BASE, "emit": "on_window_close"}, caching=False) is None
    from streaming import StreamsBuilder, TimeWindows

    b = StreamsBuilder()
    stream = b.stream("input", key_serde=serdes.String(), value_serde=serdes.Long())
    stream.group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10)).count()
    # a peek ends the chain too: it is a node the batch hands records to, not a sink
    stream.peek(lambda k, v: None).to("copy", key_serde=serdes.String(), value_serde=serdes.Long())
    with TopologyTestDriver(b.build()) as driver:
        assert driver._task.batch_plan is not None
        assert driver._task.batch_plan.folds is None


class _WholeBatches(random.Random):
    """Cuts for ``run_task`` that queue 12 records at a time, process 40 per call and
    never commit, align or add headers in between."""

    def randint(self, a: int, b: int) -> int:
        return b

    def random(self) -> float:
        return 0.99


def test_a_failing_record_leaves_its_window_where_the_per_record_path_left_it() -> None:
    # a and b counted, then a's aggregator fails (its window was read: last in LRU order);
    # c's put overflows a two-window cache, which evicts the least recently used window
    # first and so forwards b before a
    params = {**_BASE, "op": "fails", "late": False, "reader": None}
    trace = [
        {"topic": "input", "key": key, "value": value, "ts": ts}
        for ts, (key, value) in enumerate([("a", 1), ("b", 1), ("a", 0), ("c", 1)])
    ]
    runs = [
        run_task(
            fold_topology(params),
            params,
            trace,
            caching=True,
            optimize=False,
            batched=batched,
            cuts=_WholeBatches(),
            cache_bytes=200,
            skip_failures=True,
        )
        for batched in (True, False)
    ]
    assert runs[0] == runs[1]
    out = [(key[:1], value) for topic, key, value, *_ in runs[1]["sent"] if topic == "out"]
    assert out[:2] == [(b"b", b"\x00" * 7 + b"\x64"), (b"a", b"\x00" * 7 + b"\x64")]
    assert len(runs[1]["skipped"]) == 1


# -- JSON serdes: sinks and window folds the fused chain calls without a Record ------------


def json_topology(p: dict[str, Any]) -> Any:
    """JSON in -> filter -> map_values (a set now and then, which JSON cannot write) ->
    a sink (with a partitioner, as drawn) and, rekeyed, a cached 5-wide window
    aggregation (tumbling or hopping) -> out."""
    from streaming import Materialized, StreamsBuilder, TimeWindows

    b = StreamsBuilder()
    json = serdes.Json()
    stream = (
        b.stream("input", key_serde=json, value_serde=json)
        .filter(lambda k, v: v is None or v.get("n") != 2)
        .map_values(lambda v: v if v is None or v["n"] != p["unwritable"] else {1, 2})
    )
    partitioner = (lambda topic, k, v, n: len(str(k)) % n) if p["partitioner"] else None
    stream.to("out", key_serde=json, value_serde=json, partitioner=partitioner)
    windows = TimeWindows.of_size_and_grace(5, p["grace"])
    if p["advance"] is not None:
        windows = windows.advance_by(p["advance"])
    (
        stream.select_key(lambda k, v: None if v is None else v["region"])
        .group_by_key()
        .windowed_by(windows)
        .aggregate(
            lambda: 0,
            lambda k, v, agg: agg + (0 if v is None or isinstance(v, set) else v["n"]),
            materialized=Materialized.as_("json-store").with_value_serde(json),
        )
        .to_stream()
        .to("windows", key_serde=serdes.TimeWindowedSerde(json, 5), value_serde=json)
    )
    return b.build()


def _json_bytes(r: dict[str, Any], bad: int | None) -> tuple[bytes | None, bytes | None]:
    """A trace record as JSON: its key, and its value as an object with a region (None
    stays a tombstone; the value ``bad`` is written as bytes that are not JSON)."""
    import orjson

    key = None if r["key"] is None else orjson.dumps(r["key"])
    n = r["value"]
    if n is None:
        return key, None
    if n == bad:
        return key, b'{"n": '
    return key, orjson.dumps({"n": n, "region": "r" + str(n % 3)})


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(
    params=st.fixed_dictionaries(
        {
            "unwritable": st.sampled_from((None, 3, 4)),
            "partitioner": st.booleans(),
            "grace": st.integers(0, 10),
            "advance": st.sampled_from((None, 1, 2, 5)),
        }
    ),
    bad=st.sampled_from((None, None, 5)),
    trace=traces.traces(("input",), max_records=60),
    skip_failures=st.booleans(),
    cut_seed=st.integers(0, 2**32 - 1),
)
def test_json_sinks_and_folds_write_what_the_per_record_path_writes(
    params: dict[str, Any],
    bad: int | None,
    trace: list[dict[str, Any]],
    skip_failures: bool,
    cut_seed: int,
) -> None:
    runs = [
        run_task(
            json_topology(params),
            params,
            trace,
            caching=True,
            optimize=False,
            batched=batched,
            cuts=random.Random(cut_seed),
            skip_failures=skip_failures,
            encode=lambda r: _json_bytes(r, bad),
            # JSON on the repartition topic too, as in the driver: its sink is direct
            extra_config={"default.key.serde": "json", "default.value.serde": "json"},
        )
        for batched in (True, False)
    ]
    assert runs[0] == runs[1]


def json_sink_topology(p: dict[str, Any]) -> Any:
    """JSON in -> map_values (a set now and then, which JSON cannot write) -> out: one
    input partition, so each batch goes through the batch entry, its records queued as
    plain tuples."""
    from streaming import StreamsBuilder

    b = StreamsBuilder()
    json = serdes.Json()
    (
        b.stream("input", key_serde=json, value_serde=json)
        .map_values(lambda v: v if v is None or v["n"] != p["unwritable"] else {1, 2})
        .to("out", key_serde=json, value_serde=json)
    )
    return b.build()


@settings(max_examples=30, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(
    unwritable=st.sampled_from((None, 3, 4)),
    trace=traces.traces(("input",), max_records=40),
    skip_failures=st.booleans(),
    cut_seed=st.integers(0, 2**32 - 1),
)
def test_failures_of_records_queued_as_plain_tuples_are_reported_as_on_the_per_record_path(
    unwritable: int | None, trace: list[dict[str, Any]], skip_failures: bool, cut_seed: int
) -> None:
    """The handlers and the error of a failing record get what the per-record path gives
    them (a ``StampedRecord`` and its coordinates) when the record was queued as a plain
    tuple."""
    params = {"unwritable": unwritable}
    runs = [
        run_task(
            json_sink_topology(params),
            params,
            trace,
            caching=True,
            optimize=False,
            batched=batched,
            cuts=random.Random(cut_seed),
            skip_failures=skip_failures,
            encode=lambda r: _json_bytes(r, None),
            extra_config={"default.key.serde": "json", "default.value.serde": "json"},
        )
        for batched in (True, False)
    ]
    assert runs[0] == runs[1]


def test_json_sinks_and_folds_are_called_directly() -> None:
    from streaming.runtime.nodes import SinkNode

    params = {"unwritable": None, "partitioner": True, "grace": 0, "advance": None}
    with TopologyTestDriver(json_topology(params)) as driver:
        plan = driver._task.batch_plan
        assert plan is not None and plan.folds is not None
        # each sink and the aggregation get (key, value, timestamp, headers), no Record
        # the sinks of JSON keys and values ("out" and the repartition topic's), not the
        # windowed one (its key serde has no one-argument equivalent)
        sinks = [
            name
            for name, node in driver._task.nodes.items()
            if type(node) is SinkNode and type(node.key_serde) is serdes.Json
        ]
        assert len(sinks) == 2
        assert sorted(plan.direct) == sorted([*sinks, plan.folds.folds[0].node.name])


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(
    keys=st.lists(
        st.one_of(
            st.sampled_from(("a", "b", "\ud800", "é")),
            st.text(max_size=3),
            st.integers(-2, 2),
            st.none(),
        ),
        max_size=40,
    ),
    remembered=st.integers(1, 4),
)
def test_a_direct_sink_writes_each_key_as_process_does(keys: list[Any], remembered: int) -> None:
    """A direct sink remembers the bytes of recent string keys: through it, repeats,
    keys JSON cannot write (a lone surrogate) and a memory cleared when full (at most
    ``remembered`` keys here) send what ``process`` sends, or fail as it fails."""
    from types import SimpleNamespace

    from streaming.errors import StreamsException
    from streaming.runtime import nodes
    from streaming.topology.processor import Record

    def sent_by(direct: bool) -> list[Any]:
        out: list[Any] = []
        sink = nodes.SinkNode("sink", "out", None, serdes.Json(), serdes.Json(), None)
        sink.init(
            SimpleNamespace(  # type: ignore[arg-type]
                default_key_serde=serdes.Json(),
                default_value_serde=serdes.Json(),
                send=lambda topic, k, v, ts, h, *rest: out.append((topic, k, v, ts, h)),
            )
        )
        write = sink.direct()
        assert write is not None
        for i, key in enumerate(keys):
            try:
                if direct:
                    write(key, {"i": i}, i, ())
                else:
                    sink.process(Record(key, {"i": i}, i, ()))
            except StreamsException as exc:
                out.append(str(exc))
        return out

    old = nodes._STR_BYTES_MAX
    nodes._STR_BYTES_MAX = remembered
    try:
        assert sent_by(True) == sent_by(False)
    finally:
        nodes._STR_BYTES_MAX = old


# -- input: the serdes' one-argument equivalents queue what the serdes would ---------------


class _Message:
    """What ``add_messages`` reads of a confluent-kafka ``Message``."""

    def __init__(self, raw: ConsumerRecord) -> None:
        self._raw = raw

    def headers(self) -> Any:
        return list(self._raw.headers) or None

    def timestamp(self) -> tuple[int, int]:
        return (1, self._raw.timestamp)

    def key(self) -> bytes | None:
        return self._raw.key

    def value(self) -> bytes | None:
        return self._raw.value

    def offset(self) -> int:
        return self._raw.offset


_RAW = st.one_of(
    st.none(),
    st.binary(max_size=6),
    st.sampled_from((b"1", b'"a"', b"[1,2]", b'{"n":1}', b"\xff\xfe", b"{", b"null", b"")),
    # rows with an event-time column: TIMESTAMP text, epoch ms (negative too), unreadable
    st.sampled_from(
        (
            b'{"t":"2026-11-30 12:34:56.789"}',
            b'{"t":"2026-11-30T12:34:56.001"}',
            b'{"t":"2026-11-30 12:34:56"}',
            b'{"t":7}',
            b'{"t":-3}',
            b'{"t":"soon"}',
        )
    ),
)
_SERDES = {"json": serdes.Json, "string": serdes.String, "bytes": serdes.Bytes, "long": serdes.Long}


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(
    key_serde=st.sampled_from(sorted(_SERDES)),
    value_serde=st.sampled_from(sorted(_SERDES)),
    raws=st.lists(st.tuples(_RAW, _RAW, st.integers(-2, 50)), max_size=20),
    messages=st.booleans(),
    column_time=st.booleans(),
)
def test_input_is_queued_as_the_serdes_decode_it(
    key_serde: str, value_serde: str, raws: list[Any], messages: bool, column_time: bool
) -> None:
    from streaming import StreamsBuilder
    from streaming.runtime.task import StampedRecord
    from streaming.sql.timestamps import ColumnTimestampExtractor

    key_de, value_de = _SERDES[key_serde](), _SERDES[value_serde]()
    extractor = ColumnTimestampExtractor("t") if column_time else None
    b = StreamsBuilder()
    b.stream("in", key_serde=key_de, value_serde=value_de, timestamp_extractor=extractor).to("out")
    handled: list[tuple[int, str]] = []

    def handler(raw: ConsumerRecord, exc: Exception) -> str:
        handled.append((raw.offset, _describe(exc)))
        return "continue"

    records = [
        ConsumerRecord("in", 0, offset, ts, key, value, (("h", b"1"),) if offset % 2 else ())
        for offset, (key, value, ts) in enumerate(raws)
    ]
    task = StreamTask(
        "0_0",
        b.build(),
        ["KSTREAM-SOURCE-0000000000"],
        application_id="input",
        config={},
        send=lambda *a: None,
        clock=lambda: 0,
        deserialization_handler=handler,
    )
    task.initialize_stores()
    if messages:
        task.add_messages("in", 0, [_Message(r) for r in records])
    else:
        task.add_records(records)
    expected: list[Any] = []
    expected_handled: list[tuple[int, str]] = []
    for r in records:
        try:
            key = key_de.deserialize("in", r.key)
            value = value_de.deserialize("in", r.value)
        except Exception as exc:
            expected_handled.append((r.offset, _describe(exc)))
            continue
        ts = r.timestamp
        if extractor is not None:
            ts = extractor.extract(SimpleNamespace(value=value, timestamp=ts), -1)  # type: ignore[arg-type]
        if ts >= 0:
            expected.append(
                StampedRecord("in", 0, r.offset, ts, key, value, r.headers, r.key, r.value)
            )
    queued = list(task.partition_group.queues.get(("in", 0), ()))
    assert [tuple(rec) for rec in queued] == [tuple(rec) for rec in expected]
    assert [type(rec[4]) for rec in queued] == [type(rec.key) for rec in expected]
    assert [type(rec[5]) for rec in queued] == [type(rec.value) for rec in expected]
    assert handled == expected_handled
    task.close()
