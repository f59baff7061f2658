"""KTable.suppress: ports of Kafka's ``KTableSuppressProcessorTest`` and ``SuppressScenarioTest``
(Kafka 4.1), plus checks of the ``InMemoryTimeOrderedKeyValueChangeBuffer`` port.

Processor-level cases run the processor against a fake context and a real buffer; the scenario
cases go through the DSL and ``streaming.TopologyTestDriver`` with the expected outputs of
Kafka's own tests.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from streaming import (
    BufferConfig,
    Consumed,
    Grouped,
    Materialized,
    Produced,
    SlidingWindows,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    TopologyTestDriver,
    serdes,
)
from streaming.dsl.change import Change
from streaming.dsl.processors.session_aggregate import KStreamSessionWindowAggregateSupplier
from streaming.dsl.processors.suppress import (
    InMemoryTimeOrderedKeyValueChangeBuffer,
    KTableSuppressSupplier,
    suppress_buffer_store_builder,
)
from streaming.dsl.processors.table import TableSupplier
from streaming.dsl.windows import SessionWindows
from streaming.errors import StreamsException
from streaming.state import InMemoryStateStoreContext, RecordContext
from streaming.topology.processor import Record
from streaming.windowed import SessionWindow, TimeWindow, Windowed

ARBITRARY_LONG = 5
ARBITRARY_WINDOW = TimeWindow(0, 100)
STORE = "suppress-store"
S, L = serdes.String(), serdes.Long()


# ====================================================================== fake context


class _Node:
    name = "KTABLE-SUPPRESS-0000000001"


class FakeContext(InMemoryStateStoreContext):
    def __init__(self) -> None:
        super().__init__(default_key_serde=S, default_value_serde=L, capture_changelog=True)
        self.current_node = _Node()
        self.forwarded: list[Record] = []
        self.stores: dict[str, Any] = {}

    def forward(self, record: Record, child_name: str | None = None) -> None:
        self.forwarded.append(record)

    def get_state_store(self, name: str) -> Any:
        return self.stores[name]


def make(
    suppressed: Suppressed, key_serde: Any = None, parent: Any = None
) -> tuple[FakeContext, Any, InMemoryTimeOrderedKeyValueChangeBuffer]:
    context = FakeContext()
    buffer = suppress_buffer_store_builder(STORE, key_serde, L, True).build()
    buffer.init(context, buffer)
    context.stores[STORE] = buffer
    supplier = KTableSuppressSupplier(suppressed, STORE, parent or TableSupplier())
    processor = supplier()
    processor.init(context)
    return context, processor, buffer


def final_results(grace: int) -> Suppressed:
    """Kafka's FinalResultsSuppressionBuilder.buildFinalResultsSuppression(grace)."""
    return Suppressed("window_close", grace, BufferConfig.unbounded())


def process(
    context: FakeContext, processor: Any, key: Any, change: Change, ts: int, headers: Any = ()
) -> None:
    context.set_record_context(RecordContext(ts, 0, 0, "", headers))
    processor.process(Record(key, change, ts, headers))


# ====================================================================== KTableSuppressProcessorTest


def test_zero_time_limit_should_immediately_emit() -> None:
    context, processor, _ = make(Suppressed.until_time_limit(0, BufferConfig.unbounded()))
    value = Change(ARBITRARY_LONG, ARBITRARY_LONG)
    process(context, processor, "hey", value, ARBITRARY_LONG)
    assert context.forwarded == [Record("hey", value, ARBITRARY_LONG)]


def test_windowed_zero_time_limit_should_immediately_emit() -> None:
    context, processor, _ = make(
        Suppressed.until_time_limit(0, BufferConfig.unbounded()), serdes.TimeWindowedSerde(S, 100)
    )
    key = Windowed("hey", ARBITRARY_WINDOW)
    value = Change(ARBITRARY_LONG, ARBITRARY_LONG)
    process(context, processor, key, value, ARBITRARY_LONG)
    assert context.forwarded == [Record(key, value, ARBITRARY_LONG)]


def test_intermediate_suppression_should_buffer_and_emit_later() -> None:
    context, processor, _ = make(Suppressed.until_time_limit(1, BufferConfig.unbounded()))
    process(context, processor, "k1", Change(1, None), 0)
    assert context.forwarded == []
    process(context, processor, "tick", Change(None, None), 1)
    assert context.forwarded == [Record("k1", Change(1, None), 0)]


