"""The runtime's error model: every client error is retriable, abortable, task-migrated or fatal.

Kafka Streams handles a client error by its kind, and so does this runtime:

- **retriable** (leader moved, coordinator unavailable, timeout, broker down): the call is
  tried again later with ``retry.backoff.ms`` between attempts; the thread keeps running and
  reports the stall (``Stall``) until ``task.timeout.ms`` has passed without progress, then
  fails with ``TaskTimeoutException`` (Kafka's ``maybeInitTaskTimeoutOrThrow``).
- **abortable** (a transaction that must be aborted, a write the broker did not take):
  ``TaskCorruptedException``: the open transaction is aborted and every task is closed dirty
  and rebuilt from its committed offsets and changelog (Kafka's ``handleCorruption``).
- **task migrated** (the producer was fenced or hit a fatal error, the consumer's generation
  is gone): ``TaskMigratedException``: tasks are closed dirty, a new producer replaces the old
  one and the thread rejoins (Kafka's ``handleTaskMigrated`` / ``reInitializeThreadProducer``).
- **fatal** (authorization, unsupported version, bad configuration): ``StreamsException``,
  which ends the thread and reaches the uncaught exception handler.
"""

from __future__ import annotations

import enum
import logging
import time
from typing import Any, Literal

from confluent_kafka import KafkaError, KafkaException

from streaming.errors import StreamsException

log = logging.getLogger(__name__)

#: a client call waiting on the brokers longer than this is reported as a stall (``Stall``)
#: while it lasts: its retriable failure would come only at its timeout, and it can end with
#: another kind of failure (records that timed out meanwhile)
SLOW_CALL_S = 2.0


class Kind(enum.Enum):
    """How the runtime reacts to a client error."""

    RETRIABLE = "retriable"
    ABORTABLE = "abortable"
    TASK_MIGRATED = "task-migrated"
    FATAL = "fatal"


class RetriableStreamsException(StreamsException):
    """A transient failure: try again after ``retry.backoff.ms`` (within ``task.timeout.ms``)."""


class TaskCorruptedException(StreamsException):
    """The open transaction (or the unacknowledged writes) must be rolled back."""


class TaskMigratedException(StreamsException):
    """The producer or the group membership is gone: close tasks dirty, new producer, rejoin."""


class ConsumerFencedException(TaskMigratedException):
    """The main consumer's static membership was fenced: rejoin with a new consumer."""


class TaskTimeoutException(StreamsException):
    """A retriable failure lasted longer than ``task.timeout.ms``."""


def codes(*names: str) -> frozenset[int]:
    """The codes of the ``KafkaError`` names this librdkafka knows."""
    return frozenset(getattr(KafkaError, name) for name in names if hasattr(KafkaError, name))


#: the producer's epoch or identity is no longer valid: a new producer is needed
MIGRATED_CODES = codes(
    "_FENCED",
    "PRODUCER_FENCED",
    "INVALID_PRODUCER_EPOCH",
    "UNKNOWN_PRODUCER_ID",
    "INVALID_PRODUCER_ID_MAPPING",
    "OUT_OF_ORDER_SEQUENCE_NUMBER",
    "INVALID_TXN_STATE",
    "ILLEGAL_GENERATION",
    "UNKNOWN_MEMBER_ID",
    "FENCED_INSTANCE_ID",
    "_ASSIGNMENT_LOST",
)

#: nothing the runtime can do about these: a person must change something
FATAL_CODES = codes(
    "TOPIC_AUTHORIZATION_FAILED",
    "GROUP_AUTHORIZATION_FAILED",
    "CLUSTER_AUTHORIZATION_FAILED",
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
    "SASL_AUTHENTICATION_FAILED",
    "_AUTHENTICATION",
    "UNSUPPORTED_VERSION",
    "UNSUPPORTED_FOR_MESSAGE_FORMAT",
    "_UNSUPPORTED_FEATURE",
    "_INVALID_ARG",
    "_SSL",
    "INVALID_CONFIG",
    "INVALID_REPLICATION_FACTOR",
    "INVALID_PARTITIONS",
    "TRANSACTION_COORDINATOR_FENCED",
)

