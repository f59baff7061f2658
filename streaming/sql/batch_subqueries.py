"""The DuckDB translation of subqueries in FROM and JOIN (``batch``): each one translated
on its own, as a query, and read by the outer query as a relation.

    SELECT category, AVG(final) FROM (
      SELECT MAX(B.price) AS final, A.category FROM auction A, bid B
      WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires
      GROUP BY A.id, A.category
    ) Q GROUP BY category

A subquery (an aggregation, a window TVF aggregation, a join, a ranking over a join) is
what the stream compiles into a view (``views``); its batch rows are the view's final
rows: an aggregation's last value per group, each window's result (every window, as
for any window aggregation: the stream has those that closed), a Top-N's top rows once
its updates are applied. The outer query then runs over those rows as the
stream's runs over the view, so what the stream's result ends with (the last row per
sink key of an updating result) is the batch result. The subquery's columns are named
as the stream names them (alias, column name, else ``EXPR$i``); its window bounds stay
epoch ms, so the outer query compares them with time attributes as instants (Nexmark
q7's ``B.dateTime BETWEEN B1.dateTime - INTERVAL '10' SECOND AND B1.dateTime``, bounds
included as in the stream's interval join) and formats them into a TIMESTAMP sink column.
A stream joined (first, INNER or LEFT, on its key) with an updating subquery is the
stream's lookup join: each stream row meets the view's rows as they are when it comes,
the batch its final rows, as for a stream-table join (``batch``): the two agree once the
view's rows no longer change after the stream rows that meet them (a regular join, the
view first, follows its changes and agrees).

A ranking (``ROW_NUMBER()``, ...) over a join orders its TIMESTAMP columns as instants.
Rows that tie on its ORDER BY come in the stream in the order the join emits them, the
order in which the later of their two rows arrived: the batch breaks ties by that time
(the greatest event time of the joined rows; the latest first for a deduplication that
keeps the last row), then by the event times of its rows in join order (the row that
arrives meets the other side's rows in the order they came); among rows that tie on all
of these too, DuckDB picks.

Not translated (``SqlError``): a window (a window TVF or a group window) in the outer
query of a subquery, ``FOR SYSTEM_TIME AS OF`` the event time of a subquery's rows (their
relation has none), a subquery that is not a SELECT, and ``*`` over a subquery whose own
list has a ``*`` left (``stars.expand_over_subqueries`` expands the others first).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import sqlglot
from sqlglot import exp

from streaming.sql.batch_rank import RANKINGS
from streaming.sql.catalog import TableDef
from streaming.sql.derived import span
from streaming.sql.join_star import expand_join_star
from streaming.sql.stars import output_names

#: the columns of a window's bounds (epoch ms in the translation)
_BOUNDS = {"window_start", "window_end", "window_time", "__window_start", "__window_end"}
_BOUND_CALLS = {"TUMBLE_START", "TUMBLE_END", "HOP_START", "HOP_END"}


def reads_subquery(select: exp.Select) -> bool:
    """Whether ``select`` reads a subquery in FROM or a JOIN."""
    return any(isinstance(node, exp.Subquery) for node in _read(select))


def _read(select: exp.Select) -> list[exp.Expr]:
    from_ = select.args.get("from_") or select.args.get("from")
    nodes = [from_.this] if from_ is not None else []
    return nodes + [join.this for join in select.args.get("joins") or []]


def translate(
    translation: Any, select: exp.Select, event_ms: str
) -> tuple[str, tuple[TableDef, ...]]:
    """The DuckDB SQL of ``select`` (the INSERT's query of ``translation``, a
    ``batch._Translation``) over its subqueries, and the tables it reads; ``event_ms``:
    the relations' event-time column."""
    statement = translation.statement
    _expand_star(select)
    own_tvfs: list[Any] = []
    read: list[TableDef] = []
    from_ = select.args.get("from_") or select.args.get("from")
    assert from_ is not None  # reads_subquery said so
    joins = select.args.get("joins") or []
    nodes = [from_.this, *(join.this for join in joins)]
    unnamed = 0
    for node in nodes:
        if isinstance(node, exp.Subquery):
            start, end = span(node)
            own_tvfs += [t for t in statement.window_tvfs if start <= t.offset <= end]
            if not node.alias_or_name:
                unnamed += 1
                node.set("alias", exp.TableAlias(this=exp.to_identifier(f"__subquery{unnamed}")))
            translation.scope[node.alias_or_name] = _columns_table(node)
        else:
            translation.scope[node.alias_or_name] = translation._source_table(node)
    outer_tvfs = [t for t in statement.window_tvfs if t not in own_tvfs]
    if outer_tvfs:
        raise translation.error(
            outer_tvfs[0].offset,
            "a window TVF in a query over a subquery is not translated to batch SQL",
        )
    translation._no_processing_time(select)
    if translation._group_window(select) is not None:
        raise translation.error(
            select, "a group window over a subquery is not translated to batch SQL"
        )
    for i, node in enumerate(nodes):
        if isinstance(node, exp.Subquery):
            sql, tables, kinds = _subquery(translation, node, own_tvfs, event_ms)
            read.extend(tables)
            alias = node.alias_or_name
            translation.scope[alias] = dataclasses.replace(translation.scope[alias], columns=kinds)
            relation = exp.Subquery(
                this=_parse(sql), alias=exp.TableAlias(this=exp.to_identifier(alias))
            )
            node.replace(relation)
            if i > 0:
                on = joins[i - 1].args.get("on")
                if on is not None:
                    joins[i - 1].set("on", on.transform(translation._instants))
        elif i == 0:
            read.append(translation.tables[node.name])
            from_.set("this", translation._relation(node, None, None))
        else:
            read.append(translation.tables[node.name])
            _refuse_as_of_subquery(translation, node, nodes)
            translation._join(joins[i - 1], nodes[0].alias_or_name)
    translation._rewrite_expressions(select)
    translation._name_columns(select, None)
    unique = {table.name: table for table in read}
    return select.sql("duckdb"), tuple(unique.values())


