"""Flink built-ins (``streaming.sql.builtins``) in the DuckDB translation (``batch``).

DuckDB's functions of these names differ (its ``HOUR`` takes no text, it has no
``DATE_FORMAT``), so each call becomes DuckDB SQL computing what the built-in computes:

- ``HOUR(t)``: ``EXTRACT(HOUR ...)`` of the instant ``t`` (UTC), ``t`` read as
  ``timestamps.parse_timestamp`` reads it (a number is ms; text ISO-8601 or SQL style);
- ``DATE_FORMAT(t, 'pattern')``: ``strftime`` of that instant, the Java pattern's letters
  (``yyyy yy MM dd HH mm ss SSS`` and quoted text, as ``builtins.date_format`` knows them)
  as strftime's; the pattern must be a literal;
- ``SPLIT_INDEX`` and ``REGEXP_EXTRACT``: the stream's own Python functions
  (``builtins.split_index``, ``builtins.regexp_extract``: Python's ``re``, NULL without a
  match) registered in DuckDB under internal names (``PYTHON``), since DuckDB's
  ``regexp_extract`` gives '' without a match and RE2 is not Python's ``re``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp

from streaming.sql.builtins import JAVA_PATTERN, STRFTIME, regexp_extract, split_index
from streaming.sql.functions import lookup


@dataclass(frozen=True)
class PythonBuiltin:
    """A built-in DuckDB runs as the stream's Python function: the name it is registered
    under, the function, its DuckDB parameter and result types."""

    name: str
    fn: Callable[..., Any]
    parameters: tuple[str, ...]
    returns: str


#: the built-ins run in DuckDB as Python functions, by their SQL names
PYTHON = {
    "SPLIT_INDEX": PythonBuiltin(
        "__flink_split_index", split_index, ("VARCHAR", "VARCHAR", "BIGINT"), "VARCHAR"
    ),
    "REGEXP_EXTRACT": PythonBuiltin(
        "__flink_regexp_extract", regexp_extract, ("VARCHAR", "VARCHAR", "BIGINT"), "VARCHAR"
    ),
}
#: the built-ins translated here
TRANSLATED = ("DATE_FORMAT", "HOUR", *PYTHON)


def python_builtin(registered: str) -> PythonBuiltin | None:
    """The built-in registered in DuckDB as ``registered`` (None: not one)."""
    return next((b for b in PYTHON.values() if b.name == registered.lower()), None)


def strftime_pattern(java: str) -> str:
    """A Java date pattern as a DuckDB ``strftime`` format (``%`` kept as text)."""
    out, at = [], 0
    for match in JAVA_PATTERN.finditer(java):
        out.append(java[at : match.start()].replace("%", "%%"))
        token = match.group(0)
        if token.startswith("'"):
            out.append(token[1:-1].replace("%", "%%"))
        else:
            out.append("%g" if token == "SSS" else STRFTIME[token])
        at = match.end()
    out.append(java[at:].replace("%", "%%"))
    return "".join(out)


def called_builtin(node: exp.Expr) -> str | None:
    """The name of the translated built-in ``node`` calls (a plain call, or a node of its
    own in sqlglot: ``HOUR``, ``REGEXP_EXTRACT``), None if it calls none."""
    if isinstance(node, exp.Anonymous):
        name = node.name.upper()
    elif isinstance(node, exp.Func) and not isinstance(node, exp.AggFunc):
        name = node.sql_name()
    else:
        return None
    return name if name in TRANSLATED else None


def translate(
    node: exp.Expr, epoch_ms: Callable[[str], str], error: Callable[[exp.Expr, str], Exception]
) -> exp.Expr | None:
    """DuckDB's expression for a call of a translated built-in (its arguments already
    translated), or None when ``node`` is none (or a Python function shadows it).
    ``epoch_ms``: DuckDB SQL of a TIMESTAMP value's epoch ms; ``error``: a ``SqlError``
    at a node."""
    name = called_builtin(node)
    if name is None:
        return None
    args: list[exp.Expr] = list(node.expressions) if isinstance(node, exp.Anonymous) else []
    for value in [] if args else node.args.values():  # in order, as the stream's ``_as_call``
        values = value if isinstance(value, list) else [value]
        args.extend(v for v in values if isinstance(v, exp.Expr))
    if lookup(name) is not None:
        return None  # a Python function of that name: registered as such
    if name in PYTHON:
        if name == "REGEXP_EXTRACT" and len(args) == 2:
            args.append(exp.Literal.number(0))  # the whole match, the default group
        return exp.Anonymous(this=PYTHON[name].name, expressions=args)
    instant = f"make_timestamp(CAST(({epoch_ms(args[0].sql('duckdb'))}) AS BIGINT) * 1000)"
    if name == "HOUR":
        return sqlglot.parse_one(f"CAST(EXTRACT(HOUR FROM {instant}) AS BIGINT)", read="duckdb")
    if len(args) != 2 or not (isinstance(args[1], exp.Literal) and args[1].is_string):
        raise error(node, "DATE_FORMAT is translated to batch SQL with a literal pattern only")
    pattern = exp.Literal.string(strftime_pattern(args[1].this)).sql("duckdb")
    return sqlglot.parse_one(f"strftime({instant}, {pattern})", read="duckdb")
