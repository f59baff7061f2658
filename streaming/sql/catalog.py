"""DDL -> table definitions: ``CREATE TABLE ... WITH (...)`` over a Kafka topic.

A table without a primary key (connector ``kafka``) is an append stream; a primary key,
or connector ``upsert-kafka``, makes it an upsert table. A view (``CREATE VIEW``, a
subquery in FROM) is a table of connector ``view``: no topic, its rows stay in the
topology. Values are JSON objects with
one field per column; keys are raw strings (``'key.format' = 'raw'``, the default for one
key column) or JSON (``'key.format' = 'json'``, the default for several: an object of the
key columns). The key columns are ``'key.fields'`` (``;``-separated, Flink's syntax) or
else the primary key. ``'window.close.quiet'`` (a Flink duration, e.g. ``'5 s'``) closes the
windows of the aggregations over the table on the wall clock once it is quiet that long.

A computed column ``name AS PROCTIME()`` is the table's processing-time attribute, as in
Flink: not in the topic's values (the format neither reads nor writes it), a TIMESTAMP
whose value is the wall-clock time at which the row is read (``Compiler.source_of``).
Any other computed column (``name AS expression``) and the METADATA columns are
``computed_columns``: not in the topic's values either, added as each row is read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from streaming import serdes
from streaming.sql import filesystem
from streaming.sql.computed_columns import (
    MetadataColumn,
    check_metadata,
    check_placement,
    computed_expression,
)
from streaming.sql.errors import error_at, node_offset
from streaming.sql.formats import (
    FORMAT_OPTIONS,
    KINDS,
    REGISTRY_FORMATS,
    ColumnType,
    format_problem,
    value_serde,
)
from streaming.sql.rewrite import Watermark, duration_ms

#: SQL types this slice knows, each mapped onto one of five value kinds.
TYPE_KINDS = {
    "TEXT": "STRING",
    "VARCHAR": "STRING",
    "CHAR": "STRING",
    "NVARCHAR": "STRING",
    "BIGINT": "BIGINT",
    "INT": "BIGINT",
    "SMALLINT": "BIGINT",
    "TINYINT": "BIGINT",
    "DOUBLE": "DOUBLE",
    "FLOAT": "DOUBLE",
    "DECIMAL": "DOUBLE",
    "BOOLEAN": "BOOLEAN",
    "TIMESTAMP": "TIMESTAMP",
    "TIMESTAMPLTZ": "TIMESTAMP",
    "DATETIME": "TIMESTAMP",
}

#: The kind of a column whose type comes from its query (``CREATE TABLE ... AS SELECT``, a
#: view), filled in as the query compiles.
INFERRED = "INFERRED"

#: the option that turns the quiet close on for the windowed aggregations over the table
WINDOW_CLOSE_QUIET = "window.close.quiet"

_KNOWN_OPTIONS = {
    "connector",
    "topic",
    "format",
    "value.format",
    "key.format",
    "key.fields",
    "scan.startup.mode",
    "properties.bootstrap.servers",
    "properties.group.id",
    "value.fields-include",
    "table.type",
    WINDOW_CLOSE_QUIET,
    *filesystem.OPTIONS,
    *FORMAT_OPTIONS["csv"],
    *FORMAT_OPTIONS["json"],
    *(
        option
        for fmt in ("protobuf", *REGISTRY_FORMATS)
        for bare in FORMAT_OPTIONS[fmt]
        for option in (bare, f"value.{bare}", f"key.{bare}")
    ),
}

#: the key formats whose keys are objects of the key columns inside a topology (``raw``:
#: the one key column's text)
OBJECT_KEY_FORMATS = ("json", "avro-confluent")


@dataclass(frozen=True)
class TableDef:
    """A table declared by CREATE TABLE: its columns, topic, keys and event time."""

    name: str
    columns: dict[str, str]
    topic: str
    connector: str
    primary_key: tuple[str, ...]
    key_fields: tuple[str, ...]
    key_format: str
    watermark: Watermark | None
    options: dict[str, str]
    #: its rows are window results stamped at a window bound (the time attribute): a
    #: GROUP BY that column groups by window
    window_bound: bool = False
    #: the declared SQL types (binary value formats encode INT and BIGINT, FLOAT and
    #: DOUBLE, DECIMAL(p, s) differently); a column not here is its kind's widest type
    column_types: dict[str, ColumnType] = field(default_factory=dict)
    #: ``'window.close.quiet'`` in ms: the wall-clock quiet time after which the windowed
    #: aggregations over the table close their windows (a view: its source's); None: the
    #: application's ``window.close.quiet.ms``
    window_close_quiet_ms: int | None = None
    #: the ``name AS PROCTIME()`` column: the processing-time attribute (None: none)
    proctime: str | None = None
    #: a view whose rows update: what updates them, for the error of an append-only sink
    #: (as Flink names the node that produces the update changes)
    updated_by: str | None = None
    #: ``PARTITIONED BY`` (a ``filesystem`` table's partition directories)
    partition_keys: tuple[str, ...] = ()
    #: the computed columns but PROCTIME() (name -> expression): evaluated as a row is read
    computed: dict[str, exp.Expr] = field(default_factory=dict)
    #: the METADATA columns (name -> what they read): fields of the Kafka record
    metadata: dict[str, MetadataColumn] = field(default_factory=dict)

    @property
    def is_file(self) -> bool:
        """A ``filesystem`` table: its rows are files under ``'path'``, no topic."""
        return self.connector == filesystem.CONNECTOR

    @property
    def is_view(self) -> bool:
        """A view (or a subquery in FROM): its rows stay inside the topology, no topic."""
        return self.connector == "view"

    @property
    def is_global(self) -> bool:
        """A ``GlobalKTable`` (``'table.type' = 'global'``): every instance reads all of its
        partitions, so a stream joins it by any column without re-keying."""
        return self.options.get("table.type") == "global"

    @property
    def is_upsert(self) -> bool:
        """An upsert table (``KTable``) rather than an append stream (``KStream``)."""
        return bool(self.primary_key) or self.connector == "upsert-kafka"

    def key_serde(self) -> Any:
        """The key serde: raw strings, JSON, or Avro with a schema registry."""
        if self.key_format == "avro-confluent":
            from streaming.sql.registry_formats import ConfluentAvroRows

            columns = self.format_columns()
            key_columns = {name: columns[name] for name in self.key_fields}
            return ConfluentAvroRows(key_columns, self.options, is_key=True)
        return serdes.Json() if self.key_format == "json" else serdes.String()

    @property
    def value_format(self) -> str:
        """``'value.format'`` (or ``'format'``): json, csv, avro or raw."""
        return self.options.get("value.format", self.options.get("format", "json"))

    def format_columns(self) -> dict[str, ColumnType]:
        """Each column's type as the value format sees it."""
        return {
            name: self.column_types.get(name) or ColumnType(kind, kind)
            for name, kind in self.columns.items()
            if name != self.proctime and name not in self.computed and name not in self.metadata
        }

    def value_serde(self) -> Any:
        """The serde of the topic's values (rows as dicts of columns), in its format."""
        return value_serde(self.value_format, self.format_columns(), self.options)

    def key_of(self, row: dict[str, Any] | None) -> Any:
        """The Kafka key of an output row: None without key columns (as Flink writes)."""
        if row is None or not self.key_fields:
            return None
        if self.key_format in OBJECT_KEY_FORMATS:
            return {name: row.get(name) for name in self.key_fields}
        value = row.get(self.key_fields[0])
        return None if value is None else raw_key(value)


