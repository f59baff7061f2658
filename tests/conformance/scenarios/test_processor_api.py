"""Processor API: a processor with a key-value store and punctuation, run by the
``TopologyTestDriver`` with Kafka Streams' semantics.

Stream-time punctuation is aligned to 0 and fires (with the current stream time) once
stream time reaches the next due time, after a record is processed; missed intervals are
skipped, not replayed. Wall-clock punctuation is first due ``interval`` after ``schedule``
and fires when ``advance_wall_clock_time`` reaches it.
"""

from __future__ import annotations

from typing import Any

import pytest

from streaming import TopologyTestDriver, serdes
from streaming.state import Stores
from streaming.topology.graph import Topology
from streaming.topology.processor import Processor, PunctuationType, Record

S = serdes.String()
L = serdes.Long()


class CountingProcessor(Processor):
    """Counts per key in store "counts"; punctuation emits every count (Kafka's
    WordCountProcessor demo shape)."""

    def __init__(self, kind: PunctuationType, interval: int, log: list[int], cancel_after: int = 0):
        self.kind = kind
        self.interval = interval
        self.log = log
        self.cancel_after = cancel_after

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store("counts")
        self.schedule = context.schedule(self.interval, self.kind, self.punctuate)

    def process(self, record: Record) -> None:
        count = self.store.get(record.key) or 0
        self.store.put(record.key, count + 1)

    def punctuate(self, timestamp: int) -> None:
        self.log.append(timestamp)
        for key, value in self.store.all():
            self.context.forward(Record(key, value, timestamp))
        if self.cancel_after and len(self.log) >= self.cancel_after:
            self.schedule.cancel()


def topology(kind: PunctuationType, interval: int, log: list[int], cancel_after: int = 0):
    t = Topology()
    t.add_source("source", "in", key_serde=S, value_serde=S)
    t.add_processor("count", lambda: CountingProcessor(kind, interval, log, cancel_after), "source")
    t.add_state_store(
        Stores.key_value_store_builder(Stores.in_memory_key_value_store("counts"), S, L), "count"
    )
    t.add_sink("sink", "out", "count", key_serde=S, value_serde=L)
    return t


def driver(t: Topology, tmp_path: Any) -> TopologyTestDriver:
    return TopologyTestDriver(t, {"state.dir": str(tmp_path)}, initial_wall_clock_time_ms=0)


def test_stream_time_punctuation_aligned_to_zero_skips_missed(tmp_path: Any) -> None:
    log: list[int] = []
    with driver(topology(PunctuationType.STREAM_TIME, 10, log), tmp_path) as d:
        src = d.create_input_topic("in", S, S)
        out = d.create_output_topic("out", S, L)
        src.pipe_input("a", "x", 0)  # stream time 0 >= 0: punctuate(0), next 10
        assert log == [0]
        assert [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()] == [("a", 1, 0)]
        src.pipe_input("b", "x", 9)
        assert log == [0]
        src.pipe_input("a", "x", 10)  # due
        src.pipe_input("a", "x", 35)  # 20 and 30 were missed: one call, next 40
        src.pipe_input("b", "x", 20)  # out of order: stream time stays 35
        src.pipe_input("b", "x", 39)
        assert log == [0, 10, 35]
        src.pipe_input("b", "x", 40)
        assert log == [0, 10, 35, 40]
        last = {r.key: (r.value, r.timestamp) for r in out.read_records_to_list()}
        assert last == {"a": (3, 40), "b": (4, 40)}
        assert d.get_key_value_store("counts").get("b") == 4


def test_stream_time_punctuation_not_driven_by_wall_clock(tmp_path: Any) -> None:
    log: list[int] = []
    with driver(topology(PunctuationType.STREAM_TIME, 10, log), tmp_path) as d:
        d.advance_wall_clock_time(1000)
        assert log == []  # no data yet: stream time unknown


def test_wall_clock_punctuation(tmp_path: Any) -> None:
    log: list[int] = []
    with driver(topology(PunctuationType.WALL_CLOCK_TIME, 100, log), tmp_path) as d:
        src = d.create_input_topic("in", S, S)
        out = d.create_output_topic("out", S, L)
        src.pipe_input("a", "x", 5000)  # record time does not drive wall-clock punctuation
        assert log == []
        d.advance_wall_clock_time(50)
        assert log == []
        d.advance_wall_clock_time(50)  # now 100: first due time (schedule time 0 + 100)
        assert log == [100]
        assert [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()] == [
            ("a", 1, 100)
        ]
        d.advance_wall_clock_time(250)  # now 350: 200 and 300 missed, one call, next 400
        assert log == [100, 350]
        d.advance_wall_clock_time(49)
        assert log == [100, 350]
        d.advance_wall_clock_time(1)
        assert log == [100, 350, 400]


def test_punctuator_can_cancel_itself(tmp_path: Any) -> None:
    log: list[int] = []
    with driver(topology(PunctuationType.WALL_CLOCK_TIME, 10, log, cancel_after=2), tmp_path) as d:
        for _ in range(5):
            d.advance_wall_clock_time(10)
        assert log == [10, 20]


def test_schedule_rejects_interval_below_one_ms(tmp_path: Any) -> None:
    log: list[int] = []
    with pytest.raises(ValueError, match="minimum supported scheduling interval"):
        driver(topology(PunctuationType.STREAM_TIME, 0, log), tmp_path)


def test_store_not_connected_is_refused(tmp_path: Any) -> None:
    class Sneaky(Processor):
        def init(self, context: Any) -> None:
            super().init(context)
            context.get_state_store("counts")

        def process(self, record: Record) -> None:
            pass

    t = topology(PunctuationType.STREAM_TIME, 10, [])
    t.add_processor("sneaky", Sneaky, "source")
    with pytest.raises(Exception, match="has no access to StateStore counts"):
        driver(t, tmp_path)
