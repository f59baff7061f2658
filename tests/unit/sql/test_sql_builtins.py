"""Flink's built-in scalar functions DATE_FORMAT, HOUR, SPLIT_INDEX, REGEXP_EXTRACT and the
IN predicate, compiled and run on rows (Nexmark's q10, q14, q15-q17, q21 and q22 use them)."""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest

from streaming import TopologyTestDriver, serdes
from streaming.sql import SqlError, compile
from streaming.sql.batch import to_duckdb

DDL = """
CREATE TABLE bids (id STRING, url STRING, channel STRING, ts TIMESTAMP(3))
WITH ('connector' = 'kafka', 'topic' = 'bids', 'format' = 'json');
"""
SINK = """
CREATE TABLE out (id STRING, {columns})
WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
"""

ROWS = [
    {
        "id": "1",
        "url": "https://x.com/ab/item?q=1&channel_id=42",
        "channel": "Apple",
        "ts": "2024-03-05 07:08:09.045",
    },
    {"id": "2", "url": "https://x.com/cd", "channel": "other", "ts": "2024-03-05 23:59:59.999"},
    {"id": "3", "url": None, "channel": None, "ts": None},
    {"id": "4", "url": "", "channel": "BAIDU", "ts": "2024-03-06 00:00:00.000"},
]


def sql(select: str, columns: int) -> str:
    """``select`` into a sink of ``id`` and ``columns`` STRING columns a, b, c."""
    sink = SINK.format(columns=", ".join(f"{c} STRING" for c in "abc"[:columns]))
    return DDL + sink + f"INSERT INTO out {select};"


def run(select: str, columns: int = 3) -> list[dict]:
    with TopologyTestDriver(compile(sql(select, columns))) as driver:
        source = driver.create_input_topic("bids", key_serde=serdes.String())
        for row in ROWS:
            source.pipe_input(row["id"], row)
        out = driver.create_output_topic("out", key_serde=serdes.String())
        return [r.value for r in out.read_records_to_list()]


def column(select: str) -> list:
    return [row["a"] for row in run(select, 1)]


def test_date_format_takes_java_patterns():
    select = (
        "SELECT id, DATE_FORMAT(ts, 'yyyy-MM-dd'), DATE_FORMAT(`ts`, 'HH:mm'), "
        "DATE_FORMAT(ts, 'yy/MM/dd HH:mm:ss.SSS ''at''') FROM bids"
    )
    rows = run(select)
    assert [r["a"] for r in rows] == ["2024-03-05", "2024-03-05", None, "2024-03-06"]
    assert [r["b"] for r in rows] == ["07:08", "23:59", None, "00:00"]
    assert rows[0]["c"] == "24/03/05 07:08:09.045 at"


def test_hour_of_a_timestamp():
    assert column("SELECT id, CAST(HOUR(ts) AS STRING) FROM bids") == ["7", "23", None, "0"]


def test_split_index_counts_from_zero_and_is_null_past_the_end():
    rows = run(
        "SELECT id, SPLIT_INDEX(url, '/', 3), SPLIT_INDEX(url, '/', 4), "
        "SPLIT_INDEX(url, '/', 0) FROM bids"
    )
    assert [r["a"] for r in rows] == ["ab", "cd", None, None]
    assert [r["b"] for r in rows] == ["item?q=1&channel_id=42", None, None, None]
    assert [r["c"] for r in rows] == ["https:", "https:", None, None]


def test_regexp_extract_a_group_null_without_a_match():
    select = (
        "SELECT id, REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2), "
        "REGEXP_EXTRACT(url, 'x\\.(com)'), REGEXP_EXTRACT(url, '(c)', 5) FROM bids"
    )
    rows = run(select)
    assert [r["a"] for r in rows] == ["42", None, None, None]
    assert [r["b"] for r in rows] == ["x.com", "x.com", None, None]
    assert [r["c"] for r in rows] == [None, None, None, None]