def test_final_results_suppression_should_buffer_and_emit_at_grace_expiration() -> None:
    context, processor, _ = make(final_results(1), serdes.TimeWindowedSerde(S, 1))
    window_start, record_time, window_end = 99, 99, 100
    key = Windowed("hey", TimeWindow(window_start, window_end))
    value = Change(ARBITRARY_LONG, ARBITRARY_LONG)
    process(context, processor, key, value, record_time)
    assert context.forwarded == []
    # although the stream time is now window end, the grace period is still open
    process(context, processor, Windowed("dummyKey", TimeWindow(100, 101)), value, 101)
    assert context.forwarded == [Record(key, value, record_time)]


def test_final_results_with_zero_grace_should_still_buffer_until_the_window_end() -> None:
    context, processor, _ = make(final_results(0), serdes.TimeWindowedSerde(S, 100))
    key = Windowed("hey", TimeWindow(0, 100))
    process(context, processor, key, Change(ARBITRARY_LONG, ARBITRARY_LONG), 5)
    assert context.forwarded == []


def test_final_results_with_zero_grace_at_window_end_should_immediately_emit() -> None:
    context, processor, _ = make(final_results(0), serdes.TimeWindowedSerde(S, 100))
    key = Windowed("hey", TimeWindow(0, 100))
    value = Change(ARBITRARY_LONG, ARBITRARY_LONG)
    process(context, processor, key, value, 100)
    assert context.forwarded == [Record(key, value, 100)]


def test_final_result_should_ignore_tombstones_for_time_windows() -> None:
    context, processor, _ = make(final_results(0), serdes.TimeWindowedSerde(S, 100))
    process(context, processor, Windowed("hey", TimeWindow(0, 100)), Change(None, 5), 100)
    assert context.forwarded == []


def test_final_result_should_ignore_tombstones_for_session_windows() -> None:
    context, processor, _ = make(final_results(0), serdes.SessionWindowedSerde(S))
    process(context, processor, Windowed("hey", SessionWindow(0, 0)), Change(None, 5), 100)
    assert context.forwarded == []


@pytest.mark.parametrize(
    ("key", "key_serde"),
    [
        (Windowed("hey", TimeWindow(0, 100)), serdes.TimeWindowedSerde(S, 100)),
        (Windowed("hey", SessionWindow(0, 0)), serdes.SessionWindowedSerde(S)),
        ("hey", S),
    ],
    ids=["time-windows", "session-windows", "ktable"],
)
def test_suppress_should_not_drop_tombstones(key: Any, key_serde: Any) -> None:
    context, processor, _ = make(
        Suppressed.until_time_limit(0, BufferConfig.max_records(0)), key_serde
    )
    process(context, processor, key, Change(None, ARBITRARY_LONG), 100)
    assert context.forwarded == [Record(key, Change(None, ARBITRARY_LONG), 100)]


def test_suppress_should_emit_when_over_record_capacity() -> None:
    context, processor, _ = make(
        Suppressed.until_time_limit(timedelta(days=100), BufferConfig.max_records(1))
    )
    value = Change(None, ARBITRARY_LONG)
    process(context, processor, "hey", value, 100)
    process(context, processor, "dummyKey", value, 101)
    assert context.forwarded == [Record("hey", value, 100)]


def test_suppress_should_emit_when_over_byte_capacity() -> None:
    context, processor, _ = make(
        Suppressed.until_time_limit(timedelta(days=100), BufferConfig.max_bytes(60))
    )
    value = Change(None, ARBITRARY_LONG)
    process(context, processor, "hey", value, 100)
    process(context, processor, "dummyKey", value, 101)
    assert context.forwarded == [Record("hey", value, 100)]


def test_suppress_should_shut_down_when_over_record_capacity() -> None:
    context, processor, _ = make(
        Suppressed.until_time_limit(
            timedelta(days=100), BufferConfig.max_records(1).shut_down_when_full()
        )
    )
    value = Change(None, ARBITRARY_LONG)
    process(context, processor, "hey", value, 100)
    with pytest.raises(StreamsException, match=r"buffer exceeded its max capacity"):
        process(context, processor, "dummyKey", value, 101)
    assert context.forwarded == []


