"""KStreamWindowAggregate: ports of Kafka's ``KStreamWindowAggregateTest`` (Kafka 4.1).

Processor-level cases (Kafka's MockInternalProcessorContext tests) run against a small fake
context; the topology-level cases go through the DSL and ``streaming.TopologyTestDriver``.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from streaming import (
    Consumed,
    Grouped,
    Materialized,
    Produced,
    StreamsBuilder,
    TopologyTestDriver,
    serdes,
)
from streaming.dsl.change import Change
from streaming.dsl.processors.window_aggregate import (
    EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION,
    KStreamWindowAggregateSupplier,
)
from streaming.dsl.windows import EmitStrategy, TimeWindows
from streaming.state import InMemoryStateStoreContext, Stores, TimeWindow, Windowed
from streaming.topology.processor import Processor, Record

UPDATE = EmitStrategy.on_window_update()
CLOSE = EmitStrategy.on_window_close()
STORE = "dummy-store-name"

STRING_INIT = lambda: "0"  # noqa: E731  (Kafka's MockInitializer.STRING_INIT)


def tostring_adder(key: Any, value: Any, agg: Any) -> str:
    """Kafka's MockAggregator.TOSTRING_ADDER."""
    return f"{agg}+{value}"


# ====================================================================== fake context


class _Node:
    name = "testNode"


class FakeContext(InMemoryStateStoreContext):
    """Just enough of the processor context for one processor and its store."""

    def __init__(self, app_configs: dict | None = None) -> None:
        super().__init__(app_configs=app_configs)
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
        return None

    def current_system_time_ms(self) -> int:
        return self.system_time_ms

    def schedule(self, interval: int, punctuation_type: Any, punctuator: Any) -> None:
        """Emit-on-close schedules its wall-clock emit of what the throttle held back (a
        difference from Kafka, see tests/unit/dsl/test_emit_final_catch_up.py); these
        processor-level cases, ported from Kafka's, never run it."""
        self.scheduled.append((interval, punctuation_type, punctuator))

    def reset_forwards(self) -> None:
        self.forwarded = []


def make_context(
    window_size: int, emit_final: bool, interval: int | None = 0, value_serde: Any = None
) -> FakeContext:
    configs = {} if interval is None else {EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION: interval}
    context = FakeContext(configs)
    if emit_final:
        supplier = Stores.in_memory_window_store(STORE, 86_400_000, window_size)
    else:
        supplier = Stores.in_memory_window_store(STORE, 86_400_000, window_size)
    store = (
        Stores.timestamped_window_store_builder(
            supplier, serdes.String(), value_serde or serdes.String()
        )
        .with_logging_disabled()
        .with_caching_disabled()
        .build()
    )
    store.init(context, store)
    context.stores[STORE] = store
    return context


def fwd(key: str, start: int, end: int, value: str, ts: int) -> Record:
    return Record(Windowed(key, TimeWindow(start, end)), Change(value, None), ts)


def processor_for(strategy: EmitStrategy, context: FakeContext) -> Any:
    windows = TimeWindows.of_size_and_grace(10, 5).advance_by(5)
    supplier = KStreamWindowAggregateSupplier(windows, STORE, strategy, STRING_INIT, tostring_adder)
    processor = supplier()
    processor.init(context)
    return supplier, processor


# ====================================================================== processor-level cases


@pytest.mark.parametrize("strategy", [UPDATE, CLOSE], ids=["update", "close"])
def test_should_not_emit_final_if_not_progress_enough(strategy: EmitStrategy) -> None:
    emit_final = strategy == CLOSE
    context = make_context(10, emit_final)
    _, processor = processor_for(strategy, context)

    processor.process(Record("A", "1", 0))
    processor.process(Record("B", "2", 5))
    processor.process(Record("C", "3", 15))
    if emit_final:
        expected = [fwd("A", 0, 10, "0+1", 0), fwd("B", 0, 10, "0+2", 5)]
    else:
        expected = [
            fwd("A", 0, 10, "0+1", 0),
            fwd("B", 0, 10, "0+2", 5),
            fwd("B", 5, 15, "0+2", 5),
            fwd("C", 10, 20, "0+3", 15),
            fwd("C", 15, 25, "0+3", 15),
        ]
    assert context.forwarded == expected
    context.reset_forwards()

    processor.process(Record("D", "4", 15))
    if emit_final:
        assert context.forwarded == []  # observed time does not progress
    else:
        assert context.forwarded == [fwd("D", 10, 20, "0+4", 15), fwd("D", 15, 25, "0+4", 15)]
    context.reset_forwards()

    processor.process(Record("E", "5", 19))
    if emit_final:
        assert context.forwarded == []  # does not progress enough to cover new windows
    else:
        assert context.forwarded == [fwd("E", 10, 20, "0+5", 19), fwd("E", 15, 25, "0+5", 19)]


