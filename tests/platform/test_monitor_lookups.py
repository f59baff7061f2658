"""The lag monitor's offset lookups outlast a consumer that does not know a partition or
group coordinator yet (a fresh consumer right after the brokers restarted) and give up on
anything else."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from pipelines.streams.monitor import _committed, _watermarks


class _Consumer:
    """Answers with ``errors`` (KafkaError codes) first, then the watermarks (0, 42)."""

    def __init__(self, *errors: int) -> None:
        self.errors = list(errors)
        self.calls = 0

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float) -> tuple[int, int]:
        self.calls += 1
        if self.errors:
            raise KafkaException(KafkaError(self.errors.pop(0)))
        return 0, 42


def test_an_unknown_partition_is_asked_for_again() -> None:
    consumer = _Consumer(KafkaError._UNKNOWN_PARTITION, KafkaError.LEADER_NOT_AVAILABLE)
    assert _watermarks(consumer, TopicPartition("orders", 0), timeout=5.0) == (0, 42)
    assert consumer.calls == 3


def test_other_errors_and_a_spent_timeout_raise() -> None:
    with pytest.raises(KafkaException, match="Broker: Topic authorization failed"):
        _watermarks(
            _Consumer(KafkaError.TOPIC_AUTHORIZATION_FAILED), TopicPartition("t", 0), timeout=5.0
        )
    never = _Consumer(*[KafkaError._UNKNOWN_PARTITION] * 100)
    with pytest.raises(KafkaException):
        _watermarks(never, TopicPartition("t", 0), timeout=0.5)
    assert 1 < never.calls < 10


class _GroupConsumer:
    """One topic of two partitions; ``committed`` fails with ``errors`` first."""

    def __init__(self, *errors: int) -> None:
        self.errors = list(errors)

    def list_topics(self, topic: str, timeout: float) -> object:
        meta = type("Meta", (), {"error": None, "partitions": {0: None, 1: None}})()
        return type("Cluster", (), {"topics": {topic: meta}})()

    def committed(self, parts: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        if self.errors:
            raise KafkaException(KafkaError(self.errors.pop(0)))
        return [TopicPartition(tp.topic, tp.partition, 7 * tp.partition - 1) for tp in parts]


def test_committed_offsets_wait_for_the_group_coordinator() -> None:
    consumer = _GroupConsumer(KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS)
    assert _committed(consumer, ["orders"], timeout=5.0) == {("orders", 0): -1, ("orders", 1): 6}
