"""Processor metadata (Kafka's KIP-825): the encoding committed as offset metadata, the merge
when a task is created, and the processor context methods (runtime and test driver)."""

from __future__ import annotations

import base64
import struct
from types import SimpleNamespace

import pytest
from confluent_kafka import TopicPartition

from streaming import (
    EmitStrategy,
    Materialized,
    StreamsBuilder,
    TimeWindows,
    TopologyTestDriver,
    serdes,
)
from streaming.runtime import processor_metadata as pm
from streaming.runtime.active_task import ActiveTask, ActiveTaskCreator
from streaming.runtime.assignment import TopologyPlan
from streaming.runtime.config import StreamsConfig
from streaming.runtime.metrics import ThreadMetrics
from streaming.runtime.processor_metadata import ProcessorMetadata
from streaming.runtime.state_directory import StateDirectory
from streaming.runtime.task import ConsumerRecord


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


# -- the encoding (Kafka's TopicPartitionMetadata / ProcessorMetadata byte layout) ----------


def test_encodes_kafkas_topic_partition_metadata_layout():
    metadata = ProcessorMetadata()
    metadata.add("store", 5)
    raw = bytes.fromhex(
        "02"  # version (Kafka's LATEST_MAGIC_BYTE)
        "00000000000003e8"  # partition time 1000
        "00000001"  # one entry
        "00000005" + b"store".hex() + "0000000000000005"
    )
    assert pm.encode(1000, metadata) == _b64(raw)


def test_encodes_no_processor_metadata_as_partition_time_only():
    assert pm.encode(-1, ProcessorMetadata()) == _b64(b"\x02" + b"\xff" * 8)
    assert base64.b64decode(pm.encode(7, ProcessorMetadata())) == b"\x02" + struct.pack(">q", 7)


def test_round_trip_keeps_every_entry():
    metadata = ProcessorMetadata()
    metadata.add("emit-final-counts", 1_795_498_070_000)
    metadata.add("négatif", -(1 << 63))
    metadata.add("max", (1 << 63) - 1)
    partition_time, decoded = pm.decode(pm.encode(123, metadata))
    assert partition_time == 123
    assert decoded == metadata
    assert dict(decoded.items()) == {
        "emit-final-counts": 1_795_498_070_000,
        "négatif": -(1 << 63),
        "max": (1 << 63) - 1,
    }
    assert not decoded.needs_commit


def test_decodes_version_1_partition_time_only():
    partition_time, metadata = pm.decode(_b64(b"\x01" + struct.pack(">q", 42)))
    assert partition_time == 42
    assert len(metadata) == 0


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "not base64!",
        _b64(b""),
        _b64(b"\x03" + struct.pack(">q", 42)),  # a future version
        _b64(b"\x02\x00"),  # truncated partition time
        _b64(b"\x02" + struct.pack(">q", 42) + b"\x00\x00\x00\x02\x00"),  # truncated entries
        _b64(b"\x02" + struct.pack(">q", 42) + struct.pack(">iiB", 1, 1, 0x61)),  # no value
    ],
)
def test_foreign_or_broken_metadata_is_ignored(text):
    partition_time, metadata = pm.decode(text)
    assert partition_time == pm.UNKNOWN
    assert len(metadata) == 0


def test_deserialize_rejects_trailing_bytes():
    good = ProcessorMetadata({"a": 1}).serialize()
    assert ProcessorMetadata.deserialize(good) == ProcessorMetadata({"a": 1})
    with pytest.raises(ValueError):
        ProcessorMetadata.deserialize(good + b"\x00")


def test_add_marks_a_commit_needed_and_checks_the_range():
    metadata = ProcessorMetadata()
    assert not metadata.needs_commit
    metadata.add("k", 1)
    assert metadata.needs_commit and metadata.get("k") == 1
    with pytest.raises(ValueError):
        metadata.add("k", 1 << 63)


def test_merge_takes_the_largest_value_per_key_and_the_largest_time():
    first = ProcessorMetadata({"a": 10, "b": 5})
    second = ProcessorMetadata({"a": 7, "c": 1})
    partition_time, merged = pm.merge([pm.encode(100, first), None, pm.encode(300, second)])
    assert partition_time == 300
    assert dict(merged.items()) == {"a": 10, "b": 5, "c": 1}
    assert not merged.needs_commit


# -- the processor context ----------------------------------------------------------------


def _emit_final_builder(output: str = "out") -> StreamsBuilder:
    builder = StreamsBuilder()
    (
        builder.stream("in", key_serde=serdes.String(), value_serde=serdes.String())
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(1000, 0))
        .emit_strategy(EmitStrategy.on_window_close())
        # retention beyond size + grace: closed windows stay in the store (and fetchable)
        .count(materialized=Materialized.as_("counts").with_retention(60_000))
        .to_stream()
        .map(lambda wk, n: (f"{wk.key}@{wk.window.start}", n))
        .to(output, key_serde=serdes.String(), value_serde=serdes.Long())
    )
    return builder


