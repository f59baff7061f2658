"""The runtime's error model: classification of librdkafka errors, the stall clock, the
folding of repeated client log lines, and the topic limits checked before each write."""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from streaming.runtime import failures
from streaming.runtime.client_log import RepeatFilter
from streaming.runtime.failures import Kind, Stall, classify
from streaming.runtime.topic_limits import TopicLimits


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        (KafkaError.NOT_LEADER_FOR_PARTITION, Kind.RETRIABLE),
        (KafkaError._TRANSPORT, Kind.RETRIABLE),
        (KafkaError._ALL_BROKERS_DOWN, Kind.RETRIABLE),
        (KafkaError._TIMED_OUT, Kind.RETRIABLE),
        (KafkaError.COORDINATOR_NOT_AVAILABLE, Kind.RETRIABLE),
        (KafkaError.NOT_COORDINATOR, Kind.RETRIABLE),
        (KafkaError.NOT_ENOUGH_REPLICAS, Kind.RETRIABLE),
        (KafkaError.CONCURRENT_TRANSACTIONS, Kind.RETRIABLE),
        (KafkaError._FENCED, Kind.TASK_MIGRATED),
        (KafkaError.PRODUCER_FENCED, Kind.TASK_MIGRATED),
        (KafkaError.INVALID_PRODUCER_EPOCH, Kind.TASK_MIGRATED),
        (KafkaError.UNKNOWN_PRODUCER_ID, Kind.TASK_MIGRATED),
        (KafkaError.INVALID_TXN_STATE, Kind.TASK_MIGRATED),
        (KafkaError.ILLEGAL_GENERATION, Kind.TASK_MIGRATED),
        (KafkaError.UNKNOWN_MEMBER_ID, Kind.TASK_MIGRATED),
        (KafkaError.INVALID_TIMESTAMP, Kind.ABORTABLE),
        (KafkaError.MSG_SIZE_TOO_LARGE, Kind.ABORTABLE),
        (KafkaError.TOPIC_AUTHORIZATION_FAILED, Kind.FATAL),
        (KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Kind.FATAL),
        (KafkaError.UNSUPPORTED_VERSION, Kind.FATAL),
    ],
)
def test_classify(code, kind):
    assert classify(KafkaError(code)) is kind


def test_fatal_producer_errors_replace_the_producer_but_authorization_is_fatal():
    assert classify(KafkaError(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, fatal=True)) is (
        Kind.TASK_MIGRATED
    )
    assert classify(KafkaError(KafkaError._INCONSISTENT, fatal=True)) is Kind.TASK_MIGRATED
    assert classify(KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED, fatal=True)) is (Kind.FATAL)


def test_abortable_and_retriable_flags_are_honoured():
    assert classify(KafkaError(KafkaError._INCONSISTENT, txn_requires_abort=True)) is (
        Kind.ABORTABLE
    )
    assert classify(KafkaError(KafkaError._INCONSISTENT, retriable=True)) is Kind.RETRIABLE
    # an unknown broker error is fatal; an unknown local one is transient
    assert classify(KafkaError(KafkaError.POLICY_VIOLATION)) is Kind.FATAL
    assert classify(KafkaError(KafkaError._DESTROY_BROKER)) is Kind.RETRIABLE


def test_calling_translates_client_errors():
    with (
        pytest.raises(failures.RetriableStreamsException, match="reading offsets failed"),
        failures.calling("reading offsets"),
    ):
        raise KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION))
    with pytest.raises(failures.TaskMigratedException), failures.calling("committing"):
        raise KafkaException(KafkaError(KafkaError._FENCED))
    with pytest.raises(failures.TaskCorruptedException), failures.calling("committing"):
        raise KafkaException(KafkaError(KafkaError._INCONSISTENT, txn_requires_abort=True))
    with pytest.raises(failures.StreamsException) as info, failures.calling("committing"):
        raise KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    assert type(info.value) is failures.StreamsException
    assert isinstance(info.value.__cause__, KafkaException)


