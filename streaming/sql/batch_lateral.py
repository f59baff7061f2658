"""``LATERAL TABLE(fn(...))`` in the DuckDB translation (``batch``): a Python table
function joined to the rows of the FROM table.

    SELECT ... FROM t, LATERAL TABLE(fn(x)) AS T(a, b) ...
    SELECT ... FROM t LEFT JOIN LATERAL TABLE(fn(x)) AS T(a, b) ON TRUE ...

The function is registered on the connection (under an internal name) as a scalar
function returning the list of its rows for one input row, ``STRUCT(f0 ..., f1 ...)[]``
(the column types from the function's ``result_types`` or type hints); the FROM table's
relation is read as ``(SELECT *, UNNEST(fn(x)) AS row FROM t)`` with the row's fields as
the named columns, so WHERE, GROUP BY and group windows over the joined rows translate as
over any table. For LEFT JOIN ... ON TRUE, an input row for which the function yields
nothing gets one row of NULLs, as in the stream.

A function that raises (or yields a row of the wrong width) fails its record in the
stream: the processing exception handler skips it (``log_and_continue``) or sends it to
the dead-letter topic, so the stream's output has none of its rows. The batch does the
same: the input row is left out (LEFT JOIN included), and the query goes on.

The parameter types come from the function's type hints, else from the argument when it
is a plain column; LATERAL TABLE after a join or a window TVF, or over a view or
subquery, is not translated (the stream compiles neither the first nor the second).
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable, Iterable
from typing import Any

import sqlglot
from sqlglot import exp

from streaming.sql import functions
from streaming.sql.catalog import TableDef
from streaming.sql.rewrite import LateralTable

#: the column holding one row of the function in the joined relation
ROW = "__lateral_row"
#: the prefix of the name the function is registered under while the query runs
PREFIX = "__lateral_"
_DUCKDB_TYPES = {"STRING": "VARCHAR", "BIGINT": "BIGINT", "DOUBLE": "DOUBLE", "BOOLEAN": "BOOLEAN"}


@dataclasses.dataclass(frozen=True)
class Registered:
    """The function as DuckDB registers it: name, parameter and return types."""

    name: str
    fn: Callable[..., Any]
    parameters: tuple[str, ...]
    returns: str


def translate(
    translation: Any, select: exp.Select, from_: exp.From, group_bounds: tuple[str, str]
) -> tuple[str, TableDef, Registered]:
    """The DuckDB SQL of ``select`` (its FROM a table with a LATERAL TABLE), the table it
    reads and the function to register; ``translation`` is the query's
    ``batch._Translation``, ``group_bounds`` its columns of a GROUP BY window's bounds."""
    statement = translation.statement
    lateral = statement.laterals[0]
    table = from_.this
    if (
        len(statement.laterals) > 1
        or select.args.get("joins")
        or statement.window_tvf is not None
        or not isinstance(table, exp.Table)
        or table.name not in translation.tables
        or translation.tables[table.name].is_view
        or lateral.after != table.alias_or_name
    ):
        raise translation.error(
            lateral.offset,
            "LATERAL TABLE is translated to batch SQL after one declared table (not a view, "
            "subquery, join or window TVF), once per query",
        )
    source = translation.tables[table.name]
    function = functions.lookup(lateral.call.name)
    assert isinstance(function, functions.TableFunction)  # the compiler checked it
    names = lateral.columns or tuple(f"f{i}" for i in range(len(function.result_kinds)))
    alias = table.alias_or_name
    joined = dataclasses.replace(
        source, columns={**source.columns, **dict(zip(names, function.result_kinds, strict=True))}
    )
    translation.scope[alias] = joined
    if lateral.alias is not None:
        for reference in select.find_all(exp.Column):
            if reference.table == lateral.alias:
                reference.set("table", None)
    args = [a.copy() for a in lateral.call.expressions]
    holder = exp.Select(expressions=args)
    translation._rewrite_expressions(holder)
    registered = _registered(translation, lateral, function, source, holder.expressions)
    call = exp.Anonymous(this=registered.name, expressions=holder.expressions)
    translation._no_processing_time(select)
    window = translation._group_window(select)
    if window is not None and window[0] == "SESSION":
        raise translation.error(
            lateral.offset,
            "a SESSION window over LATERAL TABLE rows is not translated to batch SQL",
        )
    bounds = group_bounds if window is not None else None
    inner = translation._relation(table, window, bounds)
    fields = ", ".join(
        f"struct_extract({ROW}, 'f{i}') AS {_quoted(name)}" for i, name in enumerate(names)
    )
    sql = (
        f"SELECT * EXCLUDE ({ROW}), {fields} FROM "
        f"(SELECT *, UNNEST({call.sql('duckdb')}) AS {ROW} FROM {inner.sql('duckdb')}) "
        "AS __lateral"
    )
    parsed = sqlglot.parse_one(sql, read="duckdb")
    assert isinstance(parsed, exp.Select)
    from_.set("this", parsed.subquery(alias))
    translation._rewrite_expressions(select)
    translation._name_columns(select, bounds)
    return str(select.sql("duckdb")), source, registered


