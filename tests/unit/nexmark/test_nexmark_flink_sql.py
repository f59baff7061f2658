"""Nexmark's Flink SQL queries, exactly as Nexmark writes them (``bench/nexmark/flink_sql``).

Each query that runs verbatim is compiled from Nexmark's text (only its blackhole sink
swapped for a Kafka topic), run through the ``TopologyTestDriver`` on generated events
(4,000 over 20 s of event time, plus the closing events) and its rows checked against
DuckDB (``bench.nexmark.flink_reference``); q10's rows are read from the files of its
'filesystem' sink. For the queries of ``TRANSLATED`` (q4, q5, q7, q8, q9, q10, q11, q13,
q14, q18, q19, q21, q22) DuckDB runs
``streaming.sql.batch.to_duckdb``'s translation of Nexmark's text (stream == batch, as
the platform reconciles a SQL application); every query's translation is checked against
its hand-written SQL, or the ``SqlError`` naming what is not translated. Each other query raises a ``SqlError`` naming
the construct that stops it (``flink_queries.NOT_VERBATIM``), never another exception.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bench.nexmark.flink_queries import (
    BLACKHOLE,
    FILE_SINKS,
    NEXMARK_QUERIES,
    NOT_VERBATIM,
    PROCESSING_TIME,
    PROCESSING_TIME_CLOSE_MS,
    RUNS_VERBATIM,
    SINK_KEYS,
    TOPICS,
    file_output,
    file_records,
    nexmark_text,
    query_text,
    topology,
)
from bench.nexmark.flink_reference import (
    TRANSLATED,
    check,
    compared,
    expected_results,
    translated_results,
)
from bench.nexmark.generator import GeneratorConfig, closing_events, generate
from bench.nexmark.local import drive
from bench.nexmark.model import SQL_DDL, Event
from bench.nexmark.reference import row_key
from bench.nexmark.udf import count_char
from streaming.sql import SqlError
from streaming.sql import compile as compile_sql

CONFIG = GeneratorConfig(seed=7, events_per_second=200)
EVENTS = 4_000
OUTPUT = "nexmark-out"


@pytest.fixture(scope="module")
def events() -> list[Event]:
    generated = generate(EVENTS, CONFIG)
    return generated + closing_events(generated)


@pytest.fixture(scope="module")
def nexmark_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Nexmark's ``${NEXMARK_DIR}`` (and ``${FLINK_HOME}``) of these tests."""
    return tmp_path_factory.mktemp("nexmark")


def run(query: str, events: list[Event], nexmark_dir: Path) -> list[tuple[str | None, Any]]:
    """``events`` through Nexmark's ``query``; for a query on processing time, then the
    wall clock on past its last window; a 'filesystem' sink's rows read from its files."""
    idle = PROCESSING_TIME_CLOSE_MS if query in PROCESSING_TIME else 0
    compiled = topology(query, OUTPUT, nexmark_dir)
    records = drive(compiled, TOPICS[query], events, OUTPUT, f"flink-{query}", idle)
    files = file_output(query, OUTPUT, nexmark_dir)
    return records if files is None else file_records(query, files)


def test_every_nexmark_query_runs_or_is_refused_with_a_reason() -> None:
    assert set(RUNS_VERBATIM) | set(NOT_VERBATIM) == set(NEXMARK_QUERIES)
    assert not set(RUNS_VERBATIM) & set(NOT_VERBATIM)


@pytest.mark.parametrize("query", RUNS_VERBATIM)
def test_verbatim_query_matches_duckdb(query: str, events: list[Event], nexmark_dir: Path) -> None:
    records = run(query, events, nexmark_dir)
    assert len(expected_results(query, events)) >= 1
    assert check(query, events, records) == []


#: the verbatim queries ``to_duckdb`` does not translate: what its ``SqlError`` names
NOT_TRANSLATED = {
    "q12": "TUMBLE over p_time, the processing time of B",
}


def rows(query: str, found: list[dict[str, Any]]) -> Counter[bytes]:
    return Counter(row_key(None, r) for r in found if compared(query, r))


