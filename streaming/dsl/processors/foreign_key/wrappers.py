"""The foreign-key join's messages and keys, in Kafka's byte formats.

- ``SubscriptionWrapper`` (subscription topic value, subscription store value):
  ``{1 bit hash-is-null}{7 bits version}{instruction}{16-byte hash?}{primary key}{int32 partition}``
- ``SubscriptionResponseWrapper`` (response topic value):
  ``{1 bit hash-is-null}{7 bits version}{16-byte hash?}{foreign value?}``
- ``CombinedKeySchema``: subscription store keys ``{int32 len(fk)}{fk}{pk}``, prefix-scanned by
  ``{int32 len(fk)}{fk}``.

A serde whose inner serde is None takes the default serde at run time (``with_default``).
"""

from __future__ import annotations

import enum
import struct
from typing import Any

_INT = struct.Struct(">i")
_HASH = struct.Struct(">qq")

SUBSCRIPTION_VERSION = 1
RESPONSE_VERSION = 0


class Instruction(enum.IntEnum):
    """What the foreign side does with a subscription (Kafka's ``SubscriptionWrapper.Instruction``)."""

    DELETE_KEY_NO_PROPAGATE = 0  # send nothing
    DELETE_KEY_AND_PROPAGATE = 1  # send (k, null)
    PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE = 2  # send (k, fk-val), or (k, null) without one
    PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE = 3  # send (k, fk-val) only if there is one


class SubscriptionWrapper:
    """A left row's subscription to a foreign key: its value hash, instruction and key."""

    __slots__ = ("hash", "instruction", "primary_key", "primary_partition", "version")

    def __init__(
        self,
        hash: tuple[int, int] | None,
        instruction: Instruction,
        primary_key: Any,
        primary_partition: int | None,
        version: int = SUBSCRIPTION_VERSION,
    ) -> None:
        if primary_key is None:
            raise ValueError("primaryKey cannot be null. Required by downstream processor.")
        self.hash = hash
        self.instruction = instruction
        self.primary_key = primary_key
        self.primary_partition = primary_partition
        self.version = version

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SubscriptionWrapper) and (
            self.hash,
            self.instruction,
            self.primary_key,
            self.primary_partition,
            self.version,
        ) == (
            other.hash,
            other.instruction,
            other.primary_key,
            other.primary_partition,
            other.version,
        )

    def __repr__(self) -> str:
        return (
            f"SubscriptionWrapper(version={self.version}, primaryKey={self.primary_key!r}, "
            f"instruction={self.instruction.name}, hash={self.hash}, "
            f"primaryPartition={self.primary_partition})"
        )


class SubscriptionResponseWrapper:
    """The foreign row's value sent back to a subscriber, with the subscription's hash."""

    __slots__ = ("foreign_value", "original_value_hash", "primary_partition", "version")

    def __init__(
        self,
        original_value_hash: tuple[int, int] | None,
        foreign_value: Any,
        primary_partition: int | None,
        version: int = RESPONSE_VERSION,
    ) -> None:
        self.original_value_hash = original_value_hash
        self.foreign_value = foreign_value
        self.primary_partition = primary_partition
        self.version = version

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SubscriptionResponseWrapper) and (
            self.original_value_hash,
            self.foreign_value,
            self.version,
        ) == (other.original_value_hash, other.foreign_value, other.version)

    def __repr__(self) -> str:
        return (
            f"SubscriptionResponseWrapper(version={self.version}, "
            f"foreignValue={self.foreign_value!r}, originalValueHash={self.original_value_hash})"
        )


