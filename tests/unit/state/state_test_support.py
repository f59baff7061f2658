"""Minimal serdes and store factories for the state-store tests (Kafka's byte formats)."""

from __future__ import annotations

import struct

from streaming.state import InMemoryStateStoreContext, Stores, ThreadCache

_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")


class IntSerde:
    """Kafka's IntegerSerializer: 4-byte big-endian two's complement."""

    def serialize(self, topic, data):
        return None if data is None else _INT.pack(data)

    def deserialize(self, topic, data):
        return None if data is None else _INT.unpack(data)[0]


class LongSerde:
    """Kafka's LongSerializer: 8-byte big-endian."""

    def serialize(self, topic, data):
        return None if data is None else _LONG.pack(data)

    def deserialize(self, topic, data):
        return None if data is None else _LONG.unpack(data)[0]


class StrSerde:
    """Kafka's StringSerializer: UTF-8."""

    def serialize(self, topic, data):
        return None if data is None else data.encode()

    def deserialize(self, topic, data):
        return None if data is None else data.decode()


class BytesSerde:
    """Identity serde for bytes."""

    def serialize(self, topic, data):
        return data

    def deserialize(self, topic, data):
        return data


def make_context(tmp_path, cache_bytes: int | None = None) -> InMemoryStateStoreContext:
    cache = None if cache_bytes is None else ThreadCache(cache_bytes)
    ctx = InMemoryStateStoreContext(
        state_dir=tmp_path,
        capture_changelog=True,
        cache=cache,
        default_key_serde=StrSerde(),
        default_value_serde=StrSerde(),
    )
    ctx.set_time(1)
    return ctx


def kv_supplier(kind: str, name: str = "kv", timestamped: bool = False):
    if kind == "memory":
        return Stores.in_memory_key_value_store(name)
    if timestamped:
        return Stores.persistent_timestamped_key_value_store(name)
    return Stores.persistent_key_value_store(name)


def window_supplier(kind: str, retention, size, dups=False, name="ws", timestamped=False):
    if kind == "memory":
        return Stores.in_memory_window_store(name, retention, size, dups)
    if timestamped:
        return Stores.persistent_timestamped_window_store(name, retention, size, dups)
    return Stores.persistent_window_store(name, retention, size, dups)


def session_supplier(kind: str, retention, name="ss"):
    if kind == "memory":
        return Stores.in_memory_session_store(name, retention)
    return Stores.persistent_session_store(name, retention)
