"""The Nexmark queries in Streaming SQL, compiled: Nexmark's own text where it runs here,
an edited version where it does not yet.

- ``bench.nexmark.flink_queries``: Nexmark's Flink SQL files unchanged (``flink_sql/``),
  the queries of ``RUNS_VERBATIM``, checked by ``bench.nexmark.flink_reference``;
- ``bench/nexmark/sql/*.sql``: q3 and q4 edited to run here (each file says how; they
  have ``${OUTPUT_TOPIC}`` and ``${MAX_AUCTION_LENGTH_MS}`` parameters, filled in here),
  over the tables of ``bench.nexmark.model.SQL_DDL`` and checked as the DSL versions are
  (``bench.nexmark.reference``).

docs/sql/nexmark.md lists which query runs how, and what stops the others.
"""

from __future__ import annotations

from pathlib import Path
from string import Template
from typing import Any

from bench.nexmark import flink_queries, flink_reference, reference
from bench.nexmark.model import SQL_DDL, Event
from bench.nexmark.queries import QUERIES, QueryContext
from streaming import Topology
from streaming.sql import compile as compile_sql

SQL_DIR = Path(__file__).parent / "sql"

#: the queries with an edited SQL version (they do not run verbatim yet)
EDITED_QUERIES: tuple[str, ...] = tuple(
    q for q in QUERIES if (SQL_DIR / f"{q}.sql").exists() and q not in flink_queries.RUNS_VERBATIM
)

#: every query the SQL engine runs, verbatim or edited, in Nexmark's order
SQL_QUERIES: tuple[str, ...] = tuple(
    q
    for q in flink_queries.NEXMARK_QUERIES
    if q in EDITED_QUERIES or q in flink_queries.RUNS_VERBATIM
)

#: every query name some engine runs
ALL_QUERIES: tuple[str, ...] = tuple(
    q for q in flink_queries.NEXMARK_QUERIES if q in QUERIES or q in SQL_QUERIES
)


def query_text(name: str, ctx: QueryContext) -> str:
    """The edited query's file with its parameters filled in (without the DDL)."""
    path = SQL_DIR / f"{name}.sql"
    if name not in EDITED_QUERIES:
        raise KeyError(f"no edited SQL version of {name}; there are: {', '.join(EDITED_QUERIES)}")
    return Template(path.read_text()).substitute(
        OUTPUT_TOPIC=ctx.output, MAX_AUCTION_LENGTH_MS=ctx.max_auction_length_ms
    )


def topology(name: str, ctx: QueryContext) -> Topology:
    """Query ``name`` compiled over the benchmark's topics, writing to ``ctx.output``:
    Nexmark's text if it runs verbatim, else its edited version."""
    if name in flink_queries.RUNS_VERBATIM:
        return flink_queries.topology(name, ctx.output)
    return compile_sql(SQL_DDL + query_text(name, ctx))


#: the engines a query runs on: its DSL topology or its compiled SQL
ENGINES = ("dsl", "sql")


def build(engine: str, name: str, ctx: QueryContext) -> Topology:
    """Query ``name``'s topology on ``engine`` (``"dsl"``: ``bench.nexmark.queries``,
    ``"sql"``: this module's compiled SQL)."""
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
    correct): a verbatim query's rows as Nexmark's sink has them (``flink_reference``),
    the others' as the DSL version writes them (``reference``)."""
    if engine == "sql" and name in flink_queries.RUNS_VERBATIM:
        return flink_reference.check(name, events, records)
    return reference.check(name, events, records)