def raw_key(value: Any) -> str:
    """A raw key's text: SQL booleans as ``true``/``false``, numbers as written."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def is_proctime(column: exp.ColumnDef) -> bool:
    """Whether ``column`` is Flink's processing-time attribute, ``name AS PROCTIME()``."""
    for constraint in column.constraints:
        computed = constraint.kind
        if isinstance(computed, exp.ComputedColumnConstraint):
            call = computed.this
            return (
                isinstance(call, exp.Anonymous)
                and call.name.upper() == "PROCTIME"
                and not call.expressions
            )
    return False


def column_type(column: exp.ColumnDef, source: str) -> exp.DataType:
    """The declared type of a ``CREATE TABLE`` column: TIMESTAMP for ``name AS
    PROCTIME()``; any other computed column (``name AS expr``) is refused here, saying so
    (``table_from_ddl`` reads them: ``computed_columns``)."""
    data_type = column.args.get("kind")
    if data_type is None and is_proctime(column):
        return exp.DataType.build("TIMESTAMP")
    if data_type is None:
        raise error_at(
            source,
            node_offset(column),
            f"computed column {column.sql()} is not supported here: only name AS PROCTIME() "
            "(the processing-time attribute); declare the column with a type and compute the "
            "value in the SELECT",
        )
    return data_type


def proctime_column(schema: exp.Schema, source: str) -> str | None:
    """The name of the table's ``name AS PROCTIME()`` column (None: none); a second one
    is an error."""
    found = [
        item for item in schema.expressions if isinstance(item, exp.ColumnDef) and is_proctime(item)
    ]
    if len(found) > 1:
        raise error_at(
            source,
            node_offset(found[1]),
            f"a table has one PROCTIME() column: {found[0].name} is already its processing time",
        )
    return found[0].name if found else None


