"""Window aggregations as Flink runs them: final and append-only by default (one row per
window when stream time passes its end plus the WATERMARK delay), into any sink.

The expected rows are Flink's, from ``WindowAggregateITCase`` (window TVFs) and
``GroupWindowITCase`` (group windows) of ``flink-table-planner``, on their inputs
(``flink_itcases``). Each query is Flink's without the column of its test UDAF
``concat_distinct_agg``; ``*_ROWTIME`` (the window end - 1 ms) is read as ``*_END``.
"""

from __future__ import annotations

import pytest
from flink_itcases import (
    TIMESTAMP_DATA,
    WINDOW_DATA,
    end_of_input,
    engine_rows,
    flink_rows,
    rows_of,
    run,
    window_table,
)

from streaming.sql import SqlError, compile

T1 = window_table("T1", "t1", "'1' SECOND")

#: the sink of the WindowAggregateITCase queries: a plain Kafka topic, no key
WINDOW_SINK = """
CREATE TABLE out (
  `name` STRING, window_start TIMESTAMP(3), window_end TIMESTAMP(3), cnt BIGINT,
  sum_bigdec DECIMAL(10, 2), max_double DOUBLE, min_float FLOAT, distinct_string BIGINT
) WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
"""

WINDOW_INPUT = [("t1", row) for row in rows_of(WINDOW_DATA)] + [
    ("t1", end_of_input("2020-10-10 00:01:00"))
]


def test_event_time_tumble_window():
    # WindowAggregateITCase.testEventTimeTumbleWindow
    sql = (
        T1
        + WINDOW_SINK
        + """
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
   TUMBLE(TABLE T1, DESCRIPTOR(rowtime), INTERVAL '5' SECOND))
GROUP BY `name`, window_start, window_end
"""
    )
    expected = [
        "a,2020-10-10T00:00,2020-10-10T00:00:05,4,11.10,5.0,1.0,2,Hi|Comment#1",
        "a,2020-10-10T00:00:05,2020-10-10T00:00:10,1,3.33,null,3.0,1,Comment#2",
        "b,2020-10-10T00:00:05,2020-10-10T00:00:10,2,6.66,6.0,3.0,2,Hello|Hi",
        "b,2020-10-10T00:00:15,2020-10-10T00:00:20,1,4.44,4.0,4.0,1,Hi",
        "b,2020-10-10T00:00:30,2020-10-10T00:00:35,1,3.33,3.0,3.0,1,Comment#3",
        "null,2020-10-10T00:00:30,2020-10-10T00:00:35,1,7.77,7.0,7.0,0,null",
    ]
    kinds = "sttimddi-"
    assert engine_rows(run(sql, WINDOW_INPUT), kinds) == flink_rows(expected, kinds)


def test_tumble_window_group_on_window_only():
    # WindowAggregateITCase.testTumbleWindowGroupOnWindowOnly
    sql = (
        T1
        + """
CREATE TABLE out (window_start TIMESTAMP(3), window_end TIMESTAMP(3), cnt BIGINT,
  sum_bigdec DECIMAL(10, 2), max_double DOUBLE, min_float FLOAT, distinct_string BIGINT
) WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');

INSERT INTO out
SELECT
  window_start,
  window_end,
  COUNT(*),
  SUM(`bigdec`),
  MAX(`double`),
  MIN(`float`),
  COUNT(DISTINCT `string`)
FROM TABLE(
   TUMBLE(TABLE T1, DESCRIPTOR(rowtime), INTERVAL '5' SECOND))
GROUP BY window_start, window_end
"""
    )
    expected = [
        "2020-10-10T00:00,2020-10-10T00:00:05,4,11.10,5.0,1.0,2,Hi|Comment#1",
        "2020-10-10T00:00:05,2020-10-10T00:00:10,3,9.99,6.0,3.0,3,Hello|Hi|Comment#2",
        "2020-10-10T00:00:15,2020-10-10T00:00:20,1,4.44,4.0,4.0,1,Hi",
        "2020-10-10T00:00:30,2020-10-10T00:00:35,2,11.10,7.0,3.0,1,Comment#3",
    ]
    kinds = "ttimddi-"
    assert engine_rows(run(sql, WINDOW_INPUT), kinds) == flink_rows(expected, kinds)


