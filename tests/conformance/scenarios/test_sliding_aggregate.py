"""KStreamSlidingWindowAggregate: ports of Kafka's ``KStreamSlidingWindowAggregateTest`` (4.1).

Each case runs with both emit strategies and with caching on and off, like Kafka's
parameterised test. ``gather`` is Kafka's ``gatherOutput``: window start -> set of
(value, timestamp), which does not depend on the order in which caches flush.
"""

from __future__ import annotations

import logging
import random
from typing import Any

import pytest

from streaming import (
    Consumed,
    EmitStrategy,
    Grouped,
    Materialized,
    Processor,
    Produced,
    Record,
    SlidingWindows,
    StreamsBuilder,
    TopologyTestDriver,
    serdes,
)
from streaming.dsl.change import Change
from streaming.dsl.processors.sliding_aggregate import KStreamSlidingWindowAggregateSupplier
from streaming.dsl.processors.window_aggregate import (
    EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION,
)
from streaming.state import InMemoryStateStoreContext, Stores, TimeWindow, Windowed

UPDATE = EmitStrategy.on_window_update()
CLOSE = EmitStrategy.on_window_close()

# Kafka's tests set the emit interval to 0 so that every record tries to emit
DRIVER_CONFIG = {EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION: 0}

STRATEGIES = [(UPDATE, True), (UPDATE, False), (CLOSE, True), (CLOSE, False)]
STRATEGY_IDS = ["update-cache", "update-nocache", "close-cache", "close-nocache"]

STRING_INIT = lambda: "0"  # noqa: E731  (Kafka's MockInitializer.STRING_INIT)


def tostring_adder(key: Any, value: Any, agg: Any) -> str:
    """Kafka's MockAggregator.TOSTRING_ADDER."""
    return f"{agg}+{value}"


class Capture:
    """Kafka's MockApiProcessorSupplier: records (key, value, timestamp) of what reaches it."""

    def __init__(self) -> None:
        self.processed: list[tuple[Any, Any, int]] = []

    def __call__(self) -> Processor:
        capture = self

        class _Processor(Processor):
            def process(self, record: Record) -> None:
                capture.processed.append((record.key, record.value, record.timestamp))

        return _Processor()


def gather(capture: Capture) -> dict[int, set[tuple[Any, int]]]:
    out: dict[int, set[tuple[Any, int]]] = {}
    for key, value, ts in capture.processed:
        out.setdefault(key.window.start, set()).add((value, ts))
    return out


def sorted_by_key_and_start(capture: Capture) -> list[tuple[Any, Any, int]]:
    # Java's List.sort is stable: same order for equal (key, start)
    return sorted(capture.processed, key=lambda r: (r[0].key, r[0].window.start))


def kvt(key: str, start: int, end: int, value: Any, ts: int) -> tuple[Windowed, Any, int]:
    return (Windowed(key, TimeWindow(start, end)), value, ts)


def run(
    strategy: EmitStrategy,
    with_cache: bool,
    windows: SlidingWindows,
    records: list[tuple[str | None, str | None, int]],
    *,
    reduce: bool = False,
    store: str = "store-name",
) -> Capture:
    builder = StreamsBuilder()
    mat = Materialized.as_(store).with_value_serde(serdes.String())
    mat = mat.with_caching_enabled() if with_cache else mat.with_caching_disabled()
    windowed = (
        builder.stream("topic", consumed=Consumed.with_(serdes.String(), serdes.String()))
        .group_by_key(Grouped.with_(serdes.String(), serdes.String()))
        .windowed_by(windows)
        .emit_strategy(strategy)
    )
    if reduce:
        table = windowed.reduce(lambda agg, v: f"{agg}+{v}", mat)  # MockReducer.STRING_ADDER
    else:
        table = windowed.aggregate(STRING_INIT, tostring_adder, mat)
    capture = Capture()
    table.to_stream().process(capture)
    with TopologyTestDriver(builder.build(), DRIVER_CONFIG) as driver:
        topic = driver.create_input_topic("topic", serdes.String(), serdes.String())
        for key, value, ts in records:
            topic.pipe_input(key, value, ts)
    return capture


