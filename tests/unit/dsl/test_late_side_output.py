"""The late records of windowed aggregations: reported by the processor that drops them, on
the task's dropped-records counters and, when asked, as a side output stream."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from streaming import (
    Grouped,
    LateRecord,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    TimeWindow,
    TimeWindows,
    TopologyException,
    TopologyTestDriver,
    serdes,
)
from streaming.dsl.processors.window_aggregate import (
    KStreamWindowAggregateProcessor,
    KStreamWindowAggregateSupplier,
)
from streaming.dsl.windows import EmitStrategy
from streaming.topology.processor import Record
from streaming.windowed import SessionWindow

CONFIG = {"application.id": "late", "bootstrap.servers": "unused:9092"}
STRING = serdes.String()


def _late_values(table: Any, out: list[tuple[str, LateRecord]]) -> None:
    table.late_records().foreach(lambda k, v: out.append((k, v)))


def _drive(builder: StreamsBuilder, records: list[tuple[str, str, int]]) -> dict[str, int]:
    with TopologyTestDriver(builder.build(), CONFIG) as driver:
        topic = driver.create_input_topic("in", STRING, STRING)
        for key, value, ts in records:
            topic.pipe_input(key, value, ts)
        return driver.metrics()


def _windowed(builder: StreamsBuilder, windows: Any) -> Any:
    return (
        builder.stream("in", key_serde=STRING, value_serde=STRING)
        .group_by_key(Grouped.with_(STRING, STRING))
        .windowed_by(windows)
    )


def test_a_late_record_goes_to_the_side_output_once_per_closed_window() -> None:
    builder = StreamsBuilder()
    counts = _windowed(builder, TimeWindows.of_size_and_grace(10, 5).advance_by(5)).count()
    late: list[tuple[str, LateRecord]] = []
    _late_values(counts, late)
    # stream time 30, close time 25: the record at 12 falls in [5,15) and [10,20), both
    # closed; the one at 22 falls in [15,25) (closed) and [20,30) (open)
    metrics = _drive(builder, [("a", "x", 30), ("a", "y", 12), ("b", "z", 22)])
    assert late == [
        ("a", LateRecord("y", TimeWindow(5, 15), 30)),
        ("a", LateRecord("y", TimeWindow(10, 20), 30)),
        ("b", LateRecord("z", TimeWindow(15, 25), 30)),
    ]
    assert metrics == {"dropped-records-total": 3, "late-records-dropped-total": 3}


def test_without_a_side_output_each_late_record_is_logged_as_kafka_logs_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    builder = StreamsBuilder()
    _windowed(builder, TimeWindows.of_size_and_grace(10, 0)).count()
    with caplog.at_level(logging.DEBUG, "streaming.dsl"):
        metrics = _drive(builder, [("a", "x", 30), ("a", "y", 3)])
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage().split(".")[0] for r in warnings] == [
        "Skipping record for expired window"
    ]
    assert metrics["late-records-dropped-total"] == 1


def test_with_a_side_output_the_late_records_are_not_logged_as_warnings(
    caplog: pytest.LogCaptureFixture,
) -> None:
    builder = StreamsBuilder()
    late: list[tuple[str, LateRecord]] = []
    _late_values(_windowed(builder, TimeWindows.of_size_and_grace(10, 0)).count(), late)
    with caplog.at_level(logging.DEBUG, "streaming.dsl"):
        _drive(builder, [("a", "x", 30), ("a", "y", 3), ("a", "z", 4)])
    assert len(late) == 2
    expired = [r for r in caplog.records if "expired window" in r.getMessage()]
    assert [r.levelno for r in expired] == [logging.DEBUG, logging.DEBUG]


def test_the_aggregation_output_is_the_same_with_and_without_the_side_output() -> None:
    records = [("a", "x", 30), ("a", "y", 12), ("a", "w", 31), ("b", "z", 22), ("b", "v", 40)]
    outputs = []
    for with_late in (False, True):
        builder = StreamsBuilder()
        counts = _windowed(builder, TimeWindows.of_size_and_grace(10, 5).advance_by(5)).count()
        if with_late:
            _late_values(counts, [])
        counts.to_stream().map(lambda k, v: (str(k), str(v))).to("out")
        with TopologyTestDriver(builder.build(), CONFIG) as driver:
            topic = driver.create_input_topic("in", STRING, STRING)
            for key, value, ts in records:
                topic.pipe_input(key, value, ts)
            out = driver.create_output_topic("out", STRING, STRING)
            outputs.append(out.read_key_values_to_list())
    assert outputs[0] == outputs[1]
    assert outputs[0]  # the aggregation forwarded its updates, the side output took none


def test_session_and_sliding_aggregations_report_their_late_records() -> None:
    builder = StreamsBuilder()
    sessions = (
        builder.stream("in", key_serde=STRING, value_serde=STRING)
        .group_by_key(Grouped.with_(STRING, STRING))
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, 0))
        .count()
    )
    sliding = _windowed(builder, SlidingWindows.of_time_difference_and_grace(5, 0)).count()
    late_sessions: list[tuple[str, LateRecord]] = []
    late_sliding: list[tuple[str, LateRecord]] = []
    _late_values(sessions, late_sessions)
    _late_values(sliding, late_sliding)
    metrics = _drive(builder, [("a", "x", 100), ("a", "y", 10)])
    assert late_sessions == [("a", LateRecord("y", SessionWindow(10, 10), 100))]
    assert late_sliding == [("a", LateRecord("y", TimeWindow(10, 15), 100))]
    assert metrics == {"dropped-records-total": 2, "late-records-dropped-total": 2}


def test_late_records_of_a_table_no_windowed_aggregation_made_are_refused() -> None:
    builder = StreamsBuilder()
    counts = builder.stream("in").group_by_key().count()
    with pytest.raises(TopologyException, match="needs a table made by a windowed aggregation"):
        counts.late_records()
    windowed = _windowed(builder, TimeWindows.of_size_with_no_grace(10)).count()
    windowed.late_records()
    with pytest.raises(TopologyException, match="already called"):
        windowed.late_records()


class _Context:
    """A processor context that kept an emitted close time from before a restart."""

    def __init__(self, emitted_close_time: int) -> None:
        self.metadata = {"store": emitted_close_time}
        self.app_configs = {"__emit.interval.ms.kstreams.windowed.aggregation__": 0}
        self.forwarded: list[tuple[Record, str | None]] = []
        self.dropped: list[str] = []
        self.store = _Store()
        self.current_node = None

    def get_state_store(self, name: str) -> Any:
        return self.store

    def processor_metadata_for_key(self, key: str) -> int | None:
        return self.metadata.get(key)

    def add_processor_metadata_key_value(self, key: str, value: int) -> None:
        self.metadata[key] = value

    def record_dropped(self, reason: str) -> None:
        self.dropped.append(reason)

    def forward(self, record: Record, child_name: str | None = None) -> None:
        self.forwarded.append((record, child_name))

    def schedule(self, *args: Any) -> None:
        return None

    def current_system_time_ms(self) -> int:
        return 0

    def record_metadata(self) -> None:
        return None


class _Store:
    def __init__(self) -> None:
        self.puts: list[tuple[Any, Any, int]] = []

    def fetch(self, key: Any, start: int) -> None:
        return None

    def put(self, key: Any, value: Any, start: int) -> None:
        self.puts.append((key, value, start))

    def fetch_all(self, lower: int, upper: int) -> list[Any]:
        return []


def test_after_a_restart_a_record_for_a_window_emitted_as_final_goes_to_the_side_output() -> None:
    # the processor's stream time starts over after a restart; the emitted close time (50)
    # comes back from the task's processor metadata: [20,30) was emitted, [40,50) too
    supplier = KStreamWindowAggregateSupplier(
        TimeWindows.of_size_and_grace(10, 0),
        "store",
        EmitStrategy.on_window_close(),
        lambda: 0,
        lambda k, v, agg: agg + 1,
    )
    supplier.late_output = "late"
    processor = KStreamWindowAggregateProcessor(supplier)
    context = _Context(emitted_close_time=50)
    processor.init(context)
    processor.process(Record("k", "v", 25))
    # Kafka's processor still puts it (its stream time is 25, the window open) ...
    assert [(key, start) for key, _, start in context.store.puts] == [("k", 20)]
    # ... but the window's final result is out already: the record goes to the side output,
    # without counting as dropped
    assert [(r.key, r.value, child) for r, child in context.forwarded] == [
        ("k", LateRecord("v", TimeWindow(20, 30), 25), "late")
    ]
    assert context.dropped == []
