"""Reading what stream applications committed to a topic, as a downstream consumer does."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer


def read_committed(
    bootstrap: str, topic: str, until: Callable[[list[Any]], bool], timeout: float = 60.0
) -> list[Any]:
    """The committed messages of ``topic`` (``read_committed``, from the earliest offset)
    until ``until(messages)`` holds or ``timeout`` passed, then whatever else arrives within
    a second (so that a message beyond what was waited for shows up too)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    out: list[Any] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while not until(out) and time.monotonic() < deadline:
            out += [m for m in consumer.consume(num_messages=500, timeout=0.5) if m.error() is None]
        out += [m for m in consumer.consume(num_messages=500, timeout=1.0) if m.error() is None]
    finally:
        consumer.close()
    return out
