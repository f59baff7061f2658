"""The record collector: every record a task writes (sinks, changelogs, dead letters) goes
through one confluent-kafka producer per stream thread (transactional under exactly-once).

Delivery reports are only requested for failures (``delivery.report.only.error``); a failed
delivery goes to the production exception handler, and a ``FAIL`` decision surfaces as an
exception at the next ``check()`` (every commit checks, after ``flush``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaException, Producer

from streaming.runtime import errors
from streaming.runtime.partitioner import default_partition

log = logging.getLogger(__name__)


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
    ) -> None:
        self.producer = producer
        self._produce = producer.produce
        self._poll = producer.poll
        self._handler = production_handler
        self._dlq = dead_letter_topic
        self._partition_counts = partition_counts
        self._failure: BaseException | None = None
        self.sent = 0
        self.skipped = 0
        self.on_send: Callable[[], None] | None = None

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
        """Write one record of a sink (``partitioner(topic, key, value, n)`` if given)."""
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
        # positional (value, key, partition): -1 is librdkafka's "unassigned" partition;
        # timestamp 0 means "now", so a negative one is left out
        produce = self._produce
        hdrs = list(headers) if headers else None
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
                break
            except BufferError:
                self._poll(0.05)  # local queue full: serve delivery reports, then retry
            except KafkaException as exc:
                self._handle_failure(topic, key, value, timestamp, exc)
                return
        self.sent += 1
        if self.sent & 0x3FF == 0:
            self._poll(0)

    # -- failures -------------------------------------------------------------------------

    def on_delivery(self, err: Any, msg: Any) -> None:
        """librdkafka delivery report (only failures are reported)."""
        if err is None:
            return
        self._handle_failure(
            msg.topic(), msg.key(), msg.value(), msg.timestamp()[1], KafkaException(err)
        )

    def _handle_failure(
        self, topic: str, key: Any, value: Any, timestamp: int, exc: Exception
    ) -> None:
        ctx = errors.ErrorHandlerContext(topic, -1, -1, timestamp, (), None, None)
        try:
            decision = errors.decide(self._handler, ctx, (key, value), exc)
        except Exception as handler_exc:  # a broken handler fails the thread
            decision = errors.Response.FAIL
            exc = handler_exc
        if decision is errors.Response.CONTINUE:
            self.skipped += 1
            log.warning("Skipping record to %s that could not be written: %s", topic, exc)
            if self._dlq and topic != self._dlq:
                self.send_dead_letter(ctx, key, value, exc)
            return
        if self._failure is None:
            self._failure = ProductionError(
                f"Error encountered sending record to topic {topic}: {exc}. The production "
                "exception handler said FAIL; set production.exception.handler to "
                "log_and_continue to skip such records."
            )
            self._failure.__cause__ = exc

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
        self._send(self._dlq, key, value, context.timestamp, headers, -1)

    @property
    def dead_letter_topic(self) -> str | None:
        return self._dlq

    def check(self) -> None:
        """Raise the first production failure the handler decided to fail on."""
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure

    def poll(self) -> None:
        self._poll(0)

    def flush(self, timeout: float = 60.0) -> None:
        """Wait until every record is acknowledged (at-least-once commits)."""
        remaining = self.producer.flush(timeout)
        if remaining:
            raise ProductionError(f"{remaining} records were not delivered within {timeout}s")
        self.check()