def test_driver_context_keeps_the_last_emitted_window_close_time():
    with TopologyTestDriver(_emit_final_builder().build()) as driver:
        source = driver.create_input_topic(
            "in", key_serde=serdes.String(), value_serde=serdes.String()
        )
        out = driver.create_output_topic(
            "out", key_serde=serdes.String(), value_serde=serdes.Long()
        )
        source.pipe_input("k", "a", timestamp=100)
        source.pipe_input("k", "b", timestamp=2500)  # closes [0, 1000) and [1000, 2000)
        context = driver._task.context
        assert context.processor_metadata_for_key("counts") == 2500
        assert context.processor_metadata_for_key("unknown") is None
        assert out.read_key_values_to_list() == [("k@0", 1)]
        source.pipe_input("k", "c", timestamp=2600)  # nothing new closes: nothing again
        assert out.read_key_values_to_list() == []
        assert context.processor_metadata_for_key("counts") == 2500


class _Collector:
    dead_letter_topic = None

    def __init__(self):
        self.sent = []

    def send(self, topic, key, value, timestamp, headers=(), record=None, partitioner=None):
        self.sent.append((topic, key, value, timestamp))

    def send_to_partition(self, topic, partition, key, value, timestamp, headers=()):
        pass


class _CommittedOffsets:
    """What ``Consumer.committed`` answers for the task's partitions (no broker here)."""

    def __init__(self, committed):
        self.committed_offsets = committed
        self.calls = 0

    def committed(self, partitions, timeout=None):
        self.calls += 1
        out = []
        for tp in partitions:
            offset, metadata = self.committed_offsets[tp.partition]
            if metadata is None:  # what librdkafka gives for a partition without a commit
                out.append(TopicPartition(tp.topic, tp.partition, offset))
            else:
                out.append(TopicPartition(tp.topic, tp.partition, offset, metadata=metadata))
        return out


def _active_task(tmp_path, consumer):
    topology = _emit_final_builder().build()
    config = StreamsConfig.from_mapping(
        {"application.id": "pm", "bootstrap.servers": "x:1", "statestore.cache.max.bytes": 0}
    )
    plan = TopologyPlan(topology, "pm")
    plan.resolve(lambda topics: dict.fromkeys(topics, 1))
    collector = _Collector()
    creator = ActiveTaskCreator(
        services=SimpleNamespace(
            config=config,
            state_directory=StateDirectory(tmp_path, "pm"),
            topology=topology,
            app_configs={
                **config.app_configs(),
                "__emit.interval.ms.kstreams.windowed.aggregation__": 0,
            },
            global_stores={},
        ),
        collector=collector,
        cache=None,
        clock=lambda: 0,
        metrics=ThreadMetrics(),
        consumer=consumer,
    )
    task = ActiveTask("0_0", plan.subtopologies[0], 0, [("in", 0)], creator)
    task.initialize()
    task.state = "RUNNING"
    return task, collector


def _records(*timestamps, start=0):
    return [ConsumerRecord("in", 0, start + i, ts, b"k", b"v") for i, ts in enumerate(timestamps)]


def test_active_task_commits_its_metadata_and_a_new_task_reads_it_back(tmp_path):
    consumer = _CommittedOffsets({0: (-1001, None)})  # nothing committed yet
    task, collector = _active_task(tmp_path / "one", consumer)
    task.add_records(_records(100, 2500))
    assert task.process(10) == 2
    assert consumer.calls == 1  # read once, before the processors' init
    offsets = task.committable_offsets(lambda tp: None)
    assert offsets == {("in", 0): 2}
    metadata, changed = task.commit_metadata()
    assert changed
    assert pm.decode(metadata[("in", 0)]) == (2500, ProcessorMetadata({"counts": 2500}))
    assert task.commit_metadata() == (metadata, False)  # handed out: no longer changed
    emitted = [sent for sent in collector.sent if sent[0] == "out"]
    assert [key for _topic, key, _value, _ts in emitted] == [b"k@0"]
    task.close(clean=True)

    # a new owner of the task reads what was committed before its processors start
    consumer = _CommittedOffsets({0: (2, metadata[("in", 0)])})
    task, collector = _active_task(tmp_path / "two", consumer)
    assert task.commit_metadata() == (metadata, False)
    assert task.stream_task.stream_time == 2500  # the committed partition time
    # [0, 1000) is in its window store again (as if restored from the changelog): it was
    # emitted already and must not come out a second time
    task.add_records(_records(100, 2600, 3100, start=2))
    task.process(10)
    keys = [key for topic, key, _value, _ts in collector.sent if topic == "out"]
    assert keys == [b"k@2000"]
    metadata, changed = task.commit_metadata()
    assert changed
    assert pm.decode(metadata[("in", 0)]) == (3100, ProcessorMetadata({"counts": 3100}))
    task.close(clean=True)


def test_metadata_change_waits_for_an_offset_to_commit_it_with(tmp_path):
    task, _collector = _active_task(tmp_path, _CommittedOffsets({0: (-1001, None)}))
    assert task.commit_metadata()[1] is False  # reads the (empty) committed metadata
    task.stream_task.context.add_processor_metadata_key_value("x", 1)
    assert task.committable_offsets(lambda tp: None) == {}
    assert task.commit_metadata()[1]  # changed, but nothing to commit it with yet
    assert task.commit_metadata()[1]  # so still changed
    assert task.committable_offsets(lambda tp: 7) == {("in", 0): 7}
    assert task.commit_metadata()[1]
    assert not task.commit_metadata()[1]
    task.close(clean=True)
