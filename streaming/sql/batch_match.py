"""MATCH_RECOGNIZE in the DuckDB translation (``batch``): the stream's own matcher, run
over each partition's rows in DuckDB.

    SELECT ... FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts ...) AS T WHERE ...

DuckDB has no row pattern matching, so the query reads, as ``T``, a subquery that groups
``t``'s rows by the PARTITION BY columns, hands each partition's rows to a Python function
registered on the connection (as JSON: ``to_json(list(struct_pack(...) ORDER BY ...))``)
and UNNESTs the rows it returns (the PARTITION BY columns then the MEASURES, as the
stream's view holds them). The function compiles nothing: it is the clause as the stream
compiles it (``match_recognize.compile_match``: PATTERN, DEFINE, MEASURES, AFTER MATCH
SKIP, WITHIN, Python functions in DEFINE and MEASURES included), fed row by row as the
stream's ``MatchRecognize`` feeds it (``row_pattern.Matcher.step``).

The rows of a partition are fed in the stream's order: by event time (the WATERMARK
column as epoch ms), then the further ORDER BY columns (NULL first ascending, last
descending, as the stream compares them), then the input order (``batch_order``: the
stream releases the rows of one time in the order it read them). What differs:

- late rows: the stream drops a row at or behind the watermark when it is read (the rows
  after it in its partition were matched already); the batch has no late rows, it
  matches every row, as for windows;
- the end of the input: the stream emits a match once the watermark has passed its rows
  and no partial match that started before it is left (a partial match ends when a row
  breaks it or WITHIN times it out on the watermark). The batch sees the whole input:
  at its end every partial match ends (Flink's last watermark, ``Matcher.finish``), so
  it also gives the matches the stream still holds back (waiting for the watermark, or
  for an earlier partial match without WITHIN that nothing ends yet). The stream's
  output equals the batch's once the watermark has passed every row plus WITHIN.

MATCH_RECOGNIZE ordered by a ``PROCTIME()`` column (rows matched as they are read), over
a subquery or view, and window aggregations of the matches are not translated.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import sqlglot
from sqlglot import exp

from streaming.sql import batch_order
from streaming.sql.catalog import TableDef
from streaming.sql.match_recognize import CompiledMatch, compile_match
from streaming.sql.row_pattern import MatchContext

#: the name the matcher is registered under while the query runs
FUNCTION = "__match_recognize"
#: DuckDB's type of a view column of each kind, to read the matches' JSON
_JSON_TYPES = {"STRING": "VARCHAR", "BIGINT": "BIGINT", "DOUBLE": "DOUBLE", "BOOLEAN": "BOOLEAN"}


def translate(
    translation: Any, select: exp.Select, from_: exp.From, event_ms: str
) -> tuple[str, TableDef, Callable[[str | None], str]]:
    """The DuckDB SQL of ``select`` (its FROM a table with a MATCH_RECOGNIZE), the table
    it reads and the function to register as ``FUNCTION``; ``translation`` is the
    query's ``batch._Translation``, ``event_ms`` the relations' event time column."""
    statement = translation.statement
    clause = statement.match_recognize[0]
    table = from_.this
    if (
        len(statement.match_recognize) > 1
        or clause.subquery_end is not None
        or not isinstance(table, exp.Table)
        or table.name != clause.after
        or table.name not in translation.tables
        or translation.tables[table.name].is_view
    ):
        raise translation.error(
            clause.offset,
            "MATCH_RECOGNIZE is translated to batch SQL over one declared table (not a view "
            "or subquery), once per query",
        )
    source = translation.tables[table.name]
    compiled = compile_match(translation.source, source, clause)
    if compiled.rowtime is None:
        raise translation.error(
            clause.offset,
            "MATCH_RECOGNIZE ordered by processing time (PROCTIME()) is not translated to "
            "batch SQL: its matches depend on when the rows are read",
        )
    if statement.window_tvf is not None or translation._group_window(select) is not None:
        raise translation.error(
            clause.offset,
            "a window aggregation of MATCH_RECOGNIZE's matches is not translated to batch SQL",
        )
    alias = table.alias_or_name
    translation.scope[alias] = dataclasses.replace(
        source,
        name=alias,
        columns=compiled.columns,
        computed={},
        metadata={},
        watermark=None,
        proctime=None,
    )
    relation = translation._relation(table, None, None)
    from_.set("this", _matches(relation, source, compiled, event_ms).subquery(alias))
    translation._no_processing_time(select)
    translation._rewrite_expressions(select)
    translation._name_columns(select, None)
    return str(select.sql("duckdb")), source, matcher_function(compiled, event_ms)


def _matches(
    relation: exp.Subquery, source: TableDef, compiled: CompiledMatch, event_ms: str
) -> exp.Select:
    """The matches of ``relation``'s rows: a row per match, the view's columns."""

    def quoted(name: str) -> str:
        return exp.to_identifier(name, quoted=True).sql("duckdb")

    fields = [*source.columns, event_ms]
    packed = ", ".join(f"{quoted(c)} := {quoted(c)}" for c in fields)
    order = [event_ms]
    for column, desc in compiled.secondary:
        order.append(f"{quoted(column)} {'DESC NULLS LAST' if desc else 'ASC NULLS FIRST'}")
    order.append(batch_order.INPUT_ORDER)
    rows = f"CAST(to_json(list(struct_pack({packed}) ORDER BY {', '.join(order)})) AS VARCHAR)"
    shape = json.dumps([{c: _JSON_TYPES.get(k, "VARCHAR") for c, k in compiled.columns.items()}])
    group = ", ".join(quoted(c) for c in compiled.partition)
    sql = (
        f"SELECT UNNEST(from_json({FUNCTION}({rows}), {exp.Literal.string(shape).sql()}), "
        f"recursive := TRUE) FROM {relation.sql('duckdb')}"
    )
    parsed = sqlglot.parse_one(f"{sql} GROUP BY {group}" if group else sql, read="duckdb")
    assert isinstance(parsed, exp.Select)
    return parsed


def matcher_function(compiled: CompiledMatch, event_ms: str) -> Callable[[str | None], str]:
    """The function DuckDB calls with a partition's rows (a JSON array, in order, each
    with its epoch ms under ``event_ms``): the view's rows of its matches, as JSON."""
    matcher, output = compiled.matcher, compiled.output

    def matches(rows: str | None) -> str:
        state: dict[str, Any] = {"threads": [], "completed": []}
        found: list[MatchContext] = []
        for seq, row in enumerate(json.loads(rows) if rows else []):
            ts = int(row.pop(event_ms))
            state, out = matcher.step(state, seq, ts, row)
            found.extend(out)
        found.extend(matcher.finish(state))
        return json.dumps([output(match) for match in found])

    return matches