@pytest.mark.parametrize("strategy", [UPDATE, CLOSE], ids=["update", "close"])
def test_should_emit_with_interval_0(strategy: EmitStrategy) -> None:
    emit_final = strategy == CLOSE
    context = make_context(10, emit_final)
    _, processor = processor_for(strategy, context)

    processor.process(Record("A", "1", 0))
    processor.process(Record("A", "1", 5))
    processor.process(Record("B", "2", 10))
    processor.process(Record("C", "3", 15))
    processor.process(Record("D", "4", 20))
    if emit_final:
        expected = [
            fwd("A", 0, 10, "0+1+1", 5),
            fwd("A", 5, 15, "0+1", 5),
            fwd("B", 5, 15, "0+2", 10),
        ]
    else:
        expected = [
            fwd("A", 0, 10, "0+1", 0),
            fwd("A", 0, 10, "0+1+1", 5),
            fwd("A", 5, 15, "0+1", 5),
            fwd("B", 5, 15, "0+2", 10),
            fwd("B", 10, 20, "0+2", 10),
            fwd("C", 10, 20, "0+3", 15),
            fwd("C", 15, 25, "0+3", 15),
            fwd("D", 15, 25, "0+4", 20),
            fwd("D", 20, 30, "0+4", 20),
        ]
    assert context.forwarded == expected


@pytest.mark.parametrize("strategy", [UPDATE, CLOSE], ids=["update", "close"])
def test_should_emit_with_large_interval(strategy: EmitStrategy) -> None:
    emit_final = strategy == CLOSE
    context = make_context(10, emit_final, interval=1000)
    _, processor = processor_for(strategy, context)

    context.system_time_ms = 0
    processor.process(Record("A", "1", 0))
    processor.process(Record("A", "1", 5))
    processor.process(Record("B", "2", 10))
    processor.process(Record("C", "3", 15))
    if emit_final:
        assert context.forwarded == []
    else:
        assert context.forwarded == [
            fwd("A", 0, 10, "0+1", 0),
            fwd("A", 0, 10, "0+1+1", 5),
            fwd("A", 5, 15, "0+1", 5),
            fwd("B", 5, 15, "0+2", 10),
            fwd("B", 10, 20, "0+2", 10),
            fwd("C", 10, 20, "0+3", 15),
            fwd("C", 15, 25, "0+3", 15),
        ]
    context.reset_forwards()

    context.system_time_ms = 10_000
    processor.process(Record("D", "4", 20))
    if emit_final:
        assert context.forwarded == [
            fwd("A", 0, 10, "0+1+1", 5),
            fwd("A", 5, 15, "0+1", 5),
            fwd("B", 5, 15, "0+2", 10),
        ]
    else:
        assert context.forwarded == [fwd("D", 15, 25, "0+4", 20), fwd("D", 20, 30, "0+4", 20)]
    context.reset_forwards()

    context.system_time_ms = 10_100
    processor.process(Record("E", "5", 40))
    if emit_final:
        assert context.forwarded == []  # throttled: next emit at 11000
    else:
        assert context.forwarded == [fwd("E", 35, 45, "0+5", 40), fwd("E", 40, 50, "0+5", 40)]


def test_default_emit_interval_is_one_second() -> None:
    context = make_context(10, True, interval=None)
    _, processor = processor_for(CLOSE, context)
    context.system_time_ms = 5
    processor.process(Record("A", "1", 0))
    processor.process(Record("B", "2", 30))  # closes [0,10) and [5,15) but throttled
    assert context.forwarded == []
    context.system_time_ms = 1005
    processor.process(Record("C", "3", 30))
    assert context.forwarded == [fwd("A", 0, 10, "0+1", 0)]