def _refuse_as_of_subquery(translation: Any, table: exp.Expr, nodes: list[exp.Expr]) -> None:
    """A ``SqlError`` for ``JOIN t FOR SYSTEM_TIME AS OF q.ts`` on the event time of a
    subquery ``q``'s rows: their relation has no event time to meet the versions at."""
    version = table.args.get("version")
    if version is None or translation._as_of_proctime(version.expression):
        return
    at = version.expression
    left = at.table if isinstance(at, exp.Column) and at.table else nodes[0].alias_or_name
    if any(isinstance(n, exp.Subquery) and n.alias_or_name == left for n in nodes):
        raise translation.error(
            table,
            "FOR SYSTEM_TIME AS OF the time of a subquery's rows is not translated to batch SQL",
        )


def _parse(sql: str) -> exp.Expr:
    return sqlglot.parse_one(sql, read="duckdb")


def _columns_table(node: exp.Subquery) -> TableDef:
    """A placeholder table of the subquery ``node``'s output names (kinds filled in once
    translated)."""
    names = (
        {name: "OTHER" for name in _names(node.this)} if isinstance(node.this, exp.Select) else {}
    )
    return TableDef(node.alias_or_name, names, "", "view", (), (), "raw", None, {})


def _expand_star(select: exp.Select) -> None:
    """``*`` over one subquery as its columns, as the stream expands it over the view."""
    read = _read(select)
    if len(read) != 1 or not isinstance(read[0], exp.Subquery):
        return
    nested = read[0].this
    if not isinstance(nested, exp.Select) or any(
        isinstance(i, exp.Star) for i in nested.expressions
    ):
        return
    items: list[exp.Expr] = []
    for item in select.expressions:
        if isinstance(item, exp.Star):
            items.extend(exp.column(name, quoted=True) for name in _names(nested))
        else:
            items.append(item)
    select.set("expressions", items)


def _names(select: exp.Select) -> list[str]:
    """The output names of ``select`` as the stream names a view's columns."""
    return output_names(select)


def _subquery(
    translation: Any, node: exp.Subquery, tvfs: list[Any], event_ms: str
) -> tuple[str, tuple[TableDef, ...], dict[str, str]]:
    """The DuckDB SQL of the subquery ``node``, the tables it reads and its columns' kinds
    (window bounds: BIGINT epoch ms)."""
    inner = node.this
    if not isinstance(inner, exp.Select):
        raise translation.error(node, "a subquery in FROM needs a SELECT")
    inner = inner.copy()
    tables: dict[str, TableDef] = translation.tables
    if all(isinstance(n, exp.Table) and n.name in tables for n in _read(inner)):
        expand_join_star(inner, lambda t: tables[t.name], translation.source)
    _expand_star(inner)
    if any(isinstance(item, exp.Star) for item in inner.expressions):
        raise translation.error(
            node, "SELECT * in a subquery in FROM is not translated to batch SQL: name the columns"
        )
    names = _names(inner)
    sink_name = f"__{node.alias_or_name}"
    sink = TableDef(sink_name, dict.fromkeys(names, "OTHER"), "", "view", (), (), "raw", None, {})
    start, end = span(node)
    own = tuple(t for t in tvfs if start <= t.offset <= end)
    statement = dataclasses.replace(
        translation.statement, window_tvf=own[0] if own else None, window_tvfs=own
    )
    insert = exp.Insert(this=exp.Table(this=exp.to_identifier(sink_name)), expression=inner)
    sub = type(translation)(translation.source, {**tables, sink_name: sink}, statement, insert)
    scope = _scope(inner, tables)
    sub.scope.update(scope)
    _order_as_instants(sub, inner, scope, event_ms)
    items = [item.copy() for item in inner.expressions]
    query = sub.translate()
    kinds = {name: _kind(sub, item, bool(own)) for name, item in zip(names, items, strict=True)}
    return query.sql, query.tables, kinds


