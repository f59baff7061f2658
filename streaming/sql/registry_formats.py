"""Flink's ``avro-confluent`` format: a table's rows as Avro in Confluent's wire format, the
schema kept in a schema registry.

A sink writes each row with the schema Flink derives from the table's columns (the ``avro``
format's record, see ``formats.avro_schema``), registered under ``<topic>-value`` (or
``'avro-confluent.subject'``) on first use. A source reads each record with the schema its
id names, whatever version that is, and takes the table's columns from it by name: a column
the writer's schema lacks reads as NULL, a field the table does not declare is left out.

The options, as Flink names them (``value.``-prefixed with ``'value.format'``):
``'avro-confluent.url'`` (required), ``'avro-confluent.subject'``,
``'avro-confluent.basic-auth.user-info'``, ``'avro-confluent.basic-auth.credentials-source'``
and ``'avro-confluent.ssl.truststore.location'`` (a CA file, PEM, for the registry's TLS).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from streaming.errors import SerializationError
from streaming.sql.formats import AvroRows, ColumnType
from streaming.sql.timestamps import format_timestamp

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def format_option(options: Mapping[str, str], name: str, side: str = "value") -> str | None:
    """Option ``name`` (``avro-confluent.url``, ...) of the value (or ``side="key"``), given
    with the side's prefix (``'value.avro-confluent.url'``) or, for the value, bare."""
    prefixed = options.get(f"{side}.{name}")
    return prefixed if prefixed is not None or side == "key" else options.get(name)


def registry_problem(
    options: Mapping[str, str], side: str = "value", fmt: str = "avro-confluent"
) -> str:
    """What is missing from format ``fmt``'s options ('' if nothing)."""
    if not format_option(options, f"{fmt}.url", side):
        option = f"key.{fmt}.url" if side == "key" else f"{fmt}.url"
        return f"the {fmt!r} format needs {option!r} (the schema registry)"
    return ""


def registry_config(
    options: Mapping[str, str], side: str = "value", fmt: str = "avro-confluent"
) -> dict[str, Any]:
    """The serdes' registry settings from the table's options of format ``fmt``."""
    config: dict[str, Any] = {"schema.registry.url": format_option(options, f"{fmt}.url", side)}
    user_info = format_option(options, f"{fmt}.basic-auth.user-info", side)
    if user_info:
        config["basic.auth.user.info"] = user_info
        source = format_option(options, f"{fmt}.basic-auth.credentials-source", side)
        config["basic.auth.credentials.source"] = source or "USER_INFO"
    ca = format_option(options, f"{fmt}.ssl.truststore.location", side)
    if ca:
        config["ssl.ca.location"] = ca
    return config


def _subject_strategy(options: Mapping[str, str], side: str, fmt: str) -> Any:
    """The subject name strategy of ``'<fmt>.subject'``: that subject, else the topic's."""
    subject = format_option(options, f"{fmt}.subject", side)
    return "topic" if subject is None else (lambda ctx, record_name: subject)


class ConfluentAvroRows(AvroRows):
    """Rows as Confluent-framed Avro with a registry (Flink's ``avro-confluent``)."""

    def __init__(
        self, columns: Mapping[str, ColumnType], options: Mapping[str, str], *, is_key: bool = False
    ) -> None:
        from streaming.serdes.avro import AvroSerde

        super().__init__(columns)
        side = "key" if is_key else "value"
        registry = registry_config(options, side)
        strategy = _subject_strategy(options, side, "avro-confluent")
        self._writer = AvroSerde(
            registry, json.dumps(self.schema), subject_name_strategy=strategy, is_key=is_key
        )
        self._reader = AvroSerde(registry, subject_name_strategy=strategy, is_key=is_key)

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        record = {
            name: self._encodable(name, column, data.get(name))
            for name, column in self.columns.items()
        }
        return self._writer.serialize(topic, record)

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        record = self._reader.deserialize(topic, data)
        if record is None:
            return None
        if not isinstance(record, dict):
            raise SerializationError(f"an 'avro-confluent' value is not a record: {record!r}")
        row: dict[str, Any] = {}
        for name in self.columns:
            value = record.get(name)
            if isinstance(value, datetime):
                value = format_timestamp((value - _EPOCH) // timedelta(milliseconds=1))
            elif isinstance(value, Decimal):
                value = float(value)
            row[name] = value
        return row

    def __repr__(self) -> str:
        return f"ConfluentAvroRows({list(self.columns)})"


def json_schema(columns: Mapping[str, ColumnType]) -> dict[str, Any]:
    """The JSON Schema of a table's rows: an object of its columns, each typed by its kind
    (TIMESTAMP as the json format writes it, text or epoch ms), NULL allowed where the
    column is nullable."""
    kinds = {
        "STRING": ["string"],
        "BIGINT": ["integer"],
        "DOUBLE": ["number"],
        "BOOLEAN": ["boolean"],
        "TIMESTAMP": ["string", "integer"],
    }
    properties = {
        name: {"type": kinds[column.kind] + (["null"] if column.nullable else [])}
        for name, column in columns.items()
    }
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "record",
        "type": "object",
        "properties": properties,
        "required": [name for name, column in columns.items() if not column.nullable],
    }


class RegistryJsonRows:
    """Rows as JSON documents with a JSON Schema in a registry, Confluent-framed (the
    ``json-registry`` format of Confluent's Flink): a sink registers the schema derived from
    its columns; a source validates each document against the schema its id names and takes
    the columns from it by name."""

    def __init__(
        self, columns: Mapping[str, ColumnType], options: Mapping[str, str], *, is_key: bool = False
    ) -> None:
        from streaming.serdes.json_schema import JsonSchemaSerde

        self.columns = dict(columns)
        self.schema = json_schema(columns)
        side = "key" if is_key else "value"
        registry = registry_config(options, side, "json-registry")
        strategy = _subject_strategy(options, side, "json-registry")
        self._writer = JsonSchemaSerde(
            registry, json.dumps(self.schema), subject_name_strategy=strategy, is_key=is_key
        )
        self._reader = JsonSchemaSerde(registry, subject_name_strategy=strategy, is_key=is_key)

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        return self._writer.serialize(topic, {name: data.get(name) for name in self.columns})

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        document = self._reader.deserialize(topic, data)
        if document is None:
            return None
        if not isinstance(document, dict):
            raise SerializationError(f"a 'json-registry' value is not an object: {document!r}")
        return {name: document.get(name) for name in self.columns}

    def __repr__(self) -> str:
        return f"RegistryJsonRows({list(self.columns)})"
