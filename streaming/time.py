"""Durations and timestamp extractors.

Durations are int milliseconds or ``timedelta``. A timestamp extractor decides the
event time of a consumed record, like Kafka Streams' ``TimestampExtractor``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Protocol


def to_millis(
    duration: int | timedelta, what: str = "duration", *, allow_negative: bool = False
) -> int:
    """Milliseconds from an int or a timedelta; negative durations are rejected unless
    ``allow_negative``."""
    if isinstance(duration, timedelta):
        ms = duration // timedelta(milliseconds=1)
    elif isinstance(duration, int) and not isinstance(duration, bool):
        ms = duration
    else:
        raise TypeError(f"{what} must be int milliseconds or a timedelta, got {duration!r}")
    if ms < 0 and not allow_negative:
        raise ValueError(f"{what} must not be negative, got {ms} ms")
    return ms


class ConsumedRecord(Protocol):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: Any
    value: Any


class TimestampExtractor(Protocol):
    def extract(self, record: ConsumedRecord, partition_time: int) -> int: ...


class RecordTimestampExtractor:
    """The record's own timestamp (Kafka's ``FailOnInvalidTimestamp`` without the failure).

    Records with a negative timestamp are dropped by the source, as Kafka Streams does
    with ``LogAndSkipOnInvalidTimestamp``.
    """

    def extract(self, record: ConsumedRecord, partition_time: int) -> int:
        return record.timestamp


class WallclockTimestampExtractor:
    """Processing time: the current wall-clock time."""

    def __init__(self, clock: Any = None) -> None:
        import time

        self._clock = clock or (lambda: int(time.time() * 1000))

    def extract(self, record: ConsumedRecord, partition_time: int) -> int:
        return self._clock()


class FieldTimestampExtractor:
    """Event time from a field of a dict value (e.g. JSON ``{"ts": 1700000000000}``).

    Falls back to the record timestamp when the field is missing or not a number.
    """

    def __init__(self, field: str) -> None:
        self.field = field

    def extract(self, record: ConsumedRecord, partition_time: int) -> int:
        value = record.value
        if isinstance(value, dict):
            ts = value.get(self.field)
            if isinstance(ts, int | float) and not isinstance(ts, bool):
                return int(ts)
        return record.timestamp


def as_extractor(extractor: Any) -> TimestampExtractor | None:
    """Accept an extractor object or a plain ``fn(record, partition_time) -> int``."""
    if extractor is None or hasattr(extractor, "extract"):
        return extractor

    class _Fn:
        def extract(self, record: ConsumedRecord, partition_time: int) -> int:
            return extractor(record, partition_time)

    return _Fn()