def test_suppress_should_shut_down_when_over_byte_capacity() -> None:
    context, processor, _ = make(
        Suppressed.until_time_limit(
            timedelta(days=100), BufferConfig.max_bytes(60).shut_down_when_full()
        )
    )
    value = Change(None, ARBITRARY_LONG)
    process(context, processor, "hey", value, 100)
    with pytest.raises(StreamsException, match=r"KTABLE-SUPPRESS-0000000001 buffer exceeded"):
        process(context, processor, "dummyKey", value, 101)


# ====================================================================== buffer semantics


def test_buffer_keeps_first_position_and_emits_latest_change_with_its_context() -> None:
    context, processor, buffer = make(Suppressed.until_time_limit(10, BufferConfig.unbounded()))
    process(context, processor, "b", Change(1, None), 0)
    process(context, processor, "a", Change(1, None), 1)
    # b is updated later but keeps its place (time 0) in the buffer
    process(context, processor, "b", Change(2, 1), 5, (("h", b"x"),))
    assert buffer.prior_value_for_buffered("b") == (True, None)
    assert buffer.prior_value_for_buffered("zzz") == (False, None)
    process(context, processor, "c", Change(1, None), 11)
    assert context.forwarded == [
        Record("b", Change(2, 1), 5, (("h", b"x"),)),
        Record("a", Change(1, None), 1),
    ]
    assert buffer.num_records() == 1


def test_buffer_evicts_equal_times_in_key_byte_order() -> None:
    context, processor, _ = make(Suppressed.until_time_limit(0, BufferConfig.unbounded()))
    context.set_record_context(RecordContext(3, 0, 0, ""))
    buffer = context.stores[STORE]
    for key in ("b", "c", "a"):
        buffer.put(3, key, Change(1, None), context.record_context())
    processor.process(Record("tick", Change(1, None), 3))
    assert [r.key for r in context.forwarded] == ["a", "b", "c", "tick"]


def test_buffer_size_matches_kafka_estimate() -> None:
    context, processor, buffer = make(
        Suppressed.until_time_limit(timedelta(days=1), BufferConfig.unbounded())
    )
    process(context, processor, "hey", Change(None, ARBITRARY_LONG), 100)
    # 8 (time) + 3 (key) + 8 (prior == old, counted once) + 0 (new) + 20 (context, topic "")
    assert buffer.buffer_size == 39
    process(context, processor, "hey", Change(7, 6), 101)
    # prior (8) and old (8) now differ, new 8
    assert buffer.buffer_size == 8 + 3 + 8 + 8 + 8 + 20


def test_buffer_changelog_round_trip() -> None:
    context, processor, buffer = make(
        Suppressed.until_time_limit(timedelta(days=1), BufferConfig.unbounded())
    )
    process(context, processor, "k", Change(1, None), 100, (("h", b"v"),))
    process(context, processor, "k", Change(2, 1), 120)
    buffer.flush()
    assert [(name, key) for name, key, _, _ in context.logged] == [(STORE, b"k")]
    restored = suppress_buffer_store_builder(STORE, S, L, True).build()
    restore_context = FakeContext()
    restored.init(restore_context, restored)
    restored.set_serdes_if_null(S, L)
    restore_context.registered[STORE]([(key, value, ts) for _, key, value, ts in context.logged])
    assert restored.num_records() == 1
    assert restored.min_timestamp == 100
    assert restored.buffer_size == buffer.buffer_size
    evicted: list = []
    restored.evict_while(lambda: True, lambda k, change, rc: evicted.append((k, change, rc)))
    assert [(k, change) for k, change, _ in evicted] == [("k", Change(2, 1))]
    assert evicted[0][2].timestamp == 120


def test_window_close_suppression_waits_grace_plus_gap_after_session_windows() -> None:
    parent = KStreamSessionWindowAggregateSupplier(
        SessionWindows(5, 2), "s", None, lambda: 0, lambda k, v, a: a, lambda k, a, b: a
    )
    supplier = KTableSuppressSupplier(
        Suppressed.until_window_closes(BufferConfig.unbounded()), STORE, parent
    )
    assert supplier.suppress_duration_ms == 7
    assert parent.send_old_values  # the buffer needs the parent's old values