def test_in_a_list_with_nulls_as_sql_has_them():
    rows = run(
        "SELECT id, CASE WHEN lower(channel) IN ('apple', 'baidu') THEN 'yes' "
        "WHEN lower(channel) NOT IN ('apple', 'baidu') THEN 'no' ELSE 'null' END, "
        "CASE WHEN channel IN ('x', NULL) THEN 'yes' WHEN NOT (channel IN ('x', NULL)) "
        "THEN 'no' ELSE 'null' END FROM bids",
        2,
    )
    assert [r["a"] for r in rows] == ["yes", "no", "null", "yes"]
    assert [r["b"] for r in rows] == ["null", "null", "null", "null"]


def test_in_filters_rows():
    assert [
        r["id"] for r in run("SELECT id, url FROM bids WHERE channel IN ('Apple', 'BAIDU')", 1)
    ] == [
        "1",
        "4",
    ]


def test_in_a_subquery_is_an_error_naming_it():
    with pytest.raises(SqlError, match="a subquery in an expression"):
        compile(sql("SELECT id, url FROM bids WHERE id IN (SELECT id FROM bids)", 1))


def test_comparing_in_with_other_types_is_an_error():
    with pytest.raises(SqlError, match="type mismatch"):
        compile(sql("SELECT id, url FROM bids WHERE ts IN (1, 2)", 1))


def batch(select: str, columns: int = 3) -> list[dict]:
    """``to_duckdb``'s rows of ``select`` over ``ROWS``, in ``id`` order."""
    query = to_duckdb(sql(select, columns))
    con = duckdb.connect()
    try:
        return sorted(query.run(con, {"bids": pd.DataFrame(ROWS)}), key=lambda r: r["id"])
    finally:
        con.close()


def test_batch_translation_of_split_index_and_regexp_extract_gives_the_streams_rows():
    """The stream's own functions run in DuckDB (its REGEXP_EXTRACT gives '' without a
    match, its SPLIT_INDEX is missing): NULL without a match, past the last piece, for
    a group that did not take part, for '' and NULL text."""
    select = (
        "SELECT id, SPLIT_INDEX(url, '/', 3), REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2), "
        "REGEXP_EXTRACT(channel, '(pp)|(x)', 2) FROM bids"
    )
    stream = run(select)
    assert batch(select) == stream
    assert [(r["a"], r["b"], r["c"]) for r in stream] == [
        ("ab", "42", None),
        ("cd", None, None),
        (None, None, None),
        (None, None, None),
    ]
    two_arguments = "SELECT id, REGEXP_EXTRACT(channel, 'A.') FROM bids"
    assert batch(two_arguments, 1) == run(two_arguments, 1)


def test_batch_translation_of_date_format_and_hour_gives_the_streams_rows():
    """DATE_FORMAT (Java pattern letters, quoted text, a literal %) and HOUR in DuckDB
    give what the stream gives, NULL timestamps and the last millisecond of a day included."""
    select = (
        "SELECT id, DATE_FORMAT(ts, 'yyyy-MM-dd HH:mm:ss.SSS'), "
        "DATE_FORMAT(ts, 'yy/MM/dd ''at'' HH 100%'), CAST(HOUR(ts) AS STRING) FROM bids"
    )
    stream = run(select)
    assert batch(select) == stream
    assert stream[0] == {
        "id": "1",
        "a": "2024-03-05 07:08:09.045",
        "b": "24/03/05 at 07 100%",
        "c": "7",
    }
    assert stream[2] == {"id": "3", "a": None, "b": None, "c": None}


def test_batch_translation_of_date_format_needs_a_literal_pattern():
    with pytest.raises(SqlError, match="DATE_FORMAT is translated to batch SQL with a literal"):
        to_duckdb(sql("SELECT id, DATE_FORMAT(ts, channel) FROM bids", 1))
