"""Python aggregate functions (``functions.AggregateFunction``) in the DuckDB translation
(``batch``).

DuckDB registers Python scalar functions, not aggregates, so a call ``my_agg(x, y)`` in a
GROUP BY (plain, a window TVF's, TUMBLE / HOP / SESSION) becomes a scalar function over
the group's argument lists, in the order the stream reads the rows (``batch_order``'s
input order: the ``_offset``, else the rows' order):

    __udaf_my_agg(CAST(to_json(list(json_array(x, y) ORDER BY __input_order)) AS VARCHAR))

The function registered under that name calls what the stream calls: ``create_accumulator()``,
``accumulate(acc, x, y)`` for each row in order (NULLs as ``None``), then ``get_value(acc)``.

The batch has no retractions: over an updating input (a regular join, an upsert table)
the relation holds the final rows and each group is accumulated from them, which equals
the stream's final value only when ``retract`` undoes ``accumulate`` exactly (the
intermediate rows the stream emits have no batch counterpart). In a SESSION window the
stream ``merge``s the accumulators of the sessions a row bridges; the batch accumulates
the merged session's rows in input order, the same value when ``merge`` agrees with
accumulating the rows in that order.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import sqlglot
from sqlglot import exp

from streaming.sql.batch_order import INPUT_ORDER
from streaming.sql.functions import AggregateFunction

#: the prefix of the names the aggregates are registered under while the query runs
PREFIX = "__udaf_"


def call(node: exp.Anonymous, args: list[exp.Expr], kinds: list[str]) -> exp.Expr:
    """DuckDB's expression for ``node``, a Python aggregate's call (``args``: its
    arguments, translated; ``kinds``: BIGINT for those surely integers, read as such
    whatever the relation's column type, as the stream's JSON holds them): the registered
    function over the group's argument lists."""
    values = ", ".join(
        f"TRY_CAST({a.sql('duckdb')} AS BIGINT)" if kind == "BIGINT" else a.sql("duckdb")
        for a, kind in zip(args, kinds, strict=True)
    )
    rows = f"CAST(to_json(list(json_array({values}) ORDER BY {INPUT_ORDER})) AS VARCHAR)"
    return sqlglot.parse_one(f"{PREFIX}{node.name.lower()}({rows})", read="duckdb")


def aggregate_name(registered: str) -> str | None:
    """The SQL name of the aggregate registered as ``registered`` (None: not one)."""
    lowered = registered.lower()
    return lowered[len(PREFIX) :] if lowered.startswith(PREFIX) else None


def scalar(function: AggregateFunction) -> Callable[[str | None], Any]:
    """The scalar function DuckDB calls with a group's argument lists (a JSON array of
    arrays, in input order): the aggregate's value over them."""
    impl = function.impl

    def value(rows: str | None) -> Any:
        accumulator = impl.create_accumulator()
        for args in json.loads(rows) if rows else []:
            impl.accumulate(accumulator, *args)
        return impl.get_value(accumulator)

    return value