@pytest.mark.parametrize(("strategy", "with_cache"), STRATEGIES, ids=STRATEGY_IDS)
def test_aggregate_small_input(strategy: EmitStrategy, with_cache: bool) -> None:
    capture = run(
        strategy,
        with_cache,
        SlidingWindows.of_time_difference_and_grace(10, 5),
        [("A", "1", 10), ("A", "2", 10), ("A", "3", 14), ("A", "4", 15), ("A", "5", 20),
         ("A", "6", 22), ("A", "7", 30)],
    )  # fmt: skip
    if strategy == CLOSE:
        expected = {
            0: {("0+1+2", 10)},
            4: {("0+1+2+3", 14)},
            5: {("0+1+2+3+4", 15)},
            10: {("0+1+2+3+4+5", 20)},
            11: {("0+3+4+5", 20)},
            12: {("0+3+4+5+6", 22)},
        }
    else:
        expected = {
            0: {("0+1", 10), ("0+1+2", 10)},
            4: {("0+1+2+3", 14)},
            5: {("0+1+2+3+4", 15)},
            10: {("0+1+2+3+4+5", 20)},
            11: {("0+3", 14), ("0+3+4", 15), ("0+3+4+5", 20)},
            12: {("0+3+4+5+6", 22)},
            15: {("0+4", 15), ("0+4+5", 20), ("0+4+5+6", 22)},
            16: {("0+5", 20), ("0+5+6", 22)},
            20: {("0+5+6+7", 30)},
            21: {("0+6", 22), ("0+6+7", 30)},
            23: {("0+7", 30)},
        }
    assert gather(capture) == expected


@pytest.mark.parametrize(("strategy", "with_cache"), STRATEGIES, ids=STRATEGY_IDS)
def test_reduce_small_input(strategy: EmitStrategy, with_cache: bool) -> None:
    capture = run(
        strategy,
        with_cache,
        SlidingWindows.of_time_difference_and_grace(10, 5),
        [("A", "1", 10), ("A", "2", 14), ("A", "3", 15), ("A", "4", 22), ("A", "5", 26),
         ("A", "6", 30)],
        reduce=True,
    )  # fmt: skip
    if strategy == CLOSE:
        expected = {
            0: {("1", 10)},
            4: {("1+2", 14)},
            5: {("1+2+3", 15)},
            11: {("2+3", 15)},
            12: {("2+3+4", 22)},
        }
    else:
        expected = {
            0: {("1", 10)},
            4: {("1+2", 14)},
            5: {("1+2+3", 15)},
            11: {("2", 14), ("2+3", 15)},
            12: {("2+3+4", 22)},
            15: {("3", 15), ("3+4", 22)},
            16: {("4", 22), ("4+5", 26)},
            20: {("4+5+6", 30)},
            23: {("5", 26), ("5+6", 30)},
            27: {("6", 30)},
        }
    assert gather(capture) == expected


