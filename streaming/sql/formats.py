"""Value formats of SQL tables: how a row travels in a Kafka record's value.

Inside a compiled topology a row is a dict of columns shaped as the JSON format reads it
(TIMESTAMP as ``'yyyy-MM-dd HH:mm:ss.SSS'`` text or epoch ms, DECIMAL as a float); each
format turns such rows into bytes and back, at the sources and sinks only:

- ``json``: one JSON object per value (Flink's ``json``); TIMESTAMP(3) columns written as
  ``'yyyy-MM-dd HH:mm:ss.SSS'``, or ``'yyyy-MM-ddTHH:mm:ss.SSS'`` with
  ``'json.timestamp-format.standard' = 'ISO-8601'`` (both are read);
- ``csv``: the columns in declared order, RFC 4180 quoting where needed, no line end, NULL
  as an empty field or ``'csv.null-literal'`` (Flink's ``csv``);
- ``avro``: Avro binary without a schema registry, the schema derived from the columns as
  Flink's ``avro`` format derives it (a record of nullable fields; TIMESTAMP(3) as
  ``timestamp-millis``, DECIMAL(p, s) as ``bytes``/``decimal``);
- ``raw``: a table of one STRING column, its UTF-8 text (NULL is a null value);
- ``protobuf``: the binary messages of a generated Protobuf class,
  ``'protobuf.message-class-name'`` (see ``protobuf_format``);
- ``avro-confluent``: the ``avro`` format's records in Confluent's wire format, their
  schema in a schema registry (``'avro-confluent.url'``; see ``registry_formats``);
- ``json-registry``: JSON documents with a JSON Schema in a registry, Confluent-framed
  (``'json-registry.url'``).

Bytes a format cannot read raise ``SerializationError``, so the application's
deserialization handler (and its dead-letter topic) sees them.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from sqlglot import exp

from streaming import serdes
from streaming.errors import SerializationError
from streaming.sql.timestamps import format_timestamp, parse_timestamp

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

#: the value kinds a column may have
KINDS = ("STRING", "BIGINT", "DOUBLE", "BOOLEAN", "TIMESTAMP")

VALUE_FORMATS = ("json", "csv", "avro", "raw", "protobuf", "avro-confluent", "json-registry")
#: the formats whose schemas live in a schema registry
REGISTRY_FORMATS = ("avro-confluent", "json-registry")
#: the options each format reads (besides 'format' / 'value.format'), as Flink names them
FORMAT_OPTIONS = {
    "csv": ("csv.field-delimiter", "csv.quote-character", "csv.null-literal"),
    "json": ("json.timestamp-format.standard",),
    "protobuf": ("protobuf.message-class-name", "protobuf.read-default-values"),
    **{
        fmt: (
            f"{fmt}.url",
            f"{fmt}.subject",
            f"{fmt}.basic-auth.user-info",
            f"{fmt}.basic-auth.credentials-source",
            f"{fmt}.ssl.truststore.location",
        )
        for fmt in ("avro-confluent", "json-registry")
    },
}
TIMESTAMP_STANDARDS = ("SQL", "ISO-8601")


@dataclass(frozen=True)
class ColumnType:
    """A column's value kind (STRING, BIGINT, DOUBLE, BOOLEAN, TIMESTAMP) and its declared
    SQL type, which binary formats need (INT and BIGINT, FLOAT and DOUBLE, DECIMAL's
    precision and scale are one kind but encode differently)."""

    kind: str
    declared: str = ""
    precision: int | None = None
    scale: int | None = None
    nullable: bool = True

    @classmethod
    def of(cls, kind: str, data_type: exp.DataType, nullable: bool = True) -> ColumnType:
        name = data_type.this.name if hasattr(data_type.this, "name") else str(data_type.this)
        params = [int(p.name) for p in data_type.expressions if p.name.isdigit()]
        precision = params[0] if params else None
        scale = params[1] if len(params) > 1 else None
        return cls(kind, name.upper(), precision, scale, nullable)


def value_serde(fmt: str, columns: Mapping[str, ColumnType], options: Mapping[str, str]) -> Any:
    """The serde of a table's values in format ``fmt`` (one of ``VALUE_FORMATS``)."""
    if fmt == "json":
        if options.get("json.timestamp-format.standard", "SQL") == "ISO-8601":
            return IsoTimestampJson(columns)
        return serdes.Json()
    if fmt == "csv":
        return CsvRows(
            columns,
            delimiter=options.get("csv.field-delimiter", ","),
            quote=options.get("csv.quote-character", '"'),
            null_literal=options.get("csv.null-literal"),
        )
    if fmt == "avro":
        return AvroRows(columns)
    if fmt == "raw":
        return RawRows(columns)
    if fmt == "protobuf":
        from streaming.sql.protobuf_format import ProtobufRows

        return ProtobufRows(columns, options)
    if fmt == "avro-confluent":
        from streaming.sql.registry_formats import ConfluentAvroRows

        return ConfluentAvroRows(columns, options)
    if fmt == "json-registry":
        from streaming.sql.registry_formats import RegistryJsonRows

        return RegistryJsonRows(columns, options)
    raise ValueError(f"unknown value format {fmt!r}: one of {', '.join(VALUE_FORMATS)}")