# ====================================================================== SuppressScenarioTest


def _value_counts(builder: StreamsBuilder, count_materialized: Any = None) -> Any:
    return (
        builder.table(
            "input",
            consumed=Consumed.with_(S, S),
            materialized=Materialized.with_(S, S).with_caching_disabled().with_logging_disabled(),
        )
        .group_by(lambda k, v: (v, k), Grouped.with_(S, S))
        .count(count_materialized)
    )


def _drain(driver: TopologyTestDriver, topic: str) -> list[tuple]:
    out = driver.create_output_topic(topic, S, L)
    return [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]


def _scenario(value_counts: Any, suppressed: Suppressed, builder: StreamsBuilder) -> Any:
    value_counts.suppress(suppressed).to_stream().to(
        "output-suppressed", produced=Produced.with_(S, L)
    )
    value_counts.to_stream().to("output-raw", produced=Produced.with_(S, L))
    return TopologyTestDriver(builder.build())


def test_should_immediately_emit_events_with_zero_emit_after() -> None:
    builder = StreamsBuilder()
    counts = _value_counts(builder)
    with _scenario(counts, Suppressed.until_time_limit(0, BufferConfig.unbounded()), builder) as d:
        src = d.create_input_topic("input", S, S)
        src.pipe_input("k1", "v1", 0)
        src.pipe_input("k1", "v2", 1)
        src.pipe_input("k2", "v1", 2)
        expected = [("v1", 1, 0), ("v1", 0, 1), ("v2", 1, 1), ("v1", 1, 2)]
        assert _drain(d, "output-raw") == expected
        assert _drain(d, "output-suppressed") == expected
        src.pipe_input("x", "x", 3)
        assert _drain(d, "output-raw") == [("x", 1, 3)]
        assert _drain(d, "output-suppressed") == [("x", 1, 3)]
        src.pipe_input("x", "y", 4)
        assert _drain(d, "output-raw") == [("x", 0, 4), ("y", 1, 4)]
        assert _drain(d, "output-suppressed") == [("x", 0, 4), ("y", 1, 4)]


def test_should_suppress_intermediate_events_with_time_limit() -> None:
    builder = StreamsBuilder()
    counts = _value_counts(builder)
    with _scenario(counts, Suppressed.until_time_limit(2, BufferConfig.unbounded()), builder) as d:
        src = d.create_input_topic("input", S, S)
        src.pipe_input("k1", "v1", 0)
        src.pipe_input("k1", "v2", 1)
        src.pipe_input("k2", "v1", 2)
        assert _drain(d, "output-raw") == [("v1", 1, 0), ("v1", 0, 1), ("v2", 1, 1), ("v1", 1, 2)]
        assert _drain(d, "output-suppressed") == [("v1", 1, 2)]
        # a dummy "tick" record just to advance stream time
        src.pipe_input("tick", "tick", 3)
        assert _drain(d, "output-raw") == [("tick", 1, 3)]
        # the stream time is now 3, so it's time to emit this record
        assert _drain(d, "output-suppressed") == [("v2", 1, 1)]
        src.pipe_input("tick", "tock", 4)
        assert _drain(d, "output-raw") == [("tick", 0, 4), ("tock", 1, 4)]
        # tick is still buffered, since it was first inserted at time 3, and it is only time 4
        assert _drain(d, "output-suppressed") == []


@pytest.mark.parametrize(
    "buffer",
    [BufferConfig.max_records(1).emit_early_when_full(), BufferConfig.max_bytes(200)],
    ids=["record-limit", "bytes-limit"],
)
def test_should_suppress_intermediate_events_with_limit(buffer: BufferConfig) -> None:
    builder = StreamsBuilder()
    counts = _value_counts(builder, Materialized.with_(S, L))
    forever = (1 << 63) - 1
    with _scenario(counts, Suppressed.until_time_limit(forever, buffer), builder) as d:
        src = d.create_input_topic("input", S, S)
        src.pipe_input("k1", "v1", 0)
        src.pipe_input("k1", "v2", 1)
        src.pipe_input("k2", "v1", 2)
        assert _drain(d, "output-raw") == [("v1", 1, 0), ("v1", 0, 1), ("v2", 1, 1), ("v1", 1, 2)]
        # consecutive updates to v1 get suppressed into only the latter
        assert _drain(d, "output-suppressed") == [("v1", 0, 1), ("v2", 1, 1)]
        src.pipe_input("x", "x", 3)
        assert _drain(d, "output-raw") == [("x", 1, 3)]
        # now we see that last update to v1, but we won't see the update to x until it is evicted
        assert _drain(d, "output-suppressed") == [("v1", 1, 2)]


