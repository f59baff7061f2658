"""Python table functions (``LATERAL TABLE``) in the DuckDB translation
(``streaming.sql.batch_lateral``): the stream's rows (``TopologyTestDriver``) equal the
batch query's over the same rows, for the comma / CROSS JOIN and LEFT JOIN forms, several
columns, a WHERE on the function's columns, a GROUP BY over its rows and a function that
raises on some input (its record left out on both sides)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import duckdb
import pandas as pd
import pytest

from streaming import TopologyTestDriver, serdes
from streaming.sql import SqlError, compile
from streaming.sql.batch import to_duckdb
from streaming.sql.functions import table
from streaming.sql.timestamps import format_timestamp


def words(text: str | None) -> Iterator[tuple[str, int]]:
    """Each word of the text with its length (none for NULL or blank text)."""
    for word in (text or "").split():
        yield word, len(word)


def picky(text: str | None) -> Iterator[str]:
    """The text's words; raises on a text with a '!'."""
    if text is not None and "!" in text:
        raise ValueError(f"no shouting: {text}")
    yield from (text or "").split()


def untyped(text):
    yield text


FUNCTIONS = {"words": words, "picky": picky}

LINES = """
CREATE TABLE lines (id STRING, line STRING, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '0' SECOND)
WITH ('connector' = 'kafka', 'topic' = 'lines', 'format' = 'json');
"""

ROWS_SINK = """
CREATE TABLE out (id STRING, word STRING, len BIGINT)
WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
"""

COUNTS_SINK = """
CREATE TABLE out (word STRING, n BIGINT, total BIGINT, PRIMARY KEY (word) NOT ENFORCED)
WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'key.format' = 'json',
      'value.format' = 'json');
"""

ROWS = [
    {"id": "1", "line": "to be or", "ts": format_timestamp(1_000)},
    {"id": "2", "line": "", "ts": format_timestamp(2_000)},
    {"id": "3", "line": None, "ts": format_timestamp(3_000)},
    {"id": "4", "line": "not to be!", "ts": format_timestamp(4_000)},
    {"id": "5", "line": "be quick", "ts": format_timestamp(5_000)},
]

CONFIG = {"processing.exception.handler": "log_and_continue"}


def stream_rows(sql: str, keyed: bool = False) -> list[Any]:
    """The sink's records for ``ROWS``, failing records skipped (``log_and_continue``)."""
    with TopologyTestDriver(compile(sql, functions=FUNCTIONS), CONFIG) as driver:
        source = driver.create_input_topic("lines", key_serde=serdes.String())
        for row in ROWS:
            source.pipe_input(row["id"], row)
        out = driver.create_output_topic(
            "out", key_serde=serdes.Json() if keyed else serdes.String()
        )
        records = out.read_records_to_list()
    if not keyed:
        return [r.value for r in records]
    final: dict[str, Any] = {}
    for record in records:
        final[repr(record.key)] = record.value
    return [v for v in final.values() if v is not None]


def batch_rows(sql: str) -> list[dict[str, Any]]:
    query = to_duckdb(sql, functions=FUNCTIONS)
    con = duckdb.connect()
    try:
        return query.run(con, {"lines": pd.DataFrame(ROWS)})
    finally:
        con.close()


def ordered(rows: list[dict[str, Any]]) -> list[tuple]:
    return sorted((tuple(sorted(r.items())) for r in rows), key=repr)


@pytest.mark.parametrize(
    "join",
    [
        ", LATERAL TABLE(words(line)) AS T(word, len)",
        "CROSS JOIN LATERAL TABLE(words(line)) AS T(word, len)",
        "JOIN LATERAL TABLE(words(l.line)) T(word, len) ON TRUE",
    ],
)
def test_cross_join_lateral_rows_equal_the_batch(join):
    sql = LINES + ROWS_SINK + f"INSERT INTO out SELECT l.id, T.word, T.len FROM lines AS l {join};"
    streamed = stream_rows(sql)
    assert len(streamed) == 8
    assert ordered(batch_rows(sql)) == ordered(streamed)