#: transient: the same call succeeds once the cluster has recovered
RETRIABLE_CODES = codes(
    "_TRANSPORT",
    "_ALL_BROKERS_DOWN",
    "_DESTROY_BROKER",
    "_TIMED_OUT",
    "_TIMED_OUT_QUEUE",
    "_MSG_TIMED_OUT",
    "_WAIT_COORD",
    "_WAIT_CACHE",
    "_RESOLVE",
    "_DESTROY",
    "_IN_PROGRESS",
    "_PREV_IN_PROGRESS",
    "_NODE_UPDATE",
    "_UNKNOWN_PARTITION",
    "_UNKNOWN_TOPIC",
    "_NO_OFFSET",
    "_OUTDATED",
    "_STATE",
    "_RETRY",
    "_PARTITION_EOF",
    "_MAX_POLL_EXCEEDED",
    "NOT_LEADER_FOR_PARTITION",
    "NOT_LEADER_OR_FOLLOWER",
    "LEADER_NOT_AVAILABLE",
    "NOT_COORDINATOR",
    "NOT_COORDINATOR_FOR_GROUP",
    "COORDINATOR_NOT_AVAILABLE",
    "GROUP_COORDINATOR_NOT_AVAILABLE",
    "COORDINATOR_LOAD_IN_PROGRESS",
    "GROUP_LOAD_IN_PROGRESS",
    "REQUEST_TIMED_OUT",
    "NETWORK_EXCEPTION",
    "NOT_ENOUGH_REPLICAS",
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    "UNKNOWN_TOPIC_OR_PART",
    "KAFKA_STORAGE_ERROR",
    "CONCURRENT_TRANSACTIONS",
    "REBALANCE_IN_PROGRESS",
    "UNSTABLE_OFFSET_COMMIT",
    "OFFSET_NOT_AVAILABLE",
    "FETCH_SESSION_ID_NOT_FOUND",
    "INVALID_FETCH_SESSION_EPOCH",
    "UNKNOWN_LEADER_EPOCH",
    "FENCED_LEADER_EPOCH",
    "NOT_CONTROLLER",
    "THROTTLING_QUOTA_EXCEEDED",
    "PREFERRED_LEADER_NOT_AVAILABLE",
    "ELIGIBLE_LEADERS_NOT_AVAILABLE",
    "BROKER_NOT_AVAILABLE",
    "REPLICA_NOT_AVAILABLE",
)

#: a write of one record the broker refused: the production exception handler decides
RECORD_CODES = codes(
    "INVALID_TIMESTAMP",
    "MSG_SIZE_TOO_LARGE",
    "INVALID_RECORD",
    "CORRUPT_MESSAGE",
    "INVALID_MSG",
    "INVALID_MSG_SIZE",
    "RECORD_LIST_TOO_LARGE",
    "_MSG_SIZE_TOO_LARGE",
    "_INVALID_RECORD",
    "_BAD_MSG",
    "_KEY_SERIALIZATION",
    "_VALUE_SERIALIZATION",
)

#: the broker setting to look at when a record is refused
RECORD_HINTS = {
    getattr(KafkaError, "INVALID_TIMESTAMP", -10_000): (
        "the record's timestamp lies outside what the topic accepts; see the topic configs "
        "message.timestamp.after.max.ms and message.timestamp.before.max.ms"
    ),
    getattr(KafkaError, "MSG_SIZE_TOO_LARGE", -10_001): (
        "the record is larger than the topic's max.message.bytes (or the broker's "
        "message.max.bytes); raise the limit or make the record smaller"
    ),
    getattr(KafkaError, "_MSG_SIZE_TOO_LARGE", -10_002): (
        "the record is larger than the producer's message.max.bytes (producer.message.max.bytes)"
    ),
}


def error_of(exc: BaseException) -> KafkaError | None:
    """The ``KafkaError`` inside a ``KafkaException`` (or None)."""
    if isinstance(exc, KafkaError):
        return exc
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def classify(err: KafkaError) -> Kind:
    """Map a librdkafka error to how the runtime handles it (see the module docstring)."""
    code = err.code()
    if code in FATAL_CODES:
        return Kind.FATAL
    if code in MIGRATED_CODES:
        return Kind.TASK_MIGRATED
    if err.fatal():
        # a fatal producer error leaves the instance unusable: replace it
        return Kind.TASK_MIGRATED
    if err.txn_requires_abort() or code in RECORD_CODES:
        return Kind.ABORTABLE
    if err.retriable() or code in RETRIABLE_CODES or code < 0:
        # librdkafka's own (negative) codes not named above are local and transient (e.g.
        # _DESTROY_BROKER when a broker handle is replaced): bounded by task.timeout.ms
        return Kind.RETRIABLE
    return Kind.FATAL


