"""A ``CREATE TABLE`` without a column list, its columns taken from the schema registry.

``CREATE TABLE orders WITH ('topic' = 'orders', 'format' = 'avro-confluent',
'avro-confluent.url' = '...')`` reads the latest schema registered under the table's
subject (``'avro-confluent.subject'``, else ``<topic>-value``) when the statement compiles,
and declares a column per field of its record, typed as Flink maps Avro: string → STRING,
int → INT, long → BIGINT (``timestamp-millis`` → TIMESTAMP(3)), float → FLOAT, double →
DOUBLE, boolean → BOOLEAN, bytes/``decimal`` → DECIMAL(p, s); a field whose type is a
union with null is nullable. A field of another type (a record, an array, a map) is an
error naming it: list the columns instead.
"""

from __future__ import annotations

import json
from typing import Any

from sqlglot import exp

from streaming.sql.catalog import TableDef, _options, table_def
from streaming.sql.errors import SqlError, error_at, node_offset
from streaming.sql.formats import ColumnType
from streaming.sql.registry_formats import format_option, registry_config
from streaming.sql.rewrite import Watermark


def registry_columns(create: exp.Create, source: str) -> bool:
    """Whether ``create`` (no column list) takes its columns from the registry."""
    if not isinstance(create.this, exp.Table) or create.find(exp.LikeProperty):
        return False
    try:
        options, _ = _options(create, source)
    except SqlError:
        return False  # the statement's other checks say what is wrong
    return options.get("value.format", options.get("format")) == "avro-confluent"


def table_from_registry(create: exp.Create, watermark: Watermark | None, source: str) -> TableDef:
    """The ``TableDef`` of a column-less ``CREATE TABLE`` in the ``avro-confluent`` format."""
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    from streaming.serdes.registry import describe, schema_registry_client

    options, _ = _options(create, source)
    name = create.this.name
    topic = options.get("topic", name)
    subject = format_option(options, "avro-confluent.subject") or f"{topic}-value"
    url = format_option(options, "avro-confluent.url")
    if not url:
        raise error_at(
            source,
            node_offset(create),
            "a CREATE TABLE without columns needs 'avro-confluent.url' to read them from",
        )
    try:
        registered = schema_registry_client(registry_config(options)).get_latest_version(subject)
    except (SchemaRegistryError, OSError, ValueError) as exc:
        raise error_at(
            source,
            node_offset(create),
            f"table {name}: no columns listed and no schema read for subject {subject!r} "
            f"from {url}: {describe(exc)}",
        ) from None
    except Exception as exc:
        raise error_at(
            source,
            node_offset(create),
            f"table {name}: the schema registry at {url} did not answer: {exc}",
        ) from None
    schema = json.loads(registered.schema.schema_str or "null")
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise error_at(
            source,
            node_offset(create),
            f"table {name}: subject {subject!r} holds no Avro record to take columns from",
        )
    types: dict[str, ColumnType] = {}
    for field in schema["fields"]:
        column = column_type(field["type"])
        if column is None:
            raise error_at(
                source,
                node_offset(create),
                f"table {name}: field {field['name']} of subject {subject!r} is of Avro type "
                f"{json.dumps(field['type'])}, which no column type here holds: list the columns",
            )
        types[field["name"]] = column
    return table_def(
        name,
        {column: t.kind for column, t in types.items()},
        (),
        create,
        watermark,
        source,
        types=types,
    )


def column_type(avro_type: Any) -> ColumnType | None:
    """The SQL column of an Avro field type (None: no column type holds it)."""
    nullable = False
    if isinstance(avro_type, list):
        branches = [t for t in avro_type if t != "null"]
        if len(branches) != 1:
            return None
        nullable = len(branches) < len(avro_type)
        avro_type = branches[0]
    logical = avro_type.get("logicalType") if isinstance(avro_type, dict) else None
    base = avro_type.get("type") if isinstance(avro_type, dict) else avro_type
    if base == "long" and logical == "timestamp-millis":
        return ColumnType("TIMESTAMP", "TIMESTAMP", 3, nullable=nullable)
    if base == "bytes" and logical == "decimal":
        precision, scale = avro_type.get("precision"), avro_type.get("scale", 0)
        return ColumnType("DOUBLE", "DECIMAL", precision, scale, nullable)
    simple = {
        "string": ("STRING", "VARCHAR"),
        "int": ("BIGINT", "INT"),
        "long": ("BIGINT", "BIGINT"),
        "float": ("DOUBLE", "FLOAT"),
        "double": ("DOUBLE", "DOUBLE"),
        "boolean": ("BOOLEAN", "BOOLEAN"),
    }.get(base if isinstance(base, str) else "")
    if simple is None:
        return None
    return ColumnType(simple[0], simple[1], nullable=nullable)
