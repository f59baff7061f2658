"""``Change``: the (new, old) pair that flows between KTable processors."""

from __future__ import annotations

import struct
from typing import Any

_UINT32 = struct.Struct(">I")


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
    """Kafka Streams' ``ChangedSerializer`` layout for repartitioned table updates (KIP-904).

    ``old + 0x00`` | ``new + 0x01`` | ``uint32 len(new) + new + old + 0x02``.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def serialize(self, topic: str | None, change: Change | None) -> bytes | None:
        if change is None:
            return None
        new = self.inner.serialize(topic, change.new_value)
        old = self.inner.serialize(topic, change.old_value)
        if new is not None and old is not None:
            return _UINT32.pack(len(new)) + new + old + b"\x02"
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
        body = data[:-1]
        inner = self.inner.deserialize
        if flag == 2:
            (n,) = _UINT32.unpack_from(body)
            return Change(inner(topic, body[4 : 4 + n]), inner(topic, body[4 + n :]))
        if flag == 1:
            return Change(inner(topic, body), None)
        if flag == 0:
            return Change(None, inner(topic, body))
        raise ValueError(f"Encountered unknown flag {flag} in ChangedSerde")
