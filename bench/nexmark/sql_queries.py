"""The Nexmark queries in Streaming SQL: Nexmark's own Flink SQL text, compiled.

Every query the SQL engine runs is Nexmark's file unchanged (``bench.nexmark.flink_queries``,
``flink_sql/``; only the blackhole sink becomes a Kafka topic), checked against DuckDB by
``bench.nexmark.flink_reference``; the DSL versions (``bench.nexmark.queries``) are checked
by ``bench.nexmark.reference``. docs/sql/nexmark.md lists which queries run and what
stops the others.
"""

from __future__ import annotations

from typing import Any

from bench.nexmark import flink_queries, flink_reference, reference
from bench.nexmark.model import Event
from bench.nexmark.queries import QUERIES, QueryContext
from streaming import Topology

#: every query the SQL engine runs on a broker (verbatim), in Nexmark's order: all that run
#: here; q12's windows are on processing time, so its check is what does not depend on
#: the wall clock (``flink_reference``)
SQL_QUERIES: tuple[str, ...] = flink_queries.RUNS_VERBATIM

#: every query name some engine runs
ALL_QUERIES: tuple[str, ...] = tuple(
    q for q in flink_queries.NEXMARK_QUERIES if q in QUERIES or q in SQL_QUERIES
)


def topology(name: str, ctx: QueryContext) -> Topology:
    """Query ``name``'s Nexmark text compiled over the benchmark's topics, writing to
    ``ctx.output``."""
    if name not in SQL_QUERIES:
        refusal = flink_queries.NOT_VERBATIM.get(name)
        why = f": {refusal.missing}" if refusal else ""
        raise KeyError(f"{name} does not run in SQL here{why}")
    return flink_queries.topology(name, ctx.output)


#: the engines a query runs on: its DSL topology or its compiled SQL
ENGINES = ("dsl", "sql")


def build(engine: str, name: str, ctx: QueryContext) -> Topology:
    """Query ``name``'s topology on ``engine`` (``"dsl"``: ``bench.nexmark.queries``,
    ``"sql"``: Nexmark's SQL text, compiled)."""
    if engine == "sql":
        return topology(name, ctx)
    if engine == "dsl":
        return QUERIES[name][0](ctx)
    raise ValueError(f"unknown engine {engine!r}; known: {', '.join(ENGINES)}")


def queries_of(engine: str) -> tuple[str, ...]:
    """The queries ``engine`` has: the DSL's (``bench.nexmark.queries``) or the SQL's."""
    return SQL_QUERIES if engine == "sql" else tuple(QUERIES)


def input_topics(name: str) -> tuple[str, ...]:
    """The Nexmark topics query ``name`` reads (on either engine)."""
    return QUERIES[name][1] if name in QUERIES else flink_queries.TOPICS[name]


def check(
    engine: str, name: str, events: list[Event], records: list[tuple[str | None, Any]]
) -> list[str]:
    """The differences of query ``name``'s output on ``engine`` from DuckDB's result (empty:
    correct): the SQL's rows as Nexmark's sink has them (``flink_reference``), the DSL's
    as its topology writes them (``reference``)."""
    if engine == "sql":
        return flink_reference.check(name, events, records)
    return reference.check(name, events, records)
