"""``LATERAL TABLE(fn(...))``: a Python table function joined to the rows of a FROM table.

``FROM t, LATERAL TABLE(fn(args)) AS T(a, b)`` (or ``CROSS JOIN LATERAL TABLE``) gives one
row per row the function yields for a row of ``t``: ``t``'s columns and ``a``, ``b``;
``LEFT JOIN LATERAL TABLE(...) ON TRUE`` keeps a row of ``t`` for which the function
yields none, with NULL in ``a`` and ``b``. Without column names the columns are ``f0``,
``f1``, ... (Flink's). ``*`` stands for ``t``'s columns then the function's, as in
Flink; ``t.*`` for ``t``'s and ``T.*`` for the function's. The joined rows are a view (``flat_map_values`` over ``t``'s
stream, key and timestamp kept), so filters, projections, GROUP BY and windows over them
compile as over any table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from sqlglot import exp

from streaming.sql import functions
from streaming.sql.catalog import TableDef
from streaming.sql.errors import error_at
from streaming.sql.expressions import compile_expression
from streaming.sql.rewrite import LateralTable, Statement
from streaming.sql.scopes import RowScope


def take_lateral(statement: Statement, table: str) -> LateralTable | None:
    """The statement's next LATERAL TABLE if it joins ``table`` (its alias or name)."""
    laterals = statement.laterals
    if laterals and laterals[0].after == table:
        return laterals.pop(0)
    return None


def lateral_view(
    compiler: Any, select: exp.Select, source: TableDef, alias: str | None, lateral: LateralTable
) -> TableDef:
    """The view of ``source``'s rows joined with the table function's rows; column
    references qualified by the LATERAL alias are made plain."""
    text = compiler.source
    name = lateral.call.name
    if source.is_upsert:
        raise error_at(
            text,
            lateral.offset,
            f"LATERAL TABLE over the updating table {source.name} is not supported yet",
        )
    function = functions.lookup(name)
    if not isinstance(function, functions.TableFunction):
        what = "unknown table function" if function is None else "not a table function:"
        raise error_at(text, lateral.offset, f"{what} {name}")
    rows = RowScope(source, text, alias)
    fns = [compile_expression(arg, rows).fn for arg in lateral.call.expressions]
    wrong = functions.check_arity(function.fn, len(fns))
    if wrong is not None:
        raise error_at(text, lateral.offset, f"function {function.name} {wrong}")
    width = len(function.result_kinds)
    names = lateral.columns or tuple(f"f{i}" for i in range(width))
    if len(names) != width:
        raise error_at(
            text,
            lateral.offset,
            f"{lateral.alias} names {len(names)} columns, {function.name} gives {width}",
        )
    for column in names:
        if column in source.columns:
            raise error_at(
                text, lateral.offset, f"column {column} is in {source.name} already: rename it"
            )
    if lateral.alias is not None:
        for reference in select.find_all(exp.Column):
            if reference.table == lateral.alias:
                reference.set("table", None)
    view = dataclasses.replace(
        source,
        name=f"{source.name}, LATERAL TABLE({function.name})",
        connector="view",
        columns={**source.columns, **dict(zip(names, function.result_kinds, strict=True))},
        options={k: v for k, v in source.options.items() if k != "table.type"},
    )
    expand = _expander(function, fns, names, lateral.left)
    compiler.views[view.name] = compiler.source_of(source).flat_map_values(expand)
    return view


def expand_lateral_stars(tree: exp.Expr, statement: Statement, tables: dict[str, TableDef]) -> None:
    """In each SELECT of ``tree`` over a table and a LATERAL TABLE of the statement,
    ``*`` as the table's columns then the function's (Flink's order), ``t.*`` as the
    table's and ``T.*`` (the LATERAL alias) as the function's, in place (before the
    query's output names are read: a view of it). A call of an unknown function is
    left to ``lateral_view`` to report."""
    for select in tree.find_all(exp.Select):
        from_ = select.args.get("from_")
        node = from_.this if from_ is not None else None
        if not isinstance(node, exp.Table) or node.name not in tables:
            continue
        alias = node.alias_or_name
        lateral = next((t for t in statement.laterals if t.after == alias), None)
        function = functions.lookup(lateral.call.name) if lateral is not None else None
        if lateral is None or not isinstance(function, functions.TableFunction):
            continue
        width = len(function.result_kinds)
        names = lateral.columns or tuple(f"f{i}" for i in range(width))
        _expand_stars(select, tables[node.name], alias, lateral, names)


def _expand_stars(
    select: exp.Select,
    source: TableDef,
    alias: str | None,
    lateral: LateralTable,
    names: tuple[str, ...],
) -> None:
    """``*``, ``t.*`` and ``T.*`` of ``select`` as ``expand_lateral_stars`` says."""
    own = [c for c in source.columns if c[:1] != "$"]
    expanded: list[exp.Expr] = []
    for item in select.expressions:
        columns: list[str] | None = None
        if isinstance(item, exp.Star):
            columns = [*own, *names]
        elif isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
            if lateral.alias is not None and item.table == lateral.alias:
                columns = list(names)
            elif item.table in (alias, source.name):
                columns = own
        if columns is None:
            expanded.append(item)
        else:
            expanded += [exp.column(c, quoted=True) for c in columns]
    select.set("expressions", expanded)


def _expander(
    function: functions.TableFunction,
    fns: list[Callable[[dict[str, Any]], Any]],
    names: tuple[str, ...],
    left: bool,
) -> Callable[[Any], list[dict[str, Any]]]:
    """``row -> joined rows``: the row with each of the function's rows (with NULLs when
    there is none and ``left``)."""
    call, width = function.fn, len(names)
    nulls = dict.fromkeys(names)

    def expand(row: Any) -> list[dict[str, Any]]:
        if not isinstance(row, dict):
            return []
        args = [fn(row) for fn in fns]
        try:
            produced = list(call(*args) or ())
        except Exception as e:
            raise functions.call_failed(function.name, args, e) from e
        joined = []
        for item in produced:
            many = isinstance(item, tuple | list) and (width > 1 or len(item) == 1)
            values = tuple(item) if many else (item,)
            if len(values) != width:
                raise functions.FunctionError(
                    f"function {function.name} gave a row of {len(values)} columns, not {width}"
                )
            joined.append({**row, **dict(zip(names, values, strict=True))})
        return joined if joined or not left else [{**row, **nulls}]

    return expand