def test_event_time_hop_window():
    # WindowAggregateITCase.testEventTimeHopWindow: the late event still counts in the
    # windows that end after 00:00:09 (the watermark when it arrives is 00:00:07)
    sql = (
        T1
        + WINDOW_SINK
        + """
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
   HOP(TABLE T1, DESCRIPTOR(rowtime), INTERVAL '5' SECOND, INTERVAL '10' SECOND))
GROUP BY `name`, window_start, window_end
"""
    )
    expected = [
        "a,2020-10-09T23:59:55,2020-10-10T00:00:05,4,11.10,5.0,1.0,2,Hi|Comment#1",
        "a,2020-10-10T00:00,2020-10-10T00:00:10,6,19.98,5.0,1.0,3,Comment#2|Hi|Comment#1",
        "a,2020-10-10T00:00:05,2020-10-10T00:00:15,1,3.33,null,3.0,1,Comment#2",
        "b,2020-10-10T00:00,2020-10-10T00:00:10,2,6.66,6.0,3.0,2,Hello|Hi",
        "b,2020-10-10T00:00:05,2020-10-10T00:00:15,2,6.66,6.0,3.0,2,Hello|Hi",
        "b,2020-10-10T00:00:10,2020-10-10T00:00:20,1,4.44,4.0,4.0,1,Hi",
        "b,2020-10-10T00:00:15,2020-10-10T00:00:25,1,4.44,4.0,4.0,1,Hi",
        "b,2020-10-10T00:00:25,2020-10-10T00:00:35,1,3.33,3.0,3.0,1,Comment#3",
        "b,2020-10-10T00:00:30,2020-10-10T00:00:40,1,3.33,3.0,3.0,1,Comment#3",
        "null,2020-10-10T00:00:25,2020-10-10T00:00:35,1,7.77,7.0,7.0,0,null",
        "null,2020-10-10T00:00:30,2020-10-10T00:00:40,1,7.77,7.0,7.0,0,null",
    ]
    kinds = "sttimddi-"
    assert engine_rows(run(sql, WINDOW_INPUT), kinds) == flink_rows(expected, kinds)


TEST_TABLE = window_table("testTable", "test-table", "'0.01' SECOND")

TIMESTAMP_INPUT = [("test-table", row) for row in rows_of(TIMESTAMP_DATA)] + [
    ("test-table", end_of_input("1970-01-01 00:00:01"))
]


def test_event_time_sliding_group_window():
    # GroupWindowITCase.testEventTimeSlidingWindow (HOP_ROWTIME read as HOP_END)
    sql = (
        TEST_TABLE
        + """
CREATE TABLE out (s STRING, w_start TIMESTAMP(3), w_end TIMESTAMP(3), c1 BIGINT, s1 BIGINT,
  c_int BIGINT, c_float BIGINT
) WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');

INSERT INTO out
SELECT
  `string`,
  HOP_START(rowtime, INTERVAL '0.004' SECOND, INTERVAL '0.005' SECOND),
  HOP_END(rowtime, INTERVAL '0.004' SECOND, INTERVAL '0.005' SECOND),
  COUNT(1),
  SUM(1),
  COUNT(`int`),
  COUNT(DISTINCT `float`)
FROM testTable
GROUP BY `string`, HOP(rowtime, INTERVAL '0.004' SECOND, INTERVAL '0.005' SECOND)
"""
    )
    expected = [
        "Hallo,1970-01-01T00:00,1970-01-01T00:00:00.004,1,1,1,1,a",
        "Hello world,1970-01-01T00:00:00.004,1970-01-01T00:00:00.008,1,1,1,1,a",
        "Hello world,1970-01-01T00:00:00.008,1970-01-01T00:00:00.012,1,1,1,1,a",
        "Hello world,1970-01-01T00:00:00.012,1970-01-01T00:00:00.016,1,1,1,1,b",
        "Hello world,1970-01-01T00:00:00.016,1970-01-01T00:00:00.020,1,1,1,1,b",
        "Hello,1970-01-01T00:00,1970-01-01T00:00:00.004,2,2,2,2,a",
        "Hello,1970-01-01T00:00:00.004,1970-01-01T00:00:00.008,3,3,3,2,a|b",
        "Hi,1970-01-01T00:00,1970-01-01T00:00:00.004,1,1,1,1,a",
        "null,1970-01-01T00:00:00.028,1970-01-01T00:00:00.032,1,1,1,1,null",
        "null,1970-01-01T00:00:00.032,1970-01-01T00:00:00.036,1,1,1,1,null",
    ]
    kinds = "sttiiii-"
    # Flink's third column is the window's rowtime, its end - 1 ms
    ends = flink_rows(expected, kinds)
    expected_rows = sorted(
        ((s, start, _plus_1ms(rowtime), *rest) for s, start, rowtime, *rest in ends), key=repr
    )
    assert engine_rows(run(sql, TIMESTAMP_INPUT), kinds) == expected_rows