@pytest.mark.parametrize(("strategy", "with_cache"), STRATEGIES, ids=STRATEGY_IDS)
def test_aggregate_large_input(strategy: EmitStrategy, with_cache: bool) -> None:
    emit_final = strategy == CLOSE
    capture = run(
        strategy,
        with_cache,
        SlidingWindows.of_time_difference_and_grace(10, 10 if emit_final else 50),
        [
            ("A", "1", 10), ("A", "2", 20), ("A", "3", 22), ("A", "4", 15),
            ("B", "1", 12), ("B", "2", 13), ("B", "3", 18), ("B", "4", 19), ("B", "5", 25),
            ("B", "6", 14),  # skipped for emit final: [4, 14], close time 15
            ("C", "1", 11),  # skipped for emit final: [1, 11], close time 15
            ("C", "2", 15), ("C", "3", 16), ("C", "4", 21), ("C", "5", 23),
            ("D", "4", 11),  # skipped for emit final: [1, 11], close time 15
            ("D", "2", 12),  # skipped for emit final: [2, 12], close time 15
            ("D", "3", 29),
            ("D", "5", 16),  # skipped for emit final: [6, 16], close time 19
        ],
    )  # fmt: skip
    actual = sorted_by_key_and_start(capture)
    if emit_final:
        assert actual == [
            kvt("A", 0, 10, "0+1", 10),
            kvt("A", 5, 15, "0+1+4", 15),
            kvt("B", 2, 12, "0+1", 12),
            kvt("B", 3, 13, "0+1+2", 13),
            kvt("B", 8, 18, "0+1+2+3+6", 18),
            kvt("C", 5, 15, "0+2", 15),
            kvt("C", 6, 16, "0+2+3", 16),
        ]
        return
    expected = [
        kvt("A", 0, 10, "0+1", 10),
        kvt("A", 5, 15, "0+1+4", 15),
        kvt("A", 10, 20, "0+1+2", 20),
        kvt("A", 10, 20, "0+1+2+4", 20),
        kvt("A", 11, 21, "0+2", 20),
        kvt("A", 11, 21, "0+2+4", 20),
        kvt("A", 12, 22, "0+2+3", 22),
        kvt("A", 12, 22, "0+2+3+4", 22),
        kvt("A", 16, 26, "0+2+3", 22),
        kvt("A", 21, 31, "0+3", 22),
        kvt("B", 2, 12, "0+1", 12),
        kvt("B", 3, 13, "0+1+2", 13),
        kvt("B", 4, 14, "0+1+2+6", 14),
        kvt("B", 8, 18, "0+1+2+3", 18),
        kvt("B", 8, 18, "0+1+2+3+6", 18),
        kvt("B", 9, 19, "0+1+2+3+4", 19),
        kvt("B", 9, 19, "0+1+2+3+4+6", 19),
        kvt("B", 13, 23, "0+2", 13),
        kvt("B", 13, 23, "0+2+3", 18),
        kvt("B", 13, 23, "0+2+3+4", 19),
        kvt("B", 13, 23, "0+2+3+4+6", 19),
        kvt("B", 14, 24, "0+3", 18),
        kvt("B", 14, 24, "0+3+4", 19),
        kvt("B", 14, 24, "0+3+4+6", 19),
        kvt("B", 15, 25, "0+3+4+5", 25),
        kvt("B", 19, 29, "0+4", 19),
        kvt("B", 19, 29, "0+4+5", 25),
        kvt("B", 20, 30, "0+5", 25),
        kvt("C", 1, 11, "0+1", 11),
        kvt("C", 5, 15, "0+1+2", 15),
        kvt("C", 6, 16, "0+1+2+3", 16),
        kvt("C", 11, 21, "0+1+2+3+4", 21),
        kvt("C", 12, 22, "0+2", 15),
        kvt("C", 12, 22, "0+2+3", 16),
        kvt("C", 12, 22, "0+2+3+4", 21),
        kvt("C", 13, 23, "0+2+3+4+5", 23),
        kvt("C", 16, 26, "0+3", 16),
        kvt("C", 16, 26, "0+3+4", 21),
        kvt("C", 16, 26, "0+3+4+5", 23),
        kvt("C", 17, 27, "0+4", 21),
        kvt("C", 17, 27, "0+4+5", 23),
        kvt("C", 22, 32, "0+5", 23),
        kvt("D", 1, 11, "0+4", 11),
        kvt("D", 2, 12, "0+4+2", 12),
        kvt("D", 6, 16, "0+4+2+5", 16),
        kvt("D", 12, 22, "0+2", 12),
        kvt("D", 12, 22, "0+2+5", 16),
        kvt("D", 13, 23, "0+5", 16),
        kvt("D", 19, 29, "0+3", 29),
    ]
    assert actual == expected


