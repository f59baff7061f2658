"""Streaming SQL: Flink-SQL-style statements compiled to a ``Topology``.

``compile(text)`` turns ``CREATE TABLE ... WITH (...)`` declarations over Kafka topics and
``INSERT INTO sink SELECT ...`` queries into StreamsBuilder calls; ``explain(text)``
returns the compiled topology's ``describe()``. Supported: projection and WHERE with
expressions (arithmetic, comparison, AND/OR/NOT, IS NULL, CASE, CAST, COALESCE, UPPER,
LOWER, CONCAT / ``||``, SUBSTRING, CHAR_LENGTH, TRIM); GROUP BY on a stream with COUNT,
COUNT(DISTINCT), SUM, AVG, MIN, MAX, over TUMBLE/HOP/SESSION windows (group-window
functions or window TVFs) or none, and HAVING; joins of two tables (stream-table, also
``FOR SYSTEM_TIME AS OF``; interval joins of two streams; table-table on the keys);
EMIT CHANGES / EMIT FINAL; EXPLAIN. Errors are ``SqlError`` with line and column.

Not yet: RIGHT and foreign-key joins, joins of more than two tables, GROUP BY over joins
or upsert tables, CREATE TABLE AS SELECT, pull and push queries, the CLI, the Dagster
integration.
"""

from __future__ import annotations

from typing import Any

from streaming.sql.errors import SqlError
from streaming.topology import Topology

__all__ = ["SqlError", "compile", "explain"]


def compile(text: str, config: dict[str, Any] | None = None) -> Topology:
    """The topology of the statements in ``text`` (``config`` goes to ``build``)."""
    from streaming.sql.compiler import Compiler

    compiler = Compiler(text)
    compiler.compile_all()
    return compiler.builder.build(config)


def explain(text: str) -> str:
    """``Topology.describe()`` of the statements in ``text`` (``EXPLAIN`` prefixes allowed)."""
    return str(compile(text).describe())