def _plus_1ms(timestamp: str) -> str:
    from streaming.sql.timestamps import format_timestamp, parse_timestamp

    millis = parse_timestamp(timestamp)
    assert millis is not None
    return format_timestamp(millis + 1)


def test_event_time_session_group_window():
    # GroupWindowITCase.testEventTimeSessionWindow: out of order, the late 4 ms row
    # merges two sessions of "Hello" (SESSION_ROWTIME read as SESSION_END)
    sql = """
CREATE TABLE T1 (rowtime TIMESTAMP(3), `int` INT, `string` STRING, name STRING,
  WATERMARK FOR rowtime AS rowtime - INTERVAL '0.01' SECOND
) WITH ('connector' = 'kafka', 'topic' = 't1', 'format' = 'json');

CREATE TABLE out (s STRING, s_start TIMESTAMP(3), s_end TIMESTAMP(3), c1 BIGINT, s1 BIGINT,
  c_int BIGINT, s_int BIGINT, c_name BIGINT
) WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');

INSERT INTO out
SELECT
  `string`,
  SESSION_START(rowtime, INTERVAL '0.005' SECOND),
  SESSION_END(rowtime, INTERVAL '0.005' SECOND),
  COUNT(1),
  SUM(1),
  COUNT(`int`),
  SUM(`int`),
  COUNT(DISTINCT name)
FROM T1
GROUP BY `string`, SESSION(rowtime, INTERVAL '0.005' SECOND)
"""
    data = [(1, 1, "Hello", "a"), (2, 2, "Hello", "b"), (8, 8, "Hello", "a")]
    data += [(9, 9, "Hello World", "b"), (4, 4, "Hello", "c"), (16, 16, "Hello", "d")]
    inputs = [("t1", {"rowtime": ms, "int": i, "string": s, "name": n}) for ms, i, s, n in data] + [
        ("t1", {"rowtime": 1000, "string": "end-of-input"})
    ]
    expected = [
        "Hello World,1970-01-01T00:00:00.009,1970-01-01T00:00:00.014,1,1,1,9,1",
        "Hello,1970-01-01T00:00:00.016,1970-01-01T00:00:00.021,1,1,1,16,1",
        "Hello,1970-01-01T00:00:00.001,1970-01-01T00:00:00.013,4,4,4,15,3",
    ]
    kinds = "sttiiiii"
    assert engine_rows(run(sql, inputs), kinds) == flink_rows(expected, kinds)


ORDERS = """
CREATE TABLE orders (order_id STRING, region STRING, amount DOUBLE, order_time TIMESTAMP(3),
  WATERMARK FOR order_time AS order_time - INTERVAL '1' MINUTE
) WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json');
"""

REVENUE_SINK = """
CREATE TABLE windowed_revenue (region STRING, window_start TIMESTAMP(3),
  window_end TIMESTAMP(3), revenue DOUBLE
) WITH ('connector' = 'kafka', 'topic' = 'windowed-revenue', 'format' = 'json');
"""

#: the classic job, verbatim
WINDOWED_REVENUE = (
    "INSERT INTO windowed_revenue SELECT region, TUMBLE_START(order_time, INTERVAL '5' MINUTE), "
    "TUMBLE_END(order_time, INTERVAL '5' MINUTE), SUM(amount) FROM orders GROUP BY region, "
    "TUMBLE(order_time, INTERVAL '5' MINUTE)"
)

#: the same job over the window TVF
WINDOWED_REVENUE_TVF = """
INSERT INTO windowed_revenue
SELECT region, window_start, window_end, SUM(amount)
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(order_time), INTERVAL '5' MINUTES))
GROUP BY window_start, window_end, region
"""


def order(order_id: str, region: str, amount: float, time: str) -> tuple[str, dict]:
    return "orders", {
        "order_id": order_id,
        "region": region,
        "amount": amount,
        "order_time": f"2024-01-01 {time}",
    }


REVENUE_INPUT = [
    order("o1", "EU", 10.0, "10:01:00"),
    order("o2", "EU", 4.5, "10:03:30"),
    order("o3", "US", 1.0, "10:04:00"),
    order("o4", "EU", 2.0, "10:05:30"),  # the EU window 10:00-10:05 is still open (+1 min)
    order("o5", "US", 7.0, "10:06:10"),  # stream time 10:06:10 closes 10:00-10:05
    order("o6", "EU", 100.0, "10:02:00"),  # late: its window closed
    order("o7", "APAC", 3.0, "10:11:00"),  # closes 10:05-10:10
]


