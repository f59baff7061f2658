"""Window Top-N as Flink runs it over a window aggregation's results: ``ROW_NUMBER()
OVER (PARTITION BY window_start, window_end ORDER BY ...)`` filtered on N, append-only,
each window's top N rows out once.

The expected rows are Flink's: the example of its Window Top-N docs page, and
``WindowRankITCase.testTumbleWindow`` / ``testTumbleWindowWithRankOffset`` (without the
column of its test UDAF) on ``TestData.windowDataWithTimestamp``. A window's rows come
out when the results of a later window come (the aggregation emits windows in the order
of their ends), so the inputs end with two rows: the second closes the first's window,
whose result lets out every window before it.
"""

from __future__ import annotations

from typing import Any

import duckdb
import pandas as pd
import pytest
from flink_itcases import (
    WINDOW_DATA,
    end_of_input,
    engine_rows,
    flink_rows,
    rows_of,
    run,
    window_table,
)

from streaming import TopologyTestDriver, serdes
from streaming.sql import SqlError, compile
from streaming.sql.batch import to_duckdb

BID = """
CREATE TABLE Bid (
  bidtime TIMESTAMP(3), price DECIMAL(10, 2), item STRING, supplier_id STRING,
  WATERMARK FOR bidtime AS bidtime - INTERVAL '1' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'bid', 'format' = 'json');
CREATE TABLE out (window_start TIMESTAMP(3), window_end TIMESTAMP(3), supplier_id STRING,
  price DECIMAL(10, 2), cnt BIGINT, rownum BIGINT)
  WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
"""

DOCS_QUERY = """
INSERT INTO out
SELECT *
  FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC) as rownum
    FROM (
      SELECT window_start, window_end, supplier_id, SUM(price) as price, COUNT(*) as cnt
      FROM TABLE(
        TUMBLE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
      GROUP BY window_start, window_end, supplier_id
    )
  ) WHERE rownum <= 3;
"""

#: the Bid table of Flink's Window Top-N docs: bidtime, price, item, supplier_id
BIDS = [
    ("2020-04-15 08:05", 4.0, "C", "supplier1"),
    ("2020-04-15 08:06", 4.0, "C", "supplier2"),
    ("2020-04-15 08:07", 2.0, "G", "supplier1"),
    ("2020-04-15 08:08", 2.0, "B", "supplier3"),
    ("2020-04-15 08:09", 5.0, "D", "supplier4"),
    ("2020-04-15 08:11", 2.0, "B", "supplier3"),
    ("2020-04-15 08:13", 1.0, "E", "supplier1"),
    ("2020-04-15 08:15", 3.0, "H", "supplier2"),
    ("2020-04-15 08:17", 6.0, "F", "supplier5"),
]


def bid(row: tuple[Any, ...]) -> dict[str, Any]:
    return dict(zip(("bidtime", "price", "item", "supplier_id"), row, strict=True))


def test_the_docs_window_top_n_example():
    inputs = [("bid", bid(row)) for row in BIDS]
    for at in ("2020-04-15 09:00", "2020-04-15 09:20"):
        inputs.append(("bid", bid((at, 0.0, "Z", "end-of-input"))))
    expected = [
        "2020-04-15T08:00,2020-04-15T08:10,supplier1,6.00,2,1",
        "2020-04-15T08:00,2020-04-15T08:10,supplier4,5.00,1,2",
        "2020-04-15T08:00,2020-04-15T08:10,supplier2,4.00,1,3",
        "2020-04-15T08:10,2020-04-15T08:20,supplier5,6.00,1,1",
        "2020-04-15T08:10,2020-04-15T08:20,supplier2,3.00,1,2",
        "2020-04-15T08:10,2020-04-15T08:20,supplier3,2.00,1,3",
    ]
    kinds = "ttsmii"
    assert engine_rows(run(BID + DOCS_QUERY, inputs), kinds) == flink_rows(expected, kinds)


def test_a_window_comes_out_once_when_a_later_window_closes():
    with TopologyTestDriver(compile(BID + DOCS_QUERY)) as driver:
        bids = driver.create_input_topic("bid", key_serde=serdes.String())
        out = driver.create_output_topic("out", key_serde=serdes.String())
        for row in BIDS:
            bids.pipe_input(None, bid(row))
        # [08:00, 08:10) closed at 08:11 but its ranking waits for a later window's results
        assert out.read_records_to_list() == []
        bids.pipe_input(None, bid(("2020-04-15 08:25", 1.0, "X", "supplier9")))
        first = [(r.value["supplier_id"], r.value["rownum"]) for r in out.read_records_to_list()]
        assert first == [("supplier1", 1), ("supplier4", 2), ("supplier2", 3)]
        bids.pipe_input(None, bid(("2020-04-15 08:35", 1.0, "X", "supplier9")))
        second = [(r.value["supplier_id"], r.value["rownum"]) for r in out.read_records_to_list()]
        assert second == [("supplier5", 1), ("supplier2", 2), ("supplier3", 3)]