@pytest.mark.parametrize("strategy", [UPDATE, CLOSE], ids=["update", "close"])
def test_should_emit_from_last_emit_time(strategy: EmitStrategy) -> None:
    emit_final = strategy == CLOSE
    context = make_context(10, emit_final)
    supplier, processor = processor_for(strategy, context)

    processor.process(Record("A", "1", 0))
    processor.process(Record("B", "2", 5))
    processor.process(Record("C", "3", 15))
    if emit_final:
        expected = [fwd("A", 0, 10, "0+1", 0), fwd("B", 0, 10, "0+2", 5)]
    else:
        expected = [
            fwd("A", 0, 10, "0+1", 0),
            fwd("B", 0, 10, "0+2", 5),
            fwd("B", 5, 15, "0+2", 5),
            fwd("C", 10, 20, "0+3", 15),
            fwd("C", 15, 25, "0+3", 15),
        ]
    assert context.forwarded == expected
    context.reset_forwards()

    new_processor = supplier()
    new_processor.init(context)
    new_processor.process(Record("D", "4", 25))
    if emit_final:
        # the new processor does not emit the windows emitted before
        expected = [fwd("B", 5, 15, "0+2", 5), fwd("C", 10, 20, "0+3", 15)]
    else:
        expected = [fwd("D", 20, 30, "0+4", 25), fwd("D", 25, 35, "0+4", 25)]
    assert context.forwarded == expected


def test_throw_if_emit_final_used_with_unlimited_windows() -> None:
    class Unlimited:  # stands in for Kafka's UnlimitedWindows
        def grace_period_ms(self) -> int:
            return 0

    with pytest.raises(ValueError, match="ON_WINDOW_CLOSE strategy is only supported for"):
        KStreamWindowAggregateSupplier(Unlimited(), STORE, CLOSE, STRING_INIT, tostring_adder)  # type: ignore[arg-type]
    KStreamWindowAggregateSupplier(Unlimited(), STORE, UPDATE, STRING_INIT, tostring_adder)  # type: ignore[arg-type]


def test_send_old_values() -> None:
    context = make_context(10, False)
    windows = TimeWindows.of_size_and_grace(10, 5)
    supplier = KStreamWindowAggregateSupplier(windows, STORE, UPDATE, STRING_INIT, tostring_adder)
    supplier.enable_sending_old_values(True)
    processor = supplier()
    processor.init(context)
    processor.process(Record("A", "1", 1))
    processor.process(Record("A", "2", 3))
    w = Windowed("A", TimeWindow(0, 10))
    assert context.forwarded == [
        Record(w, Change("0+1", "0"), 1),
        Record(w, Change("0+1+2", "0+1"), 3),
    ]


def test_null_key_dropped_null_value_aggregated(caplog: pytest.LogCaptureFixture) -> None:
    # Kafka's KStreamWindowAggregate drops null keys only; null values reach the aggregator
    context = make_context(10, False, value_serde=serdes.Long())
    windows = TimeWindows.of_size_with_no_grace(10)
    supplier = KStreamWindowAggregateSupplier(
        windows, STORE, UPDATE, lambda: 0, lambda k, v, a: a + 1
    )
    processor = supplier()
    processor.init(context)
    with caplog.at_level(logging.WARNING):
        processor.process(Record(None, "1", 1))
    assert "Skipping record due to null key. Topic, partition, and offset not known." in caplog.text
    processor.process(Record("A", None, 2))
    assert context.forwarded == [Record(Windowed("A", TimeWindow(0, 10)), Change(1, None), 2)]


def test_late_record_drop_rule() -> None:
    # window end + grace <= observed stream time -> dropped (end > close time is kept)
    context = make_context(10, False)
    windows = TimeWindows.of_size_and_grace(10, 5)
    supplier = KStreamWindowAggregateSupplier(windows, STORE, UPDATE, STRING_INIT, tostring_adder)
    processor = supplier()
    processor.init(context)
    processor.process(Record("A", "x", 14))  # close time 9: [0,10) still open
    processor.process(Record("A", "1", 9))
    processor.process(Record("A", "y", 15))  # close time 10: [0,10) closed
    processor.process(Record("A", "2", 9))
    assert [(r.key.window.start, r.value.new_value, r.timestamp) for r in context.forwarded] == [
        (10, "0+x", 14),
        (0, "0+1", 9),
        (10, "0+x+y", 15),
    ]