def format_problem(fmt: str, columns: Mapping[str, ColumnType], options: Mapping[str, str]) -> str:
    """What is wrong with format ``fmt`` for these columns and options ('' if nothing)."""
    if fmt not in VALUE_FORMATS:
        return f"unsupported 'format' {fmt!r}: use one of {', '.join(VALUE_FORMATS)}"
    standard = options.get("json.timestamp-format.standard", "SQL")
    if standard not in TIMESTAMP_STANDARDS:
        return (
            f"'json.timestamp-format.standard' is {standard!r}: use one of "
            f"{', '.join(TIMESTAMP_STANDARDS)}"
        )
    if fmt == "raw" and (len(columns) != 1 or next(iter(columns.values())).kind != "STRING"):
        return "the 'raw' format holds one STRING column"
    if fmt == "csv":
        for option in ("csv.field-delimiter", "csv.quote-character"):
            if option in options and len(options[option]) != 1:
                return f"{option!r} must be one character"
    if fmt in ("csv", "avro", *REGISTRY_FORMATS):
        for name, column in columns.items():
            if column.kind not in KINDS:
                return f"column {name}: declare its type, the {fmt!r} format needs it"
    if fmt == "protobuf":
        from streaming.sql.protobuf_format import protobuf_problem

        return protobuf_problem(columns, options)
    if fmt in REGISTRY_FORMATS:
        from streaming.sql.registry_formats import registry_problem

        problem = registry_problem(options, "value", fmt)
        if problem:
            return problem
    if fmt in ("avro", "avro-confluent"):
        for name, column in columns.items():
            if column.declared == "DECIMAL" and column.precision is None:
                return f"column {name}: an Avro DECIMAL needs a precision, e.g. DECIMAL(10, 2)"
    return ""


def _cell(column: ColumnType, text: str) -> Any:
    """A CSV field's value for ``column``."""
    kind = column.kind
    if kind == "STRING":
        return text
    text = text.strip()
    if kind == "BIGINT":
        return int(text)
    if kind == "DOUBLE":
        return float(text)
    if kind == "BOOLEAN":
        lowered = text.lower()
        if lowered not in ("true", "false"):
            raise ValueError(f"not a BOOLEAN: {text!r}")
        return lowered == "true"
    return text  # TIMESTAMP: kept as written, like JSON's text


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class IsoTimestampJson(serdes.Json):
    """JSON rows whose TIMESTAMP columns are written as ISO-8601 (``T`` between date and
    time, as Flink's ``'json.timestamp-format.standard' = 'ISO-8601'``)."""

    def __init__(self, columns: Mapping[str, ColumnType]) -> None:
        self.timestamps = [name for name, column in columns.items() if column.kind == "TIMESTAMP"]

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if isinstance(data, dict) and self.timestamps:
            data = dict(data)
            for name in self.timestamps:
                millis = parse_timestamp(data.get(name))
                if millis is not None:
                    data[name] = format_timestamp(millis).replace(" ", "T", 1)
        return super().serialize(topic, data)

    def __repr__(self) -> str:
        return f"IsoTimestampJson({self.timestamps})"


class CsvRows:
    """Rows as CSV lines (Flink's ``csv`` format)."""

    def __init__(
        self,
        columns: Mapping[str, ColumnType],
        *,
        delimiter: str = ",",
        quote: str = '"',
        null_literal: str | None = None,
    ) -> None:
        self.columns = dict(columns)
        self.delimiter = delimiter
        self.quote = quote
        self.null_literal = null_literal

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        null = self.null_literal or ""
        fields = [null if data.get(c) is None else _text(data.get(c)) for c in self.columns]
        out = io.StringIO()
        # the line end makes the writer quote fields holding one; the value has none
        writer = csv.writer(out, delimiter=self.delimiter, quotechar=self.quote)
        writer.writerow(fields)
        return out.getvalue().removesuffix("\r\n").encode()

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            text = data.decode()
            rows = list(
                csv.reader(io.StringIO(text), delimiter=self.delimiter, quotechar=self.quote)
            )
        except (UnicodeDecodeError, csv.Error) as exc:
            raise SerializationError(f"invalid CSV: {exc}") from exc
        fields = rows[0] if rows else []
        if len(rows) > 1:
            raise SerializationError(f"CSV value has {len(rows)} lines, a row is one")
        return self.row(fields)

    def row(self, fields: list[str]) -> dict[str, Any]:
        """The row of one CSV line's fields (``SerializationError`` if they do not fit)."""
        if len(fields) != len(self.columns):
            raise SerializationError(
                f"CSV value has {len(fields)} fields, the table {len(self.columns)} columns"
            )
        row: dict[str, Any] = {}
        for (name, column), field in zip(self.columns.items(), fields, strict=True):
            if field == self.null_literal or (field == "" and column.kind != "STRING"):
                row[name] = None
                continue
            try:
                row[name] = _cell(column, field)
            except ValueError as exc:
                raise SerializationError(
                    f"CSV field {name} is not a {column.kind}: {field!r}"
                ) from exc
        return row

    def __repr__(self) -> str:
        return f"CsvRows({list(self.columns)})"


