"""Each Nexmark query through the ``TopologyTestDriver`` against its DuckDB batch version.

The same generated events (a few thousand, 20 s of event time) go through the DSL topology
in generation order, the driver's wall clock moving on by a second with each second of event
time (emit-on-close of session windows is throttled to once per wall-clock second, as in
Kafka Streams); then ``closing_events`` close every window. The output must equal ``bench.nexmark.reference``'s
expected results (exact, doubles approximately).
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.nexmark.generator import GeneratorConfig, closing_events, generate
from bench.nexmark.local import drive
from bench.nexmark.model import Event
from bench.nexmark.queries import QUERIES, QueryContext
from bench.nexmark.reference import check, expected_results

#: 200 events/s of event time: 4,000 events span 20 s (two 10 s windows, sessions that end)
CONFIG = GeneratorConfig(seed=7, events_per_second=200)
EVENTS = 4_000


@pytest.fixture(scope="module")
def events() -> list[Event]:
    generated = generate(EVENTS, CONFIG)
    return generated + closing_events(generated)


def run_query(query: str, events: list[Event]) -> list[tuple[str | None, Any]]:
    """``events`` through ``query``'s DSL topology; its output as (key, JSON value) pairs."""
    build, topics = QUERIES[query]
    topology = build(QueryContext("nexmark-out", CONFIG.max_auction_length_ms))
    return drive(topology, topics, events, "nexmark-out", f"nexmark-{query}")


@pytest.mark.parametrize("query", sorted(QUERIES, key=lambda q: int(q[1:])))
def test_query_matches_duckdb(query: str, events: list[Event]) -> None:
    records = run_query(query, events)
    assert check(query, events, records) == []


def test_windowed_queries_cover_several_windows(events: list[Event]) -> None:
    """The comparison means something: several closed windows, sessions and joins."""
    assert len({v["starttime"] for _k, v in expected_results("q5", events)}) >= 5
    assert len({v["dateTime"][:18] for _k, v in expected_results("q7", events)}) >= 2
    assert len(expected_results("q8", events)) >= 20
    assert len(expected_results("q11", events)) >= 50
    assert len(expected_results("q3", events)) >= 5
    assert len(expected_results("q6", events)) >= 10  # the hot seller has over 10 winners


def test_check_reports_a_wrong_result(events: list[Event]) -> None:
    """A changed, a missing and an extra row are each reported."""
    records = run_query("q7", events)
    key, value = records[0]
    wrong = [(key, {**value, "price": value["price"] + 1}), *records[1:]]
    assert any("missing" in p for p in check("q7", events, wrong))
    assert any("unexpected" in p for p in check("q7", events, [*records, records[0]]))
    table = run_query("q4", events)
    last_key, last = next((k, v) for k, v in reversed(table) if v is not None)
    assert check("q4", events, [*table, (last_key, {**last, "final": last["final"] * 1.01})])