@pytest.mark.parametrize(("strategy", "with_cache"), STRATEGIES, ids=STRATEGY_IDS)
def test_early_records_repeated_input(strategy: EmitStrategy, with_cache: bool) -> None:
    capture = run(
        strategy,
        with_cache,
        SlidingWindows.of_time_difference_and_grace(5, 0),
        [("A", "1", 0), ("A", "2", 2), ("A", "3", 4), ("A", "4", 0), ("A", "5", 2),
         ("A", "6", 2), ("A", "7", 0), ("A", "8", 7)],
        store="topic-Canonized",
    )  # fmt: skip
    if strategy == CLOSE:
        expected = {0: {("0+1+2+3+4+5+6+7", 4)}, 1: {("0+2+3+5+6", 4)}}
    else:
        expected = {
            0: {
                ("0+1", 0),
                ("0+1+2", 2),
                ("0+1+2+3+4+5", 4),
                ("0+1+2+3+4+5+6", 4),
                ("0+1+2+3", 4),
                ("0+1+2+3+4", 4),
                ("0+1+2+3+4+5+6+7", 4),
            },
            1: {("0+2+3+5+6", 4), ("0+2", 2), ("0+2+3", 4), ("0+2+3+5", 4)},
            2: {("0+2+3+5+6+8", 7)},
            3: {("0+3", 4), ("0+3+8", 7)},
            5: {("0+8", 7)},
        }
    assert gather(capture) == expected


EARLY_LARGE_INPUT = [("E", "1", 0), ("E", "3", 5), ("E", "4", 6), ("E", "2", 3), ("E", "6", 13),
                     ("E", "5", 10), ("E", "7", 4), ("E", "8", 2), ("E", "9", 15)]  # fmt: skip

EARLY_LARGE_UPDATES = [
    kvt("E", 0, 10, "0+1", 0),
    kvt("E", 0, 10, "0+1+3", 5),
    kvt("E", 0, 10, "0+1+3+4", 6),
    kvt("E", 0, 10, "0+1+3+4+2", 6),
    kvt("E", 1, 11, "0+3", 5),
    kvt("E", 1, 11, "0+3+4", 6),
    kvt("E", 1, 11, "0+3+4+2", 6),
    kvt("E", 3, 13, "0+3+4+2+6", 13),
    kvt("E", 3, 13, "0+3+4+2+6+5", 13),
    kvt("E", 3, 13, "0+3+4+2+6+5+7", 13),
    kvt("E", 4, 14, "0+3+4", 6),
    kvt("E", 4, 14, "0+3+4+6", 13),
    kvt("E", 4, 14, "0+3+4+6+5", 13),
    kvt("E", 4, 14, "0+3+4+6+5+7", 13),
    kvt("E", 5, 15, "0+3+4+6+5", 13),
    kvt("E", 5, 15, "0+3+4+6+5+9", 15),
    kvt("E", 6, 16, "0+4", 6),
    kvt("E", 6, 16, "0+4+6", 13),
    kvt("E", 6, 16, "0+4+6+5", 13),
    kvt("E", 6, 16, "0+4+6+5+9", 15),
    kvt("E", 7, 17, "0+6", 13),
    kvt("E", 7, 17, "0+6+5", 13),
    kvt("E", 7, 17, "0+6+5+9", 15),
    kvt("E", 11, 21, "0+6", 13),
    kvt("E", 11, 21, "0+6+9", 15),
    kvt("E", 14, 24, "0+9", 15),
]


