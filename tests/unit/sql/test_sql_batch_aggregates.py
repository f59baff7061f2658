"""Python aggregate functions in the DuckDB translation (``streaming.sql.batch_aggregates``):
the stream's final values (``TopologyTestDriver``) equal the batch query's over the same
rows, in a plain GROUP BY, tumbling windows (the TVF and GROUP BY TUMBLE) and SESSION
windows, with an aggregate whose value depends on the order of the rows."""

from __future__ import annotations

import random
from typing import Any

import duckdb
import pandas as pd
import pytest

from streaming import TopologyTestDriver, serdes
from streaming.sql import compile
from streaming.sql.batch import to_duckdb
from streaming.sql.timestamps import format_timestamp

DELAY = 5_000
FLUSH = "~flush"


class Trail:
    """The values in the order accumulated, joined by '|' (order matters)."""

    def create_accumulator(self) -> list:
        return []

    def accumulate(self, acc: list, value: str | None, n: int | None) -> None:
        acc.append(f"{value}:{n}")

    def get_value(self, acc: list) -> str:
        return "|".join(acc)


class Total:
    """SUM of a BIGINT, NULLs left out, with merge (for SESSION windows)."""

    def create_accumulator(self) -> list:
        return [0]

    def accumulate(self, acc: list, value: int | None) -> None:
        if value is not None:
            acc[0] += value

    def merge(self, acc: list, others: list) -> None:
        for other in others:
            acc[0] += other[0]

    def get_value(self, acc: list) -> int:
        return int(acc[0])


FUNCTIONS = {"trail": Trail, "total": Total}

WORDS = f"""
CREATE TABLE words (id STRING, grp STRING, word STRING, n BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '{DELAY // 1000}' SECOND)
WITH ('connector' = 'kafka', 'topic' = 'words', 'format' = 'json');
CREATE FUNCTION longest AS 'sql_udfs.Longest' LANGUAGE PYTHON;
"""

KEYED_SINK = """
CREATE TABLE out (grp STRING, trail STRING, top STRING, PRIMARY KEY (grp) NOT ENFORCED)
WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'key.format' = 'json',
      'value.format' = 'json');
"""

WINDOW_SINK = """
CREATE TABLE out (grp STRING, window_start TIMESTAMP(3), window_end TIMESTAMP(3), agg STRING,
  total BIGINT)
WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
"""


def trace(seed: int, n: int = 80) -> list[dict[str, Any]]:
    """Random words of three groups, out of order within the WATERMARK delay only (none
    late), some of one time, a few NULL words and counts."""
    rng = random.Random(seed)
    rows, clock = [], 100_000
    for i in range(n):
        clock += rng.choice([0, 500, 1_000, 3_000, 9_000])
        ts = clock - rng.choice([0, 0, 0, 1_000, 4_000])
        rows.append(
            {
                "id": f"w{i}",
                "grp": rng.choice(["a", "b", "c"]),
                "word": rng.choice(["hi", "hello", "yo", "hey", None]),
                "n": rng.choice([1, 2, 5, None]),
                "ts": format_timestamp(ts),
            }
        )
    return rows


def stream_rows(sql: str, rows: list[dict[str, Any]], keyed: bool = False) -> list[Any]:
    """The sink's rows for ``rows`` piped in order, then a row a day later (its own group)
    that closes every window."""
    flush = {"id": "flush", "grp": FLUSH, "word": None, "n": None, "ts": format_timestamp(10**8)}
    with TopologyTestDriver(compile(sql, functions=FUNCTIONS)) as driver:
        source = driver.create_input_topic("words", key_serde=serdes.String())
        for row in [*rows, flush]:
            source.pipe_input(row["id"], row)
        out = driver.create_output_topic(
            "out", key_serde=serdes.Json() if keyed else serdes.String()
        )
        return [r.value for r in out.read_records_to_list()]