T1 = window_table("T1", "t1", "'1' SECOND")

RANK_SINK = """
CREATE TABLE out (
  `name` STRING, window_start TIMESTAMP(3), window_end TIMESTAMP(3), cnt BIGINT,
  sum_b DECIMAL(10, 2), max_d DOUBLE, min_f FLOAT, uv BIGINT, rownum BIGINT
) WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
"""


def rank_query(condition: str) -> str:
    return f"""
INSERT INTO out
SELECT * FROM
(
  SELECT *,
    ROW_NUMBER() OVER(
      PARTITION BY window_start, window_end ORDER BY sum_b DESC) as rownum
  FROM (
    SELECT
      `name`,
      window_start,
      window_end,
      COUNT(*) as cnt,
      SUM(`bigdec`) as sum_b,
      MAX(`double`) as max_d,
      MIN(`float`) as min_f,
      COUNT(DISTINCT `string`) as uv
    FROM TABLE(
      TUMBLE(TABLE T1, DESCRIPTOR(rowtime), INTERVAL '5' SECOND))
  GROUP BY `name`, window_start, window_end
  )
)
WHERE {condition}
"""


RANK_INPUT = [("t1", row) for row in rows_of(WINDOW_DATA)] + [
    ("t1", end_of_input("2020-10-10 00:01:00")),
    ("t1", end_of_input("2020-10-10 00:02:00")),
]


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        (
            # WindowRankITCase.testTumbleWindow
            "rownum <= 2",
            [
                "a,2020-10-10T00:00,2020-10-10T00:00:05,4,11.10,5.0,1.0,2,Hi|Comment#1,1",
                "a,2020-10-10T00:00:05,2020-10-10T00:00:10,1,3.33,null,3.0,1,Comment#2,2",
                "b,2020-10-10T00:00:05,2020-10-10T00:00:10,2,6.66,6.0,3.0,2,Hello|Hi,1",
                "b,2020-10-10T00:00:15,2020-10-10T00:00:20,1,4.44,4.0,4.0,1,Hi,1",
                "b,2020-10-10T00:00:30,2020-10-10T00:00:35,1,3.33,3.0,3.0,1,Comment#3,2",
                "null,2020-10-10T00:00:30,2020-10-10T00:00:35,1,7.77,7.0,7.0,0,null,1",
            ],
        ),
        (
            # WindowRankITCase.testTumbleWindowWithRankOffset
            "rownum > 1 AND rownum <= 2",
            [
                "a,2020-10-10T00:00:05,2020-10-10T00:00:10,1,3.33,null,3.0,1,Comment#2,2",
                "b,2020-10-10T00:00:30,2020-10-10T00:00:35,1,3.33,3.0,3.0,1,Comment#3,2",
            ],
        ),
    ],
)
def test_window_rank_itcase(condition, expected):
    kinds = "sttimddi-i"
    rows = run(T1 + RANK_SINK + rank_query(condition), RANK_INPUT)
    # the first end-of-input row's window result lets the others out and waits itself
    assert engine_rows(rows, kinds) == flink_rows(expected, kinds)


def test_window_top_n_over_a_processing_time_tvf_is_refused_at_the_tvf():
    # directly over a window TVF the rows are ranked per window (``window_rank``) on the
    # event time only
    tables = """
CREATE TABLE Bid (bidtime TIMESTAMP(3), price DOUBLE, supplier_id STRING, pt AS PROCTIME())
  WITH ('connector' = 'kafka', 'topic' = 'bid', 'format' = 'json');
CREATE TABLE out (supplier_id STRING, price DOUBLE, rownum BIGINT)
  WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
"""
    query = """
INSERT INTO out
SELECT supplier_id, price, rownum FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC) AS rownum
  FROM TABLE(TUMBLE(TABLE Bid, DESCRIPTOR(pt), INTERVAL '10' MINUTES))
) WHERE rownum <= 3;
"""
    with pytest.raises(SqlError, match="needs it to be the WATERMARK column of Bid") as e:
        compile(tables + query)
    line = query.splitlines()[4]
    assert (e.value.line, e.value.column) == (
        tables.count("\n") + 5,
        line.index("TABLE(TUMBLE") + 1,
    )


def test_the_docs_window_top_n_agrees_with_its_duckdb_translation():
    inputs = [bid(row) for row in BIDS]
    ends = [bid((at, 0.0, "Z", "end-of-input")) for at in ("2020-04-15 09:00", "2020-04-15 09:20")]
    stream = run(BID + DOCS_QUERY, [("bid", row) for row in [*inputs, *ends]])
    con = duckdb.connect()
    try:
        # the end-of-input rows' own windows never close in the stream: not in the batch
        batch = to_duckdb(BID + DOCS_QUERY).run(con, {"Bid": pd.DataFrame(inputs)})
    finally:
        con.close()
    assert sorted(stream, key=repr) == sorted(batch, key=repr)
    assert len(batch) == 6
