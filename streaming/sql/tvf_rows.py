"""A window TVF's rows queried as they are, not aggregated: Flink's first window TVF
examples.

    SELECT * FROM TABLE(TUMBLE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))

is every row of ``Bid`` with ``window_start``, ``window_end`` and ``window_time`` (the
window's end less 1 ms, Flink's rowtime of the window) added, one row per window that
holds it (TUMBLE's one, HOP's and CUMULATE's each): an append stream, the rows a
``flat_map`` of the table's (``window_rank.windowed_rows``), record time kept. The
three columns are TIMESTAMP(3) as Flink reports them (epoch ms in the rows, written as
timestamps). ``*`` stands for the table's columns, then the three.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sqlglot import exp

from streaming.sql.catalog import TableDef
from streaming.sql.derived import is_aggregation
from streaming.sql.rewrite import Statement, WindowTvf
from streaming.sql.window_rank import windowed_rows

#: the columns a window TVF adds to its table's, in Flink's order
TVF_COLUMNS = ("window_start", "window_end", "window_time")


def reads_tvf_rows(statement: Statement, select: exp.Select) -> WindowTvf | None:
    """The window TVF whose rows ``select`` reads as they are, else None: the statement's
    only TVF, ``select`` its outer query (not a subquery: a window join's inputs, a
    window Top-N's) with no GROUP BY, aggregate or OVER, its FROM the TVF's table."""
    tvf = statement.window_tvf
    if len(statement.window_tvfs) != 1 or select.find_ancestor(exp.Select, exp.Subquery):
        return None
    from_ = select.args.get("from_") or select.args.get("from")
    node = from_.this if from_ is not None else None
    if tvf is None or not isinstance(node, exp.Table) or node.name != tvf.table:
        return None
    if select.args.get("joins") or is_aggregation(select):
        return None
    if any(item.find(exp.Window) for item in select.expressions):
        return None
    return tvf


def star_columns(table: TableDef) -> list[str]:
    """What ``*`` over the TVF of ``table`` stands for: its columns, then the window's."""
    return [c for c in table.columns if c[:1] != "$" and c not in TVF_COLUMNS] + list(TVF_COLUMNS)


def expand_star(select: exp.Select, table: TableDef) -> None:
    """``*`` and ``t.*`` of ``select`` (over the TVF of ``table``) as ``star_columns``,
    in place."""
    expanded: list[exp.Expr] = []
    for item in select.expressions:
        star = isinstance(item, exp.Star) or (
            isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
        )
        if star:
            expanded += [exp.column(c, quoted=True) for c in star_columns(table)]
        else:
            expanded.append(item)
    select.set("expressions", expanded)


def expand_tvf_stars(tree: exp.Expr, statement: Statement, tables: dict[str, TableDef]) -> None:
    """``expand_star`` in each SELECT of ``tree`` that reads a window TVF's rows."""
    for select in tree.find_all(exp.Select):
        tvf = reads_tvf_rows(statement, select)
        if tvf is not None and tvf.table in tables:
            expand_star(select, tables[tvf.table])


def with_tvf_columns(table: TableDef) -> TableDef:
    """``table`` with the three window columns (TIMESTAMP, as Flink types them) added."""
    return dataclasses.replace(
        table, columns={**table.columns, **dict.fromkeys(TVF_COLUMNS, "TIMESTAMP")}
    )


def tvf_rows_view(compiler: Any, select: exp.Select, tvf: WindowTvf) -> TableDef:
    """The view of the TVF's rows with the three window columns, put in the FROM of
    ``select`` in place of the TVF's table."""
    timed = with_tvf_columns(windowed_rows(compiler, select, tvf, "a query of a window TVF's rows"))
    compiler.tables[timed.name] = timed
    compiler.views[timed.name] = compiler.views[timed.name].map_values(
        lambda row: {**row, "window_time": row["window_end"] - 1}
    )
    return timed
