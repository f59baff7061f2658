"""The record collector: every record a task writes (sinks, changelogs, dead letters) goes
through one confluent-kafka producer per stream thread (transactional under exactly-once).

Under at-least-once, delivery reports are only requested for failures
(``delivery.report.only.error``). Under exactly-once every record is reported: the
collector keeps the offset of the last record acknowledged per partition in the open
transaction (``acked``, Kafka's ``RecordCollectorImpl.offsets``), from which the committer
takes the changelog offsets the transactional stores record, without asking the brokers. A
failed delivery is handled by its kind, as Kafka's ``RecordCollectorImpl`` does:

- a fenced or fatally failed producer: ``TaskMigratedException`` (a new producer is made);
- a retriable failure (timed out, not enough replicas): ``TaskCorruptedException`` (the tasks
  are rolled back to their committed state and process again);
- a record the topic would refuse (``INVALID_TIMESTAMP``, ``RECORD_TOO_LARGE``, ...): the
  production exception handler decides before it is sent (``topic_limits``). ``CONTINUE``
  skips it and writes it to the dead-letter topic, so the transaction commits without it;
  ``FAIL`` ends the thread with a message naming the record, the topic and the setting. A
  refusal only the broker saw fails the record's whole batch (librdkafka cannot say which
  record was bad): under exactly-once the transaction is rolled back and processed again.

The failure surfaces as an exception at the next ``check()`` (every commit checks).
"""

from __future__ import annotations

import datetime
import logging
import math
import time
from collections.abc import Callable, Container
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from streaming.runtime import errors
from streaming.runtime.failures import (
    RECORD_CODES,
    RECORD_HINTS,
    SLOW_CALL_S,
    Kind,
    RetriableStreamsException,
    TaskCorruptedException,
    TaskMigratedException,
    calling,
    classify,
    codes,
    error_of,
    kafka_exception_behind,
)
from streaming.runtime.in_flight import InFlightTimestamps
from streaming.runtime.partitioner import default_partition
from streaming.runtime.topic_limits import TopicLimits

log = logging.getLogger(__name__)

_time = time.time

#: how long a full local producer queue may block a write (Kafka's ``max.block.ms``)
MAX_BLOCK_S = 60.0


class ProductionError(RuntimeError):
    """A record could not be written and the production handler said FAIL."""