def type_kind(data_type: exp.DataType, source: str) -> str:
    """The value kind (STRING, BIGINT, DOUBLE, BOOLEAN, TIMESTAMP) of a SQL type."""
    name = data_type.this.name if hasattr(data_type.this, "name") else str(data_type.this)
    kind = TYPE_KINDS.get(name.upper())
    if kind is None:
        raise error_at(source, node_offset(data_type), f"unsupported column type {data_type.sql()}")
    return kind


def table_from_ddl(
    create: exp.Create,
    watermark: Watermark | None,
    source: str,
    metadata: tuple[MetadataColumn, ...] = (),
) -> TableDef:
    """A ``TableDef`` from a parsed ``CREATE TABLE`` (its WATERMARK and METADATA clauses
    taken out beforehand)."""
    schema = create.this
    if not isinstance(schema, exp.Schema):
        raise error_at(source, node_offset(create), "CREATE TABLE needs a column list")
    columns, primary_key = schema_elements(schema, source, computed=True)
    computed = {
        item.name: expression
        for item in schema.expressions
        if isinstance(item, exp.ColumnDef)
        and not is_proctime(item)
        and (expression := computed_expression(item)) is not None
    }
    for column in metadata:
        check_metadata(column, columns[column.name], source)
    if computed:
        from streaming.sql.source_columns import compiled_columns

        proctime = proctime_column(schema, source)
        hidden = frozenset([proctime] if proctime else [])
        kinds = compiled_columns(schema.this.name, columns, computed, hidden, source)
        columns.update({name: compiled.kind for name, compiled in kinds.items()})
    return table_def(
        schema.this.name,
        columns,
        primary_key,
        create,
        watermark,
        source,
        types=declared_types(schema, source),
        proctime=proctime_column(schema, source),
        computed=computed,
        metadata={column.name: column for column in metadata},
    )


def schema_elements(
    schema: exp.Schema, source: str, *, computed: bool = False
) -> tuple[dict[str, str], tuple[str, ...]]:
    """The columns (name -> kind) and the primary key of a ``CREATE TABLE``'s list; a
    computed column (``computed``: allowed) is INFERRED, its kind is its expression's."""
    columns: dict[str, str] = {}
    primary_key: tuple[str, ...] = ()
    for item in schema.expressions:
        if computed and isinstance(item, exp.ColumnDef) and computed_expression(item):
            columns[item.name] = "TIMESTAMP" if is_proctime(item) else INFERRED
        elif isinstance(item, exp.ColumnDef):
            columns[item.name] = type_kind(column_type(item, source), source)
            if any(isinstance(c.kind, exp.PrimaryKeyColumnConstraint) for c in item.constraints):
                primary_key = (item.name,)
        elif isinstance(item, exp.PrimaryKey):
            primary_key = tuple(e.name for e in item.expressions)
        else:
            raise error_at(source, node_offset(item), f"unsupported table element {item.sql()}")
    return columns, primary_key


def declared_types(schema: exp.Schema, source: str) -> dict[str, ColumnType]:
    """The declared type of each column of a ``CREATE TABLE``'s list (NOT NULL kept)."""
    types: dict[str, ColumnType] = {}
    for item in schema.expressions:
        if isinstance(item, exp.ColumnDef) and (item.args.get("kind") or is_proctime(item)):
            not_null = any(
                isinstance(c.kind, exp.NotNullColumnConstraint) for c in item.constraints
            )
            data_type = column_type(item, source)
            types[item.name] = ColumnType.of(type_kind(data_type, source), data_type, not not_null)
    return types


