"""ValueAndTimestamp and its byte format (Kafka's ValueAndTimestampSerializer/Deserializer)."""

from __future__ import annotations

from typing import Any, NamedTuple

_TS_SIZE = 8


class ValueAndTimestamp(NamedTuple):
    """A value paired with its record timestamp, the value type of timestamped stores."""

    value: Any
    timestamp: int

    @classmethod
    def make(cls, value: Any, timestamp: int) -> ValueAndTimestamp | None:
        """Kafka's ValueAndTimestamp.make: None when value is None."""
        return None if value is None else cls(value, timestamp)

    @staticmethod
    def get_value_or_null(vat: ValueAndTimestamp | None) -> Any:
        return None if vat is None else vat.value


def raw_value(data: bytes | None) -> bytes | None:
    """Plain value bytes of a timestamped value (strip the 8-byte timestamp)."""
    return None if data is None else data[_TS_SIZE:]


def raw_timestamp(data: bytes) -> int:
    """Timestamp of a timestamped value's bytes."""
    return int.from_bytes(data[:_TS_SIZE], "big", signed=True)


def with_timestamp(value: bytes | None, timestamp: int) -> bytes | None:
    """Prepend an 8-byte big-endian timestamp to plain value bytes (None stays None)."""
    if value is None:
        return None
    return timestamp.to_bytes(_TS_SIZE, "big", signed=True) + value


class ValueAndTimestampSerde:
    """Serde for ValueAndTimestamp: [8-byte BE timestamp][value bytes]; None stays None."""

    __slots__ = ("inner",)

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def serialize(self, topic: str | None, data: ValueAndTimestamp | None) -> bytes | None:
        if data is None:
            return None
        value = data.value
        if value is None:
            return None
        raw = self.inner.serialize(topic, value)
        if raw is None:
            return None
        return data.timestamp.to_bytes(_TS_SIZE, "big", signed=True) + raw

    def deserialize(self, topic: str | None, data: bytes | None) -> ValueAndTimestamp | None:
        if data is None:
            return None
        value = self.inner.deserialize(topic, data[_TS_SIZE:])
        if value is None:
            return None
        return ValueAndTimestamp(value, int.from_bytes(data[:_TS_SIZE], "big", signed=True))
