"""The record collector's ``send``: the common record takes a short path once its topic's
limits are known, and every record is still decided by those limits exactly as before (the
first record of a topic and every later one alike)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from streaming.runtime import errors
from streaming.runtime.producer import ProductionError, RecordCollector
from streaming.runtime.topic_limits import BATCH_OVERHEAD, BEFORE_MARGIN_MS, TopicLimits

TOPIC = "out"
DLQ = "dead-letters"
LIMITS = TopicLimits(after_max_ms=60_000, before_max_ms=3_600_000, max_message_bytes=1_000)


class _Producer(Producer):
    """A real producer whose brokers are never reached (``produce`` only queues), which
    keeps the topic and partition of what it queued."""

    def __init__(self) -> None:
        super().__init__({"bootstrap.servers": "127.0.0.1:1", "log_level": 0})
        self.written: list[tuple[str, int]] = []

    def produce(self, topic: str, value: Any, key: Any, partition: int, **kw: Any) -> None:  # type: ignore[override]
        super().produce(topic, value, key, partition, **kw)
        self.written.append((topic, partition))


@pytest.fixture
def producer() -> Iterator[_Producer]:
    producer = _Producer()
    yield producer
    producer.purge()


def _collector(
    producer: _Producer, handler: errors.Handler, limits: TopicLimits = LIMITS
) -> RecordCollector:
    return RecordCollector(
        producer,
        production_handler=handler,
        dead_letter_topic=DLQ,
        partition_counts=lambda topic: 2,
        exactly_once=True,
        topic_limits=lambda topic: limits,
    )


def _now() -> int:
    return int(time.time() * 1000)


def test_each_record_is_held_to_its_topics_limits_on_the_first_and_later_sends(
    producer: _Producer,
) -> None:
    collector = _collector(producer, errors.log_and_continue)
    good = b"x" * (1_000 - BATCH_OVERHEAD - 1)  # with its 1-byte key, just within the size
    for round_no in range(3):
        now = _now()
        collector.send(TOPIC, b"k", good, now)
        collector.send(TOPIC, b"k", good + b"y", now)  # one byte too large
        collector.send(TOPIC, b"k", b"v", now + 120_000)  # too far ahead
        collector.send(TOPIC, b"k", b"v", now - 3_600_000 + BEFORE_MARGIN_MS - 1_000)  # too old
        collector.send(TOPIC, b"k", b"v", now - 3_600_000 + BEFORE_MARGIN_MS + 60_000)
        collector.send(TOPIC, b"k", b"v", now + 30_000)
        # each refused record is skipped and written to the dead-letter topic instead
        assert (
            producer.written[-6:]
            == [(TOPIC, -1), (DLQ, -1), (DLQ, -1), (DLQ, -1)] + [(TOPIC, -1)] * 2
        )
        assert (collector.sent, collector.skipped) == (6 * (round_no + 1), 3 * (round_no + 1))


def test_a_record_ahead_of_a_stale_clock_is_decided_on_the_current_one(
    producer: _Producer,
) -> None:
    collector = _collector(producer, errors.log_and_fail)
    collector.send(TOPIC, b"k", b"v", _now())  # the limits are read and kept
    collector._clock_ms -= 3_600_000  # as if the delivery reports were served an hour ago
    collector.send(TOPIC, b"k", b"v", _now() + 30_000)
    collector.check()
    assert collector.sent == 2


def test_a_refusal_fails_as_the_handler_says(producer: _Producer) -> None:
    collector = _collector(producer, errors.log_and_fail)
    collector.send(TOPIC, b"k", b"v", _now())
    collector.send(TOPIC, b"k", b"v", _now() + 120_000)
    with pytest.raises(ProductionError, match=re.escape("message.timestamp.after.max.ms=60000")):
        collector.check()


def test_headers_partitioners_and_log_append_time_topics_keep_their_meaning(
    producer: _Producer,
) -> None:
    appended = TopicLimits(after_max_ms=60_000, log_append_time=True, max_message_bytes=1_000)
    collector = _collector(producer, errors.log_and_continue, appended)
    chosen: list[Any] = []

    def partitioner(topic: str, key: Any, value: Any, n: int) -> int:
        chosen.append((topic, key, value, n))
        return 1

    for _ in range(2):
        # a LogAppendTime topic takes any timestamp; headers count towards the size
        collector.send(TOPIC, b"k", b"v", _now() + 10**9)
        collector.send(TOPIC, b"k", b"v", _now(), ((b"h", b"x" * 1_000),))
        collector.send(TOPIC, b"k", b"v", _now(), (), None, partitioner)
    assert producer.written == [(TOPIC, -1), (DLQ, -1), (TOPIC, 1)] * 2
    assert collector.skipped == 2
    assert chosen == [(TOPIC, None, None, 2)] * 2
