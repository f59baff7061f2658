"""The DuckDB translation of a window join (``batch``): two window TVF subqueries joined
on their window bounds.

    SELECT ... FROM (SELECT * FROM TABLE(TUMBLE(TABLE L, DESCRIPTOR(ts), size))) L
    FULL JOIN (SELECT * FROM TABLE(TUMBLE(TABLE R, DESCRIPTOR(ts), size))) R
    ON L.window_start = R.window_start AND L.window_end = R.window_end AND L.k = R.k

runs in DuckDB as written, each subquery reading its table's timed relation with the
window bounds (``window_start``, ``window_end`` and ``window_time``, epoch ms, one row per
window, as ``batch`` builds a window TVF's rows): with both bounds in the ON clause, an
ordinary (outer) join is the window join of every window, which is what the stream emits
for each window that closed.

A side that aggregates (``GROUP BY window_start, window_end, ...`` over its TVF, its
bounds selected under any name: Nexmark's q8), or aggregates such a side's rows again
(q5's ``max(num)`` per window), is translated as a query of its own (the same
translation as an INSERT's, its columns named by the subquery's SELECT list, window
bounds as epoch ms) and joined as written: each side's rows are its windows' final
results, the ones the stream's aggregation emits when a window closes, and the stream
joins those (a window join, or a regular join when the bounds are renamed) into the
rows the batch join gives: a window whose side is empty has no inner-join rows and
an outer join's padded ones. An aggregation over a side's result reads it as a
relation (a CTE) of the side's columns. As for every window here, the rows the stream's
aggregation drops as late are in the batch's windows.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import sqlglot
from sqlglot import exp

from streaming.sql.catalog import TableDef
from streaming.sql.derived import is_aggregation, outputs, span
from streaming.sql.window_join import BOUNDS

#: the columns a window TVF adds, as epoch ms
WINDOW_COLUMNS = {"window_start": "BIGINT", "window_end": "BIGINT", "window_time": "BIGINT"}
#: the name of the sink a side's aggregation is translated into (its own columns)
_SIDE_SINK = "__side_result"


def translate(translation: Any, select: exp.Select) -> tuple[str, tuple[TableDef, ...]]:
    """The DuckDB SQL of the window join ``select`` (its subqueries' TVFs in
    ``translation.statement``) and the tables it reads."""
    from_ = select.args.get("from_") or select.args.get("from")
    assert from_ is not None  # window_join.joins_subqueries said so
    nodes = [from_.this, *(j.this for j in select.args.get("joins") or [])]
    read: dict[str, TableDef] = {}
    for node in nodes:
        inner = node.this
        if isinstance(inner, exp.Select) and is_aggregation(inner):
            sql, kinds, tables = _aggregated(translation, node)
            node.set("this", sqlglot.parse_one(sql, read="duckdb"))
            alias = node.alias_or_name
            translation.scope[alias] = _relation_def(alias, kinds)
        else:
            tables = (_window_rows(translation, node),)
        read.update((t.name, t) for t in tables)
    for join in select.args.get("joins") or []:
        on = join.args.get("on")
        if on is not None:
            join.set("on", on.transform(translation._instants))
    translation._rewrite_expressions(select)
    translation._name_columns(select, BOUNDS)
    return select.sql("duckdb"), tuple(read.values())


def _relation_def(name: str, columns: dict[str, str]) -> TableDef:
    """A relation of ``columns`` (name -> kind) that the translation reads by ``name``."""
    return TableDef(name, columns, "", "kafka", (), (), "raw", None, {})


def _aggregated(
    translation: Any, node: exp.Subquery
) -> tuple[str, dict[str, str], tuple[TableDef, ...]]:
    """The DuckDB SQL of the aggregating subquery ``node`` (over its window TVF, or over
    another such subquery, read as a CTE), its columns' kinds and the tables it reads."""
    inner = node.this
    assert isinstance(inner, exp.Select)
    inner_from = inner.args.get("from_") or inner.args.get("from")
    base = inner_from.this if inner_from is not None else None
    tables = dict(translation.tables)
    statement = dataclasses.replace(translation.statement, window_tvf=None, window_tvfs=())
    read: tuple[TableDef, ...] = ()
    cte = ""
    if (
        isinstance(base, exp.Subquery)
        and isinstance(base.this, exp.Select)
        and is_aggregation(base.this)
        and not inner.args.get("joins")
    ):
        sql, kinds, read = _aggregated(translation, base)
        name = f"__side_{span(base)[0]}"
        tables[name] = _relation_def(name, kinds)
        cte = f"WITH {name} AS ({sql}) "
        base.replace(
            exp.Table(this=exp.to_identifier(name), alias=exp.to_identifier(base.alias_or_name))
        )
    elif isinstance(base, exp.Table) and not inner.args.get("joins"):
        start, end = span(node)
        tvfs = [
            t
            for t in translation.statement.window_tvfs
            if t.table == base.name and start <= t.offset <= end
        ]
        if len(tvfs) != 1:
            raise translation.error(
                node,
                "a window join's aggregating side is translated to batch SQL over one window "
                "TVF, or over such a side",
            )
        statement = dataclasses.replace(statement, window_tvf=tvfs[0], window_tvfs=(tvfs[0],))
    else:
        raise translation.error(
            node,
            "a window join's aggregating side is translated to batch SQL over one window TVF, "
            "or over such a side",
        )
    names = [output.name for output in outputs(inner, translation.source)]
    tables[_SIDE_SINK] = _relation_def(_SIDE_SINK, dict.fromkeys(names, "BIGINT"))
    insert = exp.Insert(this=exp.to_table(_SIDE_SINK), expression=inner)
    side = type(translation)(translation.source, tables, statement, insert)
    query = side.translate()
    kinds = {
        name: _kind(side, item.this if isinstance(item, exp.Alias) else item)
        for name, item in zip(names, inner.expressions, strict=True)
    }
    own = tuple(t for t in query.tables if t.name in translation.tables)
    return cte + query.sql, kinds, (*read, *own)


