"""What every stream application of the platform shares: serdes, event time, validation,
the dead-letter path.

Records on the raw topics are JSON objects (see ``pipelines/generator.py``), or Avro
records of the same fields when ``StreamAppConfig.raw_format`` says so (``raw_serde``):

- ``orders``: key order id; ``order_id, customer_id, amount, region, location, event_time``
- ``customers`` (compacted): key customer id; ``customer_id, name, tier, known_locations,
  credit_limit``
- ``clicks``: ``user_id, page, event_time``

``event_time`` is epoch milliseconds; it is the stream time of every application.
``dead_letter_gate`` sends the records an application cannot use to its dead-letter topic,
right after the source (before any repartition, window or store), with KIP-1034's
``__streams.errors.*`` headers saying why:

- a JSON value that decodes but misses a field the application needs (``InvalidRecord``);
- an event time more than ``max_event_time_ahead_ms`` (15 minutes by default) ahead of the
  wall clock (``EventTimeTooFarAhead``). Brokers refuse records stamped too far in the
  future (``message.timestamp.after.max.ms``, 1 hour by default in Kafka 4) with
  ``INVALID_TIMESTAMP``: such an order would pass the input topic (stamped when produced)
  and then fail every transaction on the repartition or output topic. It would also move
  stream time ahead and close every open window. Its dead letter is stamped with the wall
  clock (the value still carries the event time).

Bytes that do not decode at all go to the same topic through the runtime's
``errors.dead.letter.queue.topic.name`` option, with the same headers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipelines.streams.config import StreamAppConfig
from streaming import Branched, FixedKeyProcessor, Produced, Record, serdes
from streaming.time import FieldTimestampExtractor

KEY_SERDE = serdes.String()
VALUE_SERDE = serdes.Json()
EVENT_TIME = FieldTimestampExtractor("event_time")


def raw_serde(config: StreamAppConfig, topic: str) -> Any:
    """The value serde of raw topic ``topic`` (``domain.ORDERS``, ...) under ``config``'s
    ``raw_format``: JSON, or Avro through the schema registry (any registered version, read
    as the topic's ``.avsc``). What the applications write stays JSON."""
    return config.raw_format.reader_serde(topic)


# KIP-1034's dead-letter headers (the names streaming.runtime.errors writes too)
HEADER_EXCEPTION = "__streams.errors.exception"
HEADER_MESSAGE = "__streams.errors.message"
HEADER_STACKTRACE = "__streams.errors.stacktrace"
HEADER_TOPIC = "__streams.errors.topic"
HEADER_PARTITION = "__streams.errors.partition"
HEADER_OFFSET = "__streams.errors.offset"
#: the platform's short reason code: ``invalid`` or ``event-time-ahead``
HEADER_REASON = "platform.dead-letter.reason"


class TableBootstrapExtractor:
    """Timestamp 0 for table updates, so a task applies customer profiles before it
    processes the orders that need them (Kafka Streams picks the lowest timestamp first)."""

    def extract(self, record: Any, partition_time: int) -> int:
        return 0


TABLE_TIME = TableBootstrapExtractor()


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


ORDER_FIELDS: dict[str, Callable[[Any], bool]] = {
    "order_id": lambda v: isinstance(v, str),
    "customer_id": lambda v: isinstance(v, str),
    "region": lambda v: isinstance(v, str),
    "amount": _number,
    "event_time": _number,
}
CLICK_FIELDS: dict[str, Callable[[Any], bool]] = {
    "user_id": lambda v: isinstance(v, str),
    "event_time": _number,
}


def _problem(value: Any, fields: dict[str, Callable[[Any], bool]]) -> str | None:
    if not isinstance(value, dict):
        return f"the value is not a JSON object ({type(value).__name__})"
    bad = [name for name, ok in fields.items() if not ok(value.get(name))]
    return f"missing or mistyped fields: {', '.join(bad)}" if bad else None


def order_problem(key: Any, value: Any) -> str | None:
    """Why the applications cannot use this order (None when they can)."""
    return _problem(value, ORDER_FIELDS)


def click_problem(key: Any, value: Any) -> str | None:
    """Why the applications cannot use this click (None when they can)."""
    return _problem(value, CLICK_FIELDS)


def cents(amount: float) -> int:
    """Money as integer cents, so sums are exact and equal in stream and batch."""
    return round(amount * 100)


# -- the dead-letter path ---------------------------------------------------------------------


class RejectedRecord(ValueError):
    """Why a record went to the dead-letter topic (named in the exception header)."""

    reason = "rejected"


class InvalidRecord(RejectedRecord):
    """The value misses fields the application needs, or has them with the wrong types."""

    reason = "invalid"


class EventTimeTooFarAhead(RejectedRecord):
    """The event time lies further ahead of the wall clock than the configured bound."""

    reason = "event-time-ahead"


class DeadLetter:
    """A rejected record's value on its way from the gate to the dead-letter sink."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def dead_letter_headers(error: RejectedRecord, metadata: Any) -> tuple[tuple[str, bytes], ...]:
    """KIP-1034 headers for ``error`` and the source record's coordinates (``metadata``:
    the processor context's record metadata, or None)."""
    cls = type(error)
    message = str(error)
    topic = getattr(metadata, "topic", None) or ""
    partition = getattr(metadata, "partition", -1)
    offset = getattr(metadata, "offset", -1)
    return (
        (HEADER_EXCEPTION, f"{cls.__module__}.{cls.__qualname__}: {message}".encode()),
        (HEADER_MESSAGE, message.encode()),
        (HEADER_STACKTRACE, b""),  # nothing was raised: the gate decided
        (HEADER_TOPIC, topic.encode()),
        (HEADER_PARTITION, str(partition).encode()),
        (HEADER_OFFSET, str(offset).encode()),
        (HEADER_REASON, cls.reason.encode()),
    )


class DeadLetterGate(FixedKeyProcessor):
    """Forwards usable records unchanged and rejected ones as ``DeadLetter`` values with
    KIP-1034 headers (stamped no later than the wall clock, so the broker accepts them)."""

    def __init__(self, problem: Callable[[Any, Any], str | None], max_ahead_ms: int) -> None:
        self.problem = problem
        self.max_ahead_ms = max_ahead_ms

    def init(self, context: Any) -> None:
        self.context = context

    def rejection(self, record: Record, now: int) -> RejectedRecord | None:
        """Why ``record`` goes to the dead-letter topic at wall-clock time ``now``, if it does."""
        problem = self.problem(record.key, record.value)
        if problem is not None:
            return InvalidRecord(problem)
        ahead = record.timestamp - now
        if ahead > self.max_ahead_ms:
            return EventTimeTooFarAhead(
                f"event time {record.timestamp} is {ahead} ms ahead of the wall clock "
                f"({now}); the limit is {self.max_ahead_ms} ms (max_event_time_ahead_ms)"
            )
        return None

    def process(self, record: Record) -> None:
        now = self.context.current_system_time_ms()
        error = self.rejection(record, now)
        if error is None:
            self.context.forward(record)
            return
        headers = tuple(record.headers) + dead_letter_headers(error, self.context.record_metadata())
        self.context.forward(
            Record(record.key, DeadLetter(record.value), min(record.timestamp, now), headers)
        )


def dead_letter_gate(
    stream: Any,
    problem: Callable[[Any, Any], str | None],
    dead_letter_topic: str,
    max_ahead_ms: int,
) -> Any:
    """The records of ``stream`` the application can use; the others (``problem`` says why,
    or their event time is more than ``max_ahead_ms`` ahead of the wall clock) go to
    ``dead_letter_topic`` with KIP-1034 headers. Put it right after the source."""
    gated = stream.process_values(
        lambda: DeadLetterGate(problem, max_ahead_ms), named="dead-letter-gate"
    )
    branches = (
        gated.split(named="dead-letter-")
        .branch(lambda k, v: isinstance(v, DeadLetter), Branched.as_("rejected"))
        .default_branch(Branched.as_("accepted"))
    )
    branches["dead-letter-rejected"].map_values(lambda d: d.value).to(
        dead_letter_topic, Produced(key_serde=KEY_SERDE, value_serde=VALUE_SERDE)
    )
    return branches["dead-letter-accepted"]
