"""The DuckDB translation of Top-N and deduplication (``batch``): a ranking subquery in FROM.

    SELECT cols FROM (
      SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY t DESC) AS rn
      FROM T                      -- or TABLE(TUMBLE(TABLE T, DESCRIPTOR(t), ...))
    ) WHERE rn = 1

runs in DuckDB as written (``ROW_NUMBER``, ``RANK`` and ``DENSE_RANK`` are DuckDB's
too), over the table's timed relation (with the window bounds of a window TVF, as
``batch`` builds it), the time attribute in ORDER BY read as epoch ms (an instant, as the
stream orders it). Its result is what the stream's result ends with: each key's first or
last row, each partition's top rows once its updates are applied (the last value per
sink key), each window's.

``ROW_NUMBER()`` over the table (or its window TVF) breaks ties on its ORDER BY as the
stream does, by the order it reads the rows (``batch_order.INPUT_ORDER``: the offset):
a deduplication that keeps the last row (``ORDER BY`` the time attribute ``DESC``,
filtered on 1) keeps the last row read among those of the latest time (Flink's rule, as
``dedup`` and ``window_rank`` apply it); every other ranking puts a row after the rows it
ties with (Top-N, window Top-N, keep-first deduplication: the first row read wins).
``RANK()`` and ``DENSE_RANK()`` number ties alike, and a ranking of a GROUP BY's rows
orders the aggregation's updates, which no relation records: DuckDB picks among ties.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from streaming.sql.batch_order import INPUT_ORDER
from streaming.sql.catalog import TableDef

#: the ranking functions of Top-N and deduplication
RANKINGS = (exp.RowNumber, exp.Rank, exp.DenseRank)


@dataclass(frozen=True)
class RankingSubquery:
    """A ``(SELECT ..., RANK-FUNCTION() OVER (...) AS rn FROM table)`` in FROM: the inner
    query, the table it reads and the ranking column's name."""

    subquery: exp.Subquery
    inner: exp.Select
    table: exp.Table
    rank_column: str
    #: the query between the ranking and the table (a GROUP BY), if any
    aggregate: exp.Select | None = None


def find(node: exp.Expr, tables: dict[str, TableDef]) -> RankingSubquery | None:
    """The ranking subquery ``node`` (a FROM item), or None when it is none: one ranking
    function in the SELECT list of a query over one declared table (not a view), or over
    a subquery (a GROUP BY) of one."""
    if not isinstance(node, exp.Subquery) or not isinstance(node.this, exp.Select):
        return None
    inner = node.this
    ranks = [
        item
        for item in inner.expressions
        if isinstance(item, exp.Alias)
        and isinstance(item.this, exp.Window)
        and isinstance(item.this.this, RANKINGS)
    ]
    base = _from(inner)
    aggregate = None
    if isinstance(base, exp.Subquery) and isinstance(base.this, exp.Select):
        aggregate = base.this
        base = _from(aggregate)
        if aggregate.args.get("joins") or any(
            isinstance(w.this, RANKINGS) for w in aggregate.find_all(exp.Window)
        ):
            return None
    if (
        len(ranks) != 1
        or not isinstance(base, exp.Table)
        or base.name not in tables
        or tables[base.name].is_view
        or any(inner.args.get(k) for k in ("joins", "group", "having", "distinct"))
    ):
        return None
    return RankingSubquery(node, inner, base, ranks[0].alias, aggregate)


def _from(select: exp.Select) -> exp.Expr | None:
    from_ = select.args.get("from_") or select.args.get("from")
    return from_.this if from_ is not None else None