def test_left_join_lateral_keeps_rows_without_function_rows_with_nulls():
    sql = (
        LINES
        + ROWS_SINK
        + (
            "INSERT INTO out SELECT id, word, len FROM lines "
            "LEFT JOIN LATERAL TABLE(words(line)) AS T(word, len) ON TRUE;"
        )
    )
    streamed = stream_rows(sql)
    assert {"id": "2", "word": None, "len": None} in streamed
    assert {"id": "3", "word": None, "len": None} in streamed
    assert ordered(batch_rows(sql)) == ordered(streamed)


def test_default_column_names_and_a_where_on_the_function_columns():
    sql = (
        LINES
        + ROWS_SINK
        + (
            "INSERT INTO out SELECT id, UPPER(f0), f1 * 10 FROM lines, LATERAL TABLE(words(line)) "
            "WHERE f1 > 2 AND f0 <> 'quick';"
        )
    )
    streamed = stream_rows(sql)
    assert streamed == [
        {"id": "4", "word": "NOT", "len": 30},
        {"id": "4", "word": "BE!", "len": 30},
    ]
    assert ordered(batch_rows(sql)) == ordered(streamed)


def test_group_by_over_the_function_rows_equals_the_batch():
    sql = (
        LINES
        + COUNTS_SINK
        + (
            "INSERT INTO out SELECT word, COUNT(*), SUM(len) FROM lines, "
            "LATERAL TABLE(words(line)) AS T(word, len) GROUP BY word;"
        )
    )
    streamed = stream_rows(sql, keyed=True)
    assert {"word": "be", "n": 2, "total": 4} in streamed
    assert ordered(batch_rows(sql)) == ordered(streamed)


def test_group_window_over_the_function_rows_equals_the_batch():
    sql = LINES + (
        "CREATE TABLE out (window_start TIMESTAMP(3), n BIGINT)\n"
        "WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');\n"
        "INSERT INTO out SELECT TUMBLE_START(ts, INTERVAL '2' SECOND), COUNT(*) FROM lines, "
        "LATERAL TABLE(words(line)) AS T(word, len) GROUP BY TUMBLE(ts, INTERVAL '2' SECOND);"
    )
    streamed = stream_rows(sql)
    batch = batch_rows(sql)
    # the window of 4s is open in the stream (no later row closes it); the batch closes it
    assert streamed == [{"window_start": "1970-01-01 00:00:00.000", "n": 3}]
    assert batch == [*streamed, {"window_start": "1970-01-01 00:00:04.000", "n": 5}]


@pytest.mark.parametrize("left", [False, True])
def test_a_raising_function_leaves_its_row_out_as_the_stream_does(left):
    join = (
        "LEFT JOIN LATERAL TABLE(picky(line)) AS T(word) ON TRUE"
        if left
        else ", LATERAL TABLE(picky(line)) AS T(word)"
    )
    sql = LINES + ROWS_SINK + f"INSERT INTO out SELECT id, word, 0 FROM lines {join};"
    streamed = stream_rows(sql)
    assert all(r["id"] != "4" for r in streamed)
    assert any(r["id"] == "5" for r in streamed)
    assert ordered(batch_rows(sql)) == ordered(streamed)


def test_untranslatable_laterals_name_the_problem():
    sql = (
        LINES
        + ROWS_SINK
        + ("INSERT INTO out SELECT id, w, 0 FROM lines, LATERAL TABLE(untyped(id || 'x')) AS T(w);")
    )
    with pytest.raises(SqlError, match="table function untyped needs type hints"):
        to_duckdb(sql, functions={"untyped": table(untyped, result_types=["STRING"])})


def shout(text: str | None) -> str | None:
    return None if text is None else text.upper()