@pytest.mark.parametrize(("strategy", "with_cache"), STRATEGIES, ids=STRATEGY_IDS)
def test_early_records_large_input(strategy: EmitStrategy, with_cache: bool) -> None:
    emit_final = strategy == CLOSE
    capture = run(
        strategy,
        with_cache,
        SlidingWindows.of_time_difference_and_grace(10, 1 if emit_final else 50),
        EARLY_LARGE_INPUT,
    )
    actual = sorted_by_key_and_start(capture)
    if emit_final:
        assert actual == [
            kvt("E", 0, 10, "0+1+3+4+2", 6),
            kvt("E", 1, 11, "0+3+4+2", 6),
            kvt("E", 3, 13, "0+3+4+2+6+5+7", 13),
        ]
    else:
        # plus the updates of the combined window [0,10] and of [1,11] by E@10, E@4 and E@2
        expected = list(EARLY_LARGE_UPDATES)
        expected[4:4] = [
            kvt("E", 0, 10, "0+1+3+4+2+5", 10),
            kvt("E", 0, 10, "0+1+3+4+2+5+7", 10),
            kvt("E", 0, 10, "0+1+3+4+2+5+7+8", 10),
        ]
        expected[10:10] = [
            kvt("E", 1, 11, "0+3+4+2+5", 10),
            kvt("E", 1, 11, "0+3+4+2+5+7", 10),
            kvt("E", 1, 11, "0+3+4+2+5+7+8", 10),
        ]
        assert actual == expected


@pytest.mark.parametrize(("strategy", "with_cache"), STRATEGIES, ids=STRATEGY_IDS)
def test_early_no_grace_period_small_input(strategy: EmitStrategy, with_cache: bool) -> None:
    # all records are early: their timestamps are below the time difference
    capture = run(
        strategy,
        with_cache,
        SlidingWindows.of_time_difference_with_no_grace(50),
        [("A", "1", 0), ("A", "2", 5), ("A", "3", 6), ("A", "4", 3), ("A", "5", 13),
         ("A", "6", 10), ("A", "6", 70)],
        store="topic-Canonized",
    )  # fmt: skip
    if strategy == CLOSE:
        expected = {
            0: {("0+1+2+3+4+5+6", 13)},
            1: {("0+2+3+4+5+6", 13)},
            4: {("0+2+3+5+6", 13)},
            6: {("0+3+5+6", 13)},
            7: {("0+5+6", 13)},
            11: {("0+5", 13)},
        }
    else:
        expected = {
            0: {
                ("0+1", 0),
                ("0+1+2", 5),
                ("0+1+2+3", 6),
                ("0+1+2+3+4", 6),
                ("0+1+2+3+4+5", 13),
                ("0+1+2+3+4+5+6", 13),
            },
            1: {
                ("0+2", 5),
                ("0+2+3", 6),
                ("0+2+3+4", 6),
                ("0+2+3+4+5", 13),
                ("0+2+3+4+5+6", 13),
            },
            4: {("0+2+3", 6), ("0+2+3+5", 13), ("0+2+3+5+6", 13)},
            6: {("0+3", 6), ("0+3+5", 13), ("0+3+5+6", 13)},
            7: {("0+5", 13), ("0+5+6", 13)},
            11: {("0+5", 13)},
            20: {("0+6", 70)},
        }
    assert gather(capture) == expected


@pytest.mark.parametrize(("strategy", "with_cache"), STRATEGIES, ids=STRATEGY_IDS)
def test_no_grace_period_small_input(strategy: EmitStrategy, with_cache: bool) -> None:
    capture = run(
        strategy,
        with_cache,
        SlidingWindows.of_time_difference_with_no_grace(50),
        [("A", "1", 100), ("A", "2", 105), ("A", "3", 106), ("A", "4", 103), ("A", "5", 113),
         ("A", "6", 110)],
        store="topic-Canonized",
    )  # fmt: skip
    if strategy == CLOSE:
        expected = {
            50: {("0+1", 100)},
            55: {("0+1+2", 105)},
            56: {("0+1+2+3+4", 106)},
        }
    else:
        expected = {
            50: {("0+1", 100)},
            55: {("0+1+2", 105)},
            56: {("0+1+2+3", 106), ("0+1+2+3+4", 106)},
            63: {("0+1+2+3+4+5", 113), ("0+1+2+3+4+5+6", 113)},
            101: {
                ("0+2", 105),
                ("0+2+3", 106),
                ("0+2+3+4", 106),
                ("0+2+3+4+5", 113),
                ("0+2+3+4+5+6", 113),
            },
            104: {("0+2+3", 106), ("0+2+3+5", 113), ("0+2+3+5+6", 113)},
            106: {("0+3", 106), ("0+3+5", 113), ("0+3+5+6", 113)},
            107: {("0+5", 113), ("0+5+6", 113)},
            111: {("0+5", 113)},
        }
    assert gather(capture) == expected


