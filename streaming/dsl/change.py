"""``Change``: the (new, old) pair that flows between KTable processors."""

from __future__ import annotations

from typing import Any


def _varint(value: int) -> bytes:
    """Kafka's ``ByteUtils.writeVarint``: zig-zag, then 7 bits per byte, low group first."""
    n = ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_varint(data: bytes) -> tuple[int, int]:
    """Kafka's ``ByteUtils.readVarint``: (value, bytes read)."""
    n = shift = pos = 0
    while True:
        byte = data[pos]
        pos += 1
        n |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (n >> 1) ^ -(n & 1), pos
        shift += 7
        if shift > 28:
            raise ValueError("varint is too long")


class Change:
    """A table update: the new value and (when old values are sent) the previous one."""

    __slots__ = ("is_latest", "new_value", "old_value")

    def __init__(self, new_value: Any, old_value: Any, is_latest: bool = True) -> None:
        self.new_value = new_value
        self.old_value = old_value
        self.is_latest = is_latest

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Change)
            and self.new_value == other.new_value
            and self.old_value == other.old_value
        )

    def __repr__(self) -> str:
        return f"({self.new_value!r}<-{self.old_value!r})"


class ChangedSerde:
    """Kafka Streams' ``ChangedSerializer`` layout for repartitioned table updates (Kafka 4).

    Written: ``old + 0x00`` | ``new + 0x01`` | ``varint len(new) + new + old + 0x02``; read
    as well, with an ``is_latest`` byte before the flag: flags 3, 4 and 5.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def serialize(self, topic: str | None, change: Change | None) -> bytes | None:
        if change is None:
            return None
        new = self.inner.serialize(topic, change.new_value)
        old = self.inner.serialize(topic, change.old_value)
        if new is not None and old is not None:
            return _varint(len(new)) + new + old + b"\x02"
        if new is not None:
            return new + b"\x01"
        if old is not None:
            return old + b"\x00"
        raise ValueError(
            "Both old and new values are null in ChangeSerializer, which is not allowed."
        )

    def deserialize(self, topic: str | None, data: bytes | None) -> Change | None:
        if data is None:
            return None
        flag = data[-1]
        is_latest = True
        if flag >= 3:
            latest = data[-2]
            if latest not in (0, 1):
                raise ValueError(f"Encountered unexpected byte value {latest} for isLatestFlag")
            is_latest = latest == 1
            flag -= 3
            body = data[:-2]
        else:
            body = data[:-1]
        inner = self.inner.deserialize
        if flag == 2:
            n, pos = _read_varint(body)
            return Change(
                inner(topic, body[pos : pos + n]), inner(topic, body[pos + n :]), is_latest
            )
        if flag == 1:
            return Change(inner(topic, body), None, is_latest)
        if flag == 0:
            return Change(None, inner(topic, body), is_latest)
        raise ValueError(f"Encountered unknown flag {data[-1]} in ChangedSerde")
