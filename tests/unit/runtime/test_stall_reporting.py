"""A stream thread waiting on unreachable brokers reports its stall once the wait has lasted
``SLOW_CALL_S``, whatever the wait ends with: the producer's flush (which can end with the
records' delivery timeout rather than a retriable error), the lookup of a topic's limits
before its first record, a full producer queue. Real clients, pointed at a port where no
broker listens."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from streaming.runtime import errors, topic_limits
from streaming.runtime import producer as producer_mod
from streaming.runtime.failures import (
    RetriableStreamsException,
    Stall,
    TaskCorruptedException,
    TaskMigratedException,
)
from streaming.runtime.producer import RecordCollector
from streaming.runtime.topic_limits import TopicLimits, TopicLimitsCache

NOWHERE = "127.0.0.1:1"
SLOW_S = 0.1


@pytest.fixture(autouse=True)
def slow_after(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(producer_mod, "SLOW_CALL_S", SLOW_S)
    monkeypatch.setattr(topic_limits, "SLOW_CALL_S", SLOW_S)


@pytest.fixture
def stall() -> Stall:
    return Stall("thread-1", timeout_ms=300_000, backoff_ms=100)


@pytest.fixture
def clients() -> Iterator[list[Producer]]:
    made: list[Producer] = []
    yield made
    for producer in made:
        producer.purge()


def _collector(
    clients: list[Producer], waiting: Callable[[str], None], **settings: object
) -> RecordCollector:
    """A collector (exactly-once) writing through a producer whose brokers are unreachable,
    its delivery reports wired as the stream thread wires them."""
    collectors: list[RecordCollector] = []
    producer = Producer(
        {
            "bootstrap.servers": NOWHERE,
            "log_level": 0,
            "on_delivery": lambda err, msg: collectors[0].on_delivery(err, msg),
            **settings,
        }
    )
    clients.append(producer)
    collectors.append(
        RecordCollector(
            producer,
            production_handler=errors.log_and_fail,
            dead_letter_topic=None,
            partition_counts=lambda topic: 1,
            exactly_once=True,
            waiting=waiting,
        )
    )
    return collectors[0]


class _Reported:
    """Wraps ``Stall.waiting``: says whether the flush (on another thread) was still going
    on when the stall was first reported."""

    def __init__(self, stall: Stall) -> None:
        self.stall = stall
        self.event = threading.Event()
        self.flushing = True
        self.flushing_when_reported: bool | None = None

    def __call__(self, reason: str) -> None:
        self.stall.waiting(reason)
        if not self.event.is_set():
            self.flushing_when_reported = self.flushing
            self.event.set()


def test_a_flush_waiting_for_the_brokers_reports_the_stall_while_it_waits(
    clients: list[Producer], stall: Stall
) -> None:
    reported = _Reported(stall)
    collector = _collector(clients, reported, **{"message.timeout.ms": 60_000})
    collector.send_to_partition("out", 0, b"k", b"v", 1)
    raised: list[BaseException] = []

    def flush() -> None:
        try:
            collector.flush(1.0)
        except BaseException as exc:
            raised.append(exc)
        finally:
            reported.flushing = False

    flusher = threading.Thread(target=flush)
    flusher.start()
    try:
        assert reported.event.wait(10)
        assert reported.flushing_when_reported is True
        assert stall.stalled and "flushing the producer" in (stall.reason or "")
    finally:
        flusher.join()
    assert len(raised) == 1 and isinstance(raised[0], RetriableStreamsException)


def test_a_flush_ending_with_timed_out_records_leaves_the_stall_reported(
    clients: list[Producer], stall: Stall
) -> None:
    # the records time out during the flush: it ends with their delivery failure (a new
    # producer takes over), not with the retriable error that reports a stall, and the
    # thread waited on the brokers all the same
    collector = _collector(clients, stall.waiting, **{"message.timeout.ms": 500})
    collector.send_to_partition("out", 0, b"k", b"v", 1)
    with pytest.raises(TaskMigratedException, match="_MSG_TIMED_OUT"):
        collector.flush(10.0)
    assert stall.stalled and stall.total_stalls == 1


def test_a_flush_with_nothing_to_wait_for_reports_nothing(
    clients: list[Producer], stall: Stall
) -> None:
    _collector(clients, stall.waiting).flush(1.0)
    assert not stall.stalled


def test_a_full_producer_queue_reports_the_stall_while_it_waits(
    monkeypatch: pytest.MonkeyPatch, clients: list[Producer], stall: Stall
) -> None:
    monkeypatch.setattr(producer_mod, "MAX_BLOCK_S", 0.5)
    collector = _collector(
        clients,
        stall.waiting,
        **{"queue.buffering.max.messages": 1, "message.timeout.ms": 60_000},
    )
    collector.send_to_partition("out", 0, b"k", b"v", 1)
    with pytest.raises(TaskCorruptedException, match="queue stayed full"):
        collector.send_to_partition("out", 0, b"k", b"v", 2)
    assert stall.stalled and "queue" in (stall.reason or "")


@pytest.fixture
def admin() -> Iterator[AdminClient]:
    yield AdminClient({"bootstrap.servers": NOWHERE, "log_level": 0})


def test_reading_a_topics_limits_from_unreachable_brokers_reports_the_stall(
    admin: AdminClient, stall: Stall
) -> None:
    cache = TopicLimitsCache(admin, timeout=1.0)
    assert cache("out", waiting=stall.waiting) is TopicLimits.defaults()
    assert stall.stalled and "configs of topic out" in (stall.reason or "")
    # read again only after retry_after_s: no wait, nothing more to report
    stall.recovered()
    assert cache("out", waiting=stall.waiting) is TopicLimits.defaults()
    assert not stall.stalled
