"""KStreamSessionWindowAggregate: ports of Kafka's ``KStreamSessionWindowAggregateProcessorTest``
and the session cases of ``SuppressScenarioTest`` / ``SessionWindowedKStreamImplTest`` (Kafka 4.1).

Processor-level cases run against a small fake context with a real (optionally cached) session
store; topology-level cases go through the DSL and ``streaming.TopologyTestDriver``. Expected
outputs follow Kafka 4.1, where a session closes at ``streamTime - grace - gap`` (older copies
of the Kafka test used ``streamTime - grace``); the topology cases were checked against the Java
TopologyTestDriver.
"""

from __future__ import annotations

from typing import Any

import pytest

from streaming import Consumed, Materialized, Produced, StreamsBuilder, TopologyTestDriver, serdes
from streaming.dsl.change import Change
from streaming.dsl.processors.session_aggregate import (
    EMIT_INTERVAL_CONFIG,
    KStreamSessionWindowAggregateSupplier,
)
from streaming.dsl.windows import EmitStrategy, SessionWindows
from streaming.state import InMemoryStateStoreContext, RecordContext, Stores, ThreadCache
from streaming.topology.processor import Record
from streaming.windowed import SessionWindow, Windowed

GAP_MS = 5 * 60 * 1000
STORE = "session-store"
UPDATE = EmitStrategy.on_window_update()
CLOSE = EmitStrategy.on_window_close()


def count_init() -> int:
    return 0


def count_agg(key: Any, value: Any, agg: int) -> int:
    return agg + 1


def sum_merger(key: Any, a: int, b: int) -> int:
    return a + b


# ====================================================================== fake context


class _Node:
    name = "testNode"


class FakeContext(InMemoryStateStoreContext):
    """Just enough of the processor context for one processor and its store."""

    def __init__(self, app_configs: dict | None = None) -> None:
        super().__init__(app_configs=app_configs, cache=ThreadCache(100_000))
        self.current_node = _Node()
        self.system_time_ms = 0
        self.forwarded: list[Record] = []
        self.stores: dict[str, Any] = {}
        self.scheduled: list[tuple[int, Any, Any]] = []

    def forward(self, record: Record, child_name: str | None = None) -> None:
        self.forwarded.append(record)

    def get_state_store(self, name: str) -> Any:
        return self.stores[name]

    def record_metadata(self) -> Any:
        rc = self.record_context()
        return rc if rc is not None and rc.topic is not None else None

    def current_system_time_ms(self) -> int:
        return self.system_time_ms

    def schedule(self, interval: int, punctuation_type: Any, punctuator: Any) -> None:
        """Emit-on-close schedules its wall-clock emit of what the throttle held back (a
        difference from Kafka, see tests/unit/dsl/test_emit_final_catch_up.py); these
        processor-level cases, ported from Kafka's, never run it."""
        self.scheduled.append((interval, punctuation_type, punctuator))


_OPEN_STORES: list[Any] = []


@pytest.fixture(autouse=True)
def _close_stores() -> Any:
    """Close the RocksDB stores ``make`` opened (that also removes their temp dirs)."""
    yield
    while _OPEN_STORES:
        store = _OPEN_STORES.pop()
        if store.is_open:
            store.close()


def make(
    windows: SessionWindows = SessionWindows(GAP_MS, 0),
    *,
    caching: bool = True,
    strategy: EmitStrategy = UPDATE,
    send_old_values: bool = False,
    interval: int = 0,
) -> tuple[FakeContext, Any, Any]:
    context = FakeContext({EMIT_INTERVAL_CONFIG: interval})
    builder = Stores.session_store_builder(
        Stores.persistent_session_store(STORE, GAP_MS * 3), serdes.String(), serdes.Long()
    ).with_logging_disabled()
    if caching:
        builder.with_caching_enabled()
    store = builder.build()
    store.init(context, store)
    _OPEN_STORES.append(store)
    context.stores[STORE] = store
    supplier = KStreamSessionWindowAggregateSupplier(
        windows, STORE, strategy, count_init, count_agg, sum_merger
    )
    if send_old_values:
        supplier.enable_sending_old_values(True)
    processor = supplier()
    processor.init(context)
    return context, processor, store


