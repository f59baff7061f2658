"""A window TVF's rows queried directly (not aggregated), as the first examples of
Flink's window TVF docs page: every row of ``Bid`` with ``window_start``,
``window_end`` and ``window_time`` (the end less 1 ms), once per window that holds it.

The expected rows are that page's (``docs/dev/table/sql/queries/window-tvf.md``), its
``Bid`` table of bidtime, price and item; the same statements through ``to_duckdb``
give the same rows.
"""

from __future__ import annotations

from typing import Any

import duckdb
import pandas as pd
import pytest
from flink_itcases import engine_rows, flink_rows, run

from streaming.sql.batch import to_duckdb
from streaming.sql.compiler import Compiler
from streaming.sql.tvf_rows import TVF_COLUMNS

BID = """
CREATE TABLE Bid (
  bidtime TIMESTAMP(3), price DECIMAL(10, 2), item STRING,
  WATERMARK FOR bidtime AS bidtime - INTERVAL '1' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'bid', 'format' = 'json');
CREATE TABLE out (
  bidtime TIMESTAMP(3), price DECIMAL(10, 2), item STRING,
  window_start TIMESTAMP(3), window_end TIMESTAMP(3), window_time TIMESTAMP(3)
) WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
"""

#: the Bid table of Flink's window TVF docs: bidtime (in full, as TIMESTAMP(3) text),
#: price, item
BIDS = [
    ("2020-04-15 08:05:00.000", 4.0, "C"),
    ("2020-04-15 08:07:00.000", 2.0, "A"),
    ("2020-04-15 08:09:00.000", 5.0, "D"),
    ("2020-04-15 08:11:00.000", 3.0, "B"),
    ("2020-04-15 08:13:00.000", 1.0, "E"),
    ("2020-04-15 08:17:00.000", 6.0, "F"),
]

KINDS = "tmsttt"

TUMBLE = "TUMBLE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)"
HOP = "HOP(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES)"
CUMULATE = "CUMULATE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '2' MINUTES, INTERVAL '10' MINUTES)"

TUMBLE_ROWS = [
    "2020-04-15T08:05,4.00,C,2020-04-15T08:00,2020-04-15T08:10,2020-04-15T08:09:59.999",
    "2020-04-15T08:07,2.00,A,2020-04-15T08:00,2020-04-15T08:10,2020-04-15T08:09:59.999",
    "2020-04-15T08:09,5.00,D,2020-04-15T08:00,2020-04-15T08:10,2020-04-15T08:09:59.999",
    "2020-04-15T08:11,3.00,B,2020-04-15T08:10,2020-04-15T08:20,2020-04-15T08:19:59.999",
    "2020-04-15T08:13,1.00,E,2020-04-15T08:10,2020-04-15T08:20,2020-04-15T08:19:59.999",
    "2020-04-15T08:17,6.00,F,2020-04-15T08:10,2020-04-15T08:20,2020-04-15T08:19:59.999",
]

HOP_ROWS = [
    "2020-04-15T08:05,4.00,C,2020-04-15T08:00,2020-04-15T08:10,2020-04-15T08:09:59.999",
    "2020-04-15T08:05,4.00,C,2020-04-15T08:05,2020-04-15T08:15,2020-04-15T08:14:59.999",
    "2020-04-15T08:07,2.00,A,2020-04-15T08:00,2020-04-15T08:10,2020-04-15T08:09:59.999",
    "2020-04-15T08:07,2.00,A,2020-04-15T08:05,2020-04-15T08:15,2020-04-15T08:14:59.999",
    "2020-04-15T08:09,5.00,D,2020-04-15T08:00,2020-04-15T08:10,2020-04-15T08:09:59.999",
    "2020-04-15T08:09,5.00,D,2020-04-15T08:05,2020-04-15T08:15,2020-04-15T08:14:59.999",
    "2020-04-15T08:11,3.00,B,2020-04-15T08:05,2020-04-15T08:15,2020-04-15T08:14:59.999",
    "2020-04-15T08:11,3.00,B,2020-04-15T08:10,2020-04-15T08:20,2020-04-15T08:19:59.999",
    "2020-04-15T08:13,1.00,E,2020-04-15T08:05,2020-04-15T08:15,2020-04-15T08:14:59.999",
    "2020-04-15T08:13,1.00,E,2020-04-15T08:10,2020-04-15T08:20,2020-04-15T08:19:59.999",
    "2020-04-15T08:17,6.00,F,2020-04-15T08:10,2020-04-15T08:20,2020-04-15T08:19:59.999",
    "2020-04-15T08:17,6.00,F,2020-04-15T08:15,2020-04-15T08:25,2020-04-15T08:24:59.999",
]