@pytest.mark.parametrize("query", RUNS_VERBATIM)
def test_to_duckdb_gives_the_hand_written_rows_or_names_what_it_does_not_translate(
    query: str, events: list[Event]
) -> None:
    """``to_duckdb`` of Nexmark's text, as the platform reconciles a SQL application with
    its batch run: its rows are those of the hand-written batch SQL (an independent
    reference), or a ``SqlError`` names the construct. The check of ``TRANSLATED`` queries
    runs the translation (the stream's rows are compared with it above)."""
    if query in NOT_TRANSLATED:
        with pytest.raises(SqlError, match=NOT_TRANSLATED[query]):
            translated_results(query, events)
        return
    translated = translated_results(query, events)
    hand_written = expected_results(query, events, translated=False)
    assert translated
    assert rows(query, translated) == rows(query, hand_written)
    if query in TRANSLATED:
        assert rows(query, expected_results(query, events)) == rows(query, translated)


@pytest.mark.parametrize("query", sorted(NOT_VERBATIM))
def test_query_that_does_not_run_raises_a_named_sql_error(query: str) -> None:
    with pytest.raises(SqlError) as raised:
        compile_sql(SQL_DDL + query_text(query, OUTPUT))
    assert NOT_VERBATIM[query].error in str(raised.value)
    assert "line " in str(raised.value)


def test_only_the_sink_connector_changes() -> None:
    """The INSERTs are Nexmark's; an append-only sink's blackhole becomes a Kafka topic, an
    updating one's an upsert-kafka topic with a PRIMARY KEY."""
    for query in RUNS_VERBATIM:
        original, compiled = nexmark_text(query), query_text(query, "out", Path("/n"))
        if query in FILE_SINKS:  # Nexmark's own sink, its ${...} filled in
            assert BLACKHOLE not in original
            assert "'path' = 'file:///n/data/output/out/bid/'" in compiled
            assert compiled == original.replace("${NEXMARK_DIR}", "/n").replace(
                "${SUBMIT_TIME}", "out"
            )
            continue
        assert "${" not in compiled
        compiled = compiled.replace("/n/flink", "${FLINK_HOME}")  # q13's side input
        assert original.count(BLACKHOLE) == 1
        insert = original.index("INSERT INTO")
        assert compiled.endswith(original[insert:])
        kafka = "'connector' = 'kafka', 'topic' = 'out', 'format' = 'json'"
        if query not in SINK_KEYS:
            assert compiled == original.replace(BLACKHOLE, kafka)
            continue
        keys = ", ".join(f"`{k}`" for k in SINK_KEYS[query])
        assert f"PRIMARY KEY ({keys}) NOT ENFORCED" in compiled
        assert "'connector' = 'upsert-kafka', 'topic' = 'out'" in compiled
        assert BLACKHOLE not in compiled


def test_the_check_sees_a_difference(events: list[Event], nexmark_dir: Path) -> None:
    """One row changed (q22), one missing (q7, a top bid of a window), a key's final row
    changed or deleted (q17) fails the check."""
    q22 = run("q22", events, nexmark_dir)
    key, row = q22[0]
    assert check("q22", events, [(key, {**row, "dir1": "x"}), *q22[1:]])
    q7 = run("q7", events, nexmark_dir)
    assert check("q7", events, q7[1:])
    q12 = run("q12", events, nexmark_dir)
    key, row = q12[0]
    assert check("q12", events, q12[1:])
    assert check("q12", events, [(key, {**row, "starttime": row["endtime"]}), *q12[1:]])
    # a window's count in two rows: the totals hold, the second row of the window does not
    at, (key, row) = next((i, r) for i, r in enumerate(q12) if r[1]["bid_count"] >= 2)
    split = [(key, {**row, "bid_count": 1}), (key, {**row, "bid_count": row["bid_count"] - 1})]
    assert check("q12", events, [*q12[:at], *split, *q12[at + 1 :]]) == [
        f"a second row of a bidder's window: {split[1][1]}"
    ]
    q17 = run("q17", events, nexmark_dir)
    key, row = q17[-1]
    assert check("q17", events, [*q17, (key, {**row, "max_price": row["max_price"] + 1})])
    assert check("q17", events, [*q17, (key, None)])


def test_count_char_counts_as_nexmarks_java_class() -> None:
    """q14's ``CountChar``: bytes of the UTF-8 text equal to the character's first byte."""
    assert count_char("abcabcc", "c") == 3
    assert count_char("ça c", "c") == 1  # ç is two bytes, neither of them 'c'
    assert count_char(None, "c") == 0
    assert count_char("", "c") == 0