def translate(translation: Any, select: exp.Select, ranking: RankingSubquery, event_ms: str) -> str:
    """The DuckDB SQL of ``select`` (an INSERT's query) over the ranking subquery in its
    FROM; ``translation`` is the query's ``batch._Translation``, ``event_ms`` the column of
    its relations' event time in ms."""
    table: TableDef = translation.tables[ranking.table.name]
    alias = ranking.table.alias_or_name
    # (an unaliased subquery's columns are read unqualified: any name but "" will do)
    outer = ranking.subquery.alias_or_name or "$subquery"
    translation.scope[alias] = table
    read = dict(table.columns)
    tvf = translation.statement.window_tvf
    bounds = ("window_start", "window_end") if tvf is not None else None
    if bounds is not None:
        read.update({bound: "BIGINT" for bound in bounds})
    if ranking.aggregate is not None:  # the aggregate's columns, of kinds not known
        read = {
            item.alias_or_name: read.get(item.alias_or_name, "OTHER")
            if isinstance(item, exp.Column)
            else "OTHER"
            for item in ranking.aggregate.expressions
        }
    columns = {**read, ranking.rank_column: "BIGINT"}
    translation.scope[outer] = TableDef(outer, columns, "", "view", (), (), "raw", None, {})
    translation._no_processing_time(select)
    for call in ranking.inner.find_all(exp.Anonymous):
        if call.name.upper() == "PROCTIME":
            raise translation.error(
                call, "PROCTIME() is the processing time: it is not translated to batch SQL"
            )
    spec = (tvf.kind, tvf.size_ms, tvf.slide_ms) if tvf is not None else None
    ranking.table.replace(translation._relation(ranking.table, spec, bounds))
    watermark = table.watermark.column if table.watermark is not None else None
    if ranking.aggregate is not None:
        watermark = None  # the ranking orders aggregated columns
        translation._rewrite_expressions(ranking.aggregate)
    for window in ranking.inner.find_all(exp.Window):
        order = window.args.get("order")
        for ordered in order.expressions if order is not None else []:
            column = ordered.this
            if isinstance(column, exp.Column) and column.name == watermark:
                ordered.set("this", exp.column(event_ms, table=column.table or None))
    if ranking.aggregate is None:
        _break_ties(select, ranking, event_ms)
    _expand_star(select, ranking, list(columns))
    translation._rewrite_expressions(ranking.inner)
    translation._rewrite_expressions(select)
    translation._name_columns(select, bounds)
    return str(select.sql("duckdb"))


def _expand_star(select: exp.Select, ranking: RankingSubquery, columns: list[str]) -> None:
    """The outer ``SELECT *`` as the subquery's columns (as the stream expands it), not
    the internal columns of the timed relation."""
    names: list[str] = []
    for item in ranking.inner.expressions:
        if isinstance(item, exp.Star):
            names.extend(c for c in columns if c != ranking.rank_column)
        else:
            names.append(item.alias_or_name)
    items: list[exp.Expr] = []
    for item in select.expressions:
        if isinstance(item, exp.Star):
            items.extend(exp.column(name, quoted=True) for name in names)
        else:
            items.append(item)
    select.set("expressions", items)


def _break_ties(select: exp.Select, ranking: RankingSubquery, event_ms: str) -> None:
    """``ROW_NUMBER()``'s ORDER BY followed by the input order: descending for a
    deduplication that keeps the last row (the last read of the latest time), else
    ascending (ties in the order read)."""
    for window in ranking.inner.find_all(exp.Window):
        if not isinstance(window.this, exp.RowNumber):
            continue
        order = window.args.get("order")
        if order is None:
            order = exp.Order(expressions=[])
            window.set("order", order)
        ordered = order.expressions
        keeps_last = (
            len(ordered) == 1
            and isinstance(ordered[0].this, exp.Column)
            and ordered[0].this.name == event_ms
            and bool(ordered[0].args.get("desc"))
            and _first_row_only(select, ranking.rank_column)
        )
        order.append("expressions", exp.Ordered(this=exp.column(INPUT_ORDER), desc=keeps_last))


def _first_row_only(select: exp.Select, rank_column: str) -> bool:
    """Whether ``select``'s WHERE keeps row number 1 only (``rn = 1``, ``rn <= 1``,
    ``rn < 2``), as a deduplication does."""
    where = select.args.get("where")
    terms = where.this.flatten() if where is not None and isinstance(where.this, exp.And) else []
    if where is not None and not terms:
        terms = [where.this]
    for term in terms:
        if not isinstance(term, exp.EQ | exp.LTE | exp.LT):
            continue
        column, bound = term.this, term.expression
        if isinstance(column, exp.Column) and column.name == rank_column:
            limit = "2" if isinstance(term, exp.LT) else "1"
            if isinstance(bound, exp.Literal) and not bound.is_string and bound.this == limit:
                return True
    return False