class SubscriptionWrapperSerde:
    """Kafka's ``SubscriptionWrapperSerde`` (version 1 layout); the inner serde is the primary key's.

    Without a primary key serde it uses the default *key* serde, which the join's processors
    set with ``set_if_unset`` at init (Kafka's ``setIfUnset(SerdeGetter)``): the sink, source
    and store that share this object only know the default value serde.
    """

    def __init__(self, primary_key_serde: Any, pseudo_topic: str | None = None) -> None:
        self.primary_key_serde = primary_key_serde
        self.pseudo_topic = pseudo_topic

    def with_default(self, default: Any) -> SubscriptionWrapperSerde:
        return self

    def set_if_unset(self, default_key_serde: Any, pseudo_topic: str) -> None:
        if self.primary_key_serde is None:
            self.primary_key_serde = default_key_serde
        if self.pseudo_topic is None:
            self.pseudo_topic = pseudo_topic

    def serialize(self, topic: str | None, data: SubscriptionWrapper | None) -> bytes | None:
        if data is None:
            return None
        pk = self.primary_key_serde.serialize(self.pseudo_topic, data.primary_key)
        version = data.version
        if data.hash is None:
            head = bytes((version | 0x80, int(data.instruction)))
        else:
            head = bytes((version, int(data.instruction))) + _HASH.pack(*data.hash)
        if version == 0:
            return head + pk
        partition = data.primary_partition
        return head + pk + _INT.pack(0 if partition is None else partition)

    def deserialize(self, topic: str | None, data: bytes | None) -> SubscriptionWrapper | None:
        if data is None:
            return None
        version = data[0] & 0x7F
        hash_is_null = bool(data[0] & 0x80)
        instruction = Instruction(data[1])
        pos = 2
        hash_ = None
        if not hash_is_null:
            hash_ = _HASH.unpack_from(data, 2)
            pos += 16
        end = len(data) - 4 if version > 0 else len(data)
        pk = self.primary_key_serde.deserialize(self.pseudo_topic, data[pos:end])
        partition = _INT.unpack_from(data, end)[0] if version > 0 else None
        return SubscriptionWrapper(hash_, instruction, pk, partition, version)


class SubscriptionResponseWrapperSerde:
    """Kafka's ``SubscriptionResponseWrapperSerde``; the inner serde is the foreign table's value's."""

    def __init__(self, foreign_value_serde: Any) -> None:
        self.foreign_value_serde = foreign_value_serde

    def with_default(self, default: Any) -> SubscriptionResponseWrapperSerde:
        if self.foreign_value_serde is not None:
            return self
        return SubscriptionResponseWrapperSerde(default)

    def serialize(
        self, topic: str | None, data: SubscriptionResponseWrapper | None
    ) -> bytes | None:
        if data is None:
            return None
        value = data.foreign_value
        body = b"" if value is None else self.foreign_value_serde.serialize(topic, value) or b""
        if data.original_value_hash is None:
            return bytes((data.version | 0x80,)) + body
        return bytes((data.version,)) + _HASH.pack(*data.original_value_hash) + body

    def deserialize(
        self, topic: str | None, data: bytes | None
    ) -> SubscriptionResponseWrapper | None:
        if data is None:
            return None
        version = data[0] & 0x7F
        pos = 1
        hash_ = None
        if not data[0] & 0x80:
            hash_ = _HASH.unpack_from(data, 1)
            pos = 17
        value = None
        if len(data) > pos:
            value = self.foreign_value_serde.deserialize(topic, data[pos:])
        return SubscriptionResponseWrapper(hash_, value, None, version)


class CombinedKeySchema:
    """Subscription store keys: the foreign key's bytes (length-prefixed) then the primary key's."""

    def __init__(
        self,
        foreign_key_serde: Any,
        primary_key_serde: Any,
        foreign_key_topic: str | None = None,
        primary_key_topic: str | None = None,
    ) -> None:
        self.foreign_key_serde = foreign_key_serde
        self.primary_key_serde = primary_key_serde
        self.foreign_key_topic = foreign_key_topic
        self.primary_key_topic = primary_key_topic

    def init(self, default_key_serde: Any, foreign_key_topic: str, primary_key_topic: str) -> None:
        """Resolve missing serdes to the default key serde and set the pseudo topics."""
        self.foreign_key_topic = foreign_key_topic
        self.primary_key_topic = primary_key_topic
        if self.foreign_key_serde is None:
            self.foreign_key_serde = default_key_serde
        if self.primary_key_serde is None:
            self.primary_key_serde = default_key_serde

    def to_bytes(self, foreign_key: Any, primary_key: Any) -> bytes:
        fk = self.foreign_key_serde.serialize(self.foreign_key_topic, foreign_key)
        pk = self.primary_key_serde.serialize(self.primary_key_topic, primary_key)
        return _INT.pack(len(fk)) + fk + pk

    def prefix_bytes(self, foreign_key: Any) -> bytes:
        fk = self.foreign_key_serde.serialize(self.foreign_key_topic, foreign_key)
        return _INT.pack(len(fk)) + fk

    def from_bytes(self, data: bytes) -> tuple[Any, Any]:
        """``(foreign key, primary key)`` of a subscription store key."""
        (n,) = _INT.unpack_from(data)
        fk = self.foreign_key_serde.deserialize(self.foreign_key_topic, data[4 : 4 + n])
        pk = self.primary_key_serde.deserialize(self.primary_key_topic, data[4 + n :])
        return fk, pk
