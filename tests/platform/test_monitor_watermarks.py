"""The lag monitor's watermark lookup outlasts a consumer that does not know a partition
yet (a fresh consumer right after the brokers restarted) and gives up on anything else."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from pipelines.streams.monitor import _watermarks


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
