"""CUMULATE window aggregations as Flink runs them: from each ``size``-aligned start the
windows ``[start, start + step)``, ``[start, start + 2 * step)`` ... ``[start, start +
size)``, each emitted once, final, when the watermark passes its end.

The expected rows are Flink's: the ``Bid`` example of its Window Aggregation docs page,
and ``WindowAggregateITCase.testEventTimeCumulateWindow`` (without its test UDAF's
column) on ``TestData.windowDataWithTimestamp``.
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
CREATE TABLE out (window_start TIMESTAMP(3), window_end TIMESTAMP(3), total_price DECIMAL(10, 2))
  WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
"""

DOCS_QUERY = """
INSERT INTO out
SELECT window_start, window_end, SUM(price) AS total_price
  FROM TABLE(
    CUMULATE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '2' MINUTES, INTERVAL '10' MINUTES))
  GROUP BY window_start, window_end;
"""

#: the Bid table of Flink's windowing docs: bidtime, price, item, supplier_id
BIDS = [
    ("2020-04-15 08:05", 4.0, "C", "supplier1"),
    ("2020-04-15 08:07", 2.0, "A", "supplier1"),
    ("2020-04-15 08:09", 5.0, "D", "supplier2"),
    ("2020-04-15 08:11", 3.0, "B", "supplier2"),
    ("2020-04-15 08:13", 1.0, "E", "supplier1"),
    ("2020-04-15 08:17", 6.0, "F", "supplier2"),
]


def bid(row: tuple[Any, ...]) -> dict[str, Any]:
    return dict(zip(("bidtime", "price", "item", "supplier_id"), row, strict=True))


def test_the_docs_cumulate_example():
    inputs = [("bid", bid(row)) for row in BIDS]
    inputs.append(("bid", bid(("2020-04-15 09:00", 0.0, "Z", "end-of-input"))))
    expected = [
        "2020-04-15T08:00,2020-04-15T08:06,4.00",
        "2020-04-15T08:00,2020-04-15T08:08,6.00",
        "2020-04-15T08:00,2020-04-15T08:10,11.00",
        "2020-04-15T08:10,2020-04-15T08:12,3.00",
        "2020-04-15T08:10,2020-04-15T08:14,4.00",
        "2020-04-15T08:10,2020-04-15T08:16,4.00",
        "2020-04-15T08:10,2020-04-15T08:18,10.00",
        "2020-04-15T08:10,2020-04-15T08:20,10.00",
    ]
    assert engine_rows(run(BID + DOCS_QUERY, inputs), "ttm") == flink_rows(expected, "ttm")


def test_each_window_comes_out_once_when_the_watermark_passes_its_end():
    with TopologyTestDriver(compile(BID + DOCS_QUERY)) as driver:
        bids = driver.create_input_topic("bid", key_serde=serdes.String())
        out = driver.create_output_topic("out", key_serde=serdes.String())
        seen = []
        for row in BIDS[:4]:
            bids.pipe_input(None, bid(row))
            seen.append(
                [
                    (r.value["window_end"][11:16], r.value["total_price"])
                    for r in out.read_records_to_list()
                ]
            )
    # 08:07 (watermark 08:06:59) closes [08:00, 08:06); 08:09 closes [08:00, 08:08);
    # 08:11 closes [08:00, 08:10), the largest window of its start
    assert seen == [[], [("08:06", 4.0)], [("08:08", 6.0)], [("08:10", 11.0)]]