def table_def(
    name: str,
    columns: dict[str, str],
    primary_key: tuple[str, ...],
    create: exp.Create,
    watermark: Watermark | None,
    source: str,
    *,
    view: bool = False,
    types: dict[str, ColumnType] | None = None,
    proctime: str | None = None,
    computed: dict[str, exp.Expr] | None = None,
    metadata: dict[str, MetadataColumn] | None = None,
) -> TableDef:
    """The ``TableDef`` of a table's columns, primary key and ``WITH`` options (checked).

    A view (``view=True``) has no topic and takes no options: its rows stay inside the
    topology (``connector`` ``view``).
    """
    schema = create.this
    for column in primary_key:
        _check_column(columns, column, source, schema, "PRIMARY KEY")
    options, partition_keys = _options(create, source)
    legacy = filesystem.legacy_options(options)
    if legacy is not None:
        options = legacy
    if view and options:
        raise error_at(source, node_offset(create), "a view takes no WITH options")
    if "connector.type" in options:  # other than 'filesystem'
        raise error_at(
            source,
            node_offset(create),
            f"the legacy 'connector.type' = '{options['connector.type']}' options (Flink's "
            "old connector properties) are not supported: use 'connector' = 'kafka', "
            "'upsert-kafka' or 'filesystem'",
        )
    unknown = sorted(set(options) - _KNOWN_OPTIONS)
    if unknown:
        raise error_at(source, node_offset(create), f"unknown table option {unknown[0]!r}")
    value_format = options.get("value.format", options.get("format", "json"))
    if not view:
        format_types = {
            column: (types or {}).get(column) or ColumnType(kind, kind)
            for column, kind in columns.items()
            if column != proctime
            and column not in (computed or {})
            and column not in (metadata or {})
        }
        problem = format_problem(value_format, format_types, options)
        if problem:
            raise error_at(source, node_offset(create), problem)
    connector = "view" if view else options.get("connector", "kafka")
    if connector not in ("kafka", "upsert-kafka", "view", filesystem.CONNECTOR):
        raise error_at(source, node_offset(create), f"unsupported connector {connector!r}")
    problem = _file_problem(connector, options, columns, primary_key, partition_keys)
    if problem:
        raise error_at(source, node_offset(create), problem)
    table_type = options.get("table.type", "partitioned")
    if table_type not in ("partitioned", "global"):
        raise error_at(
            source,
            node_offset(create),
            f"unsupported 'table.type' {table_type!r}: 'partitioned' (a KTable) or 'global' "
            "(a GlobalKTable)",
        )
    if table_type == "global" and not (primary_key or connector == "upsert-kafka"):
        raise error_at(
            source,
            node_offset(create),
            "a global table is an upsert table: give it a PRIMARY KEY (or use 'upsert-kafka')",
        )
    key_fields = tuple(f.strip() for f in options.get("key.fields", "").split(";") if f.strip())
    key_fields = key_fields or primary_key
    for column in key_fields:
        _check_column(columns, column, source, schema, "'key.fields'")
    key_format = options.get("key.format", "raw" if len(key_fields) <= 1 else "json")
    if key_format not in ("raw", *OBJECT_KEY_FORMATS):
        raise error_at(source, node_offset(create), f"unsupported 'key.format' {key_format!r}")
    if key_format == "avro-confluent" and not view:
        from streaming.sql.registry_formats import registry_problem

        problem = registry_problem(options, "key") or (
            "" if key_fields else "an 'avro-confluent' key needs 'key.fields' or a PRIMARY KEY"
        )
        for column in key_fields:
            if columns[column] not in KINDS:
                problem = problem or f"key column {column}: declare its type"
        if problem:
            raise error_at(source, node_offset(create), problem)
    if key_format == "raw" and len(key_fields) > 1:
        raise error_at(
            source, node_offset(create), "a 'raw' key holds one column: use 'key.format' = 'json'"
        )
    if computed or metadata:
        check_placement(
            schema, computed or {}, metadata or {}, primary_key, key_fields, connector, source
        )
    if proctime is not None:
        _check_proctime(proctime, primary_key, key_fields, watermark, connector, source, schema)
    if watermark is not None:
        _check_column(columns, watermark.column, source, schema, "WATERMARK", watermark.offset)
        if columns[watermark.column] not in ("TIMESTAMP", "BIGINT", INFERRED):
            raise error_at(
                source,
                watermark.offset,
                f"WATERMARK column {watermark.column} must be TIMESTAMP(3) or BIGINT",
            )
    return TableDef(
        name=name,
        columns=columns,
        topic="" if view or connector == filesystem.CONNECTOR else options.get("topic", name),
        connector=connector,
        primary_key=primary_key,
        key_fields=key_fields,
        key_format=key_format,
        watermark=watermark,
        options=options,
        column_types=dict(types or {}),
        window_close_quiet_ms=_window_close_quiet_ms(create, options, source),
        proctime=proctime,
        partition_keys=partition_keys,
        computed=dict(computed or {}),
        metadata=dict(metadata or {}),
    )