def process(context: FakeContext, processor: Any, key: Any, value: Any, ts: int) -> None:
    context.set_record_context(RecordContext(ts, -2, -3, "topic"))
    processor.process(Record(key, value, ts))


def fwd(key: str, start: int, end: int, new: Any, old: Any, ts: int) -> Record:
    return Record(Windowed(key, SessionWindow(start, end)), Change(new, old), ts)


def sessions(store: Any, key: str, earliest_end: int, latest_start: int) -> list[tuple]:
    return [
        (w.key, w.window.start, w.window.end, v)
        for w, v in store.find_sessions(key, earliest_end, latest_start)
    ]


# ====================================================================== processor-level cases


def test_should_create_single_session_when_within_gap() -> None:
    context, processor, store = make()
    process(context, processor, "john", "first", 0)
    process(context, processor, "john", "second", 500)
    assert sessions(store, "john", 0, 2000) == [("john", 0, 500, 2)]


def test_should_merge_sessions() -> None:
    context, processor, store = make()
    process(context, processor, "mel", "first", 0)
    assert sessions(store, "mel", 0, 0)
    # move time beyond gap
    process(context, processor, "mel", "second", GAP_MS + 1)
    assert sessions(store, "mel", GAP_MS + 1, GAP_MS + 1)
    # should still exist as not within gap
    assert sessions(store, "mel", 0, 0)
    # move time back
    process(context, processor, "mel", "third", GAP_MS // 2)
    assert sessions(store, "mel", 0, GAP_MS + 1) == [("mel", 0, GAP_MS + 1, 3)]


def test_should_update_session_if_the_same_time() -> None:
    context, processor, store = make()
    process(context, processor, "mel", "first", 0)
    process(context, processor, "mel", "second", 0)
    assert sessions(store, "mel", 0, 0) == [("mel", 0, 0, 2)]


def test_should_have_multiple_sessions_for_same_id_when_timestamp_apart_by_session_gap() -> None:
    context, processor, store = make()
    t = 0
    process(context, processor, "mel", "first", t)
    t += GAP_MS + 1
    process(context, processor, "mel", "second", t)
    process(context, processor, "mel", "second", t)
    t += GAP_MS + 1
    process(context, processor, "mel", "third", t)
    process(context, processor, "mel", "third", t)
    process(context, processor, "mel", "third", t)
    store.flush()
    assert context.forwarded == [
        fwd("mel", 0, 0, 1, None, 0),
        fwd("mel", GAP_MS + 1, GAP_MS + 1, 2, None, GAP_MS + 1),
        fwd("mel", t, t, 3, None, t),
    ]


def test_should_remove_merged_sessions_from_state_store() -> None:
    context, processor, store = make()
    process(context, processor, "a", "1", 0)
    assert sessions(store, "a", 0, 0) == [("a", 0, 0, 1)]
    process(context, processor, "a", "2", 100)
    # a1 from above should have been removed, the merged session is in the store
    assert sessions(store, "a", 0, 100) == [("a", 0, 100, 2)]


def test_should_handle_multiple_sessions_and_merging() -> None:
    context, processor, store = make()
    for key in "abcd":
        process(context, processor, key, "1", 0)
    process(context, processor, "d", "2", GAP_MS // 2)
    process(context, processor, "a", "2", GAP_MS + 1)
    process(context, processor, "b", "2", GAP_MS + 1)
    process(context, processor, "a", "3", GAP_MS + 1 + GAP_MS // 2)
    process(context, processor, "c", "3", GAP_MS + 1 + GAP_MS // 2)
    store.flush()
    late = GAP_MS + 1 + GAP_MS // 2
    assert context.forwarded == [
        fwd("a", 0, 0, 1, None, 0),
        fwd("b", 0, 0, 1, None, 0),
        fwd("c", 0, 0, 1, None, 0),
        fwd("d", 0, GAP_MS // 2, 2, None, GAP_MS // 2),
        fwd("b", GAP_MS + 1, GAP_MS + 1, 1, None, GAP_MS + 1),
        fwd("a", GAP_MS + 1, late, 2, None, late),
        fwd("c", late, late, 1, None, late),
    ]


def test_should_immediately_forward_new_session_when_non_cached_store() -> None:
    context, processor, _ = make(caching=False)
    for key in "abc":
        process(context, processor, key, "1", 0)
    assert context.forwarded == [
        fwd("a", 0, 0, 1, None, 0),
        fwd("b", 0, 0, 1, None, 0),
        fwd("c", 0, 0, 1, None, 0),
    ]


def test_should_immediately_forward_removed_sessions_when_merging() -> None:
    context, processor, _ = make(caching=False)
    process(context, processor, "a", "1", 0)
    process(context, processor, "a", "1", 5)
    assert context.forwarded == [
        fwd("a", 0, 0, 1, None, 0),
        fwd("a", 0, 0, None, None, 0),
        fwd("a", 0, 5, 2, None, 5),
    ]
    # updates are fresh records: no headers of the input record
    assert all(r.headers == () for r in context.forwarded)


def test_should_send_old_values_of_merged_sessions_when_enabled() -> None:
    context, processor, _ = make(caching=False, send_old_values=True)
    process(context, processor, "a", "1", 0)
    process(context, processor, "a", "1", 5)
    assert context.forwarded == [
        fwd("a", 0, 0, 1, None, 0),
        fwd("a", 0, 0, None, 1, 0),
        fwd("a", 0, 5, 2, None, 5),
    ]


def test_should_forward_cached_updates_with_session_end_timestamp_and_old_values() -> None:
    context, processor, store = make(send_old_values=True)
    process(context, processor, "a", "1", 0)
    store.flush()
    process(context, processor, "a", "1", 7)
    store.flush()
    assert context.forwarded == [
        fwd("a", 0, 0, 1, None, 0),
        fwd("a", 0, 0, None, 1, 0),
        fwd("a", 0, 7, 2, None, 7),
    ]


def test_should_skip_null_key() -> None:
    context, processor, _ = make(caching=False)
    process(context, processor, None, "1", 0)
    assert context.forwarded == []


def test_should_aggregate_null_values() -> None:
    # Kafka only drops null keys; the aggregator sees null values (count counts them)
    context, processor, _ = make(caching=False)
    process(context, processor, "a", None, 0)
    assert context.forwarded == [fwd("a", 0, 0, 1, None, 0)]


def test_should_drop_late_record_with_zero_grace() -> None:
    context, processor, store = make(SessionWindows(10, 0), caching=False)
    process(context, processor, "dummy", "dummy", 0)  # stream time 0
    process(context, processor, "OnTime1", "1", 0)
    process(context, processor, "dummy", "dummy", 11)  # stream time 11: close time 1
    process(context, processor, "OnTime2", "1", 1)  # window [1,1]: not before close time
    context.forwarded.clear()
    process(context, processor, "Late1", "1", 0)  # window [0,0] ends before close time 1
    assert context.forwarded == []
    assert sessions(store, "Late1", 0, 100) == []
    assert sessions(store, "OnTime2", 0, 100) == [("OnTime2", 1, 1, 1)]


def test_should_drop_late_record_with_nonzero_grace() -> None:
    context, processor, store = make(SessionWindows(10, 1), caching=False)
    process(context, processor, "dummy", "dummy", 0)
    process(context, processor, "OnTime1", "1", 0)
    process(context, processor, "dummy", "dummy", 11)  # close time 0
    process(context, processor, "OnTime2", "1", 0)  # [0,0] not before 0: accepted
    process(context, processor, "dummy", "dummy", 12)  # close time 1
    context.forwarded.clear()
    process(context, processor, "Late1", "1", 0)
    assert context.forwarded == []
    assert sessions(store, "OnTime2", 0, 100) == [("OnTime2", 0, 0, 1)]


def test_late_record_merging_into_open_session_is_accepted() -> None:
    # the merged window decides: a late timestamp that extends a live session is kept
    context, processor, store = make(SessionWindows(10, 0), caching=False)
    process(context, processor, "a", "1", 20)
    process(context, processor, "b", "1", 25)  # close time 15
    process(context, processor, "a", "1", 12)  # alone [12,12] would be late; merged [12,20] is not
    assert sessions(store, "a", 0, 100) == [("a", 12, 20, 2)]


# ====================================================================== emit on window close


def test_emit_final_emits_closed_sessions_in_time_order() -> None:
    context, processor, _ = make(SessionWindows(10, 0), caching=False, strategy=CLOSE)
    process(context, processor, "b", "1", 3)
    process(context, processor, "a", "1", 3)
    process(context, processor, "c", "1", 1)
    process(context, processor, "c", "1", 3)  # c: [1,3]
    process(context, processor, "a", "1", 8)  # a: [3,8]
    assert context.forwarded == []
    process(context, processor, "x", "1", 14)  # close time 4: sessions ending before 4
    # ordered by end, then start, then key bytes
    assert context.forwarded == [fwd("c", 1, 3, 2, None, 3), fwd("b", 3, 3, 1, None, 3)]
    context.forwarded.clear()
    process(context, processor, "y", "1", 14)  # close time does not progress
    assert context.forwarded == []
    process(context, processor, "y", "1", 30)  # close time 20: ends in [4, 19]
    assert context.forwarded == [
        fwd("a", 3, 8, 2, None, 8),
        fwd("x", 14, 14, 1, None, 14),
        fwd("y", 14, 14, 1, None, 14),
    ]


def test_emit_final_uses_headers_of_the_triggering_record() -> None:
    context, processor, _ = make(SessionWindows(1, 0), caching=False, strategy=CLOSE)
    process(context, processor, "a", "1", 0)
    headers = (("h", b"v"),)
    context.set_record_context(RecordContext(5, -2, -3, "topic", headers))
    processor.process(Record("b", "1", 5, headers))
    assert context.forwarded == [fwd("a", 0, 0, 1, None, 0).with_headers(headers)]


def test_emit_final_is_throttled_by_the_emit_interval() -> None:
    context, processor, _ = make(SessionWindows(1, 0), caching=False, strategy=CLOSE, interval=1000)
    process(context, processor, "a", "1", 0)  # first emit check at wall clock 0: nothing closed
    process(context, processor, "b", "1", 5)  # throttled until wall clock 1000
    assert context.forwarded == []
    context.system_time_ms = 1000
    process(context, processor, "c", "1", 10)
    assert context.forwarded == [fwd("a", 0, 0, 1, None, 0), fwd("b", 5, 5, 1, None, 5)]


def test_emit_final_skips_dropped_records_but_still_emits() -> None:
    context, processor, _ = make(SessionWindows(2, 0), caching=False, strategy=CLOSE)
    process(context, processor, "a", "1", 0)
    process(context, processor, "b", "1", 10)  # close time 8: emits [a@0/0]
    process(context, processor, "a", "1", 1)  # late: dropped, nothing new closes
    process(context, processor, "c", "1", 20)  # close time 18: emits [b@10/10]
    assert context.forwarded == [fwd("a", 0, 0, 1, None, 0), fwd("b", 10, 10, 1, None, 10)]


# ====================================================================== topology-level cases

S, L = serdes.String(), serdes.Long()


def _plus(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def _run(
    op: str,
    emit: str,
    gap: int,
    grace: int | None,
    inputs: list,
    caching: bool,
    in_memory: bool = False,
) -> list:
    builder = StreamsBuilder()
    windows = (
        SessionWindows.of_inactivity_gap_with_no_grace(gap)
        if grace is None
        else SessionWindows.of_inactivity_gap_and_grace(gap, grace)
    )
    w = builder.stream("input", consumed=Consumed.with_(S, L)).group_by_key().windowed_by(windows)
    if emit == "on_window_close":
        w = w.emit_strategy(CLOSE)
    m = (
        Materialized.as_(
            Stores.in_memory_session_store("sess-store", gap + (grace or 0))
            if in_memory
            else "sess-store"
        )
        .with_key_serde(S)
        .with_value_serde(L)
    )
    if op == "count":
        t = w.count(m)
    elif op == "reduce":
        t = w.reduce(_plus, m)
    else:
        t = w.aggregate(lambda: 0, lambda k, v, a: _plus(a, v), lambda k, a, b: _plus(a, b), m)
    if emit == "suppress":
        from streaming import BufferConfig, Suppressed

        t = t.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
    t.to_stream().to("out", produced=Produced.with_(serdes.SessionWindowedSerde(S), L))
    config = {
        "statestore.cache.max.bytes": 10 * 1024 * 1024 if caching else 0,
        EMIT_INTERVAL_CONFIG: 0,  # Kafka's TopologyTestDriver default
    }
    with TopologyTestDriver(builder.build(), config, initial_wall_clock_time_ms=0) as driver:
        src = driver.create_input_topic("input", S, L)
        for key, value, ts in inputs:
            src.pipe_input(key, value, ts)
        out = driver.create_output_topic("out", serdes.SessionWindowedSerde(S), L)
        return [(str(r.key), r.value, r.timestamp) for r in out.read_records_to_list()]


@pytest.mark.parametrize("caching", [False, True])
def test_dsl_session_count_merge(caching: bool) -> None:
    # checked against the Java TopologyTestDriver (conformance family "session")
    inputs = [("a", 2, 1), ("a", 3, 12), ("a", 3, 7)]
    assert _run("count", "eager", 5, None, inputs, caching) == [
        ("[a@1/1]", 1, 1),
        ("[a@12/12]", 1, 12),
        ("[a@12/12]", None, 12),
        ("[a@7/12]", 2, 12),
    ]


def test_dsl_session_reduce_with_null_values() -> None:
    # Kafka's reduce: aggregator v if agg is None else reducer(agg, v); the merger is built from
    # it; a null first value yields a null aggregate, which removes the session
    inputs = [("a", 1, 1), ("a", None, 3), ("a", None, 30), ("a", 4, 31)]
    assert _run("reduce", "eager", 5, None, inputs, False) == [
        ("[a@1/1]", 1, 1),
        ("[a@1/1]", None, 1),
        ("[a@1/3]", 1, 3),
        ("[a@30/30]", None, 30),
        ("[a@31/31]", 4, 31),
    ]


def test_dsl_session_final_results_suppressed() -> None:
    # SuppressScenarioTest.shouldSupportFinalResultsForSessionWindows (the suppression waits
    # grace + gap for session windows)
    inputs = [("k1", 1, 0), ("k1", 1, 5), ("k1", 1, 1), ("k2", 1, 11), ("k1", 1, 5), ("k1", 1, 30)]
    assert _run("count", "eager", 5, None, inputs, False) == [
        ("[k1@0/0]", 1, 0),
        ("[k1@0/0]", None, 0),
        ("[k1@0/5]", 2, 5),
        ("[k1@0/5]", None, 5),
        ("[k1@0/5]", 3, 5),
        ("[k2@11/11]", 1, 11),
        ("[k1@30/30]", 1, 30),
    ]
    assert _run("count", "suppress", 5, None, inputs, False) == [
        ("[k1@0/5]", 3, 5),
        ("[k2@11/11]", 1, 11),
    ]


def test_dsl_session_on_window_close() -> None:
    inputs = [("a", 1, 0), ("b", 1, 2), ("a", 1, 3), ("c", 1, 20), ("a", 1, 40)]
    assert _run("count", "on_window_close", 5, 2, inputs, False) == [
        ("[b@2/2]", 1, 2),
        ("[a@0/3]", 2, 3),
        ("[c@20/20]", 1, 20),
    ]


@pytest.mark.parametrize("caching", [False, True])
def test_dsl_session_merges_a_session_only_the_cache_still_holds(caching: bool) -> None:
    # the record at 67 s is within the gap of [41/41] and of [86/86]; the store expired
    # [41/41] when stream time reached 86 s (retention = gap + grace = 26 s), but Kafka's
    # caching store keeps the flushed entry and merges it (family "session", seed 1056118576)
    s = 1000
    inputs = [("a", 1, 41 * s), ("a", 1, 86 * s), ("a", 1, 67 * s), ("a", 1, 152 * s)]
    merged = [(f"[a@{41 * s if caching else 67 * s}/{86 * s}]", 3 if caching else 2, 86 * s)]
    assert _run("count", "eager", 26 * s, None, inputs, caching, in_memory=True) == [
        (f"[a@{41 * s}/{41 * s}]", 1, 41 * s),
        (f"[a@{86 * s}/{86 * s}]", 1, 86 * s),
        (f"[a@{86 * s}/{86 * s}]", None, 86 * s),
        *merged,
        (f"[a@{152 * s}/{152 * s}]", 1, 152 * s),
    ]