def batch_rows(sql: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    query = to_duckdb(sql, functions=FUNCTIONS)
    con = duckdb.connect()
    try:
        return query.run(con, {"words": pd.DataFrame(rows)})
    finally:
        con.close()


def ordered(rows: list[dict[str, Any]]) -> list[tuple]:
    return sorted((tuple(sorted(r.items())) for r in rows if r["grp"] != FLUSH), key=repr)


@pytest.mark.parametrize("seed", [1, 2])
def test_group_by_final_values_equal_the_batch(seed):
    sql = (
        WORDS
        + KEYED_SINK
        + "INSERT INTO out SELECT grp, trail(word, n), longest(word) FROM words GROUP BY grp;"
    )
    rows = trace(seed)
    final: dict[str, dict[str, Any]] = {}
    for row in stream_rows(sql, rows, keyed=True):
        final[row["grp"]] = row
    assert ordered(list(final.values())) == ordered(batch_rows(sql, rows))


WINDOWED = [
    "INSERT INTO out SELECT grp, window_start, window_end, trail(word, n), total(n) FROM "
    "TABLE(TUMBLE(TABLE words, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
    "GROUP BY grp, window_start, window_end;",
    "INSERT INTO out SELECT grp, TUMBLE_START(ts, INTERVAL '10' SECOND), "
    "TUMBLE_END(ts, INTERVAL '10' SECOND), trail(word, n), total(n) FROM words "
    "GROUP BY grp, TUMBLE(ts, INTERVAL '10' SECOND);",
    "INSERT INTO out SELECT grp, window_start, window_end, trail(word, n), total(n) FROM "
    "TABLE(HOP(TABLE words, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '15' SECOND)) "
    "GROUP BY grp, window_start, window_end;",
    # a session's value: the stream merges the sessions a row bridges (Total.merge is a
    # sum, as accumulating the rows is; longest is order-insensitive)
    "INSERT INTO out SELECT grp, SESSION_START(ts, INTERVAL '4' SECOND), "
    "SESSION_END(ts, INTERVAL '4' SECOND), longest(word), total(n) FROM words "
    "GROUP BY grp, SESSION(ts, INTERVAL '4' SECOND);",
]


@pytest.mark.parametrize("insert", range(len(WINDOWED)))
@pytest.mark.parametrize("seed", [3, 4])
def test_window_values_equal_the_batch(insert, seed):
    sql = WORDS + WINDOW_SINK + WINDOWED[insert]
    rows = trace(seed)
    stream = stream_rows(sql, rows)
    batch = batch_rows(sql, rows)
    assert len(batch) > 5
    assert ordered(stream) == ordered(batch)


def test_the_rows_are_accumulated_in_offset_order():
    # a relation with the record offsets (as the lake stores them) is read in their order
    sql = (
        WORDS
        + KEYED_SINK
        + "INSERT INTO out SELECT grp, trail(word, n), longest(word) FROM words GROUP BY grp;"
    )
    rows = [
        {"id": "1", "grp": "a", "word": "hi", "n": 1, "ts": "1970-01-01 00:00:01", "_offset": 2},
        {"id": "2", "grp": "a", "word": "yo", "n": 2, "ts": "1970-01-01 00:00:02", "_offset": 0},
        {"id": "3", "grp": "a", "word": None, "n": None, "ts": "1970-01-01 00:00:03", "_offset": 1},
    ]
    assert batch_rows(sql, rows) == [{"grp": "a", "trail": "yo:2|None:None|hi:1", "top": "yo"}]


def test_over_an_updating_table_the_batch_accumulates_the_final_rows():
    # the stream retracts 'hello' when row 1 is replaced; the relation holds the table's
    # final rows, from which the batch accumulates the stream's final value
    sql = """
CREATE TABLE latest (id STRING, grp STRING, word STRING, n BIGINT, PRIMARY KEY (id) NOT ENFORCED)
WITH ('connector' = 'upsert-kafka', 'topic' = 'latest', 'key.format' = 'raw',
      'value.format' = 'json');
CREATE FUNCTION longest AS 'sql_udfs.Longest' LANGUAGE PYTHON;
CREATE TABLE out (grp STRING, top STRING, total BIGINT, PRIMARY KEY (grp) NOT ENFORCED)
WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'key.format' = 'json',
      'value.format' = 'json');
INSERT INTO out SELECT grp, longest(word), SUM(n) FROM latest GROUP BY grp;
"""
    rows = [
        {"id": "1", "grp": "a", "word": "hello", "n": 2},
        {"id": "2", "grp": "a", "word": "hi", "n": 4},
        {"id": "1", "grp": "a", "word": "yo", "n": 6},
    ]
    with TopologyTestDriver(compile(sql)) as driver:
        source = driver.create_input_topic("latest", key_serde=serdes.String())
        for row in rows:
            source.pipe_input(row["id"], row)
        out = driver.create_output_topic("out", key_serde=serdes.Json())
        final = out.read_records_to_list()[-1].value
    current = pd.DataFrame([rows[1], rows[2]])
    con = duckdb.connect()
    try:
        batch = to_duckdb(sql).run(con, {"latest": current})
    finally:
        con.close()
    assert batch == [final] == [{"grp": "a", "top": "yo", "total": 10}]
