"""Tables defined by a query: ``CREATE TABLE ... AS SELECT``, ``CREATE VIEW`` and
subqueries in FROM.

The table's columns are the query's output columns, named by their alias, else the
column's own name, else ``EXPR$i`` (``i`` its position from 0, as Flink names them), a
name taken already followed by 0, 1, ... (``ts``, ``ts0``: Flink's unique names). A
column list in the statement names (and for CREATE TABLE types) them instead. Kinds not
listed are ``INFERRED``: the compiler fills them in from the compiled SELECT list.

The primary key is the statement's ``PRIMARY KEY`` or, when the result is updating, its
upsert key as Flink infers it: the GROUP BY columns of an aggregation (with the window
start or end of a window under EMIT CHANGES), or the passed-through key of an upsert
source (a query over a table, a join of two tables: the left table's key). A result
whose upsert key is not all in the SELECT list has no key (an updating result then needs
a PRIMARY KEY, as for INSERT INTO). An append result (a windowed aggregation without EMIT
CHANGES, a query over a stream, a join with a stream) has none.

An output that passes the (left) source's WATERMARK column through unchanged keeps it as
the table's time attribute, with the same delay.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from streaming.sql import functions
from streaming.sql.catalog import TableDef
from streaming.sql.errors import error_at, node_offset
from streaming.sql.rewrite import SESSION_ALIAS, Watermark

#: GROUP BY items that make a window: group-window functions (SESSION renamed).
WINDOW_CALLS = ("TUMBLE", "HOP", SESSION_ALIAS)
#: Window bounds in a SELECT list.
WINDOW_COLUMNS = ("window_start", "window_end")
WINDOW_BOUND_CALLS = (
    "TUMBLE_START",
    "TUMBLE_END",
    "HOP_START",
    "HOP_END",
    "SESSION_START",
    "SESSION_END",
)


@dataclass(frozen=True)
class Output:
    """One output column of a query: its name and its (unaliased) expression."""

    name: str
    node: exp.Expr


@dataclass(frozen=True)
class QuerySources:
    """What the query reads: its FROM table (the left one of a join) and alias, and the
    right table of a join (else None; in a chain of joins, the first stream joined, else
    the first table)."""

    left: TableDef
    left_alias: str
    right: TableDef | None


def outputs(select: exp.Select, source: str) -> list[Output]:
    """The named output columns of a SELECT (an error for ``*``); a name already taken
    gets the first free suffix 0, 1, ... (``ts``, ``ts0``), as Flink (Calcite) makes a
    SELECT list's names unique."""
    result: list[Output] = []
    for i, item in enumerate(select.expressions):
        if isinstance(item, exp.Star) or (
            isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
        ):
            raise error_at(
                source, node_offset(item), "SELECT * is not supported yet: name the columns"
            )
        if isinstance(item, exp.Alias):
            name, node = item.alias, item.this
        elif isinstance(item, exp.Column):
            name, node = item.name, item
        else:
            name, node = f"EXPR${i}", item
        result.append(Output(unique_name(name, {o.name for o in result}), node))
    return result


def output_names(items: list[exp.Expr]) -> list[str]:
    """The output names of a SELECT list as ``outputs`` names them (``*`` and ``t.*``
    as ``EXPR$i``)."""
    names: list[str] = []
    for i, item in enumerate(items):
        if isinstance(item, exp.Alias):
            name = item.alias
        elif isinstance(item, exp.Column) and not isinstance(item.this, exp.Star):
            name = item.name
        else:
            name = f"EXPR${i}"
        names.append(unique_name(name, set(names)))
    return names


def unique_name(name: str, taken: set[str]) -> str:
    """``name``, else the first of ``name0``, ``name1``, ... not in ``taken``."""
    suffix = 0
    unique = name
    while unique in taken:
        unique = f"{name}{suffix}"
        suffix += 1
    return unique


def is_aggregation(select: exp.Select) -> bool:
    """Whether the query aggregates (GROUP BY, or an aggregate in its SELECT list)."""
    return select.args.get("group") is not None or any(
        functions.has_aggregate(e) for e in select.expressions
    )


def window_column(source: TableDef) -> str | None:
    """The window-bound time attribute of window results (a GROUP BY of it groups by
    window), else None."""
    if source.window_bound and source.watermark is not None and not source.is_upsert:
        return source.watermark.column
    return None


def is_windowed(select: exp.Select, has_window_tvf: bool, time_column: str | None = None) -> bool:
    """Whether the query's GROUP BY makes windows: a window TVF, a group window, or the
    window-bound column ``time_column`` of window results."""
    group = select.args.get("group")
    if group is None:
        return False
    return has_window_tvf or any(
        (isinstance(item, exp.Anonymous) and item.name.upper() in WINDOW_CALLS)
        or _is_column(item, time_column)
        for item in group.expressions
    )