def test_reduce_and_count_lambdas() -> None:
    context = make_context(10, False)
    windows = TimeWindows.of_size_with_no_grace(10)
    reduce = KStreamWindowAggregateSupplier(
        windows,
        STORE,
        UPDATE,
        lambda: None,
        lambda k, v, agg: v if agg is None else agg + v,
    )
    processor = reduce()
    processor.init(context)
    processor.process(Record("A", "a", 3))
    processor.process(Record("A", "b", 1))
    w = Windowed("A", TimeWindow(0, 10))
    # the max timestamp of the window is kept
    assert context.forwarded == [Record(w, Change("a", None), 3), Record(w, Change("ab", None), 3)]


# ====================================================================== topology-level cases

# Kafka's TopologyTestDriver disables the emit-final throttling (interval 0) unless configured
DRIVER_CONFIG = {EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION: 0}

STRATEGIES = [(UPDATE, True), (UPDATE, False), (CLOSE, True), (CLOSE, False)]
STRATEGY_IDS = ["update-cache", "update-nocache", "close-cache", "close-nocache"]


class Capture:
    """Kafka's MockApiProcessorSupplier: records (key, value, timestamp) of what reaches it."""

    def __init__(self) -> None:
        self.processed: list[tuple[Any, Any, int]] = []

    def __call__(self) -> Any:
        capture = self

        class _Processor(Processor):
            def process(self, record: Record) -> None:
                capture.processed.append((record.key, record.value, record.timestamp))

        return _Processor()


def kvt(key: str, start: int, end: int, value: Any, ts: int) -> tuple[Windowed, Any, int]:
    return (Windowed(key, TimeWindow(start, end)), value, ts)


def materialized(name: str, with_cache: bool) -> Materialized:
    m = Materialized.as_(name).with_value_serde(serdes.String())
    return m.with_caching_enabled() if with_cache else m.with_caching_disabled()


def string_stream(builder: StreamsBuilder, topic: str) -> Any:
    return builder.stream(topic, consumed=Consumed.with_(serdes.String(), serdes.String()))


@pytest.mark.parametrize(("strategy", "with_cache"), STRATEGIES, ids=STRATEGY_IDS)
def test_agg_basic(strategy: EmitStrategy, with_cache: bool) -> None:
    builder = StreamsBuilder()
    table = (
        string_stream(builder, "topic1")
        .group_by_key(Grouped.with_(serdes.String(), serdes.String()))
        .windowed_by(TimeWindows.of_size_and_grace(10, 100).advance_by(5))
        .emit_strategy(strategy)
        .aggregate(STRING_INIT, tostring_adder, materialized("topic1-Canonized", with_cache))
    )
    capture = Capture()
    table.to_stream().process(capture)

    with TopologyTestDriver(builder.build(), DRIVER_CONFIG) as driver:
        topic = driver.create_input_topic("topic1", serdes.String(), serdes.String())
        for key, value, ts in [
            ("A", "1", 0), ("B", "2", 1), ("C", "3", 2), ("D", "4", 3), ("A", "1", 4),
            ("A", "1", 5), ("B", "2", 6), ("D", "4", 7), ("B", "2", 8), ("C", "3", 9),
            ("A", "1", 10), ("B", "2", 11), ("D", "4", 12), ("B", "2", 13), ("C", "3", 14),
            ("B", "1", 3), ("B", "2", 2), ("B", "3", 9),
        ]:  # fmt: skip
            topic.pipe_input(key, value, ts)

    if strategy == CLOSE:
        assert capture.processed == []  # grace is 100: no window closes
        return
    assert capture.processed == [
        kvt("A", 0, 10, "0+1", 0),
        kvt("B", 0, 10, "0+2", 1),
        kvt("C", 0, 10, "0+3", 2),
        kvt("D", 0, 10, "0+4", 3),
        kvt("A", 0, 10, "0+1+1", 4),
        kvt("A", 0, 10, "0+1+1+1", 5),
        kvt("A", 5, 15, "0+1", 5),
        kvt("B", 0, 10, "0+2+2", 6),
        kvt("B", 5, 15, "0+2", 6),
        kvt("D", 0, 10, "0+4+4", 7),
        kvt("D", 5, 15, "0+4", 7),
        kvt("B", 0, 10, "0+2+2+2", 8),
        kvt("B", 5, 15, "0+2+2", 8),
        kvt("C", 0, 10, "0+3+3", 9),
        kvt("C", 5, 15, "0+3", 9),
        kvt("A", 5, 15, "0+1+1", 10),
        kvt("A", 10, 20, "0+1", 10),
        kvt("B", 5, 15, "0+2+2+2", 11),
        kvt("B", 10, 20, "0+2", 11),
        kvt("D", 5, 15, "0+4+4", 12),
        kvt("D", 10, 20, "0+4", 12),
        kvt("B", 5, 15, "0+2+2+2+2", 13),
        kvt("B", 10, 20, "0+2+2", 13),
        kvt("C", 5, 15, "0+3+3", 14),
        kvt("C", 10, 20, "0+3", 14),
        kvt("B", 0, 10, "0+2+2+2+1", 8),
        kvt("B", 0, 10, "0+2+2+2+1+2", 8),
        kvt("B", 0, 10, "0+2+2+2+1+2+3", 9),
        kvt("B", 5, 15, "0+2+2+2+2+3", 13),
    ]


