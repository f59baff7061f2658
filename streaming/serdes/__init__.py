"""Serialisers and deserialisers with Kafka's binary encodings.

A serde is an object with ``serialize(topic, data) -> bytes | None`` and
``deserialize(topic, data) -> object``. ``None`` always maps to ``None`` (a tombstone),
like Kafka's serdes. The byte layouts match ``org.apache.kafka.common.serialization``
and Kafka Streams' windowed serdes, so topics written here are readable from Java.

The schema-registry serdes in Confluent's wire format, ``AvroSerde``, ``ProtobufSerde`` and
``JsonSchemaSerde`` (modules ``avro``, ``protobuf``, ``json_schema``, the registry
connection in ``registry``), are imported on first use: the registry client's libraries
take a second to import, which an application without them should not pay.
"""

from __future__ import annotations

import importlib
import struct
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from streaming.errors import SerializationError
from streaming.windowed import SessionWindow, TimeWindow, Windowed

if TYPE_CHECKING:
    from streaming.serdes.avro import AvroSerde as AvroSerde
    from streaming.serdes.json_schema import JsonSchemaSerde as JsonSchemaSerde
    from streaming.serdes.protobuf import ProtobufSerde as ProtobufSerde

_LONG = struct.Struct(">q")
_INT = struct.Struct(">i")
_SHORT = struct.Struct(">h")
_DOUBLE = struct.Struct(">d")
_FLOAT = struct.Struct(">f")
LONG_MAX = (1 << 63) - 1


class Serde(Protocol):
    """What every serde provides."""

    def serialize(self, topic: str | None, data: Any) -> bytes | None: ...

    def deserialize(self, topic: str | None, data: bytes | None) -> Any: ...


class _Struct:
    """A fixed-width number serde (Kafka's Long/Integer/Short/Double/Float serdes)."""

    _struct: struct.Struct
    _kind: str

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        try:
            return self._struct.pack(data)
        except struct.error as exc:
            raise SerializationError(f"{self._kind} serde cannot encode {data!r}: {exc}") from exc

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        if data is None:
            return None
        if len(data) != self._struct.size:
            raise SerializationError(
                f"Size of data received by {self._kind}Deserializer is not {self._struct.size}"
                f" (got {len(data)} bytes)"
            )
        return self._struct.unpack(data)[0]

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Long(_Struct):
    """64-bit big-endian signed integer (Kafka ``Serdes.Long()``)."""

    _struct = _LONG
    _kind = "Long"


class Integer(_Struct):
    """32-bit big-endian signed integer (Kafka ``Serdes.Integer()``)."""

    _struct = _INT
    _kind = "Integer"


class Short(_Struct):
    """16-bit big-endian signed integer (Kafka ``Serdes.Short()``)."""

    _struct = _SHORT
    _kind = "Short"


class Double(_Struct):
    """IEEE-754 double, big-endian (Kafka ``Serdes.Double()``)."""

    _struct = _DOUBLE
    _kind = "Double"


class Float(_Struct):
    """IEEE-754 float, big-endian (Kafka ``Serdes.Float()``)."""

    _struct = _FLOAT
    _kind = "Float"


class String:
    """UTF-8 text (Kafka ``Serdes.String()``)."""

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        if not isinstance(data, str):
            raise SerializationError(f"String serde expects str, got {type(data).__name__}")
        return data.encode()

    def deserialize(self, topic: str | None, data: bytes | None) -> str | None:
        if data is None:
            return None
        try:
            return data.decode()
        except UnicodeDecodeError as exc:
            raise SerializationError(f"invalid UTF-8: {exc}") from exc

    def __repr__(self) -> str:
        return "String()"


class Bytes:
    """Raw bytes, passed through (Kafka ``Serdes.ByteArray()``)."""

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        return None if data is None else bytes(data)

    def deserialize(self, topic: str | None, data: bytes | None) -> bytes | None:
        return data

    def __repr__(self) -> str:
        return "Bytes()"


ByteArray = Bytes


class Json:
    """JSON via orjson: the default key and value serde of the engine."""

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        try:
            return orjson.dumps(data)
        except TypeError as exc:
            raise SerializationError(f"JSON serde cannot encode {data!r}: {exc}") from exc

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise SerializationError(f"invalid JSON: {exc}") from exc

    def __repr__(self) -> str:
        return "Json()"


