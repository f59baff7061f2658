"""The edited Nexmark queries in SQL (``bench/nexmark/sql/``: q3, q4) give the DSL
versions' results, and the SQL engine has every query but q6.

For every edited query, the compiled SQL and the DSL topology get the same generated
events (as in ``test_queries``: 4,000 events over 20 s of event time plus the closing
events) through the ``TopologyTestDriver``, and their outputs, normalized to result rows,
must be equal: a multiset of (key, row) for append queries, the last value per key for
updating ones. The SQL output must also pass ``reference.check`` against DuckDB on its
own. The queries that run verbatim are tested in ``test_nexmark_flink_sql``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import orjson
import pytest

from bench.nexmark.flink_queries import RUNS_VERBATIM
from bench.nexmark.generator import GeneratorConfig, closing_events, generate
from bench.nexmark.local import drive
from bench.nexmark.model import Event
from bench.nexmark.queries import QUERIES, QueryContext
from bench.nexmark.reference import APPENDS, check, compared_keys, expected_results
from bench.nexmark.sql_queries import (
    EDITED_QUERIES,
    SQL_QUERIES,
    queries_of,
    query_text,
    topology,
)

CONFIG = GeneratorConfig(seed=7, events_per_second=200)
EVENTS = 4_000
OUTPUT = "nexmark-out"
Records = list[tuple[str | None, Any]]


@pytest.fixture(scope="module")
def events() -> list[Event]:
    generated = generate(EVENTS, CONFIG)
    return generated + closing_events(generated)


def run_sql(query: str, events: list[Event]) -> Records:
    """``events`` through the compiled SQL of ``query``."""
    ctx = QueryContext(OUTPUT, CONFIG.max_auction_length_ms)
    return drive(topology(query, ctx), QUERIES[query][1], events, OUTPUT, f"sql-{query}")


def run_dsl(query: str, events: list[Event]) -> Records:
    build, topics = QUERIES[query]
    ctx = QueryContext(OUTPUT, CONFIG.max_auction_length_ms)
    return drive(build(ctx), topics, events, OUTPUT, f"dsl-{query}")


def _row(key: str | None, value: Any) -> bytes:
    return orjson.dumps([key, value], option=orjson.OPT_SORT_KEYS)


def result_rows(query: str, records: Records, events: list[Event]) -> Counter[bytes]:
    """The query's result as ``reference.check`` sees it: its rows as a multiset (append
    queries) or the last value of each key it compares (updating ones; a tombstone
    deletes the key)."""
    if query in APPENDS:
        return Counter(_row(k, v) for k, v in records)
    compared = compared_keys(query, events)
    final: dict[str | None, Any] = {}
    for key, value in records:
        if key is None or not compared(key):
            continue
        if value is None:
            final.pop(key, None)
        else:
            final[key] = value
    return Counter(_row(k, v) for k, v in final.items())


def test_every_query_but_q6_has_a_sql_version() -> None:
    assert set(QUERIES) - {"q6"} <= set(SQL_QUERIES)
    assert set(SQL_QUERIES) == set(EDITED_QUERIES) | set(RUNS_VERBATIM)
    assert not set(EDITED_QUERIES) & set(RUNS_VERBATIM)
    assert queries_of("sql") == SQL_QUERIES
    assert queries_of("dsl") == tuple(QUERIES)


@pytest.mark.parametrize("query", EDITED_QUERIES)
def test_sql_gives_the_dsl_result(query: str, events: list[Event]) -> None:
    sql, dsl = run_sql(query, events), run_dsl(query, events)
    want = result_rows(query, dsl, events)
    got = result_rows(query, sql, events)
    assert sum(want.values()) >= 1
    missing, extra = want - got, got - want
    assert (dict(missing), dict(extra)) == ({}, {})


@pytest.mark.parametrize("query", EDITED_QUERIES)
def test_sql_matches_duckdb(query: str, events: list[Event]) -> None:
    assert check(query, events, run_sql(query, events)) == []


def test_the_comparison_sees_a_difference(events: list[Event]) -> None:
    """A query whose SQL differs in one row (q3: one more auction for a seller; q4: a
    category's average changed) fails both the comparison with the DSL and the check."""
    for query, column in (("q3", "name"), ("q4", "final")):
        sql = run_sql(query, events)
        key, row = sql[-1]
        changed = [*sql, (key, {**row, column: row[column] * 2})]
        dsl = result_rows(query, run_dsl(query, events), events)
        assert result_rows(query, changed, events) != dsl
        assert check(query, events, changed)
    assert len(expected_results("q5", events)) >= 5


def test_the_loader_fills_in_every_parameter() -> None:
    ctx = QueryContext("out-topic", 12_345)
    for query in EDITED_QUERIES:
        text = query_text(query, ctx)
        assert "${" not in text
        assert "'topic' = 'out-topic'" in text
    assert "INTERVAL '12345' MILLISECOND" in query_text("q4", ctx)
    with pytest.raises(KeyError, match="no edited SQL version of q6"):
        topology("q6", ctx)
    with pytest.raises(KeyError, match="no edited SQL version of q7"):
        query_text("q7", ctx)