@pytest.mark.parametrize(("strategy", "with_cache"), STRATEGIES, ids=STRATEGY_IDS)
def test_early_no_grace_period_large_input(strategy: EmitStrategy, with_cache: bool) -> None:
    capture = run(
        strategy,
        with_cache,
        SlidingWindows.of_time_difference_with_no_grace(10),
        EARLY_LARGE_INPUT,
    )
    actual = sorted_by_key_and_start(capture)
    if strategy == CLOSE:
        assert actual == [
            kvt("E", 0, 10, "0+1+3+4+2", 6),
            kvt("E", 1, 11, "0+3+4+2", 6),
            kvt("E", 3, 13, "0+3+4+2+6+5+7", 13),
            kvt("E", 4, 14, "0+3+4+6+5+7", 13),
        ]
    else:
        # E@10 and later E@4/E@2 come too late for [0,10] and [1,11] without grace
        assert actual == EARLY_LARGE_UPDATES


@pytest.mark.parametrize(("strategy", "with_cache"), STRATEGIES, ids=STRATEGY_IDS)
def test_should_log_when_skipping_null_key_or_value(
    strategy: EmitStrategy, with_cache: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "streaming.dsl.processors.window_aggregate"):
        capture = run(
            strategy,
            with_cache,
            SlidingWindows.of_time_difference_and_grace(10, 100),
            [(None, "1", 0), ("A", None, 1)],
        )
    assert capture.processed == []
    assert "Skipping record due to null key or value. topic=[topic] partition=[0] offset=[0]" in (
        caplog.messages
    )
    assert "Skipping record due to null key or value. topic=[topic] partition=[0] offset=[1]" in (
        caplog.messages
    )


@pytest.mark.parametrize(("strategy", "with_cache"), STRATEGIES, ids=STRATEGY_IDS)
def test_should_log_when_skipping_expired_window_by_grace(
    strategy: EmitStrategy, with_cache: bool, caplog: pytest.LogCaptureFixture
) -> None:
    builder = StreamsBuilder()
    mat = Materialized.as_("store-name").with_value_serde(serdes.String())
    mat = mat.with_caching_enabled() if with_cache else mat.with_caching_disabled()
    (
        builder.stream("topic", consumed=Consumed.with_(serdes.String(), serdes.String()))
        .group_by_key(Grouped.with_(serdes.String(), serdes.String()))
        .windowed_by(SlidingWindows.of_time_difference_and_grace(10, 90))
        .emit_strategy(strategy)
        .aggregate(STRING_INIT, tostring_adder, mat)
        .to_stream()
        .to("output", produced=Produced.with_(None, serdes.String()))
    )
    with (
        caplog.at_level(logging.WARNING, "streaming.dsl.processors.window_aggregate"),
        TopologyTestDriver(builder.build(), DRIVER_CONFIG) as driver,
    ):
        topic = driver.create_input_topic("topic", serdes.String(), serdes.String())
        for value, ts in [
            ("100", 200), ("0", 100), ("1", 101), ("2", 102), ("3", 103), ("4", 104),
            ("5", 105), ("6", 15), ("101", 300), ("102", 400),
        ]:  # fmt: skip
            topic.pipe_input("k", value, ts)
        # the left windows of k@100..k@105 end before the close time 110; k@15 is dropped
        # as a whole ([15,25] ends before the close time)
        for offset, (ts, window) in enumerate(
            [(100, "[90,100]"), (101, "[91,101]"), (102, "[92,102]"), (103, "[93,103]"),
             (104, "[94,104]"), (105, "[95,105]"), (15, "[15,25]")],
            start=1,
        ):  # fmt: skip
            assert (
                f"Skipping record for expired window. topic=[topic] partition=[0] "
                f"offset=[{offset}] timestamp=[{ts}] window={window} "
                f"expiration=[110] streamTime=[200]"
            ) in caplog.messages
        out = driver.create_output_topic(
            "output", serdes.TimeWindowedSerde(serdes.String(), 10), serdes.String()
        )
        records = [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]
    expected = [kvt("k", 190, 200, "0+100", 200), kvt("k", 290, 300, "0+101", 300)]
    if strategy == UPDATE:
        expected.append(kvt("k", 390, 400, "0+102", 400))
    assert records == expected