class TimeWindowedSerde:
    """``Windowed[K]`` for time windows: inner key bytes + 8-byte window start.

    The end is not on the wire; the deserializer derives it from ``window_size_ms``
    exactly like Kafka's ``TimeWindowedDeserializer``.
    """

    def __init__(self, inner: Serde | None, window_size_ms: int | None = None) -> None:
        self.inner = inner
        self.window_size_ms = window_size_ms

    def with_default(self, default: Serde) -> TimeWindowedSerde:
        """This serde, with ``default`` as the inner serde when none was given."""
        return self if self.inner is not None else TimeWindowedSerde(default, self.window_size_ms)

    def serialize(self, topic: str | None, data: Windowed | None) -> bytes | None:
        if data is None:
            return None
        key = self.inner.serialize(topic, data.key)  # type: ignore[union-attr]  # resolve() sets inner before use
        return (key or b"") + _LONG.pack(data.window.start)

    def deserialize(self, topic: str | None, data: bytes | None) -> Windowed | None:
        if data is None:
            return None
        if len(data) < 8:
            raise SerializationError("time-windowed key shorter than its 8-byte timestamp")
        start = _LONG.unpack_from(data, len(data) - 8)[0]
        if self.window_size_ms is None:
            end = LONG_MAX
        else:
            end = start + self.window_size_ms
            if end > LONG_MAX or end < start:
                end = LONG_MAX
        return Windowed(self.inner.deserialize(topic, data[:-8]), TimeWindow(start, end))  # type: ignore[union-attr]  # resolve() sets inner before use

    def __repr__(self) -> str:
        return f"TimeWindowedSerde({self.inner!r}, {self.window_size_ms})"


class SessionWindowedSerde:
    """``Windowed[K]`` for session windows: key bytes + 8-byte end + 8-byte start."""

    def __init__(self, inner: Serde | None) -> None:
        self.inner = inner

    def with_default(self, default: Serde) -> SessionWindowedSerde:
        """This serde, with ``default`` as the inner serde when none was given."""
        return self if self.inner is not None else SessionWindowedSerde(default)

    def serialize(self, topic: str | None, data: Windowed | None) -> bytes | None:
        if data is None:
            return None
        key = self.inner.serialize(topic, data.key) or b""  # type: ignore[union-attr]  # resolve() sets inner before use
        return key + _LONG.pack(data.window.end) + _LONG.pack(data.window.start)

    def deserialize(self, topic: str | None, data: bytes | None) -> Windowed | None:
        if data is None:
            return None
        if len(data) < 16:
            raise SerializationError("session-windowed key shorter than its 16-byte window")
        end = _LONG.unpack_from(data, len(data) - 16)[0]
        start = _LONG.unpack_from(data, len(data) - 8)[0]
        return Windowed(self.inner.deserialize(topic, data[:-16]), SessionWindow(start, end))  # type: ignore[union-attr]  # resolve() sets inner before use

    def __repr__(self) -> str:
        return f"SessionWindowedSerde({self.inner!r})"


def resolve(serde: Any, default: Serde) -> Serde:
    """The serde to use at run time: ``default`` for None, wrappers completed with it."""
    if serde is None:
        return default
    with_default = getattr(serde, "with_default", None)
    return with_default(default) if with_default is not None else serde


_BY_NAME: dict[str, type] = {
    "string": String,
    "long": Long,
    "integer": Integer,
    "int": Integer,
    "short": Short,
    "double": Double,
    "float": Float,
    "bytes": Bytes,
    "bytearray": Bytes,
    "json": Json,
}


def from_config(value: Any) -> Serde:
    """A serde from a config value: a serde object, a serde class, or a name like "string"."""
    if isinstance(value, str):
        name = value.rsplit(".", 1)[-1].rsplit("$", 1)[-1].lower().removesuffix("serde")
        try:
            return _BY_NAME[name]()
        except KeyError:
            raise ValueError(
                f"unknown serde name {value!r}; use one of {sorted(_BY_NAME)} or a serde object"
            ) from None
    if isinstance(value, type):
        return value()
    if hasattr(value, "serialize") and hasattr(value, "deserialize"):
        return value
    raise ValueError(f"{value!r} is not a serde: it needs serialize() and deserialize()")


#: the schema-registry serdes, imported on first use (see the module docstring)
_REGISTRY_SERDES = {
    "AvroSerde": "streaming.serdes.avro",
    "JsonSchemaSerde": "streaming.serdes.json_schema",
    "ProtobufSerde": "streaming.serdes.protobuf",
}


def __getattr__(name: str) -> Any:
    module = _REGISTRY_SERDES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
