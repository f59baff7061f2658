"""Keys and values of the stream-stream outer-join store (Kafka's TimestampedKeyAndJoinSide,
LeftOrRightValue and their serdes).

Byte layouts are Kafka's: a key is ``[timestamp: 8 bytes big-endian][1 = left, 0 = right][key
bytes]`` (so the store iterates by timestamp, then right before left, then key bytes); a value
is ``[1 = left, 0 = right][value bytes]``.
"""

from __future__ import annotations

import struct
from typing import Any

_LONG = struct.Struct(">q")


class TimestampedKeyAndJoinSide:
    """A record key with its timestamp and the join side it came from."""

    __slots__ = ("key", "left_side", "timestamp")

    def __init__(self, left_side: bool, key: Any, timestamp: int) -> None:
        if key is None:
            raise ValueError("key cannot be null")
        self.left_side = left_side
        self.key = key
        self.timestamp = timestamp

    @staticmethod
    def make_left(key: Any, timestamp: int) -> TimestampedKeyAndJoinSide:
        """The key of a left-side record."""
        return TimestampedKeyAndJoinSide(True, key, timestamp)

    @staticmethod
    def make_right(key: Any, timestamp: int) -> TimestampedKeyAndJoinSide:
        """The key of a right-side record."""
        return TimestampedKeyAndJoinSide(False, key, timestamp)

    def is_left_side(self) -> bool:
        """True for a left-side record."""
        return self.left_side

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, TimestampedKeyAndJoinSide)
            and self.left_side == other.left_side
            and self.timestamp == other.timestamp
            and self.key == other.key
        )

    def __hash__(self) -> int:
        return hash((self.left_side, self.key, self.timestamp))

    def __repr__(self) -> str:
        return f"<{'left' if self.left_side else 'right'},{self.key}:{self.timestamp}>"


class LeftOrRightValue:
    """The value of a not-yet-joined record: exactly one of ``left_value``/``right_value``."""

    __slots__ = ("left_value", "right_value")

    def __init__(self, left_value: Any, right_value: Any) -> None:
        if left_value is not None and right_value is not None:
            raise ValueError("Only one value cannot be null")
        if left_value is None and right_value is None:
            raise ValueError("Only one value can be null")
        self.left_value = left_value
        self.right_value = right_value

    @staticmethod
    def make_left_value(value: Any) -> LeftOrRightValue:
        """A left-side value."""
        return LeftOrRightValue(value, None)

    @staticmethod
    def make_right_value(value: Any) -> LeftOrRightValue:
        """A right-side value."""
        return LeftOrRightValue(None, value)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, LeftOrRightValue)
            and self.left_value == other.left_value
            and self.right_value == other.right_value
        )

    def __hash__(self) -> int:
        return hash((self.left_value, self.right_value))

    def __repr__(self) -> str:
        if self.left_value is not None:
            return f"<left,{self.left_value}>"
        return f"<right,{self.right_value}>"


class TimestampedKeyAndJoinSideSerde:
    """Serde of ``TimestampedKeyAndJoinSide`` around the record key serde."""

    def __init__(self, key_serde: Any) -> None:
        self.key_serde = key_serde

    def serialize(self, topic: str | None, data: TimestampedKeyAndJoinSide | None) -> bytes | None:
        if data is None:
            return None
        key_bytes = self.key_serde.serialize(topic, data.key)
        return _LONG.pack(data.timestamp) + (b"\x01" if data.left_side else b"\x00") + key_bytes

    def deserialize(
        self, topic: str | None, data: bytes | None
    ) -> TimestampedKeyAndJoinSide | None:
        if data is None:
            return None
        return TimestampedKeyAndJoinSide(
            data[8] == 1, self.key_serde.deserialize(topic, data[9:]), _LONG.unpack_from(data)[0]
        )


class LeftOrRightValueSerde:
    """Serde of ``LeftOrRightValue`` around the left and right value serdes."""

    def __init__(self, left_serde: Any, right_serde: Any) -> None:
        self.left_serde = left_serde
        self.right_serde = right_serde

    def serialize(self, topic: str | None, data: LeftOrRightValue | None) -> bytes | None:
        if data is None:
            return None
        if data.left_value is not None:
            raw = self.left_serde.serialize(topic, data.left_value)
            flag = b"\x01"
        else:
            raw = self.right_serde.serialize(topic, data.right_value)
            flag = b"\x00"
        return None if raw is None else flag + raw

    def deserialize(self, topic: str | None, data: bytes | None) -> LeftOrRightValue | None:
        if not data:
            return None
        if data[0] == 1:
            return LeftOrRightValue(self.left_serde.deserialize(topic, data[1:]), None)
        return LeftOrRightValue(None, self.right_serde.deserialize(topic, data[1:]))