RANDOM_INPUT = [
    ("A", 10), ("B", 15), ("C", 16), ("D", 18), ("E", 30), ("F", 40), ("G", 55), ("H", 56),
    ("I", 58), ("J", 58), ("K", 62), ("L", 63), ("M", 63), ("N", 63), ("O", 76), ("P", 77),
    ("Q", 80), ("R", 2), ("S", 3), ("T", 5), ("U", 8),
]  # fmt: skip


@pytest.mark.parametrize(("strategy", "with_cache"), STRATEGIES, ids=STRATEGY_IDS)
@pytest.mark.parametrize("seed", range(5))
def test_aggregate_random_input(strategy: EmitStrategy, with_cache: bool, seed: int) -> None:
    records = list(RANDOM_INPUT)
    random.Random(seed).shuffle(records)
    builder = StreamsBuilder()
    mat = Materialized.as_("store-name").with_value_serde(serdes.String())
    mat = mat.with_caching_enabled() if with_cache else mat.with_caching_disabled()
    table = (
        builder.stream("topic1", consumed=Consumed.with_(serdes.String(), serdes.String()))
        .group_by_key(Grouped.with_(serdes.String(), serdes.String()))
        .windowed_by(SlidingWindows.of_time_difference_and_grace(10, 100))
        .emit_strategy(strategy)
        # sorted so that final windows do not depend on the processing order
        .aggregate(lambda: "", lambda k, v, agg: "".join(sorted(agg + v)), mat)
    )
    capture = Capture()
    table.to_stream().process(capture)
    with TopologyTestDriver(builder.build(), DRIVER_CONFIG) as driver:
        topic = driver.create_input_topic("topic1", serdes.String(), serdes.String())
        for value, ts in records:
            topic.pipe_input("A", value, ts)
        topic.pipe_input("A", "V", 181)
    results = {key.window.start: (value, ts) for key, value, ts in capture.processed}
    expected = {
        0: ("ARSTU", 10), 3: ("ASTU", 10), 4: ("ATU", 10), 5: ("ABTU", 15), 6: ("ABCU", 16),
        8: ("ABCDU", 18), 9: ("ABCD", 18), 11: ("BCD", 18), 16: ("CD", 18), 17: ("D", 18),
        20: ("E", 30), 30: ("EF", 40), 31: ("F", 40), 45: ("G", 55), 46: ("GH", 56),
        48: ("GHIJ", 58), 52: ("GHIJK", 62), 53: ("GHIJKLMN", 63), 56: ("HIJKLMN", 63),
        57: ("IJKLMN", 63), 59: ("KLMN", 63), 63: ("LMN", 63), 66: ("O", 76), 67: ("OP", 77),
        70: ("OPQ", 80), 77: ("PQ", 80), 78: ("Q", 80), 171: ("V", 181),
    }  # fmt: skip
    if strategy == CLOSE:
        # every window closed at V@181 (end + grace before it), each once with its final
        # value. Kafka's processor emits only those its store has not expired yet (52 to 70:
        # the store's stream time is 171, the latest window start, its retention 2 * 10 +
        # 100); here none is lost (docs: "Emit-on-window-close never loses a window")
        expected = {start: v for start, v in expected.items() if start + 10 + 100 < 181}
    assert results == expected


