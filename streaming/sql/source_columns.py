"""Computed and METADATA columns (``computed_columns``) at run time, on a source and a sink.

On a source, ``SourceColumnsExtractor`` is the topic's timestamp extractor: the one point
where the Kafka record's own timestamp, partition, offset and topic are seen with its
deserialized value (as Flink's Kafka source reads metadata while deserializing). It adds
the METADATA columns to the row, then the computed columns (each over the physical and
METADATA columns), and returns the WATERMARK column's time, so event time may be a
computed or METADATA column. A row without a readable time keeps the record's timestamp.

On a sink, ``sink_table`` is the table a query writes: its physical columns and its
non-VIRTUAL METADATA ones (Flink's persisted columns, the INSERT's target); a computed or
VIRTUAL column in an INSERT's column list is an error. ``RecordTimestampWriter`` writes a
METADATA ``timestamp`` column as the record's timestamp instead of a field of the value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from streaming.sql.catalog import TableDef
from streaming.sql.computed_columns import WRITABLE
from streaming.sql.errors import error_at, node_offset
from streaming.sql.expressions import Compiled, compile_expression, fail
from streaming.sql.timestamps import parse_timestamp
from streaming.time import ConsumedRecord
from streaming.topology.processor import FixedKeyProcessor, Record


@dataclass
class PhysicalScope:
    """The columns a computed column reads: the table's physical and METADATA columns."""

    table: str
    #: every column of the table (name -> kind), computed ones included
    columns: dict[str, str]
    #: the computed columns (and the PROCTIME() column): not readable here
    computed: frozenset[str]
    source: str

    def column(self, node: exp.Column) -> Compiled:
        name = node.name
        if node.table and node.table != self.table:
            raise fail(self, node, f"unknown table {node.table} in {node.sql()}")
        if name in self.computed:
            raise fail(
                self,
                node,
                f"a computed column reads the physical and METADATA columns of {self.table}: "
                f"{name} is computed",
            )
        if name not in self.columns:
            raise fail(self, node, f"unknown column {name} in table {self.table}")
        return Compiled(lambda row: row.get(name), self.columns[name])

    def aggregate(self, node: exp.AggFunc) -> Compiled:
        raise fail(self, node, f"aggregate {node.sql()} is not allowed in a computed column")

    def window_function(self, node: exp.Anonymous) -> Compiled:
        raise fail(self, node, f"unknown function {node.name}")


def compiled_columns(
    table: str,
    columns: dict[str, str],
    computed: dict[str, exp.Expr],
    not_readable: frozenset[str],
    source: str,
) -> dict[str, Compiled]:
    """Each computed column's evaluator over a row of the physical and METADATA columns
    (a NULL literal is a STRING, as a query's column is)."""
    scope = PhysicalScope(table, columns, not_readable | frozenset(computed), source)
    compiled = {}
    for name, expression in computed.items():
        one = compile_expression(expression, scope)
        compiled[name] = one if one.kind != "NULL" else Compiled(one.fn, "STRING")
    return compiled


def computed_of(table: TableDef, source: str) -> dict[str, Compiled]:
    """The evaluators of ``table``'s computed columns."""
    hidden = frozenset([table.proctime] if table.proctime else [])
    return compiled_columns(table.name, table.columns, table.computed, hidden, source)


class SourceColumnsExtractor:
    """Adds the METADATA and computed columns to each row read, and gives its event time
    (the WATERMARK column's, else the record's timestamp)."""

    def __init__(
        self,
        metadata: dict[str, str],
        computed: dict[str, Callable[[dict[str, Any]], Any]],
        rowtime: str | None,
    ) -> None:
        #: column -> metadata key (an attribute of the consumed record of the same name)
        self.metadata = metadata
        self.computed = computed
        self.rowtime = rowtime

    def extract(self, record: ConsumedRecord, partition_time: int) -> int:
        value = record.value
        if not isinstance(value, dict):
            return record.timestamp
        for name, key in self.metadata.items():
            value[name] = getattr(record, key)
        row = dict(value)
        for name, fn in self.computed.items():
            value[name] = fn(row)
        if self.rowtime is not None:
            millis = parse_timestamp(value.get(self.rowtime))
            if millis is not None:
                return millis
        return record.timestamp


def source_extractor(table: TableDef, source: str) -> SourceColumnsExtractor | None:
    """The timestamp extractor of a table with computed or METADATA columns (None: the
    table has neither)."""
    if not (table.computed or table.metadata):
        return None
    computed = {name: c.fn for name, c in computed_of(table, source).items()}
    metadata = {column.name: column.key for column in table.metadata.values()}
    rowtime = table.watermark.column if table.watermark is not None else None
    return SourceColumnsExtractor(metadata, computed, rowtime)


def sink_table(insert: exp.Insert, sink: TableDef, source: str) -> TableDef:
    """The columns an INSERT into ``sink`` writes: its physical and non-VIRTUAL METADATA
    columns (a computed or VIRTUAL column named in the column list is an error)."""
    virtual = {name for name, m in sink.metadata.items() if m.virtual}
    target = insert.this
    for column in target.expressions if isinstance(target, exp.Schema) else []:
        if column.name in sink.computed or column.name == sink.proctime:
            raise error_at(
                source,
                node_offset(column),
                f"{column.name} is a computed column of {sink.name}: an INSERT writes its "
                "physical columns, a computed one is evaluated when the table is read",
            )
        if column.name in virtual:
            raise error_at(
                source,
                node_offset(column),
                f"{column.name} is a VIRTUAL METADATA column of {sink.name}: it is read, "
                "never written",
            )
    hidden = set(sink.computed) | virtual | ({sink.proctime} if sink.proctime else set())
    return dataclasses.replace(
        sink,
        columns={name: kind for name, kind in sink.columns.items() if name not in hidden},
        computed={},
        metadata={name: m for name, m in sink.metadata.items() if name not in virtual},
        proctime=None,
    )


def written_timestamp(sink: TableDef) -> str | None:
    """The sink's METADATA ``timestamp`` column that sets each record's timestamp."""
    return next(
        (m.name for m in sink.metadata.values() if m.key in WRITABLE and not m.virtual), None
    )


class RecordTimestampWriter(FixedKeyProcessor):
    """Forwards each row with its record timestamp set from a METADATA ``timestamp``
    column, the column left out of the value (it is not a field of the format). A NULL (or
    unreadable) value keeps the record's time, as Flink's sink then writes none of its own."""

    def __init__(self, column: str) -> None:
        self.column = column

    def process(self, record: Record) -> None:
        value = record.value
        if isinstance(value, dict) and self.column in value:
            value = {name: v for name, v in value.items() if name != self.column}
            millis = parse_timestamp(record.value[self.column])
            record = record.with_value(value)
            if millis is not None:
                record = record.with_timestamp(millis)
        self.context.forward(record)