def test_calling_translates_a_system_error_chained_to_a_fatal_client_error():
    # confluent-kafka ends a flush whose fatal error (a fenced producer) was set before the
    # next delivery callback ran as a SystemError chained to that error
    fenced = KafkaException(KafkaError(KafkaError._FENCED, fatal=True))
    with (
        pytest.raises(failures.TaskMigratedException, match="flushing failed"),
        failures.calling("flushing"),
    ):
        try:
            raise fenced
        except KafkaException as exc:
            raise SystemError("returned a result with an exception set") from exc
    # a SystemError of another kind is not the client's
    with pytest.raises(SystemError), failures.calling("flushing"):
        raise SystemError("something else")


class _Clock:
    """``time.monotonic`` that moves only when told."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def monotonic(self) -> float:
        return self.now


def test_stall_times_out_after_task_timeout_and_recovers(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(failures, "time", clock)
    stall = Stall("thread-1", timeout_ms=200, backoff_ms=10)
    assert not stall.stalled
    stall.failed(RuntimeError("broker down"))
    assert stall.stalled and stall.reason == "broker down" and stall.total_stalls == 1
    assert not stall.ready()  # backing off
    clock.now += 0.010
    assert stall.ready()
    clock.now += 0.040
    stall.failed(RuntimeError("broker still down"))  # within the timeout: no raise
    assert stall.failures == 2
    assert not stall.ready() and stall.next_attempt == pytest.approx(clock.now + 0.020)
    stall.recovered()
    assert not stall.stalled and stall.seconds() == 0.0 and stall.ready()
    stall.failed(RuntimeError("down again"))
    assert stall.total_stalls == 2
    clock.now += 0.150
    stall.failed(RuntimeError("still down"))  # within the timeout
    clock.now += 0.100
    with pytest.raises(failures.TaskTimeoutException, match=r"task\.timeout\.ms=200"):
        stall.failed(RuntimeError("gone for good"))


def test_stall_backoff_grows_and_is_capped():
    stall = Stall("t", timeout_ms=60_000, backoff_ms=100)
    waits = []
    for _ in range(8):
        stall.failed(RuntimeError("x"))
        waits.append(stall.next_attempt - time.monotonic())
    assert waits[0] < waits[1] < waits[2]
    assert max(waits) <= 1.0


def _record(message: str, level: int = logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord("librdkafka", level, __file__, 1, "%s", (message,), None)


def test_repeat_filter_folds_repeats_that_differ_in_numbers_and_client_names():
    folded = RepeatFilter(window_s=0.2)
    first = _record("FAIL [app-1-consumer#consumer-8] 127.0.0.1:38101: Connect failed (after 0ms)")
    assert folded.filter(first)
    for i in range(50):
        again = _record(
            f"FAIL [app-2-producer#producer-{i}] 127.0.0.1:38101: Connect failed (after {i}ms)"
        )
        assert not folded.filter(again)
    assert folded.filter(_record("REQTMOUT [x] TxnCoordinator: Timed out"))  # another kind
    time.sleep(0.25)
    later = _record("FAIL [app-1-consumer#consumer-8] 127.0.0.1:38101: Connect failed (after 3ms)")
    assert folded.filter(later)
    assert "50 similar messages" in later.getMessage()


def test_debug_records_asked_for_are_never_folded():
    # a client's debug setting (consumer.debug=cgrp) asks for every line, repeats included
    folded = RepeatFilter(window_s=60)
    lines = [_record("OFFSETFETCH [x] Adding in [0] back to pending list", logging.DEBUG)] * 3
    assert all(folded.filter(line) for line in lines)


def test_topic_limits_refuse_what_the_broker_would():
    limits = TopicLimits(after_max_ms=60_000, before_max_ms=3_600_000, max_message_bytes=1000)
    now = 10_000_000
    assert limits.refusal(now + 59_000, 10, now) is None
    code, reason = limits.refusal(now + 61_000, 10, now)
    assert code == "INVALID_TIMESTAMP" and "message.timestamp.after.max.ms=60000" in reason
    code, reason = limits.refusal(now - 3_600_000, 10, now)
    assert code == "INVALID_TIMESTAMP" and "before.max.ms" in reason
    code, reason = limits.refusal(now, 2000, now)
    assert code == "MSG_SIZE_TOO_LARGE" and "max.message.bytes=1000" in reason
    # LogAppendTime topics overwrite the timestamp; a negative timestamp means "now"
    appended = TopicLimits(after_max_ms=60_000, log_append_time=True)
    assert appended.refusal(now + 10**9, 10, now) is None
    assert limits.refusal(-1, 10, now) is None
