"""The Nexmark queries written in Streaming SQL (``bench/nexmark/sql/*.sql``), compiled.

Each file holds one query as Nexmark's Flink SQL writes it (``nexmark/nexmark``,
``queries/*.sql``): a sink table and an ``INSERT INTO`` it, over the tables of
``bench.nexmark.model.SQL_DDL`` (the one declaration of the topics). Where this dialect or
the DSL version's definition needs a change, the file says so in a comment (and docs/sql/nexmark.md
lists them). Like Nexmark's own files, a query file has ``${NAME}`` parameters, filled in
here: ``OUTPUT_TOPIC`` (the sink's topic) and ``MAX_AUCTION_LENGTH_MS`` (q4's join bound).

q6 has no SQL version: Nexmark's q6 is an OVER window over an updating input, which Flink
does not run either, and the dialect has no OVER windows.
"""

from __future__ import annotations

from pathlib import Path
from string import Template
from typing import Any

from bench.nexmark.model import SQL_DDL
from bench.nexmark.queries import QUERIES, QueryContext
from streaming import Topology
from streaming.sql import compile as compile_sql

SQL_DIR = Path(__file__).parent / "sql"

#: the queries with a SQL version, in Nexmark's order
SQL_QUERIES: tuple[str, ...] = tuple(q for q in QUERIES if (SQL_DIR / f"{q}.sql").exists())


def query_text(name: str, ctx: QueryContext) -> str:
    """The query's file with its parameters filled in (without the DDL)."""
    path = SQL_DIR / f"{name}.sql"
    if not path.exists():
        raise KeyError(f"no SQL version of {name}; there are: {', '.join(SQL_QUERIES)}")
    return Template(path.read_text()).substitute(
        OUTPUT_TOPIC=ctx.output, MAX_AUCTION_LENGTH_MS=ctx.max_auction_length_ms
    )


def topology(name: str, ctx: QueryContext) -> Topology:
    """Query ``name`` compiled over the benchmark's topics, writing to ``ctx.output``."""
    return compile_sql(SQL_DDL + query_text(name, ctx))


def as_dsl_records(
    name: str, records: list[tuple[str | None, Any]]
) -> list[tuple[str | None, Any]]:
    """The SQL version's output records in the form of the DSL version's (and of
    ``bench.nexmark.reference``), so one check verifies both.

    Only q5 differs in form: the SQL writes one row per top auction of a window (Nexmark's
    result), the DSL one row per window with its top auctions as a sorted list; here each
    window's rows become the DSL's row, keyed by the window start. The other queries'
    records are the same."""
    if name != "q5":
        return records
    windows: dict[str, dict[str, Any]] = {}
    for _key, row in records:
        if row is None:
            continue
        window = windows.setdefault(
            row["starttime"],
            {
                "starttime": row["starttime"],
                "endtime": row["endtime"],
                "num": row["num"],
                "auctions": [],
            },
        )
        window["auctions"] = sorted([*window["auctions"], row["auction"]])
    return list(windows.items())


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
    """The queries ``engine`` has: every query in the DSL, all but q6 in SQL."""
    return SQL_QUERIES if engine == "sql" else tuple(QUERIES)