def test_event_time_cumulate_window():
    # WindowAggregateITCase.testEventTimeCumulateWindow: the late event (00:00:04, when
    # the watermark is 00:00:07) still counts in the windows that end after that
    sql = (
        window_table("T1", "t1", "'1' SECOND")
        + """
CREATE TABLE out (
  `name` STRING, window_start TIMESTAMP(3), window_end TIMESTAMP(3), cnt BIGINT,
  sum_bigdec DECIMAL(10, 2), max_double DOUBLE, min_float FLOAT, distinct_string BIGINT
) WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');

INSERT INTO out
SELECT
  `name`,
  window_start,
  window_end,
  COUNT(*),
  SUM(`bigdec`),
  MAX(`double`),
  MIN(`float`),
  COUNT(DISTINCT `string`)
FROM TABLE(
   CUMULATE(
     TABLE T1,
     DESCRIPTOR(rowtime),
     INTERVAL '5' SECOND,
     INTERVAL '15' SECOND))
GROUP BY `name`, window_start, window_end
"""
    )
    inputs = [("t1", row) for row in rows_of(WINDOW_DATA)]
    inputs.append(("t1", end_of_input("2020-10-10 00:01:00")))
    expected = [
        "a,2020-10-10T00:00,2020-10-10T00:00:05,4,11.10,5.0,1.0,2,Hi|Comment#1",
        "a,2020-10-10T00:00,2020-10-10T00:00:10,6,19.98,5.0,1.0,3,Hi|Comment#1|Comment#2",
        "a,2020-10-10T00:00,2020-10-10T00:00:15,6,19.98,5.0,1.0,3,Hi|Comment#1|Comment#2",
        "b,2020-10-10T00:00,2020-10-10T00:00:10,2,6.66,6.0,3.0,2,Hello|Hi",
        "b,2020-10-10T00:00,2020-10-10T00:00:15,2,6.66,6.0,3.0,2,Hello|Hi",
        "b,2020-10-10T00:00:15,2020-10-10T00:00:20,1,4.44,4.0,4.0,1,Hi",
        "b,2020-10-10T00:00:15,2020-10-10T00:00:25,1,4.44,4.0,4.0,1,Hi",
        "b,2020-10-10T00:00:15,2020-10-10T00:00:30,1,4.44,4.0,4.0,1,Hi",
        "b,2020-10-10T00:00:30,2020-10-10T00:00:35,1,3.33,3.0,3.0,1,Comment#3",
        "b,2020-10-10T00:00:30,2020-10-10T00:00:40,1,3.33,3.0,3.0,1,Comment#3",
        "b,2020-10-10T00:00:30,2020-10-10T00:00:45,1,3.33,3.0,3.0,1,Comment#3",
        "null,2020-10-10T00:00:30,2020-10-10T00:00:35,1,7.77,7.0,7.0,0,null",
        "null,2020-10-10T00:00:30,2020-10-10T00:00:40,1,7.77,7.0,7.0,0,null",
        "null,2020-10-10T00:00:30,2020-10-10T00:00:45,1,7.77,7.0,7.0,0,null",
    ]
    kinds = "sttimddi-"
    # the end-of-input row's own windows stay open
    assert engine_rows(run(sql, inputs), kinds) == flink_rows(expected, kinds)


def test_the_docs_example_in_batch_sql_has_the_same_rows():
    query = to_duckdb(BID + DOCS_QUERY)
    con = duckdb.connect()
    try:
        rows = query.run(con, {"Bid": pd.DataFrame([bid(row) for row in BIDS])})
    finally:
        con.close()
    # the batch relation has every window of the rows: no watermark leaves one open
    inputs = [("bid", bid(row)) for row in BIDS]
    inputs.append(("bid", bid(("2020-04-15 09:00", 0.0, "Z", "end-of-input"))))
    streamed = run(BID + DOCS_QUERY, inputs)
    assert len(rows) == 8
    assert engine_rows(rows, "ttm") == engine_rows(streamed, "ttm")


@pytest.mark.parametrize(
    ("call", "at", "message"),
    [
        (
            "CUMULATE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '3' MINUTES, INTERVAL '10' MINUTES)",
            "CUMULATE",
            "a CUMULATE window's size must be a positive whole multiple of its step",
        ),
        (
            "CUMULATE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)",
            "CUMULATE",
            r"CUMULATE takes \(TABLE t, DESCRIPTOR\(ts\), step, size\)",
        ),
        (
            "CUMULATE(TABLE Bid, DESCRIPTOR(bidtime), INTERVAL '2' MINUTES, "
            "INTERVAL '10' MINUTES, INTERVAL '1' MINUTES)",
            "INTERVAL '1'",
            r"a CUMULATE window offset \(its last argument\) is not supported yet",
        ),
    ],
)
def test_a_malformed_cumulate_is_an_error_at_its_position(call, at, message):
    query = f"INSERT INTO out\nSELECT window_start, window_end, SUM(price)\n  FROM TABLE({call})\n  GROUP BY window_start, window_end"
    with pytest.raises(SqlError, match=message) as caught:
        compile(BID + query)
    line = BID.count("\n") + 3
    assert (caught.value.line, caught.value.column) == (line, query.splitlines()[2].index(at) + 1)
