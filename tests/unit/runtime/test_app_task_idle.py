"""max.task.idle.ms as Kafka's PartitionGroup.readyToProcess, on an ActiveTask built without a
broker (the record collector only collects)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import TopicPartition

from streaming import StreamsBuilder, serdes
from streaming.runtime.active_task import ActiveTask, ActiveTaskCreator
from streaming.runtime.assignment import TopologyPlan
from streaming.runtime.config import StreamsConfig
from streaming.runtime.metrics import ThreadMetrics
from streaming.runtime.partition_group import UNKNOWN_LAG_WAIT_MS
from streaming.runtime.state_directory import StateDirectory
from streaming.runtime.task import ConsumerRecord


class Collector:
    dead_letter_topic = None

    def __init__(self):
        self.sent = []

    def send(self, topic, key, value, timestamp, headers=(), record=None, partitioner=None):
        self.sent.append((topic, key, value, timestamp))

    def send_to_partition(self, topic, partition, key, value, timestamp, headers=()):
        self.sent.append((topic, key, value, timestamp))


class _NothingCommitted:
    """A consumer whose group has committed nothing yet (no broker here)."""

    def committed(self, partitions, timeout=None):
        return [TopicPartition(tp.topic, tp.partition, -1001) for tp in partitions]


def _task(tmp_path, idle_ms):
    builder = StreamsBuilder()
    left = builder.stream("left", key_serde=serdes.String(), value_serde=serdes.String())
    right = builder.stream("right", key_serde=serdes.String(), value_serde=serdes.String())
    left.merge(right).to("out")
    topology = builder.build()
    config = StreamsConfig.from_mapping(
        {"application.id": "idle", "bootstrap.servers": "x:1", "max.task.idle.ms": idle_ms}
    )
    plan = TopologyPlan(topology, "idle")
    plan.resolve(lambda topics: dict.fromkeys(topics, 1))
    collector = Collector()
    creator = ActiveTaskCreator(
        services=SimpleNamespace(
            config=config,
            state_directory=StateDirectory(tmp_path, "idle"),
            topology=topology,
            app_configs=config.app_configs(),
            global_stores={},
        ),
        collector=collector,
        cache=None,
        clock=lambda: 0,
        metrics=ThreadMetrics(),
        consumer=_NothingCommitted(),
    )
    sub = plan.subtopologies[0]
    task = ActiveTask("0_0", sub, 0, [("left", 0), ("right", 0)], creator)
    task.initialize()
    return task, collector


def _rec(topic, offset, ts):
    return ConsumerRecord(topic, 0, offset, ts, b"k", f"{topic}{offset}".encode())


def test_waits_for_the_empty_partition_then_enforces_processing(tmp_path):
    task, collector = _task(tmp_path, 100)
    task.add_records([_rec("left", 0, 10)])
    lag = {("right", 0): 0}
    assert task.process(10, 1_000, lag.get) == 0  # caught up but empty: idle for up to 100 ms
    assert task.process(10, 1_099, lag.get) == 0
    assert task.process(10, 1_100, lag.get) == 1  # enforced processing
    assert [v for _, _, v, _ in collector.sent] == [b'"left0"']


def test_lag_means_data_is_coming(tmp_path):
    task, _ = _task(tmp_path, 0)
    task.add_records([_rec("left", 0, 10)])
    assert task.process(10, 5_000, {("right", 0): 3}.get) == 0
    assert task.process(10, 5_000, {("right", 0): 0}.get) == 1  # max.task.idle.ms=0: at once


def test_both_buffered_is_ready_and_picks_the_smaller_timestamp(tmp_path):
    task, collector = _task(tmp_path, 100)
    task.add_records([_rec("left", 0, 20), _rec("right", 0, 10)])
    # both buffered: ready, and the smaller timestamp first; then "right" is empty with an
    # unknown lag and the task waits for it (UNKNOWN_LAG_WAIT_MS) before enforcing
    assert task.process(10, 0, {}.get) == 1
    assert task.process(10, UNKNOWN_LAG_WAIT_MS, {}.get) == 1
    assert [v for _, _, v, _ in collector.sent] == [b'"right0"', b'"left0"']


@pytest.mark.parametrize(("idle", "ready"), [(-1, True), (0, False)])
def test_unknown_lag(tmp_path, idle, ready):
    task, _ = _task(tmp_path, idle)
    task.add_records([_rec("left", 0, 10)])
    # -1 disables idling; with an unknown lag the task waits a little before enforcing
    assert task.partition_group.ready(0, {}.get) is ready
    assert task.partition_group.ready(10_000, {}.get)


def test_committable_offsets_use_position_when_drained(tmp_path):
    task, _ = _task(tmp_path, -1)
    task.add_records([_rec("left", 5, 10), _rec("left", 6, 11)])
    task.process(1)
    positions = {("left", 0): 9, ("right", 0): 4}
    assert task.committable_offsets(positions.get) == {("left", 0): 6, ("right", 0): 4}
    task.process(1)
    assert task.committable_offsets(positions.get) == {("left", 0): 9, ("right", 0): 4}


def test_a_partition_that_had_records_idles_afresh(tmp_path):
    # Kafka forgets an idle deadline once the partition has records again
    task, _ = _task(tmp_path, 2_000)
    group = task.partition_group
    lag = {("left", 0): 0, ("right", 0): 0}.get
    task.add_records([_rec("right", 0, 10)])
    assert not group.ready(0, lag)  # left empty: deadline 2000
    task.add_records([_rec("left", 0, 11)])
    assert group.ready(100, lag)  # both buffered
    assert task.process(1, 100, lag) == 1  # right0 (ts 10) goes first
    assert task.process(1, 10_000, lag) == 0  # right empty again: a new deadline, 12000
    assert not group.ready(11_999, lag)
    assert group.ready(12_000, lag)