def test_a_scalar_function_in_the_arguments_runs_in_the_batch_too():
    sql = (
        LINES
        + ROWS_SINK
        + (
            "INSERT INTO out SELECT id, w, n FROM lines AS l, "
            "LATERAL TABLE(words(shout(l.line))) AS T(w, n) WHERE l.id = '5';"
        )
    )
    functions = {**FUNCTIONS, "shout": shout}
    with TopologyTestDriver(compile(sql, functions=functions)) as driver:
        source = driver.create_input_topic("lines", key_serde=serdes.String())
        for row in ROWS:
            source.pipe_input(row["id"], row)
        streamed = driver.create_output_topic("out").read_values_to_list()
    assert streamed == [{"id": "5", "word": "BE", "len": 2}, {"id": "5", "word": "QUICK", "len": 5}]
    con = duckdb.connect()
    try:
        batch = to_duckdb(sql, functions=functions).run(con, {"lines": pd.DataFrame(ROWS)})
    finally:
        con.close()
    assert batch == streamed


def test_lateral_over_a_view_is_refused_at_the_lateral():
    sql = (
        LINES
        + ROWS_SINK
        + (
            "CREATE VIEW loud AS SELECT id, line FROM lines WHERE id <> '2';\n"
            "INSERT INTO out SELECT id, w, n FROM loud, LATERAL TABLE(words(line)) AS T(w, n);"
        )
    )
    with pytest.raises(SqlError, match="LATERAL TABLE is translated to batch SQL after one"):
        to_duckdb(sql, functions=FUNCTIONS)


def stats(text: str | None, id_: str | None) -> Iterator[tuple[str, int, float, bool]]:
    """Per word: the word, its length, its share of the line's letters, whether it is
    the first; the id is appended to the word."""
    found = (text or "").split()
    letters = sum(len(w) for w in found)
    for i, word in enumerate(found):
        yield f"{word}#{id_}", len(word), len(word) / letters, i == 0


def test_four_columns_of_every_type_equal_the_batch():
    sql = LINES + (
        "CREATE TABLE out (w STRING, n BIGINT, share DOUBLE, first BOOLEAN)\n"
        "WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');\n"
        "INSERT INTO out SELECT S.w, S.n, S.share, S.first FROM lines "
        "LEFT JOIN LATERAL TABLE(stats(line, id)) AS S(w, n, share, first) ON TRUE "
        "WHERE S.first OR S.first IS NULL;"
    )
    FUNCTIONS["stats"] = stats
    try:
        streamed = stream_rows(sql)
        batch = batch_rows(sql)
    finally:
        del FUNCTIONS["stats"]
    assert {"w": "to#1", "n": 2, "share": 2 / 6, "first": True} in streamed
    assert {"w": None, "n": None, "share": None, "first": None} in streamed
    assert ordered(batch) == ordered(streamed)


def test_untyped_parameters_take_the_type_of_their_column_argument():
    def halves(text):
        """The text's halves as a row; a row of three columns for 'be quick'."""
        if text == "be quick":
            yield text, text, text
        elif text:
            yield text[: len(text) // 2], text[len(text) // 2 :]

    sql = (
        LINES
        + ROWS_SINK
        + (
            "INSERT INTO out SELECT id, a || '|' || b, 0 FROM lines, "
            "LATERAL TABLE(halves(line)) AS T(a, b);"
        )
    )
    FUNCTIONS["halves"] = table(halves, result_types=["STRING", "STRING"])
    try:
        streamed = stream_rows(sql)
        batch = batch_rows(sql)
    finally:
        del FUNCTIONS["halves"]
    # the row of the wrong width fails record 5 in the stream: the batch leaves it out too
    assert streamed == [
        {"id": "1", "word": "to b|e or", "len": 0},
        {"id": "4", "word": "not t|o be!", "len": 0},
    ]
    assert ordered(batch) == ordered(streamed)