def _kind(side: Any, node: exp.Expr) -> str:
    """The kind of a side's output column ``node``: a column's (window bounds BIGINT, as
    epoch ms), MIN / MAX of a column its column's, else BIGINT or OTHER as the
    translation infers it (COUNT, SUM of integers, ...)."""
    if isinstance(node, exp.Min | exp.Max) and isinstance(node.this, exp.Column):
        node = node.this
    if isinstance(node, exp.Column):
        if node.name in WINDOW_COLUMNS:
            return "BIGINT"
        kinds = side._column_kinds(node)
        return next(iter(kinds)) if len(kinds) == 1 else "OTHER"
    return str(side._kind(node))


def _window_rows(translation: Any, node: exp.Subquery) -> TableDef:
    """Point the subquery ``node`` at its TVF's rows with their window bounds; the table
    it reads."""
    inner = node.this
    inner_from = inner.args.get("from_") if isinstance(inner, exp.Select) else None
    table = inner_from.this if inner_from is not None else None
    start, end = span(node)
    tvf = next(
        (
            t
            for t in translation.statement.window_tvfs
            if isinstance(table, exp.Table) and t.table == table.name and start <= t.offset <= end
        ),
        None,
    )
    if tvf is None or inner_from is None or not isinstance(table, exp.Table):
        raise translation.error(
            node,
            "a window join is translated to batch SQL over the rows of two window TVFs "
            "or their window aggregations",
        )
    definition: TableDef = translation.tables[table.name]
    spec = (tvf.kind, tvf.size_ms, tvf.slide_ms)
    relation = translation._relation(table, spec, BOUNDS)
    relation.this.select("window_end - 1 AS window_time", copy=False)
    inner_from.set("this", relation)
    if any(isinstance(e, exp.Star) for e in inner.expressions):
        columns = [*definition.columns, *WINDOW_COLUMNS]
        inner.set("expressions", [exp.column(c, quoted=True) for c in columns])
    alias = node.alias_or_name
    translation.scope[alias] = dataclasses.replace(
        definition, columns={**definition.columns, **WINDOW_COLUMNS}
    )
    return definition