class RecordCollector:
    """Sends serialized records; tracks failures and per-topic partition counts."""

    def __init__(
        self,
        producer: Producer,
        *,
        production_handler: errors.Handler,
        dead_letter_topic: str | None,
        partition_counts: Callable[[str], int],
        exactly_once: bool = False,
        source_context: Callable[[], errors.ErrorHandlerContext | None] | None = None,
        topic_limits: Callable[[str], TopicLimits] | None = None,
        waiting: Callable[[str], None] | None = None,
    ) -> None:
        self.producer = producer
        self._produce = producer.produce
        self._poll = producer.poll
        self._handler = production_handler
        self._dlq = dead_letter_topic
        self._partition_counts = partition_counts
        self._eos = exactly_once
        self._source_context = source_context
        self._topic_limits = topic_limits
        #: told (the stream thread's ``Stall.waiting``) once a wait on the brokers (a flush,
        #: a full queue) has lasted ``SLOW_CALL_S``
        self._waiting = waiting
        self._limits: dict[str, TopicLimits] = {}
        #: per topic whose limits are known (or not checked), ``TopicLimits.acceptance_bounds``
        #: for the common record's check in ``send``; filled by ``_send``
        self._bounds: dict[str, tuple[float, float, float]] = {}
        #: the wall clock (ms) when ``poll`` last ran: a lower bound of now
        self._clock_ms = int(_time() * 1000)
        self._failure: BaseException | None = None
        #: exactly-once: the offset of the last record acknowledged per partition since the
        #: open transaction began (``new_transaction``)
        self.acked: dict[tuple[str, int], int] = {}
        self.sent = 0
        self.skipped = 0
        self.on_send: Callable[[], None] | None = None
        #: the topics whose unacknowledged records' timestamps are kept (``track_in_flight``)
        self._tracked: Container[str] | None = None
        self._in_flight = InFlightTimestamps()

    def _read_limits(self, topic: str) -> TopicLimits:
        assert self._topic_limits is not None
        limits = self._topic_limits(topic)
        if limits is not TopicLimits.defaults():
            self._limits[topic] = limits
            self._bounds[topic] = limits.acceptance_bounds()
        return limits

    def _forget_limits(self, topic: str) -> None:
        """Read ``topic``'s limits again before its next record."""
        self._limits.pop(topic, None)
        self._bounds.pop(topic, None)

    def replace_producer(self, producer: Producer) -> None:
        """Write through ``producer`` from now on (the old one was fenced or failed)."""
        self.producer = producer
        self._produce = producer.produce
        self._poll = producer.poll
        self._failure = None
        self.acked = {}
        self._in_flight.clear()  # the old producer's reports no longer reach the collector

    def track_in_flight(self, topics: Container[str]) -> None:
        """Keep the timestamps of the records written to ``topics`` until their delivery
        reports (exactly-once: every record is reported) for ``in_flight_low``."""
        self._tracked = topics

    def in_flight_low(self) -> int | None:
        """The smallest timestamp of a record written to a tracked topic and not reported yet
        (None: none), after serving the delivery reports that arrived."""
        self.poll()
        return self._in_flight.low()

    def new_transaction(self) -> None:
        """A transaction begins (after a commit or an abort): no record of it is
        acknowledged yet."""
        self.acked = {}

    # -- the task's send function ---------------------------------------------------------

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Any = (),
        record: Any = None,
        partitioner: Any = None,
    ) -> None:
        """Write one record of a sink (``partitioner(topic, key, value, n)`` if given, with
        the key and value of ``record``, which a sink without a partitioner may leave out).

        The common record (no partitioner, no headers, a timestamp, within its topic's
        limits as last read) is produced here in one frame; any other, or one ``produce``
        refuses, takes ``_send``, which decides it as for every record. The "ahead" limit
        is checked against ``_clock_ms``, the wall clock when the delivery reports were last
        served, which is at most now: a record it refuses takes ``_send``, which reads the
        clock (reading it costs about as much as a Python call here)."""
        if partitioner is None and not headers and timestamp >= 0 and self.on_send is None:
            bounds = self._bounds.get(topic)
            if bounds is not None:
                ahead, behind, max_size = bounds
                size = (len(key) if key else 0) + (len(value) if value else 0)
                if (
                    timestamp - self._clock_ms <= ahead
                    and size <= max_size
                    and (behind == _UNBOUNDED or int(_time() * 1000) - timestamp <= behind)
                ):
                    try:
                        self._produce(topic, value, key, -1, timestamp=timestamp)
                    except (BufferError, KafkaException, SystemError):
                        # nothing was queued: _send retries or decides what the refusal means
                        self._send(topic, key, value, timestamp, headers, -1)
                        return
                    tracked = self._tracked
                    if tracked is not None and topic in tracked:
                        self._in_flight.add(timestamp)
                    self.sent = sent = self.sent + 1
                    if not sent & 0x3FF:
                        self.poll()
                    return
        partition = -1
        if partitioner is not None:
            n = self._partition_counts(topic)
            chosen = partitioner(
                topic,
                None if record is None else record.key,
                None if record is None else record.value,
                n,
            )
            if chosen is not None:
                partition = int(chosen)
            elif key is not None:
                partition = default_partition(key, n)
        self._send(topic, key, value, timestamp, headers, partition)

    def send_to_partition(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Any = (),
    ) -> None:
        """Write one record to a fixed partition (changelogs)."""
        self._send(topic, key, value, timestamp, headers, partition)

    def _send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: Any,
        partition: int,
    ) -> None:
        if self.on_send is not None:
            self.on_send()
        if self._topic_limits is None or topic == self._dlq:
            self._bounds[topic] = _NO_BOUNDS
        else:
            limits = self._limits.get(topic) or self._read_limits(topic)
            size = (len(key) if key else 0) + (len(value) if value else 0)
            if headers:
                size += sum(len(k) + len(v or b"") for k, v in headers)
            refusal = limits.refusal(timestamp, size, int(time.time() * 1000))
            if refusal is not None:
                code, reason = refusal
                exc = KafkaException(KafkaError(getattr(KafkaError, code), reason))
                self._refused_locally(topic, key, value, timestamp, exc)
                return
        # positional (value, key, partition): -1 is librdkafka's "unassigned" partition;
        # timestamp 0 means "now", so a negative one is left out
        produce = self._produce
        hdrs = list(headers) if headers else None
        blocked_since = 0.0
        reported = False
        while True:
            try:
                if timestamp >= 0:
                    if hdrs is None:
                        produce(topic, value, key, partition, timestamp=timestamp)
                    else:
                        produce(topic, value, key, partition, timestamp=timestamp, headers=hdrs)
                elif hdrs is None:
                    produce(topic, value, key, partition)
                else:
                    produce(topic, value, key, partition, headers=hdrs)
                if timestamp >= 0 and self._tracked is not None and topic in self._tracked:
                    self._in_flight.add(timestamp)
                break
            except BufferError:
                # local queue full (brokers slow or away): serve delivery reports, retry
                now = time.monotonic()
                if not blocked_since:
                    blocked_since = now
                elif now - blocked_since > MAX_BLOCK_S:
                    raise TaskCorruptedException(
                        f"the producer's queue stayed full for {MAX_BLOCK_S:.0f} s writing to "
                        f"{topic}; the brokers are not taking writes"
                    ) from None
                elif not reported and now - blocked_since >= SLOW_CALL_S:
                    reported = True
                    if self._waiting is not None:
                        self._waiting(
                            f"writing to {topic} is waiting for the brokers (the producer's "
                            "queue is full)"
                        )
                self._poll(0.05)
            except (KafkaException, SystemError) as raised:
                # a SystemError: the KafkaException of a fatal error behind it (failures.calling)
                refused = kafka_exception_behind(raised)
                if refused is None:
                    raise
                err = error_of(refused)
                if err is not None and err.code() not in _LOCAL_RECORD_CODES:
                    # not this record: the producer's state (a transaction that must be
                    # aborted, a fenced or fatally failed producer) refuses every write
                    if classify(err) is Kind.TASK_MIGRATED:
                        raise TaskMigratedException(
                            f"writing to {topic} failed: {err}"
                        ) from refused
                    raise TaskCorruptedException(f"writing to {topic} failed: {err}") from refused
                self._refused_locally(topic, key, value, timestamp, refused)
                return
        self.sent += 1
        if self.sent & 0x3FF == 0:
            self.poll()

    # -- failures -------------------------------------------------------------------------

    def on_delivery(self, err: Any, msg: Any) -> None:
        """librdkafka delivery report: an acknowledged record (exactly-once only) moves its
        partition's ``acked`` offset; a failure is kept for ``check``. An idempotent
        producer's acknowledgements of a partition come in the order of its records."""
        if self._tracked is not None and msg.topic() in self._tracked:
            self._in_flight.done(msg.timestamp()[1])
        if err is None:
            self.acked[msg.topic(), msg.partition()] = msg.offset()
            return
        if err.code() in _PURGED:
            return  # purged by a producer replacement: the rollback rewrites them
        exc = KafkaException(err)
        kind = classify(err)
        topic = msg.topic()
        if kind is Kind.TASK_MIGRATED:
            self._fail(
                TaskMigratedException(f"writing to {topic} failed: the producer was fenced: {err}")
            )
        elif kind is Kind.FATAL:
            self._fail(self._production_error(topic, msg.timestamp()[1], exc, None))
        elif err.code() in _RECORD_CODES:
            self._refused_by_broker(topic, msg.key(), msg.value(), msg.timestamp()[1], exc)
        elif self._eos and err.code() == KafkaError._MSG_TIMED_OUT:
            # records that timed out (brokers away) leave the idempotent producer needing a
            # new epoch: its abort_transaction may not come back once they are, or succeed
            # and the next transaction fail with OUT_OF_ORDER_SEQUENCE_NUMBER. A new
            # producer's init_transactions aborts the transaction (fencing this one).
            self._fail(
                TaskMigratedException(
                    f"writing to {topic} failed: {err}; the transaction is rolled back with a "
                    "new producer"
                )
            )
        else:  # retriable, or the transaction must be aborted: roll back and process again
            self._fail(
                TaskCorruptedException(
                    f"writing to {topic} failed: {err}; the tasks roll back to their "
                    "committed state. If the brokers are slow, consider raising "
                    "producer.message.timeout.ms."
                )
            )

    def _refused_locally(
        self, topic: str, key: Any, value: Any, timestamp: int, exc: KafkaException
    ) -> None:
        """``produce()`` refused the record (too large, bad arguments): nothing was sent."""
        context = self._context(topic, timestamp)
        if self._decide(context, key, value, exc) is errors.Response.CONTINUE:
            self._skip(context, topic, key, value, exc)
        else:
            self._fail(self._production_error(topic, timestamp, exc, context))

    def _refused_by_broker(
        self, topic: str, key: Any, value: Any, timestamp: int, exc: KafkaException
    ) -> None:
        """The broker refused a write that passed the topic's limits (they changed, or the
        clocks differ). librdkafka fails every record of the batch with the same error, so
        the bad record cannot be told apart: the handler decides for each of them."""
        context = self._context(topic, timestamp)
        if self._decide(context, key, value, exc) is not errors.Response.CONTINUE:
            self._fail(self._production_error(topic, timestamp, exc, context))
        elif self._eos:
            # the transaction cannot commit with a failed write: roll back and retry, with
            # the topic's limits read again
            self._forget_limits(topic)
            self._fail(
                TaskCorruptedException(
                    f"the broker refused a record for {topic}: {exc}; the transaction is "
                    "rolled back and processed again"
                )
            )
        else:
            self._skip(context, topic, key, value, exc)

    def _skip(
        self,
        context: errors.ErrorHandlerContext,
        topic: str,
        key: Any,
        value: Any,
        exc: Exception,
    ) -> None:
        self.skipped += 1
        log.warning("Skipping record to %s that could not be written: %s", topic, exc)
        if self._dlq and topic != self._dlq:
            self.send_dead_letter(context, key, value, exc)

    def _decide(
        self, context: errors.ErrorHandlerContext, key: Any, value: Any, exc: Exception
    ) -> errors.Response:
        try:
            return errors.decide(self._handler, context, (key, value), exc)
        except Exception:  # a broken handler fails the thread
            log.exception("The production exception handler failed")
            return errors.Response.FAIL

    def _context(self, topic: str, timestamp: int) -> errors.ErrorHandlerContext:
        """The source record being processed when known, else the sink's coordinates."""
        context = self._source_context() if self._source_context is not None else None
        if context is not None:
            return context
        return errors.ErrorHandlerContext(topic, -1, -1, timestamp, (), None, None)

    @staticmethod
    def _production_error(
        topic: str,
        timestamp: int,
        exc: Exception,
        context: errors.ErrorHandlerContext | None,
    ) -> ProductionError:
        err = error_of(exc)
        hint = RECORD_HINTS.get(err.code()) if err is not None else None
        source = ""
        if context is not None and context.offset >= 0:
            source = (
                f" (produced while processing {context.topic}-{context.partition} "
                f"offset {context.offset})"
            )
        when = ""
        if timestamp is not None and timestamp >= 0:
            iso = datetime.datetime.fromtimestamp(timestamp / 1000, tz=datetime.UTC)
            when = f" with timestamp {timestamp} ({iso.isoformat(timespec='milliseconds')})"
        error = ProductionError(
            f"Error encountered sending a record to topic {topic}{when}{source}: {exc}."
            + (f" Cause: {hint}." if hint else "")
            + " The production exception handler said FAIL; set production.exception.handler"
            " to log_and_continue (and errors.dead.letter.queue.topic.name) to skip such records."
        )
        error.__cause__ = exc
        return error

    def _fail(self, failure: BaseException) -> None:
        # the most severe failure wins: a fenced producer over a rollback over a refusal
        current = self._failure
        if current is None or _SEVERITY.get(type(failure), 1) > _SEVERITY.get(type(current), 1):
            self._failure = failure

    def send_dead_letter(
        self,
        context: errors.ErrorHandlerContext,
        key: bytes | None,
        value: bytes | None,
        exc: BaseException,
    ) -> None:
        """Write the original bytes with KIP-1034 headers to the dead-letter topic."""
        if not self._dlq:
            return
        headers = errors.dead_letter_headers(context, exc)
        timestamp = context.timestamp
        if self._topic_limits is not None:
            now = int(time.time() * 1000)
            if self._topic_limits(self._dlq).refusal(timestamp, 0, now) is not None:
                timestamp = now  # the dead-letter topic would refuse the original timestamp
        self._send(self._dlq, key, value, timestamp, headers, -1)

    @property
    def dead_letter_topic(self) -> str | None:
        return self._dlq

    def check(self) -> None:
        """Raise the first production failure the handler decided to fail on."""
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure

    def poll(self) -> None:
        """Serve the producer's delivery reports (failures are kept for ``check``); read
        the wall clock for ``send``."""
        self._clock_ms = int(_time() * 1000)
        with calling("serving the producer's delivery reports"):
            self._poll(0)

    def flush(self, timeout: float) -> None:
        """Wait until every record is acknowledged; a failed write raises (``check``), and
        writes still unacknowledged after ``timeout`` raise ``RetriableStreamsException``.

        A flush still waiting after ``SLOW_CALL_S`` reports the stall (``waiting``) for the
        rest of it: it may end with a delivery failure instead of the retriable error (the
        records written before the brokers went away reach ``message.timeout.ms`` during
        it), and the thread waited on the brokers all the same."""
        if self._waiting is None or timeout <= SLOW_CALL_S:
            remaining = self._flush(timeout)
        else:
            deadline = time.monotonic() + timeout
            remaining = self._flush(SLOW_CALL_S)
            if remaining:
                self._waiting("flushing the producer is waiting for the brokers")
                remaining = self._flush(max(0.0, deadline - time.monotonic()))
        self.check()
        if not remaining:
            # every record was reported (a timestamp the broker replaced is gone too)
            self._in_flight.clear()
        if remaining:
            raise RetriableStreamsException(
                f"{remaining} records were not acknowledged within {timeout:.0f} s"
            )

    def _flush(self, timeout: float) -> int:
        """The producer's flush: the records still unacknowledged after ``timeout``."""
        try:
            with calling("flushing the producer"):
                return self.producer.flush(timeout)
        except SystemError as exc:
            # confluent-kafka can also end a flush that met a fatal error (a fenced producer)
            # with "returned NULL without setting an exception", nothing chained: the
            # delivery reports say what failed; else the producer is not usable any more
            self.check()
            raise TaskMigratedException(
                f"flushing the producer failed inside confluent-kafka ({exc}); replacing it"
            ) from exc


_UNBOUNDED = math.inf
#: no limit to check (a collector without ``topic_limits``, the dead-letter topic)
_NO_BOUNDS = (_UNBOUNDED, _UNBOUNDED, _UNBOUNDED)

#: a write the broker refused because of the record itself (the handler decides)
_RECORD_CODES = frozenset(code for code in RECORD_CODES if code >= 0)
_SEVERITY: dict[type[BaseException], int] = {
    TaskCorruptedException: 2,
    ProductionError: 3,
    TaskMigratedException: 4,
}
_PURGED = codes("_PURGE_QUEUE", "_PURGE_INFLIGHT")
#: what ``produce()`` refuses because of the record itself (the handler decides)
_LOCAL_RECORD_CODES = RECORD_CODES | codes("_INVALID_ARG")
