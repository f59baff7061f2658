"""Flink built-ins (``streaming.sql.builtins``) in the DuckDB translation (``batch``).

DuckDB's functions of these names differ (its ``HOUR`` takes no text, it has no
``DATE_FORMAT``), so each call becomes DuckDB SQL computing what the built-in computes:

- ``HOUR(t)``: ``EXTRACT(HOUR ...)`` of the instant ``t`` (UTC), ``t`` read as
  ``timestamps.parse_timestamp`` reads it (a number is ms; text ISO-8601 or SQL style);
- ``DATE_FORMAT(t, 'pattern')``: ``strftime`` of that instant, the Java pattern's letters
  (``yyyy yy MM dd HH mm ss SSS`` and quoted text, as ``builtins.date_format`` knows them)
  as strftime's; the pattern must be a literal.

The others (SPLIT_INDEX, REGEXP_EXTRACT) stay refused by ``batch``.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlglot
from sqlglot import exp

from streaming.sql.builtins import JAVA_PATTERN, STRFTIME
from streaming.sql.functions import lookup

#: the built-ins translated here
TRANSLATED = ("DATE_FORMAT", "HOUR")


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


def translate(
    node: exp.Expr, epoch_ms: Callable[[str], str], error: Callable[[exp.Expr, str], Exception]
) -> exp.Expr | None:
    """DuckDB's expression for a call of a translated built-in (its arguments already
    translated), or None when ``node`` is none (or a Python function shadows it).
    ``epoch_ms``: DuckDB SQL of a TIMESTAMP value's epoch ms; ``error``: a ``SqlError``
    at a node."""
    if isinstance(node, exp.Hour):
        name, args = "HOUR", [node.this]
    elif isinstance(node, exp.Anonymous) and node.name.upper() in TRANSLATED:
        name, args = node.name.upper(), list(node.expressions)
    else:
        return None
    if lookup(name) is not None:
        return None  # a Python function of that name: registered as such
    instant = f"make_timestamp(CAST(({epoch_ms(args[0].sql('duckdb'))}) AS BIGINT) * 1000)"
    if name == "HOUR":
        return sqlglot.parse_one(f"CAST(EXTRACT(HOUR FROM {instant}) AS BIGINT)", read="duckdb")
    if len(args) != 2 or not (isinstance(args[1], exp.Literal) and args[1].is_string):
        raise error(node, "DATE_FORMAT is translated to batch SQL with a literal pattern only")
    pattern = exp.Literal.string(strftime_pattern(args[1].this)).sql("duckdb")
    return sqlglot.parse_one(f"strftime({instant}, {pattern})", read="duckdb")
