"""Kafka records as typed lake rows, and the Arrow schema of each topic."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pipelines import domain
from pipelines.lake.paths import hour_of

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


def arrow_schema(topic: str) -> pa.Schema:
    """The Arrow schema of ``topic``'s lake table (``value`` JSON string for unknown topics)."""
    schema = domain.SCHEMAS.get(topic)
    fields = (
        [pa.field(name, _ARROW_TYPES[kind]) for name, kind in schema.items()]
        if schema is not None
        else [pa.field("value", pa.string())]
    )
    return pa.schema([*fields, *META_FIELDS])


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="backslashreplace")


def to_row(topic: str, record: KafkaRecord) -> tuple[str, dict[str, Any]]:
    """``(event_hour, row)`` of ``record``; invalid records keep their raw text."""
    parsed = domain.parse_record(topic, record.value)
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