def passthrough(columns: list[Output], column: str, qualifiers: tuple[str, ...]) -> str | None:
    """The name of the output that is exactly ``column`` (qualified by one of
    ``qualifiers`` or not at all), else None."""
    for output in columns:
        node = output.node
        if (
            isinstance(node, exp.Column)
            and node.name == column
            and (not node.table or node.table in qualifiers)
        ):
            return output.name
    return None


def upsert_key(
    select: exp.Select,
    columns: list[Output],
    sources: QuerySources,
    *,
    windowed: bool,
    final: bool,
) -> tuple[str, ...]:
    """The output names of the result's upsert key (see the module docstring); empty for
    an append result or when the key is not all in the SELECT list."""
    qualifiers = (sources.left.name, sources.left_alias)
    if is_aggregation(select):
        if windowed and final:
            return ()
        group = select.args.get("group")
        key: list[str] = []
        for item in group.expressions if group else []:
            if isinstance(item, exp.Column) and item.name in WINDOW_COLUMNS:
                continue
            if isinstance(item, exp.Anonymous) and item.name.upper() in WINDOW_CALLS:
                continue
            if not isinstance(item, exp.Column):
                return ()
            name = passthrough(columns, item.name, (item.table,) if item.table else qualifiers)
            if name is None:
                return ()
            key.append(name)
        if windowed:
            bound = next((o.name for o in columns if _is_window_bound(o.node)), None)
            if bound is None:
                return ()
            key.append(bound)
        return tuple(key)
    if not sources.left.is_upsert or (sources.right is not None and not sources.right.is_upsert):
        return ()
    names = [passthrough(columns, c, qualifiers) for c in sources.left.primary_key]
    if not names or any(n is None for n in names):
        return ()
    return tuple(n for n in names if n is not None)


def _is_column(node: exp.Expr, name: str | None) -> bool:
    """Whether ``node`` is a reference to the column ``name`` (never, for None)."""
    return name is not None and isinstance(node, exp.Column) and node.name == name


def _is_window_bound(node: exp.Expr) -> bool:
    """Whether ``node`` is ``window_start`` / ``window_end`` or a ``*_START`` / ``*_END``
    group-window function."""
    if isinstance(node, exp.Column):
        return node.name in WINDOW_COLUMNS
    return isinstance(node, exp.Anonymous) and node.name.upper() in WINDOW_BOUND_CALLS


def time_attribute(
    select: exp.Select,
    columns: list[Output],
    sources: QuerySources,
    window_size_ms: int | None,
    time_column: str | None = None,
) -> Watermark | None:
    """The result's time attribute: the source's WATERMARK renamed to the output that
    passes its column through (a query without aggregation); for a final TUMBLE/HOP
    aggregation (``window_size_ms`` given) its first window bound in the SELECT list (or
    the passed-through ``time_column`` of window results grouped by it). A row comes out
    once its window closes, so the delay is the source's plus, for a window start, the
    window's size, plus once more the source's when the source is itself window results
    (its own time runs that far behind). Else None."""
    watermark = sources.left.watermark
    if watermark is None:
        return None
    if is_aggregation(select):
        if window_size_ms is None:
            return None
        bound = next((o for o in columns if _is_window_bound(o.node)), None)
        passed = next((o for o in columns if _is_column(o.node, time_column)), None)
        if bound is not None:
            end = bound.node.name.lower().endswith("end")
        elif passed is not None:
            bound, end = passed, False  # rows at that time: like a window start
        else:
            return None
        delay = watermark.delay_ms + (0 if end else window_size_ms)
        if sources.left.window_bound:
            delay += watermark.delay_ms
        return Watermark(column=bound.name, delay_ms=delay, offset=watermark.offset)
    name = passthrough(columns, watermark.column, (sources.left.name, sources.left_alias))
    if name is None:
        return None
    return Watermark(column=name, delay_ms=watermark.delay_ms, offset=watermark.offset)


def span(node: exp.Expr) -> tuple[int, int]:
    """The first and last character offsets sqlglot recorded inside ``node``."""
    starts = [
        (n.meta["start"], n.meta.get("end", n.meta["start"]))
        for n in node.walk()
        if getattr(n, "meta", None) and isinstance(n.meta.get("start"), int)
    ]
    if not starts:
        return (0, -1)
    return min(s for s, _ in starts), max(e for _, e in starts)