CUMULATE_ROWS = [
    "2020-04-15T08:05,4.00,C,2020-04-15T08:00,2020-04-15T08:06,2020-04-15T08:05:59.999",
    "2020-04-15T08:05,4.00,C,2020-04-15T08:00,2020-04-15T08:08,2020-04-15T08:07:59.999",
    "2020-04-15T08:05,4.00,C,2020-04-15T08:00,2020-04-15T08:10,2020-04-15T08:09:59.999",
    "2020-04-15T08:07,2.00,A,2020-04-15T08:00,2020-04-15T08:08,2020-04-15T08:07:59.999",
    "2020-04-15T08:07,2.00,A,2020-04-15T08:00,2020-04-15T08:10,2020-04-15T08:09:59.999",
    "2020-04-15T08:09,5.00,D,2020-04-15T08:00,2020-04-15T08:10,2020-04-15T08:09:59.999",
    "2020-04-15T08:11,3.00,B,2020-04-15T08:10,2020-04-15T08:12,2020-04-15T08:11:59.999",
    "2020-04-15T08:11,3.00,B,2020-04-15T08:10,2020-04-15T08:14,2020-04-15T08:13:59.999",
    "2020-04-15T08:11,3.00,B,2020-04-15T08:10,2020-04-15T08:16,2020-04-15T08:15:59.999",
    "2020-04-15T08:11,3.00,B,2020-04-15T08:10,2020-04-15T08:18,2020-04-15T08:17:59.999",
    "2020-04-15T08:11,3.00,B,2020-04-15T08:10,2020-04-15T08:20,2020-04-15T08:19:59.999",
    "2020-04-15T08:13,1.00,E,2020-04-15T08:10,2020-04-15T08:14,2020-04-15T08:13:59.999",
    "2020-04-15T08:13,1.00,E,2020-04-15T08:10,2020-04-15T08:16,2020-04-15T08:15:59.999",
    "2020-04-15T08:13,1.00,E,2020-04-15T08:10,2020-04-15T08:18,2020-04-15T08:17:59.999",
    "2020-04-15T08:13,1.00,E,2020-04-15T08:10,2020-04-15T08:20,2020-04-15T08:19:59.999",
    "2020-04-15T08:17,6.00,F,2020-04-15T08:10,2020-04-15T08:18,2020-04-15T08:17:59.999",
    "2020-04-15T08:17,6.00,F,2020-04-15T08:10,2020-04-15T08:20,2020-04-15T08:19:59.999",
]

NAMED = "bidtime, price, item, window_start, window_end, window_time"


def bid(row: tuple[Any, ...]) -> dict[str, Any]:
    return dict(zip(("bidtime", "price", "item"), row, strict=True))


def streamed(sql: str) -> list[dict[str, Any]]:
    return run(BID + sql, [("bid", bid(row)) for row in BIDS])


def batched(sql: str) -> list[dict[str, Any]]:
    con = duckdb.connect()
    try:
        return to_duckdb(BID + sql).run(con, {"Bid": pd.DataFrame([bid(r) for r in BIDS])})
    finally:
        con.close()


@pytest.mark.parametrize(
    ("call", "expected"),
    [(TUMBLE, TUMBLE_ROWS), (HOP, HOP_ROWS), (CUMULATE, CUMULATE_ROWS)],
    ids=["tumble", "hop", "cumulate"],
)
@pytest.mark.parametrize("items", ["*", NAMED], ids=["star", "named"])
def test_the_docs_examples_rows_stream_and_batch(call, expected, items):
    sql = f"INSERT INTO out SELECT {items} FROM TABLE({call})"
    # the rows come out as they arrive: no window has to close
    rows = streamed(sql)
    assert engine_rows(rows, KINDS) == flink_rows(expected, KINDS)
    assert engine_rows(batched(sql), KINDS) == engine_rows(rows, KINDS)


def test_a_where_over_the_rows_and_their_window_columns():
    sql = (
        f"INSERT INTO out SELECT * FROM TABLE({HOP}) "
        "WHERE price > 2 AND window_start >= TIMESTAMP '2020-04-15 08:05:00'"
    )
    expected = [
        r for r in HOP_ROWS if float(r.split(",")[1]) > 2 and r.split(",")[3] >= "2020-04-15T08:05"
    ]
    assert len(expected) == 6
    rows = streamed(sql)
    assert engine_rows(rows, KINDS) == flink_rows(expected, KINDS)
    assert engine_rows(batched(sql), KINDS) == engine_rows(rows, KINDS)


def test_a_view_of_the_rows_has_flinks_types():
    sql = BID + f"CREATE VIEW windowed AS SELECT * FROM TABLE({TUMBLE});"
    compiler = Compiler(sql + "INSERT INTO out SELECT * FROM windowed;")
    compiler.compile_all()
    columns = compiler.tables["windowed"].columns
    assert list(columns.items())[3:] == [
        ("window_start", "TIMESTAMP"),
        ("window_end", "TIMESTAMP"),
        ("window_time", "TIMESTAMP"),
    ]


def test_create_table_as_select_star_of_the_rows():
    sql = BID.split("CREATE TABLE out")[0] + (
        "CREATE TABLE out WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json') "
        f"AS SELECT * FROM TABLE({TUMBLE}) WHERE item = 'B';"
    )
    rows = run(sql, [("bid", bid(row)) for row in BIDS])
    assert list(rows[0]) == ["bidtime", "price", "item", *TVF_COLUMNS]
    assert engine_rows(rows, KINDS) == flink_rows([TUMBLE_ROWS[3]], KINDS)


def test_each_row_comes_out_as_it_arrives_a_late_one_too_a_null_time_none():
    # Flink's window TVF operator emits per record and drops a NULL time attribute only
    late = ("2020-04-15 08:01:00.000", 7.0, "L")
    rows = run(
        BID + f"INSERT INTO out SELECT * FROM TABLE({TUMBLE})",
        [("bid", bid(r)) for r in [*BIDS, late, (None, 8.0, "N")]],
    )
    assert [row["item"] for row in rows] == ["C", "A", "D", "B", "E", "F", "L"]
    assert rows[-1]["window_start"] == "2020-04-15 08:00:00.000"