def _scope(select: exp.Select, tables: dict[str, TableDef]) -> dict[str, TableDef]:
    """The declared tables ``select`` reads, by alias."""
    return {
        node.alias_or_name: tables[node.name]
        for node in _read(select)
        if isinstance(node, exp.Table) and node.name in tables
    }


def _order_as_instants(
    sub: Any, select: exp.Select, scope: dict[str, TableDef], event_ms: str
) -> None:
    """A ranking's TIMESTAMP ORDER BY columns as epoch ms; over a join, ties broken by the
    time the join emits the row (the greatest event time of its rows), then by its rows'
    event times in join order (a row that arrives joins the other side's rows of its key
    in their arrival order)."""
    timed = [alias for alias, table in scope.items() if table.watermark is not None]
    for window in select.find_all(exp.Window):
        if not isinstance(window.this, RANKINGS):
            continue
        order = window.args.get("order")
        ordered = list(order.expressions) if order is not None else []
        for item in ordered:
            column = item.this
            if not isinstance(column, exp.Column) or sub._column_kinds(column) != {"TIMESTAMP"}:
                continue
            owners = [a for a in timed if _time_attribute(scope[a]) == column.name]
            if column.table in owners or (not column.table and len(owners) == 1):
                item.set("this", exp.column(event_ms, table=column.table or owners[0]))
            else:
                item.set("this", sub._as_ms(column))
        if len(timed) < 2 or order is None:
            continue
        times = [exp.column(event_ms, table=a) for a in timed]
        last = _keeps_last(select, window, scope)
        for tie_break in (exp.func("GREATEST", *times), *times):
            order.append("expressions", exp.Ordered(this=tie_break.copy(), desc=last))


def _time_attribute(table: TableDef) -> str | None:
    return table.watermark.column if table.watermark is not None else None


def _keeps_last(select: exp.Select, window: exp.Window, scope: dict[str, TableDef]) -> bool:
    """Whether ``window`` is a deduplication keeping the last row: ``ROW_NUMBER()`` ordered
    by the FROM table's time attribute alone, descending (``dedup``)."""
    order = window.args.get("order")
    ordered = order.expressions if order is not None else []
    from_ = select.args.get("from_") or select.args.get("from")
    first = scope.get(from_.this.alias_or_name) if from_ is not None else None
    if first is None or first.watermark is None or len(ordered) != 1:
        return False
    column = ordered[0].this
    return (
        isinstance(window.this, exp.RowNumber)
        and isinstance(column, exp.Column)
        and column.name == first.watermark.column
        and bool(ordered[0].args.get("desc"))
    )


def _kind(sub: Any, item: exp.Expr, windowed: bool) -> str:
    """The kind of an output column of a subquery (``sub``: its translation): TIMESTAMP
    for a TIMESTAMP column passed through, BIGINT for integers and window bounds (epoch
    ms), DOUBLE for AVG, else OTHER."""
    node = item.this if isinstance(item, exp.Alias) else item
    if isinstance(node, exp.Column) and node.name in _BOUNDS and not sub._column_kinds(node):
        return "BIGINT" if windowed or node.name.startswith("__") else "OTHER"
    if isinstance(node, exp.Anonymous) and node.name.upper() in _BOUND_CALLS:
        return "BIGINT"
    if isinstance(node, exp.Window) and isinstance(node.this, RANKINGS):
        return "BIGINT"
    if isinstance(node, exp.Avg):
        return "DOUBLE"
    if isinstance(node, exp.Min | exp.Max):
        node = node.this
    if isinstance(node, exp.Column):
        kinds = sub._column_kinds(node)
        if len(kinds) == 1:
            return str(next(iter(kinds)))
    return str(sub._kind(node))