def _windowed_scenario(windows: Any, inputs: list[tuple[int]]) -> tuple[list, list]:
    builder = StreamsBuilder()
    counts = (
        builder.stream("input", consumed=Consumed.with_(S, S))
        .group_by(lambda k, v: k, Grouped.with_(S, S))
        .windowed_by(windows)
        .count(Materialized.as_("counts").with_caching_disabled().with_key_serde(S))
    )
    counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream().map(
        lambda k, v: (str(k), v)
    ).to("output-suppressed", produced=Produced.with_(S, L))
    counts.to_stream().map(lambda k, v: (str(k), v)).to("output-raw", produced=Produced.with_(S, L))
    with TopologyTestDriver(builder.build()) as d:
        src = d.create_input_topic("input", S, S)
        for (ts,) in inputs:
            src.pipe_input("k1", "v1", ts)
        return _drain(d, "output-raw"), _drain(d, "output-suppressed")


def test_should_support_final_results_for_time_windows() -> None:
    raw, suppressed = _windowed_scenario(
        TimeWindows.of_size_and_grace(2, 1), [(0,), (1,), (2,), (1,), (0,), (5,), (0,)]
    )
    # the last record gets dropped because it is out of the grace period
    assert raw == [
        ("[k1@0/2]", 1, 0),
        ("[k1@0/2]", 2, 1),
        ("[k1@2/4]", 1, 2),
        ("[k1@0/2]", 3, 1),
        ("[k1@0/2]", 4, 1),
        ("[k1@4/6]", 1, 5),
    ]
    assert suppressed == [("[k1@0/2]", 4, 1), ("[k1@2/4]", 1, 2)]


def test_should_support_final_results_for_time_windows_with_large_jump() -> None:
    raw, suppressed = _windowed_scenario(
        TimeWindows.of_size_and_grace(2, 2),
        [(0,), (1,), (2,), (0,), (3,), (0,), (4,), (0,), (30,)],
    )
    assert raw == [
        ("[k1@0/2]", 1, 0),
        ("[k1@0/2]", 2, 1),
        ("[k1@2/4]", 1, 2),
        ("[k1@0/2]", 3, 1),
        ("[k1@2/4]", 2, 3),
        ("[k1@0/2]", 4, 1),
        ("[k1@4/6]", 1, 4),
        ("[k1@30/32]", 1, 30),
    ]
    assert suppressed == [("[k1@0/2]", 4, 1), ("[k1@2/4]", 2, 3), ("[k1@4/6]", 1, 4)]


def test_should_support_final_results_for_sliding_windows() -> None:
    raw, suppressed = _windowed_scenario(
        SlidingWindows.of_time_difference_and_grace(5, 15),
        [(10,), (11,), (10,), (13,), (10,), (24,), (5,), (7,), (90,)],
    )
    assert len(raw) == 16
    assert suppressed == [
        ("[k1@5/10]", 5, 10),
        ("[k1@6/11]", 5, 11),
        ("[k1@8/13]", 5, 13),
        ("[k1@11/16]", 2, 13),
        ("[k1@12/17]", 1, 13),
        ("[k1@19/24]", 1, 24),
    ]


def test_should_work_before_group_by() -> None:
    builder = StreamsBuilder()
    (
        builder.table("topic", consumed=Consumed.with_(S, S))
        .suppress(Suppressed.until_time_limit(10, BufferConfig.unbounded()))
        .group_by(lambda k, v: (k, v), Grouped.with_(S, S))
        .count()
        .to_stream()
        .to("output", produced=Produced.with_(S, L))
    )
    with TopologyTestDriver(builder.build()) as d:
        src = d.create_input_topic("topic", S, S)
        src.pipe_input("A", "a", 0)
        src.pipe_input("tick", "tick", 10)
        assert _drain(d, "output") == [("A", 1, 0)]