@pytest.mark.parametrize("query", [WINDOWED_REVENUE, WINDOWED_REVENUE_TVF])
def test_the_windowed_revenue_job_into_a_plain_kafka_sink(query):
    sql = ORDERS + REVENUE_SINK + query + ";"
    rows = run(sql, REVENUE_INPUT, "windowed-revenue")

    def window(region: str, start: str, end: str, revenue: float) -> dict:
        return {
            "region": region,
            "window_start": f"2024-01-01 {start}.000",
            "window_end": f"2024-01-01 {end}.000",
            "revenue": revenue,
        }

    # each window once, when it closes; the late order left out
    assert sorted(rows, key=repr) == sorted(
        [
            window("EU", "10:00:00", "10:05:00", 14.5),
            window("US", "10:00:00", "10:05:00", 1.0),
            window("EU", "10:05:00", "10:10:00", 2.0),
            window("US", "10:05:00", "10:10:00", 7.0),
        ],
        key=repr,
    )


def test_a_keyed_sink_gets_one_row_per_window():
    # with key fields the sink still receives one final row per window
    sql = (
        ORDERS
        + REVENUE_SINK.replace("'format' = 'json'", "'format' = 'json', 'key.fields' = 'region'")
        + WINDOWED_REVENUE
        + ";"
    )
    rows = run(sql, REVENUE_INPUT, "windowed-revenue")
    windows = [(r["region"], r["window_start"]) for r in rows]
    assert len(windows) == len(set(windows)) == 4


def test_emit_changes_states_early_results_and_needs_a_key():
    # EMIT CHANGES: every update of a window (here, with the store cache off in the
    # driver, one per order), into a sink with a key
    keyed = """
CREATE TABLE windowed_revenue (region STRING, window_start TIMESTAMP(3),
  window_end TIMESTAMP(3), revenue DOUBLE, PRIMARY KEY (region, window_start) NOT ENFORCED
) WITH ('connector' = 'kafka', 'topic' = 'windowed-revenue', 'format' = 'json',
        'key.fields' = 'region');
"""
    sql = ORDERS + keyed + WINDOWED_REVENUE + " EMIT CHANGES;"
    rows = run(sql, REVENUE_INPUT[:2], "windowed-revenue")
    assert [r["revenue"] for r in rows] == [10.0, 14.5]
    # the same without EMIT CHANGES: nothing yet, the window is open
    assert run(ORDERS + keyed + WINDOWED_REVENUE + ";", REVENUE_INPUT[:2], "windowed-revenue") == []
    with pytest.raises(SqlError) as info:
        compile(ORDERS + REVENUE_SINK + WINDOWED_REVENUE + " EMIT CHANGES;")
    assert "a windowed aggregation under EMIT CHANGES updates its rows" in info.value.message
    assert "leave EMIT CHANGES out" in info.value.message


def test_a_table_created_from_a_window_aggregation_is_append_only():
    # CREATE TABLE ... AS SELECT of a window aggregation: no key needed, final rows
    sql = (
        ORDERS
        + "CREATE TABLE windowed_revenue WITH ('connector' = 'kafka', 'topic' = "
        + "'windowed-revenue', 'format' = 'json') AS\n"
        + WINDOWED_REVENUE_TVF.replace("INSERT INTO windowed_revenue", "")
        + ";"
    )
    rows = run(sql, REVENUE_INPUT, "windowed-revenue")
    assert sorted((r["region"], r["window_start"][11:16], r["EXPR$3"]) for r in rows) == [
        ("EU", "10:00", 14.5),
        ("EU", "10:05", 2.0),
        ("US", "10:00", 1.0),
        ("US", "10:05", 7.0),
    ]


def test_having_drops_windows_of_the_final_result():
    sql = (
        ORDERS
        + REVENUE_SINK
        + WINDOWED_REVENUE.replace(
            "GROUP BY region, TUMBLE(order_time, INTERVAL '5' MINUTE)",
            "GROUP BY region, TUMBLE(order_time, INTERVAL '5' MINUTE) HAVING SUM(amount) > 5",
        )
        + ";"
    )
    rows = run(sql, REVENUE_INPUT, "windowed-revenue")
    assert sorted((r["region"], r["revenue"]) for r in rows) == [("EU", 14.5), ("US", 7.0)]