@pytest.mark.parametrize(("strategy", "with_cache"), STRATEGIES, ids=STRATEGY_IDS)
def test_emit_final_join_inputs(strategy: EmitStrategy, with_cache: bool) -> None:
    # the table-1 half of Kafka's testJoin (processEmitFinalJoin / processEmitUpdateJoin);
    # the KTable-KTable join part is covered by the join tests
    emit_final = strategy == CLOSE
    builder = StreamsBuilder()
    table = (
        string_stream(builder, "topic1")
        .group_by_key(Grouped.with_(serdes.String(), serdes.String()))
        .windowed_by(TimeWindows.of_size_and_grace(10, 5 if emit_final else 100).advance_by(5))
        .emit_strategy(strategy)
        .aggregate(STRING_INIT, tostring_adder, materialized("topic1-Canonized", with_cache))
    )
    capture = Capture()
    table.to_stream().process(capture)

    with TopologyTestDriver(builder.build(), DRIVER_CONFIG) as driver:
        topic = driver.create_input_topic("topic1", serdes.String(), serdes.String())
        if emit_final:
            for key, value, ts in [
                ("A", "1", 0), ("B", "2", 1), ("C", "3", 2), ("D", "4", 3), ("A", "1", 9),
                ("A", "1", 15),
            ]:  # fmt: skip
                topic.pipe_input(key, value, ts)
            assert capture.processed == [
                kvt("A", 0, 10, "0+1+1", 9),
                kvt("B", 0, 10, "0+2", 1),
                kvt("C", 0, 10, "0+3", 2),
                kvt("D", 0, 10, "0+4", 3),
            ]
            capture.processed.clear()
            for key, value, ts in [
                ("A", "1", 10), ("B", "2", 11), ("D", "4", 12), ("B", "2", 13), ("C", "3", 14),
                ("A", "1", 20),
            ]:  # fmt: skip
                topic.pipe_input(key, value, ts)
            assert capture.processed == [
                kvt("A", 5, 15, "0+1+1", 10),
                kvt("B", 5, 15, "0+2+2", 13),
                kvt("C", 5, 15, "0+3", 14),
                kvt("D", 5, 15, "0+4", 12),
            ]
        else:
            for key, value, ts in [("A", "1", 0), ("B", "2", 1), ("C", "3", 2), ("D", "4", 3), ("A", "1", 9)]:  # fmt: skip
                topic.pipe_input(key, value, ts)
            assert capture.processed == [
                kvt("A", 0, 10, "0+1", 0),
                kvt("B", 0, 10, "0+2", 1),
                kvt("C", 0, 10, "0+3", 2),
                kvt("D", 0, 10, "0+4", 3),
                kvt("A", 0, 10, "0+1+1", 9),
                kvt("A", 5, 15, "0+1", 9),
            ]
            capture.processed.clear()
            for key, value, ts in [("A", "1", 5), ("B", "2", 6), ("D", "4", 7), ("B", "2", 8), ("C", "3", 9)]:  # fmt: skip
                topic.pipe_input(key, value, ts)
            assert capture.processed == [
                kvt("A", 0, 10, "0+1+1+1", 9),
                kvt("A", 5, 15, "0+1+1", 9),
                kvt("B", 0, 10, "0+2+2", 6),
                kvt("B", 5, 15, "0+2", 6),
                kvt("D", 0, 10, "0+4+4", 7),
                kvt("D", 5, 15, "0+4", 7),
                kvt("B", 0, 10, "0+2+2+2", 8),
                kvt("B", 5, 15, "0+2+2", 8),
                kvt("C", 0, 10, "0+3+3", 9),
                kvt("C", 5, 15, "0+3", 9),
            ]