def _quoted(name: str) -> str:
    return exp.to_identifier(name, quoted=True).sql("duckdb")


def _registered(
    translation: Any,
    lateral: LateralTable,
    function: functions.TableFunction,
    source: TableDef,
    args: list[exp.Expr],
) -> Registered:
    """The function as DuckDB calls it: its parameter types from its type hints (else the
    argument column's type), its rows as a list of structs."""
    try:
        hints = typing.get_type_hints(function.fn)
    except (NameError, TypeError):
        hints = {}
    names = list(inspect.signature(function.fn).parameters)
    parameters = []
    for i, arg in enumerate(args):
        kind = functions.hint_kind(hints.get(names[i])) if i < len(names) else None
        if kind is None and isinstance(arg, exp.Column):
            kind = source.columns.get(arg.name)
        if kind not in _DUCKDB_TYPES:
            raise translation.error(
                lateral.offset,
                f"table function {function.name} needs type hints (int, float, str, bool) on "
                "its parameters to run in DuckDB (or plain columns as arguments)",
            )
        parameters.append(_DUCKDB_TYPES[kind])
    fields = ", ".join(
        f"f{i} {_DUCKDB_TYPES.get(k, 'VARCHAR')}" for i, k in enumerate(function.result_kinds)
    )
    name = f"{PREFIX}{'left_' if lateral.left else ''}{function.name.lower()}"
    returns = f"STRUCT({fields})[]"
    fn = rows_function(function, lateral.left, len(parameters))
    return Registered(name, fn, tuple(parameters), returns)


def rows_function(
    function: functions.TableFunction, left: bool, arity: int
) -> Callable[..., list[dict[str, Any]] | None]:
    """``args -> the function's rows`` as DuckDB structs (``{"f0": ..., ...}``): one row
    of NULLs for none when ``left``; None (no row at all) when the function raises or
    yields a row of the wrong width, as the stream's output lacks the failed record. Its
    signature has ``arity`` parameters (DuckDB checks it against the parameter types)."""
    width = len(function.result_kinds)

    def rows(*args: Any) -> list[dict[str, Any]] | None:
        try:
            produced: Iterable[Any] = list(function.fn(*args) or ())
        except Exception:
            return None
        structs = []
        for item in produced:
            many = isinstance(item, tuple | list) and (width > 1 or len(item) == 1)
            values = tuple(item) if many else (item,)
            if len(values) != width:
                return None
            structs.append({f"f{i}": v for i, v in enumerate(values)})
        if not structs and left:
            return [dict.fromkeys(f"f{i}" for i in range(width))]
        return structs

    positional = inspect.Parameter.POSITIONAL_ONLY
    rows.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(f"arg{i}", positional) for i in range(arity)]
    )
    return rows
