"""Computed and METADATA columns (``computed_columns``) in the DuckDB translation (``batch``).

A table's relation holds its topic's values (the fields as columns); the record's metadata,
when the table declares METADATA columns, is read from the relation's columns named as
the lake stores them (``pipelines.lake.records``): ``_timestamp`` (epoch ms),
``_partition``, ``_offset``; ``topic`` is the table's topic. A computed column is its
expression, rewritten as the query's are (TRY_CAST, safe division), over the physical and
METADATA columns. TIMESTAMP values are written as the relation's TIMESTAMP columns are
(``'yyyy-MM-dd HH:mm:ss.SSS'``, UTC), so the query reads them like any TIMESTAMP column.
"""

from __future__ import annotations

from typing import Any

import sqlglot
from sqlglot import exp

from streaming.sql.catalog import TableDef

#: metadata key -> the relation's column holding it (the lake's names)
RECORD_COLUMNS = {"timestamp": "_timestamp", "partition": "_partition", "offset": "_offset"}


def columns_relation(translation: Any, table: TableDef, format_ms: Any) -> str:
    """DuckDB SQL of what a query reads for ``table``: its relation's name, or, with
    computed or METADATA columns, a subquery adding them (``translation``: the query's
    ``batch._Translation``; ``format_ms``: epoch ms -> the TIMESTAMP text)."""
    name = exp.to_identifier(table.name).sql("duckdb")
    if not (table.computed or table.metadata):
        return name
    read = f"SELECT * FROM {name}"
    if table.metadata:
        values = []
        for column in table.metadata.values():
            if column.key in RECORD_COLUMNS:
                value: exp.Expr = exp.column(RECORD_COLUMNS[column.key], quoted=True)
            else:
                value = exp.Literal.string(table.topic)
            if column.key == "timestamp":
                value = format_ms(value)
            values.append(exp.alias_(value, column.name, quoted=True).sql("duckdb"))
        read = f"SELECT *, {', '.join(values)} FROM {name}"
    if not table.computed:
        return f"({read}) AS __metadata"
    select = sqlglot.parse_one(f"SELECT * FROM ({read}) AS __metadata", read="duckdb")
    assert isinstance(select, exp.Select)
    for computed, expression in table.computed.items():
        select.append(
            "expressions", exp.alias_(_ms_calls(expression.copy()), computed, quoted=True)
        )
    translation._rewrite_expressions(select)
    items = select.expressions
    for i, computed in enumerate(table.computed, start=1):
        if table.columns[computed] == "TIMESTAMP":
            items[i].set("this", format_ms(items[i].this))
    return f"({select.sql('duckdb')}) AS __columns"


def _ms_calls(expression: exp.Expr) -> exp.Expr:
    """``TO_TIMESTAMP_LTZ(epoch, precision)`` as its epoch ms (seconds times 1000 for
    precision 0), truncated as the stream's ``int()`` does."""

    def rewrite(node: exp.Expr) -> exp.Expr:
        if not (isinstance(node, exp.Anonymous) and node.name.upper() == "TO_TIMESTAMP_LTZ"):
            return node
        epoch, *rest = node.expressions
        seconds = bool(rest) and isinstance(rest[0], exp.Literal) and rest[0].this == "0"
        value = exp.Mul(this=exp.Paren(this=epoch), expression=exp.Literal.number(1000))
        return exp.cast(value if seconds else epoch, "BIGINT")

    return expression.transform(rewrite)
