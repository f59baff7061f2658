"""``bench.nexmark.sql_queries``: what ``python -m bench.nexmark --engine sql`` runs.

The SQL engine has every DSL query but q6 and more (q15-q22), each Nexmark's own text
(``bench.nexmark.flink_queries``); it builds a query from that text, reads the query's
topics and checks its output against ``flink_reference`` (the DSL's against
``reference``). The queries' results are tested in ``test_nexmark_flink_sql``.
"""

from __future__ import annotations

import pytest

from bench.nexmark.flink_queries import NEXMARK_QUERIES, RUNS_VERBATIM, TOPICS
from bench.nexmark.generator import GeneratorConfig, closing_events, generate
from bench.nexmark.local import drive
from bench.nexmark.model import Event
from bench.nexmark.queries import QUERIES, QueryContext
from bench.nexmark.reference import check as dsl_check
from bench.nexmark.sql_queries import (
    ALL_QUERIES,
    SQL_QUERIES,
    build,
    check,
    input_topics,
    queries_of,
    topology,
)

CONFIG = GeneratorConfig(seed=7, events_per_second=200)
OUTPUT = "nexmark-out"
CTX = QueryContext(OUTPUT, CONFIG.max_auction_length_ms)


@pytest.fixture(scope="module")
def events() -> list[Event]:
    generated = generate(2_000, CONFIG)
    return generated + closing_events(generated)


def test_the_sql_engine_has_every_query_but_q6() -> None:
    assert set(QUERIES) - {"q6"} <= set(SQL_QUERIES)
    assert RUNS_VERBATIM == SQL_QUERIES
    assert "q12" in SQL_QUERIES  # on processing time: checked by its per-bidder totals
    assert queries_of("sql") == SQL_QUERIES
    assert queries_of("dsl") == tuple(QUERIES)
    assert set(ALL_QUERIES) == set(QUERIES) | set(SQL_QUERIES)
    assert list(ALL_QUERIES) == [q for q in NEXMARK_QUERIES if q in ALL_QUERIES]


def test_a_query_that_does_not_run_says_why() -> None:
    with pytest.raises(KeyError, match="q6 does not run in SQL here: ROW_NUMBER over a join"):
        topology("q6", CTX)
    with pytest.raises(ValueError, match="unknown engine"):
        build("flink", "q0", CTX)


def test_the_sql_engine_runs_the_verbatim_text_and_checks_it_so(events: list[Event]) -> None:
    """q22 (SQL only) and q2 (both engines): built, driven over their topics, checked."""
    assert input_topics("q22") == TOPICS["q22"]
    assert input_topics("q2") == QUERIES["q2"][1]
    for query in ("q22", "q2"):
        records = drive(build("sql", query, CTX), input_topics(query), events, OUTPUT, query)
        assert check("sql", query, events, records) == []
        assert check("sql", query, events, records[1:])
    dsl = drive(build("dsl", "q2", CTX), input_topics("q2"), events, OUTPUT, "dsl-q2")
    assert check("dsl", "q2", events, dsl) == dsl_check("q2", events, dsl) == []