def _file_problem(
    connector: str,
    options: dict[str, str],
    columns: dict[str, str],
    primary_key: tuple[str, ...],
    partition_keys: tuple[str, ...],
) -> str:
    """What is wrong with a ``filesystem`` table's options ('' if nothing), or with
    ``PARTITIONED BY`` on another table."""
    if connector != filesystem.CONNECTOR:
        if partition_keys:
            return (
                f"PARTITIONED BY is a 'filesystem' table's partition directories; "
                f"'connector' = '{connector}' has none"
            )
        return ""
    if "path" not in options:
        return "a 'filesystem' table needs a 'path'"
    fmt = options.get("format", "")
    if fmt not in filesystem.FILE_FORMATS:
        return (
            f"a 'filesystem' table's 'format' is {' or '.join(filesystem.FILE_FORMATS)}, "
            f"not {fmt!r}"
        )
    if primary_key:
        return "a 'filesystem' table is append-only: it takes no PRIMARY KEY"
    for key in partition_keys:
        if key not in columns:
            return f"PARTITIONED BY names unknown column {key}"
    if partition_keys and len(partition_keys) == len(columns):
        return "PARTITIONED BY leaves no column for the files: keep at least one out"
    return ""


def _check_column(
    columns: dict[str, str],
    column: str,
    source: str,
    node: exp.Expr,
    what: str,
    offset: int | None = None,
) -> None:
    if column not in columns:
        at = node_offset(node) if offset is None else offset
        raise error_at(source, at, f"{what} names unknown column {column}")


def _check_proctime(
    proctime: str,
    primary_key: tuple[str, ...],
    key_fields: tuple[str, ...],
    watermark: Watermark | None,
    connector: str,
    source: str,
    schema: exp.Expr,
) -> None:
    """A PROCTIME() column is a time attribute of an append stream, computed, so neither
    a key nor the WATERMARK column."""
    at = next(
        (
            node_offset(item)
            for item in schema.expressions
            if isinstance(item, exp.ColumnDef) and item.name == proctime
        ),
        node_offset(schema),
    )
    if proctime in primary_key or proctime in key_fields:
        raise error_at(source, at, f"{proctime} AS PROCTIME() is computed: it is not a key column")
    if watermark is not None and watermark.column == proctime:
        raise error_at(
            source,
            watermark.offset,
            f"WATERMARK FOR {proctime}: {proctime} is the processing time (PROCTIME()); a "
            "WATERMARK declares an event-time column",
        )
    if primary_key or connector == "upsert-kafka":
        raise error_at(
            source,
            at,
            f"{proctime} AS PROCTIME() on an upsert table is not supported yet: declare it on "
            "an append stream (no PRIMARY KEY, 'connector' = 'kafka')",
        )


def _window_close_quiet_ms(create: exp.Create, options: dict[str, str], source: str) -> int | None:
    """``'window.close.quiet'`` in ms (None when absent); a value that is not a positive
    Flink duration is an error at the value."""
    text = options.get(WINDOW_CLOSE_QUIET)
    if text is None:
        return None
    try:
        quiet_ms = duration_ms(text)
    except ValueError as e:
        problem = str(e)
    else:
        if quiet_ms > 0:
            return quiet_ms
        problem = "0 would close every window the moment the input pauses"
    raise error_at(
        source,
        _option_offset(create, WINDOW_CLOSE_QUIET),
        f"'{WINDOW_CLOSE_QUIET}' = {text!r}: {problem}; give how long the table stays quiet "
        "(wall-clock time without records) before its windows close, as a positive whole "
        "number and a unit (ms, s, min, h, d), e.g. '5 s'",
    )


def _option_offset(create: exp.Create, key: str) -> int:
    """Where the value of the ``WITH`` option ``key`` starts (else the statement's start)."""
    properties = create.args.get("properties")
    for prop in properties.expressions if properties else []:
        if isinstance(prop, exp.Property) and prop.name == key:
            return node_offset(prop.args["value"], node_offset(create))
    return node_offset(create)


def _options(create: exp.Create, source: str) -> tuple[dict[str, str], tuple[str, ...]]:
    """The ``WITH ('k' = 'v', ...)`` options as strings, and the ``PARTITIONED BY``
    columns."""
    properties = create.args.get("properties")
    options: dict[str, str] = {}
    partition_keys: tuple[str, ...] = ()
    for prop in properties.expressions if properties else []:
        if isinstance(prop, exp.TemporaryProperty):
            continue  # CREATE TEMPORARY VIEW: every view lives as long as its topology
        if isinstance(prop, exp.PartitionedByProperty) and isinstance(prop.this, exp.Schema):
            partition_keys = tuple(column.name for column in prop.this.expressions)
            continue
        if not isinstance(prop, exp.Property) or "value" not in prop.args:
            what = "PARTITIONED BY" if isinstance(prop, exp.PartitionedByProperty) else prop.sql()
            raise error_at(
                source,
                node_offset(create),
                f"unsupported table property {what} (not supported yet)",
            )
        key = prop.this.name if isinstance(prop.this, exp.Expr) else str(prop.this)
        options[key] = prop.args["value"].name
    return options, partition_keys