def translate(exc: BaseException, what: str) -> StreamsException:
    """The runtime exception for a client error raised while doing ``what``."""
    err = error_of(exc)
    if err is None:
        return StreamsException(f"{what} failed: {exc}")
    kind = classify(err)
    message = f"{what} failed: {err.name()}: {err.str()}"
    if kind is Kind.RETRIABLE:
        return RetriableStreamsException(message)
    if kind is Kind.ABORTABLE:
        return TaskCorruptedException(message)
    if kind is Kind.TASK_MIGRATED:
        return TaskMigratedException(message)
    return StreamsException(message)


class calling:
    """Run a client call, turning a ``KafkaException`` into the runtime's exception for it.

    A fatal client error (a fenced producer) can also end the call as a ``SystemError``:
    confluent-kafka sets the fatal error's ``KafkaException`` and then runs the next
    delivery callback with it still set, which fails with "returned a result with an
    exception set", chained to it. Such a call is translated by that ``KafkaException``.

    A class rather than a generator context manager: the stream thread enters one for
    every poll of its producer, and this costs a quarter as much."""

    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> Literal[False]:
        if isinstance(exc, KafkaException):
            raise translate(exc, self.what) from exc
        if isinstance(exc, SystemError):
            cause = kafka_exception_behind(exc)
            if cause is not None:
                raise translate(cause, self.what) from exc
        return False


def kafka_exception_behind(exc: BaseException) -> KafkaException | None:
    """The ``KafkaException`` a chain of exceptions started from (None: none in it)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KafkaException):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


class Stall:
    """How long a thread has been failing to make progress, bounded by ``task.timeout.ms``.

    ``failed`` records a retriable failure (and raises ``TaskTimeoutException`` once the
    failures have lasted longer than the timeout); ``waiting`` records a client call that
    has waited ``SLOW_CALL_S`` on the brokers (a flush, a transactional call, the reading of
    a topic's configs, a full producer queue); ``recovered`` clears it. ``since`` and
    ``reason`` are what metrics and the logs report while stalled.
    """

    def __init__(self, name: str, timeout_ms: int, backoff_ms: int) -> None:
        self.name = name
        self.timeout_s = timeout_ms / 1000.0
        self.backoff_s = backoff_ms / 1000.0
        self.since: float | None = None
        self.reason: str | None = None
        self.failures = 0
        self.total_stalls = 0
        self.next_attempt = 0.0
        self._next_log = 0.0

    @property
    def stalled(self) -> bool:
        return self.since is not None

    def seconds(self) -> float:
        """Seconds since the first failure of the current stall (0 when not stalled)."""
        return 0.0 if self.since is None else time.monotonic() - self.since

    def ready(self) -> bool:
        """Whether the backoff after the last failure has passed."""
        return time.monotonic() >= self.next_attempt

    def waiting(self, reason: str) -> None:
        """A client call has waited ``SLOW_CALL_S`` on the brokers: the thread is stalled
        from now on, until it makes progress again (``recovered``), whatever the call ends
        with."""
        if self.since is None:
            now = time.monotonic()
            self.since = now
            self.total_stalls += 1
            self._next_log = now + 10.0
            log.warning(
                "%s stalled (task.timeout.ms %d): %s",
                self.name,
                int(self.timeout_s * 1000),
                reason,
            )
        self.reason = reason

    def failed(self, exc: BaseException) -> None:
        """Record a retriable failure; raise ``TaskTimeoutException`` past ``task.timeout.ms``."""
        now = time.monotonic()
        if self.since is None:
            self.since = now
            self.total_stalls += 1
            self._next_log = now
        self.failures += 1
        self.reason = str(exc)
        # exponential backoff from retry.backoff.ms, capped at 1 s
        self.next_attempt = now + min(1.0, self.backoff_s * 2 ** min(self.failures - 1, 10))
        if now >= self._next_log:
            self._next_log = now + 10.0
            log.warning(
                "%s stalled for %.1f s (task.timeout.ms %d), retrying: %s",
                self.name,
                now - self.since,
                int(self.timeout_s * 1000),
                exc,
            )
        if now - self.since > self.timeout_s:
            raise TaskTimeoutException(
                f"{self.name} made no progress for {now - self.since:.1f} s, longer than "
                f"task.timeout.ms={int(self.timeout_s * 1000)}; last error: {exc}. Check that "
                "the brokers are reachable, or raise task.timeout.ms to wait longer."
            ) from exc

    def recovered(self) -> None:
        """Progress was made: the stall (if any) is over."""
        if self.since is not None:
            log.info(
                "%s recovered after %.1f s (%d failed attempts)",
                self.name,
                time.monotonic() - self.since,
                self.failures,
            )
        self.since = None
        self.reason = None
        self.failures = 0
        self.next_attempt = 0.0
