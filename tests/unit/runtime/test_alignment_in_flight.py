"""A stream thread's alignment report counts its records not yet appended to the repartition
topics (``runtime.in_flight``, ``RecordCollector.in_flight_low``, ``runtime.alignment``)."""

from __future__ import annotations

from streaming.runtime.alignment import AlignmentSettings, EventTimeAlignment
from streaming.runtime.in_flight import InFlightTimestamps
from streaming.runtime.partition_group import PartitionGroup, StampedRecord
from streaming.runtime.producer import RecordCollector

NOW = 1_800_000_000_000
OLD = NOW - 3_600_000  # an hour behind the wall clock: a replay
REPARTITION = "app-by-user-repartition"


def _sources(tp: tuple[str, int], timestamp: int) -> list[tuple[tuple[str, int], PartitionGroup]]:
    group = PartitionGroup([tp])
    group.queue(tp).append(StampedRecord(tp[0], tp[1], 0, timestamp, None, None, ()))
    return [(tp, group)]


def test_in_flight_timestamps_keep_their_minimum():
    held = InFlightTimestamps()
    assert held.low() is None
    for ts in (5, 3, 3, 9):
        held.add(ts)
    assert held.low() == 3 and len(held) == 4
    held.done(3)
    assert held.low() == 3  # the other record with timestamp 3 is still out
    held.done(3)
    assert held.low() == 5
    held.add(3)  # back after its count fell to zero
    assert held.low() == 3
    held.done(42)  # not held: ignored
    for ts in (3, 5):
        held.done(ts)
    assert held.low() == 9 and len(held) == 1
    held.done(9)
    assert held.low() is None and len(held) == 0


def test_the_others_align_with_a_threads_unacknowledged_records():
    shared = EventTimeAlignment(AlignmentSettings(max_drift_ms=10_000))
    first, second = shared.member("t1", 0), shared.member("t2", 1)
    a, b = ("in", 0), ("in", 1)
    # the first thread processed up to a minute in; its records from OLD on are not appended
    unacknowledged: list[int | None] = [OLD]
    first.in_flight = lambda: unacknowledged[0]
    # its own bound counts its next record only: its producer appends in the order written
    assert first.limit(_sources(a, OLD + 60_000), lambda tp: 5_000, NOW) == OLD + 70_000
    # the second thread may not append past what the first still appends, plus the drift
    assert second.limit(_sources(b, OLD + 60_000), lambda tp: 5_000, NOW) == OLD + 10_000
    # acknowledged: the first thread's next record is what holds the second back
    unacknowledged[0] = None
    assert first.limit(_sources(a, OLD + 60_000), lambda tp: 5_000, NOW) == OLD + 70_000
    assert second.limit(_sources(b, OLD + 60_000), lambda tp: 5_000, NOW) == OLD + 70_000


class _Msg:
    def __init__(self, topic: str, timestamp: int, offset: int) -> None:
        self._topic, self._timestamp, self._offset = topic, timestamp, offset

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return 1, self._timestamp  # create time, as the record was written


class _Producer:
    """Keeps what was produced; ``poll`` reports the records the test marked as acknowledged
    (as confluent-kafka serves delivery reports in ``poll``), ``flush`` all of them."""

    def __init__(self) -> None:
        self.pending: list[_Msg] = []
        self.acknowledged: list[_Msg] = []
        self.collector: RecordCollector | None = None

    def produce(self, topic, value, key, partition, timestamp=0, **kwargs):
        self.pending.append(_Msg(topic, timestamp, len(self.pending)))

    def acknowledge(self, timestamp: int) -> None:
        msg = next(m for m in self.pending if m.timestamp()[1] == timestamp)
        self.pending.remove(msg)
        self.acknowledged.append(msg)

    def poll(self, timeout):
        assert self.collector is not None
        for msg in self.acknowledged:
            self.collector.on_delivery(None, msg)
        self.acknowledged = []
        return 0

    def flush(self, timeout):
        self.acknowledged += self.pending
        self.pending = []
        self.poll(0)
        return 0


def _collector(tracked: bool = True) -> tuple[RecordCollector, _Producer]:
    """An exactly-once collector over a producer that acknowledges when told; ``tracked``:
    it holds the timestamps of the repartition topic's records in flight."""
    producer = _Producer()
    collector = RecordCollector(
        producer,  # type: ignore[arg-type]
        production_handler=None,  # type: ignore[arg-type]
        dead_letter_topic=None,
        partition_counts=lambda topic: 1,
        exactly_once=True,
    )
    producer.collector = collector
    if tracked:
        collector.track_in_flight({REPARTITION})
    return collector, producer


def test_the_collector_holds_the_timestamps_of_unacknowledged_repartition_records():
    collector, producer = _collector()
    collector.send_to_partition("app-store-changelog", 0, b"k", b"v", OLD - 1)  # not tracked
    for ts in (OLD + 2_000, OLD, OLD + 1_000):
        collector.send(REPARTITION, b"k", b"v", ts)
    assert collector.in_flight_low() == OLD
    producer.acknowledge(OLD + 1_000)
    assert collector.in_flight_low() == OLD
    producer.acknowledge(OLD)
    assert collector.in_flight_low() == OLD + 2_000  # served by in_flight_low's poll
    producer.acknowledge(OLD + 2_000)
    assert collector.in_flight_low() is None


def test_a_flush_or_a_new_producer_leaves_nothing_in_flight():
    collector, _producer = _collector()
    collector.send(REPARTITION, b"k", b"v", OLD)
    collector.flush(1.0)
    assert collector.in_flight_low() is None
    collector.send(REPARTITION, b"k", b"v", OLD)
    replacement = _Producer()
    replacement.collector = collector
    collector.replace_producer(replacement)  # type: ignore[arg-type]
    assert collector.in_flight_low() is None


def test_untracked_the_collector_keeps_nothing():
    collector, _producer = _collector(tracked=False)
    collector.send(REPARTITION, b"k", b"v", OLD)
    assert collector.in_flight_low() is None