@pytest.mark.parametrize(("strategy", "with_cache"), STRATEGIES, ids=STRATEGY_IDS)
def test_should_log_when_skipping_null_key(
    strategy: EmitStrategy, with_cache: bool, caplog: pytest.LogCaptureFixture
) -> None:
    builder = StreamsBuilder()
    (
        string_stream(builder, "topic")
        .group_by_key(Grouped.with_(serdes.String(), serdes.String()))
        .windowed_by(TimeWindows.of_size_with_no_grace(10).advance_by(5))
        .emit_strategy(strategy)
        .aggregate(STRING_INIT, tostring_adder, materialized("topic1-Canonicalized", with_cache))
    )
    with (
        caplog.at_level(logging.WARNING, "streaming.dsl.processors.window_aggregate"),
        TopologyTestDriver(builder.build(), DRIVER_CONFIG) as driver,
    ):
        driver.create_input_topic("topic", serdes.String(), serdes.String()).pipe_input(None, "1")
    assert (
        "Skipping record due to null key. topic=[topic] partition=[0] offset=[0]" in caplog.messages
    )


@pytest.mark.parametrize(("strategy", "with_cache"), STRATEGIES, ids=STRATEGY_IDS)
def test_should_log_when_skipping_expired_window(
    strategy: EmitStrategy, with_cache: bool, caplog: pytest.LogCaptureFixture
) -> None:
    builder = StreamsBuilder()
    (
        string_stream(builder, "topic")
        .group_by_key(Grouped.with_(serdes.String(), serdes.String()))
        .windowed_by(TimeWindows.of_size_and_grace(10, 90).advance_by(5))
        .emit_strategy(strategy)
        .aggregate(
            lambda: "",
            tostring_adder,
            materialized("topic1-Canonicalized", with_cache)
            .with_logging_disabled()
            .with_retention(100),
        )
        .to_stream()
        .map(lambda k, v: (str(k), v))
        .to("output", produced=Produced.with_(serdes.String(), serdes.String()))
    )
    with (
        caplog.at_level(logging.WARNING, "streaming.dsl.processors.window_aggregate"),
        TopologyTestDriver(builder.build(), DRIVER_CONFIG) as driver,
    ):
        topic = driver.create_input_topic("topic", serdes.String(), serdes.String())
        for value, ts in [
            ("100", 100), ("0", 0), ("1", 1), ("2", 2), ("3", 3), ("4", 4), ("5", 5), ("6", 6),
            ("105", 105), ("106", 106),
        ]:  # fmt: skip
            topic.pipe_input("k", value, ts)
        for offset in range(1, 8):
            ts = offset - 1
            assert (
                f"Skipping record for expired window. topic=[topic] partition=[0] "
                f"offset=[{offset}] timestamp=[{ts}] window=[0,10) expiration=[10] "
                f"streamTime=[100]"
            ) in caplog.messages
        out = driver.create_output_topic("output", serdes.String(), serdes.String())
        records = [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]
    if strategy == CLOSE:
        # the window close time is 15 when the timestamp is 105
        assert records == [("[k@5/15]", "+5+6", 6)]
    else:
        assert records == [
            ("[k@95/105]", "+100", 100),
            ("[k@100/110]", "+100", 100),
            ("[k@5/15]", "+5", 5),
            ("[k@5/15]", "+5+6", 6),
            ("[k@100/110]", "+100+105", 105),
            ("[k@105/115]", "+105", 105),
            ("[k@100/110]", "+100+105+106", 106),
            ("[k@105/115]", "+105+106", 106),
        ]


