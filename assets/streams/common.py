"""What every stream application of the platform shares: serdes, event time, validation.

Records on the raw topics are JSON objects (see ``assets/generator.py``):

- ``orders``: key order id; ``order_id, customer_id, amount, region, location, event_time``
- ``customers`` (compacted): key customer id; ``customer_id, name, tier, known_locations,
  credit_limit``
- ``clicks``: ``user_id, page, event_time``

``event_time`` is epoch milliseconds; it is the stream time of every application. A JSON
value that decodes but misses a field the application needs goes to the application's
dead-letter topic (bytes that do not decode at all go there through the runtime's
``errors.dead.letter.queue.topic.name`` option).
"""

from __future__ import annotations

from typing import Any

from streaming import serdes
from streaming.time import FieldTimestampExtractor

KEY_SERDE = serdes.String()
VALUE_SERDE = serdes.Json()
EVENT_TIME = FieldTimestampExtractor("event_time")


class TableBootstrapExtractor:
    """Timestamp 0 for table updates, so a task applies customer profiles before it
    processes the orders that need them (Kafka Streams picks the lowest timestamp first)."""

    def extract(self, record: Any, partition_time: int) -> int:
        return 0


TABLE_TIME = TableBootstrapExtractor()


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def valid_order(key: Any, value: Any) -> bool:
    """An order the applications can use: the fields are there and have the right types."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("order_id"), str)
        and isinstance(value.get("customer_id"), str)
        and isinstance(value.get("region"), str)
        and _number(value.get("amount"))
        and _number(value.get("event_time"))
    )


def valid_click(key: Any, value: Any) -> bool:
    """A click with a user and an event time."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("user_id"), str)
        and _number(value.get("event_time"))
    )


def cents(amount: float) -> int:
    """Money as integer cents, so sums are exact and equal in stream and batch."""
    return round(amount * 100)
