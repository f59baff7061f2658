"""The DuckDB translation of a window join (``batch``): two window TVF subqueries joined
on their window bounds.

    SELECT ... FROM (SELECT * FROM TABLE(TUMBLE(TABLE L, DESCRIPTOR(ts), size))) L
    FULL JOIN (SELECT * FROM TABLE(TUMBLE(TABLE R, DESCRIPTOR(ts), size))) R
    ON L.window_start = R.window_start AND L.window_end = R.window_end AND L.k = R.k

runs in DuckDB as written, each subquery reading its table's timed relation with the
window bounds (``window_start``, ``window_end`` and ``window_time``, epoch ms, one row per
window, as ``batch`` builds a window TVF's rows): with both bounds in the ON clause, an
ordinary (outer) join is the window join of every window, which is what the stream emits
for each window that closed. A window aggregation inside the subqueries is not
translated.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sqlglot import exp

from streaming.sql.catalog import TableDef
from streaming.sql.derived import is_aggregation, span
from streaming.sql.window_join import BOUNDS

#: the columns a window TVF adds, as epoch ms
WINDOW_COLUMNS = {"window_start": "BIGINT", "window_end": "BIGINT", "window_time": "BIGINT"}


def translate(translation: Any, select: exp.Select) -> tuple[str, tuple[TableDef, ...]]:
    """The DuckDB SQL of the window join ``select`` (its subqueries' TVFs in
    ``translation.statement``) and the tables it reads."""
    from_ = select.args.get("from_") or select.args.get("from")
    assert from_ is not None  # window_join.joins_subqueries said so
    nodes = [from_.this, *(j.this for j in select.args.get("joins") or [])]
    read: list[TableDef] = []
    for node in nodes:
        read.append(_window_rows(translation, node))
    for join in select.args.get("joins") or []:
        on = join.args.get("on")
        if on is not None:
            join.set("on", on.transform(translation._instants))
    translation._rewrite_expressions(select)
    translation._name_columns(select, BOUNDS)
    return select.sql("duckdb"), tuple(read)


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
    if (
        tvf is None
        or inner_from is None
        or not isinstance(table, exp.Table)
        or is_aggregation(inner)
    ):
        raise translation.error(
            node,
            "a window join is translated to batch SQL over the rows of two window TVFs "
            "(a window aggregation inside is not)",
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