def avro_schema(columns: Mapping[str, ColumnType]) -> dict[str, Any]:
    """The Avro schema Flink's ``avro`` format derives from these columns."""
    fields = []
    for name, column in columns.items():
        avro_type: Any
        if column.kind == "STRING":
            avro_type = "string"
        elif column.kind == "BIGINT":
            avro_type = "long" if column.declared == "BIGINT" else "int"
        elif column.kind == "BOOLEAN":
            avro_type = "boolean"
        elif column.kind == "TIMESTAMP":
            avro_type = {"type": "long", "logicalType": "timestamp-millis"}
        elif column.declared == "DECIMAL":
            avro_type = {
                "type": "bytes",
                "logicalType": "decimal",
                "precision": column.precision,
                "scale": column.scale or 0,
            }
        else:
            avro_type = "float" if column.declared == "FLOAT" else "double"
        if column.nullable:
            fields.append({"name": name, "type": ["null", avro_type], "default": None})
        else:
            fields.append({"name": name, "type": avro_type})
    return {
        "type": "record",
        "name": "record",
        "namespace": "org.apache.flink.avro.generated",
        "fields": fields,
    }


class AvroRows:
    """Rows as Avro binary without a schema registry (Flink's ``avro`` format)."""

    def __init__(self, columns: Mapping[str, ColumnType]) -> None:
        import fastavro

        self.columns = dict(columns)
        self.schema = avro_schema(columns)
        self._parsed = fastavro.parse_schema(self.schema)
        self._write = fastavro.schemaless_writer
        self._read = fastavro.schemaless_reader

    def _encodable(self, name: str, column: ColumnType, value: Any) -> Any:
        if value is None:
            return None
        if column.kind == "TIMESTAMP":
            millis = parse_timestamp(value)
            if millis is None:
                raise SerializationError(f"column {name}: not a TIMESTAMP: {value!r}")
            return millis
        if column.declared == "DECIMAL" and isinstance(value, int | float):
            if isinstance(value, float) and not math.isfinite(value):
                raise SerializationError(f"column {name}: {value} is not a DECIMAL")
            step = Decimal(1).scaleb(-(column.scale or 0))
            return Decimal(repr(value)).quantize(step)
        return value

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        record = {
            name: self._encodable(name, column, data.get(name))
            for name, column in self.columns.items()
        }
        out = io.BytesIO()
        try:
            self._write(out, self._parsed, record)
        except (ValueError, TypeError, InvalidOperation) as exc:
            raise SerializationError(f"Avro cannot encode {data!r}: {exc}") from exc
        return out.getvalue()

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        if data is None:
            return None
        stream = io.BytesIO(data)
        try:
            record: dict[str, Any] = self._read(stream, self._parsed)  # type: ignore[assignment]
        except (EOFError, ValueError, TypeError, IndexError, UnicodeDecodeError) as exc:
            raise SerializationError(f"invalid Avro value: {exc}") from exc
        if stream.tell() != len(data):
            raise SerializationError(
                f"invalid Avro value: {len(data) - stream.tell()} bytes after the record"
            )
        row: dict[str, Any] = {}
        for name, value in record.items():
            if isinstance(value, datetime):
                value = format_timestamp((value - _EPOCH) // timedelta(milliseconds=1))
            elif isinstance(value, Decimal):
                value = float(value)
            row[name] = value
        return row

    def __repr__(self) -> str:
        return f"AvroRows({list(self.columns)})"


class RawRows:
    """A one-column row as its UTF-8 text (Flink's ``raw`` format)."""

    def __init__(self, columns: Mapping[str, ColumnType]) -> None:
        (self.column,) = columns

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        value = None if data is None else data.get(self.column)
        return None if value is None else str(value).encode()

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return {self.column: data.decode()}
        except UnicodeDecodeError as exc:
            raise SerializationError(f"raw value is not UTF-8: {exc}") from exc

    def __repr__(self) -> str:
        return f"RawRows({self.column!r})"
