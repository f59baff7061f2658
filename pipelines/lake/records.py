"""Kafka records as typed lake rows, and the Arrow schema of each topic.

A topic's values are JSON, or Avro for the raw topics when the platform writes them so
(``pipelines.schemas.RawFormat``): ``value_decoder`` reads either into the same typed
record, and an Avro topic's columns take their Arrow types from its ``.avsc``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pipelines import domain
from pipelines.lake.paths import hour_of
from pipelines.schemas import JSON, RawFormat, avro_schema

_ARROW_TYPES = {
    "str": pa.string(),
    "float": pa.float64(),
    "int": pa.int64(),
    "bool": pa.bool_(),
    "list": pa.list_(pa.string()),
}
# Columns every lake table has besides the topic's own (Kafka metadata and validity).
META_FIELDS = (
    pa.field("_key", pa.string()),
    pa.field("_partition", pa.int32()),
    pa.field("_offset", pa.int64()),
    pa.field("_timestamp", pa.int64()),
    pa.field("_valid", pa.bool_()),
    pa.field("_raw", pa.string()),
)


@dataclass(frozen=True, slots=True)
class KafkaRecord:
    """The parts of a consumed Kafka record the lake keeps."""

    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


#: Avro primitive type -> Arrow type (the lake's columns of an Avro topic)
_AVRO_ARROW_TYPES = {
    "string": pa.string(),
    "double": pa.float64(),
    "float": pa.float32(),
    "long": pa.int64(),
    "int": pa.int32(),
    "boolean": pa.bool_(),
    "bytes": pa.binary(),
}

#: a value's bytes -> the typed record of its topic, or None when it is not a valid one
Decoder = Callable[[bytes | None], dict[str, Any] | None]


def avro_arrow_type(avro_type: Any) -> pa.DataType:
    """The Arrow type of an Avro field type (a nullable union: its other branch)."""
    if isinstance(avro_type, list):
        branches = [t for t in avro_type if t != "null"]
        if len(branches) != 1:
            raise ValueError(f"the lake has no column type for the union {avro_type}")
        return avro_arrow_type(branches[0])
    if isinstance(avro_type, dict):
        if avro_type.get("type") == "array":
            return pa.list_(avro_arrow_type(avro_type["items"]))
        return avro_arrow_type(avro_type["type"])
    return _AVRO_ARROW_TYPES[avro_type]


def arrow_schema(topic: str, raw_format: RawFormat = JSON) -> pa.Schema:
    """The Arrow schema of ``topic``'s lake table (``value`` JSON string for unknown topics;
    an Avro topic's columns typed by its schema)."""
    schema = domain.SCHEMAS.get(topic)
    if raw_format.is_avro(topic):
        fields = [
            pa.field(f["name"], avro_arrow_type(f["type"])) for f in avro_schema(topic)["fields"]
        ]
    elif schema is not None:
        fields = [pa.field(name, _ARROW_TYPES[kind]) for name, kind in schema.items()]
    else:
        fields = [pa.field("value", pa.string())]
    return pa.schema([*fields, *META_FIELDS])


def value_decoder(
    topic: str,
    raw_format: RawFormat = JSON,
    kafka_topic: str | None = None,
    max_stall_s: float = 60.0,
) -> Decoder:
    """How the values of ``topic`` (read from ``kafka_topic``, default ``topic``) become
    typed records: JSON parsed, or Avro read through the registry. An Avro value that does
    not decode is invalid, like undecodable JSON; a registry unreachable for ``max_stall_s``
    raises ``RuntimeError`` (the run fails: the records are fine)."""
    if not raw_format.is_avro(topic):
        return lambda value: domain.parse_record(topic, value)
    from streaming.errors import SerializationError
    from streaming.serdes.registry import is_unavailable

    serde = raw_format.reader_serde(topic, max_stall_s=max_stall_s)
    source = kafka_topic or topic

    def decode(value: bytes | None) -> dict[str, Any] | None:
        if value is None:
            return None
        try:
            data = serde.deserialize(source, value)
        except SerializationError as exc:
            if exc.__cause__ is not None and is_unavailable(exc.__cause__):
                raise RuntimeError(f"landing {source}: {exc}") from exc
            return None
        return domain.typed_record(topic, data)

    return decode


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="backslashreplace")


def to_row(
    topic: str, record: KafkaRecord, decode: Decoder | None = None
) -> tuple[str, dict[str, Any]]:
    """``(event_hour, row)`` of ``record`` (its value read by ``decode``, JSON by default);
    invalid records keep their raw text."""
    parsed = (decode or value_decoder(topic))(record.value)
    schema = domain.SCHEMAS.get(topic)
    if schema is None:
        row: dict[str, Any] = {"value": _text(record.value)}
    else:
        row = dict.fromkeys(schema) if parsed is None else parsed
    row["_key"] = _text(record.key)
    row["_partition"] = record.partition
    row["_offset"] = record.offset
    row["_timestamp"] = record.timestamp
    row["_valid"] = parsed is not None
    row["_raw"] = None if parsed is not None else _text(record.value)
    time_column = domain.EVENT_TIME_COLUMN.get(topic, "event_time")
    ts = parsed.get(time_column) if parsed is not None else None
    return hour_of(ts if isinstance(ts, int) else record.timestamp), row
