"""Scopes for expressions: the columns of a source row, and the row after GROUP BY.

``RowScope`` reads a source table's columns from its JSON value. ``GroupScope`` serves
SELECT after GROUP BY: group columns come from the grouping key, ``window_start`` /
``window_end`` (and TUMBLE_START/END, HOP_START/END, SESSION_START/END) from the window
as epoch ms, and
each aggregate from the accumulator; any other column is an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from streaming.sql import functions
from streaming.sql.aggregates import AggregateSpec
from streaming.sql.catalog import TableDef
from streaming.sql.expressions import NUMERIC, Compiled, compile_expression, fail
from streaming.sql.timestamps import parse_timestamp

WINDOW_FUNCTIONS = {
    "TUMBLE_START": "start",
    "TUMBLE_END": "end",
    "HOP_START": "start",
    "HOP_END": "end",
    "SESSION_START": "start",
    "SESSION_END": "end",
}


@dataclass
class RowScope:
    """Columns of one source table (by name, optionally qualified by the table's name)."""

    table: TableDef
    source: str
    alias: str | None = None

    def column(self, node: exp.Column) -> Compiled:
        if node.table and node.table not in (self.table.name, self.alias):
            raise fail(self, node, f"unknown table {node.table} in {node.sql()}")
        name = node.name
        if name not in self.table.columns:
            raise fail(self, node, f"unknown column {name} in table {self.table.name}")
        return Compiled(lambda row: row.get(name), self.table.columns[name])

    def aggregate(self, node: exp.AggFunc) -> Compiled:
        raise fail(self, node, f"aggregate {node.sql()} is not allowed here")

    def window_function(self, node: exp.Anonymous) -> Compiled:
        raise fail(self, node, f"unknown function {node.name}")


@dataclass
class GroupScope:
    """The row after GROUP BY: ``{"key": [...], "window": (start, end), "aggs": [...]}``."""

    rows: RowScope
    group_columns: list[str]
    windowed: bool
    specs: list[AggregateSpec] = field(default_factory=list)
    #: the GROUP BY expressions that are not columns, by SQL text: their key index
    expressions: dict[str, int] = field(default_factory=dict)

    @property
    def source(self) -> str:
        return self.rows.source

    def column(self, node: exp.Column) -> Compiled:
        name = node.name
        if self.windowed and name in ("window_start", "window_end"):
            index = 0 if name == "window_start" else 1
            return Compiled(lambda row: row["window"][index], "TIMESTAMP")
        kind = self.rows.column(node).kind
        if name not in self.group_columns:
            raise fail(self, node, f"column {name} must be in GROUP BY or inside an aggregate")
        index = self.group_columns.index(name)
        return Compiled(lambda row: row["key"][index], kind)

    def group_key(self, node: exp.Expr) -> Compiled | None:
        """``node`` read from the grouping key if it is a GROUP BY expression, else None."""
        index = self.expressions.get(node.sql()) if self.expressions else None
        if index is None:
            return None
        kind = compile_expression(node, self.rows).kind
        return Compiled(lambda row: row["key"][index], kind)

    def aggregate(self, node: exp.AggFunc) -> Compiled:
        if isinstance(node, exp.Anonymous):  # a Python aggregate function
            return self.python_aggregate(node)
        function = type(node).__name__.upper()
        argument = node.this
        if isinstance(argument, exp.Distinct):
            if function != "COUNT" or len(argument.expressions) != 1:
                raise fail(self, node, f"{function}(DISTINCT ...) is not supported yet")
            function, argument = "COUNT_DISTINCT", argument.expressions[0]
        if isinstance(argument, exp.Star) or (function == "COUNT" and argument is None):
            if function != "COUNT":
                raise fail(self, node, f"{function}(*) is not allowed: only COUNT(*)")
            compiled = None
        else:
            compiled = compile_expression(argument, self.rows)
            if function in ("SUM", "AVG") and compiled.kind not in (*NUMERIC, "NULL"):
                raise fail(
                    self,
                    node,
                    f"type mismatch: {function} needs numbers, {argument.sql()} is {compiled.kind}",
                )
        sql = node.sql()
        keys = [spec.sql for spec in self.specs]
        if sql not in keys:
            order = (
                parse_timestamp
                if function in ("MIN", "MAX") and compiled and compiled.kind == "TIMESTAMP"
                else None
            )
            self.specs.append(
                AggregateSpec(function, compiled.fn if compiled else None, sql, order)
            )
            keys.append(sql)
        index = keys.index(sql)
        kind = {"COUNT": "BIGINT", "COUNT_DISTINCT": "BIGINT", "AVG": "DOUBLE"}.get(
            function, compiled.kind if compiled else "NULL"
        )
        return Compiled(lambda row: row["aggs"][index], kind)

    def python_aggregate(self, node: exp.Anonymous) -> Compiled:
        """A call of a Python aggregate function: its spec, its value from the row."""
        function = functions.lookup(node.name)
        assert isinstance(function, functions.AggregateFunction)
        fns = [compile_expression(arg, self.rows).fn for arg in node.expressions]
        wrong = functions.check_arity(function.impl.accumulate, len(fns), leading=1)
        if wrong is not None:
            raise fail(self, node, f"aggregate function {function.name}.accumulate {wrong}")
        table = self.rows.table
        if table.is_upsert and not function.retracts:
            raise fail(
                self,
                node,
                f"aggregate function {function.name} has no retract(): aggregating the "
                f"updating table {table.name} takes rows back",
            )
        sql = node.sql()
        keys = [spec.sql for spec in self.specs]
        if sql not in keys:
            self.specs.append(
                AggregateSpec("PYTHON", lambda row: [fn(row) for fn in fns], sql, python=function)
            )
            keys.append(sql)
        index = keys.index(sql)
        return Compiled(lambda row: row["aggs"][index], function.result_kind)

    def window_function(self, node: exp.Anonymous) -> Compiled:
        end = WINDOW_FUNCTIONS.get(node.name.upper())
        if end is None or not self.windowed:
            raise fail(self, node, f"unknown function {node.name}")
        index = 0 if end == "start" else 1
        return Compiled(lambda row: row["window"][index], "TIMESTAMP")


def row_of(key: Any, window: tuple[int, int] | None, aggs: list[Any]) -> dict[str, Any]:
    """The GroupScope row for a grouping key (a list of group values) and a window."""
    return {"key": key, "window": window, "aggs": aggs}
