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
    """Option ``name`` (``avro-confluent.*``) of the value (or ``side="key"``), given with
    the side's prefix (``'value.avro-confluent.url'``) or, for the value, bare."""
    prefixed = options.get(f"{side}.{name}")
    return prefixed if prefixed is not None or side == "key" else options.get(name)


def registry_problem(options: Mapping[str, str], side: str = "value") -> str:
    """What is missing from the format's options ('' if nothing)."""
    if not format_option(options, "avro-confluent.url", side):
        option = "key.avro-confluent.url" if side == "key" else "avro-confluent.url"
        return f"the 'avro-confluent' format needs {option!r} (the schema registry)"
    return ""


def registry_config(options: Mapping[str, str], side: str = "value") -> dict[str, Any]:
    """The serdes' registry settings from the table's options."""
    config: dict[str, Any] = {
        "schema.registry.url": format_option(options, "avro-confluent.url", side)
    }
    user_info = format_option(options, "avro-confluent.basic-auth.user-info", side)
    if user_info:
        config["basic.auth.user.info"] = user_info
        source = format_option(options, "avro-confluent.basic-auth.credentials-source", side)
        config["basic.auth.credentials.source"] = source or "USER_INFO"
    ca = format_option(options, "avro-confluent.ssl.truststore.location", side)
    if ca:
        config["ssl.ca.location"] = ca
    return config


class ConfluentAvroRows(AvroRows):
    """Rows as Confluent-framed Avro with a registry (Flink's ``avro-confluent``)."""

    def __init__(
        self, columns: Mapping[str, ColumnType], options: Mapping[str, str], *, is_key: bool = False
    ) -> None:
        from streaming.serdes.avro import AvroSerde

        super().__init__(columns)
        side = "key" if is_key else "value"
        registry = registry_config(options, side)
        subject = format_option(options, "avro-confluent.subject", side)
        strategy: Any = "topic" if subject is None else (lambda ctx, record_name: subject)
        self.subject = subject
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