# ====================================================================== in-order vs reverse


class _Node:
    name = "testNode"


class FakeContext(InMemoryStateStoreContext):
    def __init__(self) -> None:
        super().__init__(app_configs=DRIVER_CONFIG)
        self.current_node = _Node()
        self.forwarded: list[Record] = []
        self.stores: dict[str, Any] = {}

    def forward(self, record: Record, child_name: str | None = None) -> None:
        self.forwarded.append(record)

    def get_state_store(self, name: str) -> Any:
        return self.stores[name]

    def record_metadata(self) -> Any:
        return None

    def current_system_time_ms(self) -> int:
        return 0


def _run_processor(
    records: list[tuple[str, str, int]], in_order: bool, td: int, grace: int
) -> tuple[list[Record], list[Any]]:
    context = FakeContext()
    store = (
        Stores.timestamped_window_store_builder(
            Stores.in_memory_window_store("s", 10_000, td), serdes.String(), serdes.String()
        )
        .with_logging_disabled()
        .with_caching_disabled()
        .build()
    )
    store.init(context, store)
    context.stores["s"] = store
    supplier = KStreamSlidingWindowAggregateSupplier(
        SlidingWindows.of_time_difference_and_grace(td, grace),
        "s",
        UPDATE,
        STRING_INIT,
        tostring_adder,
    )
    processor = supplier()
    processor.init(context)
    processor.reverse_iterator_possible = not in_order
    for key, value, ts in records:
        processor.process(Record(key, value, ts))
    return context.forwarded, list(store.all())


@pytest.mark.parametrize("seed", range(20))
def test_in_order_and_reverse_iteration_agree(seed: int) -> None:
    # Kafka's testAggregateRandomInput: both iteration orders build the same windows
    rng = random.Random(seed)
    td = rng.randint(1, 20)
    grace = rng.randint(0, 30)
    records = [(rng.choice("AB"), str(i), rng.randint(0, 80)) for i in range(40)]
    fwd_in_order, store_in_order = _run_processor(records, True, td, grace)
    fwd_reverse, store_reverse = _run_processor(records, False, td, grace)
    assert store_in_order == store_reverse

    def gathered(forwarded: list[Record]) -> dict[Any, set[tuple[Any, int]]]:
        out: dict[Any, set[tuple[Any, int]]] = {}
        for r in forwarded:
            out.setdefault(r.key, set()).add((r.value.new_value, r.timestamp))
        return out

    assert gathered(fwd_in_order) == gathered(fwd_reverse)


def test_send_old_values() -> None:
    context = FakeContext()
    store = (
        Stores.timestamped_window_store_builder(
            Stores.in_memory_window_store("s", 10_000, 10), serdes.String(), serdes.String()
        )
        .with_logging_disabled()
        .with_caching_disabled()
        .build()
    )
    store.init(context, store)
    context.stores["s"] = store
    supplier = KStreamSlidingWindowAggregateSupplier(
        SlidingWindows.of_time_difference_and_grace(10, 100),
        "s",
        UPDATE,
        STRING_INIT,
        tostring_adder,
    )
    supplier.enable_sending_old_values(True)
    processor = supplier()
    processor.init(context)
    processor.process(Record("A", "1", 20))
    processor.process(Record("A", "2", 25))
    assert context.forwarded == [
        Record(Windowed("A", TimeWindow(10, 20)), Change("0+1", "0"), 20),
        # the previous record's right window is new: old value = initializer
        Record(Windowed("A", TimeWindow(21, 31)), Change("0+2", "0"), 25),
        Record(Windowed("A", TimeWindow(15, 25)), Change("0+1+2", "0+1"), 25),
    ]