@pytest.mark.parametrize(("strategy", "with_cache"), STRATEGIES, ids=STRATEGY_IDS)
def test_should_log_when_skipping_expired_window_by_grace(
    strategy: EmitStrategy, with_cache: bool, caplog: pytest.LogCaptureFixture
) -> None:
    builder = StreamsBuilder()
    (
        string_stream(builder, "topic")
        .group_by_key(Grouped.with_(serdes.String(), serdes.String()))
        .windowed_by(TimeWindows.of_size_and_grace(10, 90).advance_by(10))
        .emit_strategy(strategy)
        .aggregate(
            lambda: "",
            tostring_adder,
            materialized("topic1-Canonicalized", with_cache).with_logging_disabled(),
        )
        .to_stream()
        .map(lambda k, v: (str(k), v))
        .to("output", produced=Produced.with_(serdes.String(), serdes.String()))
    )
    with (
        caplog.at_level(logging.WARNING, "streaming.dsl.processors.window_aggregate"),
        TopologyTestDriver(builder.build(), DRIVER_CONFIG) as driver,
    ):
        topic = driver.create_input_topic("topic", serdes.String(), serdes.String())
        for value, ts in [
            ("100", 200), ("0", 100), ("1", 101), ("2", 102), ("3", 103), ("4", 104),
            ("5", 105), ("6", 6),
        ]:  # fmt: skip
            topic.pipe_input("k", value, ts)
        for offset, ts in enumerate([100, 101, 102, 103, 104, 105], start=1):
            assert (
                f"Skipping record for expired window. topic=[topic] partition=[0] "
                f"offset=[{offset}] timestamp=[{ts}] window=[100,110) expiration=[110] "
                f"streamTime=[200]"
            ) in caplog.messages
        assert (
            "Skipping record for expired window. topic=[topic] partition=[0] offset=[7] "
            "timestamp=[6] window=[0,10) expiration=[110] streamTime=[200]"
        ) in caplog.messages
        out = driver.create_output_topic("output", serdes.String(), serdes.String())
        records = [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]
    if strategy == CLOSE:
        assert records == []
    else:
        assert records == [("[k@200/210]", "+100", 200)]


@pytest.mark.parametrize("with_cache", [True, False], ids=["cache", "nocache"])
def test_count_and_reduce_through_the_dsl(with_cache: bool) -> None:
    builder = StreamsBuilder()
    grouped = string_stream(builder, "topic").group_by_key(
        Grouped.with_(serdes.String(), serdes.String())
    )
    windowed = grouped.windowed_by(TimeWindows.of_size_with_no_grace(10))
    counts = Capture()
    reduced = Capture()
    cnt = Materialized.as_("counts").with_value_serde(serdes.Long())
    red = Materialized.as_("reduced").with_value_serde(serdes.String())
    if not with_cache:
        cnt, red = cnt.with_caching_disabled(), red.with_caching_disabled()
    windowed.count(cnt).to_stream().process(counts)
    windowed.reduce(lambda agg, v: agg + v, red).to_stream().process(reduced)
    with TopologyTestDriver(builder.build(), DRIVER_CONFIG) as driver:
        topic = driver.create_input_topic("topic", serdes.String(), serdes.String())
        topic.pipe_input("A", "x", 3)
        topic.pipe_input("A", "y", 1)
        topic.pipe_input("A", "z", 12)
    assert counts.processed == [
        kvt("A", 0, 10, 1, 3),
        kvt("A", 0, 10, 2, 3),
        kvt("A", 10, 20, 1, 12),
    ]
    assert reduced.processed == [
        kvt("A", 0, 10, "x", 3),
        kvt("A", 0, 10, "xy", 3),
        kvt("A", 10, 20, "z", 12),
    ]
