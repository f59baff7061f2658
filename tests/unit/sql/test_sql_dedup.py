"""Deduplication as Flink writes it (``ROW_NUMBER()`` in a subquery, filtered on 1): each
key's first row, append-only. Expected rows from Flink's ``DeduplicateITCase``."""

from __future__ import annotations

from typing import Any

import pytest
from flink_itcases import run

from streaming import TopologyTestDriver, serdes
from streaming.sql import SqlError, compile

#: ``TestData.tupleData3``: a, b, c
TUPLE_DATA3 = [
    (1, 1, "Hi"),
    (2, 2, "Hello"),
    (3, 2, "Hello world"),
    (4, 3, "Hello world, how are you?"),
    (5, 3, "I am fine."),
    (6, 3, "Luke Skywalker"),
    *[(7 + i, 4, f"Comment#{1 + i}") for i in range(4)],
    *[(11 + i, 5, f"Comment#{5 + i}") for i in range(5)],
    *[(16 + i, 6, f"Comment#{10 + i}") for i in range(6)],
]

#: ``DeduplicateITCase.rowtimeTestData``: a, b (the rowtime, ms), c
ROWTIME_DATA = [
    (1, 1, "Hi"),
    (1, 3, "Hello"),
    (1, 2, "Hello world"),
    (2, 3, "I am fine."),
    (2, 6, "Comment#1"),
    (3, 5, "Comment#2"),
    (3, 4, "Comment#2"),
    (4, 4, "Comment#3"),
]

SINK = """
CREATE TABLE rowtime_sink (a INT, b BIGINT, c STRING, rowtime TIMESTAMP(3))
  WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
"""

FIRST_ROW_ON_ROWTIME = """
INSERT INTO rowtime_sink
 SELECT a, b, c, rowtime
 FROM (
   SELECT *,
     ROW_NUMBER() OVER (PARTITION BY a ORDER BY rowtime) as rowNum
   FROM T
 )
 WHERE rowNum = 1
"""


def rowtime_table(delay: str) -> str:
    return f"""
CREATE TABLE T (a INT, b BIGINT, c STRING, rowtime TIMESTAMP(3),
  WATERMARK FOR rowtime AS rowtime{delay}
) WITH ('connector' = 'kafka', 'topic' = 't', 'format' = 'json');
"""


def rowtime_rows(closing: bool = True) -> list[tuple[str, dict]]:
    rows = [("t", {"a": a, "b": b, "c": c, "rowtime": b}) for a, b, c in ROWTIME_DATA]
    # Flink's bounded input ends with a watermark at +infinity; here a later row
    return rows + ([("t", {"a": 99, "b": 1000, "c": "end", "rowtime": 1000})] if closing else [])


def ms(millis: int) -> str:
    return f"1970-01-01 00:00:00.{millis:03d}"


def test_first_row_on_proctime():
    # DeduplicateITCase.testFirstRowOnProctime
    sql = """
CREATE TABLE T (a INT, b BIGINT, c STRING, proctime AS PROCTIME())
  WITH ('connector' = 'kafka', 'topic' = 't', 'format' = 'json');
CREATE TABLE out (a INT, b BIGINT, c STRING)
  WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
INSERT INTO out
SELECT a, b, c
FROM (
  SELECT *,
    ROW_NUMBER() OVER (PARTITION BY b ORDER BY proctime) as rowNum
  FROM T
)
WHERE rowNum = 1
"""
    rows = run(sql, [("t", {"a": a, "b": b, "c": c}) for a, b, c in TUPLE_DATA3])
    expected = [
        "1,1,Hi",
        "2,2,Hello",
        "4,3,Hello world, how are you?",
        "7,4,Comment#1",
        "11,5,Comment#5",
        "16,6,Comment#10",
    ]
    assert [f"{r['a']},{r['b']},{r['c']}" for r in rows] == expected


def test_first_row_on_rowtime_is_flinks_compacted_changelog():
    # DeduplicateITCase.testFirstRowOnRowtime, with a WATERMARK delay that lets no row be
    # late: one row per key, Flink's rows once its update of key 3 (5 ms -> 4 ms) is
    # compacted (testFirstRowWithoutAllChangelogOnRowtime)
    sql = rowtime_table(" - INTERVAL '0.005' SECOND") + SINK + FIRST_ROW_ON_ROWTIME
    rows = run(sql, rowtime_rows())
    assert sorted(rows, key=lambda r: r["a"]) == [
        {"a": 1, "b": 1, "c": "Hi", "rowtime": ms(1)},
        {"a": 2, "b": 3, "c": "I am fine.", "rowtime": ms(3)},
        {"a": 3, "b": 4, "c": "Comment#2", "rowtime": ms(4)},
        {"a": 4, "b": 4, "c": "Comment#3", "rowtime": ms(4)},
    ]


def test_a_first_row_waits_for_the_watermark():
    sql = rowtime_table(" - INTERVAL '0.005' SECOND") + SINK + FIRST_ROW_ON_ROWTIME
    with TopologyTestDriver(compile(sql)) as driver:
        t = driver.create_input_topic("t", key_serde=serdes.String())
        out = driver.create_output_topic("out", key_serde=serdes.Json())
        for _, value in rowtime_rows(closing=False)[:6]:  # up to (3, 5 ms): stream time 6 ms
            t.pipe_input(None, value)
        # the watermark is at 1 ms: only key 1's first row (1 ms) is certain
        assert [r.value["a"] for r in out.read_records_to_list()] == [1]
        t.pipe_input(None, {"a": 5, "b": 9, "c": "x", "rowtime": 9})  # watermark 4 ms
        records = out.read_records_to_list()
        # key 2 (3 ms) now; key 3's 5 ms row still waits, and an earlier row replaces it
        assert [(r.value["a"], r.value["b"], r.timestamp) for r in records] == [(2, 3, 3)]
        t.pipe_input(None, {"a": 3, "b": 4, "c": "Comment#2", "rowtime": 4})
        t.pipe_input(None, {"a": 6, "b": 20, "c": "y", "rowtime": 20})
        assert [(r.value["a"], r.value["b"]) for r in out.read_records_to_list()] == [
            (3, 4),
            (5, 9),
        ]


def test_a_row_later_than_the_watermark_delay_is_dropped():
    # WATERMARK FOR rowtime AS rowtime: no disorder allowed. Flink's deduplication still
    # takes the late rows (and retracts what it emitted); here they are dropped, as late
    # rows of a window are: (1, 2 ms) after 3 ms, key 3's and key 4's rows after 6 ms
    sql = rowtime_table("") + SINK + FIRST_ROW_ON_ROWTIME
    rows = run(sql, rowtime_rows())
    # (with no delay, each key's first row in time comes out at once)
    assert [(r["a"], r["b"]) for r in rows] == [(1, 1), (2, 3), (99, 1000)]


def test_first_row_on_rowtime_followed_by_an_unbounded_aggregation():
    # DeduplicateITCase.testFirstRowOnRowTimeFollowedByUnboundedAgg
    sql = (
        rowtime_table(" - INTERVAL '0.005' SECOND")
        + """
CREATE TABLE rowtime_sink (cnt BIGINT)
  WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'format' = 'json');
INSERT INTO rowtime_sink
SELECT COUNT(b) FROM (
 SELECT a, b, c, rowtime
 FROM (
   SELECT *,
     ROW_NUMBER() OVER (PARTITION BY b ORDER BY rowtime) as rowNum
   FROM T
 )
 WHERE rowNum = 1
 )
"""
    )
    assert run(sql, rowtime_rows())[-1] == {"cnt": 6}


def test_deduplicated_rows_keep_their_event_time_for_windows():
    # the orders-dedup application in SQL, then a window over its rows: a repeated order
    # counts once, in the window of its first occurrence
    sql = """
CREATE TABLE orders (order_id STRING, amount DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '10' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json');
CREATE TABLE out (w TIMESTAMP(3), n BIGINT, total DOUBLE)
  WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
CREATE VIEW unique_orders AS
SELECT order_id, amount, ts FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY order_id ORDER BY ts ASC) AS rn FROM orders
) WHERE rn = 1;
INSERT INTO out
SELECT window_start, COUNT(*), SUM(amount)
FROM TABLE(TUMBLE(TABLE unique_orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
GROUP BY window_start, window_end;
"""

    def order(order_id: str, amount: float, time: str) -> tuple[str, dict]:
        return "orders", {"order_id": order_id, "amount": amount, "ts": f"2024-01-01 {time}"}

    rows = run(
        sql,
        [
            order("o1", 10.0, "10:00:50"),
            order("o2", 5.0, "10:00:55"),
            order("o1", 10.0, "10:01:05"),  # a repeat, in the next minute: dropped
            order("o3", 1.0, "10:01:20"),
            order("o4", 2.0, "10:03:00"),
            # the deduplicated rows come out the WATERMARK delay (10 s) later: o4 at
            # 10:03:00 closes the windows 10:00-10:01 and 10:01-10:02
            order("o5", 2.0, "10:03:10"),
        ],
    )
    assert rows == [
        {"w": "2024-01-01 10:00:00.000", "n": 2, "total": 15.0},
        {"w": "2024-01-01 10:01:00.000", "n": 1, "total": 1.0},
    ]


@pytest.mark.parametrize(
    ("subquery", "at", "message"),
    [
        (
            "SELECT *, ROW_NUMBER() OVER (PARTITION BY a ORDER BY rowtime DESC) AS rn FROM T",
            "INSERT",
            "the sink rowtime_sink is append-only (no PRIMARY KEY, 'connector' = 'kafka') but "
            "the result is updating: deduplication keeping the last row (ORDER BY rowtime DESC) "
            "updates its rows",
        ),
        (
            "SELECT *, RANK() OVER (PARTITION BY a ORDER BY b) AS rn FROM T",
            "INSERT",
            "the result is updating: Top-N (RANK() OVER (PARTITION BY ... ORDER BY ...)) "
            "updates its rows",
        ),
    ],
)
def test_deduplication_errors(subquery, at, message):
    head = rowtime_table("") + SINK
    statement = f"INSERT INTO rowtime_sink SELECT a, b, c, rowtime FROM ({subquery}) WHERE rn = 1;"
    with pytest.raises(SqlError) as info:
        compile(head + statement)
    assert message in info.value.message
    expected = (head.count("\n") + 1, statement.index(at) + 1)
    assert (info.value.line, info.value.column) == expected, str(info.value)


def test_a_row_number_the_outer_query_reads_is_top_n():
    # Top-1 (``topn``), an updating result: the append-only sink is an error
    sql = (
        rowtime_table("")
        + """
CREATE TABLE out (a INT, rn BIGINT) WITH ('connector' = 'kafka', 'topic' = 'out');
INSERT INTO out SELECT a, rn FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY a ORDER BY rowtime) AS rn FROM T
) WHERE rn = 1;
"""
    )
    with pytest.raises(SqlError) as info:
        compile(sql)
    assert "the sink out is append-only" in info.value.message
    assert "the result is updating" in info.value.message


UPSERT_SINK = """
CREATE TABLE rowtime_sink (a INT, b BIGINT, c STRING, rowtime TIMESTAMP(3),
  PRIMARY KEY (b) NOT ENFORCED)
  WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'format' = 'json');
"""

LAST_ROW_ON_ROWTIME = """
INSERT INTO rowtime_sink
 SELECT a, b, c, rowtime
 FROM (
   SELECT *,
     ROW_NUMBER() OVER (PARTITION BY b ORDER BY rowtime DESC) as rowNum
   FROM T
 )
 WHERE rowNum = 1
"""


def changelog(sql: str, rows: list[tuple[str, dict]]) -> list[tuple[Any, Any]]:
    """The (key, value) records ``sql`` writes to ``out`` for ``rows``."""
    with TopologyTestDriver(compile(sql)) as driver:
        t = driver.create_input_topic("t", key_serde=serdes.String())
        for _, value in rows:
            t.pipe_input(None, value)
        out = driver.create_output_topic("out", key_serde=serdes.String())
        return [(r.key, r.value) for r in out.read_records_to_list()]


def test_last_row_on_rowtime():
    # DeduplicateITCase.testLastRowOnRowtime: every +I / +U of Flink's changelog, in order
    # (an upsert per row: Flink's -U before each +U is the replaced row of the same key)
    sql = rowtime_table("") + UPSERT_SINK + LAST_ROW_ON_ROWTIME
    records = changelog(sql, rowtime_rows(closing=False))
    assert records == [
        ("1", {"a": 1, "b": 1, "c": "Hi", "rowtime": ms(1)}),
        ("3", {"a": 1, "b": 3, "c": "Hello", "rowtime": ms(3)}),
        ("2", {"a": 1, "b": 2, "c": "Hello world", "rowtime": ms(2)}),
        ("3", {"a": 2, "b": 3, "c": "I am fine.", "rowtime": ms(3)}),
        ("6", {"a": 2, "b": 6, "c": "Comment#1", "rowtime": ms(6)}),
        ("5", {"a": 3, "b": 5, "c": "Comment#2", "rowtime": ms(5)}),
        ("4", {"a": 3, "b": 4, "c": "Comment#2", "rowtime": ms(4)}),
        ("4", {"a": 4, "b": 4, "c": "Comment#3", "rowtime": ms(4)}),
    ]


def test_an_earlier_row_does_not_replace_the_last_one():
    sql = rowtime_table("") + UPSERT_SINK + LAST_ROW_ON_ROWTIME
    rows = [
        ("t", {"a": 1, "b": 7, "c": "x", "rowtime": 5}),
        ("t", {"a": 2, "b": 7, "c": "y", "rowtime": 4}),
    ]
    assert [value["a"] for _, value in changelog(sql, rows)] == [1]


def test_last_row_on_proctime():
    # DeduplicateITCase.testLastRowOnProctime: the final row per key
    sql = """
CREATE TABLE T (a INT, b BIGINT, c STRING, proctime AS PROCTIME())
  WITH ('connector' = 'kafka', 'topic' = 't', 'format' = 'json');
CREATE TABLE out (a INT, b BIGINT, c STRING, PRIMARY KEY (b) NOT ENFORCED)
  WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'format' = 'json');
INSERT INTO out
SELECT a, b, c
FROM (
  SELECT *,
    ROW_NUMBER() OVER (PARTITION BY b ORDER BY proctime DESC) as rowNum
  FROM T
)
WHERE rowNum = 1
"""
    records = changelog(sql, [("t", {"a": a, "b": b, "c": c}) for a, b, c in TUPLE_DATA3])
    assert len(records) == len(TUPLE_DATA3)  # every row replaces its key's last one
    last = {key: value for key, value in records}
    assert sorted(f"{r['a']},{r['b']},{r['c']}" for r in last.values()) == sorted(
        [
            "1,1,Hi",
            "3,2,Hello world",
            "6,3,Luke Skywalker",
            "10,4,Comment#4",
            "15,5,Comment#9",
            "21,6,Comment#15",
        ]
    )


def test_last_row_on_rowtime_followed_by_an_unbounded_aggregation():
    # DeduplicateITCase.testLastRowOnRowTimeFollowedByUnboundedAgg
    sql = (
        rowtime_table("")
        + """
CREATE TABLE rowtime_sink (cnt BIGINT)
  WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'format' = 'json');
INSERT INTO rowtime_sink
SELECT COUNT(b) FROM (
 SELECT a, b, c, rowtime
 FROM (
   SELECT *,
     ROW_NUMBER() OVER (PARTITION BY b ORDER BY rowtime DESC) as rowNum
   FROM T
 )
 WHERE rowNum = 1
 )
"""
    )
    assert run(sql, rowtime_rows(closing=False))[-1] == {"cnt": 6}


@pytest.mark.parametrize(
    ("direction", "expected"),
    [
        # DeduplicateITCase.testFirstRowOnBuiltinProctime
        (
            "",
            [
                "1,1,Hi",
                "2,2,Hello",
                "4,3,Hello world, how are you?",
                "7,4,Comment#1",
                "11,5,Comment#5",
                "16,6,Comment#10",
            ],
        ),
        # DeduplicateITCase.testLastRowOnBuiltinProctime
        (
            " DESC",
            [
                "1,1,Hi",
                "3,2,Hello world",
                "6,3,Luke Skywalker",
                "10,4,Comment#4",
                "15,5,Comment#9",
                "21,6,Comment#15",
            ],
        ),
    ],
)
def test_deduplication_on_the_builtin_proctime(direction, expected):
    sql = f"""
CREATE TABLE T (a INT, b BIGINT, c STRING)
  WITH ('connector' = 'kafka', 'topic' = 't', 'format' = 'json');
CREATE TABLE out (a INT, b BIGINT, c STRING, PRIMARY KEY (b) NOT ENFORCED)
  WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'format' = 'json');
INSERT INTO out
SELECT a, b, c
FROM (
  SELECT *,
    ROW_NUMBER() OVER (PARTITION BY b ORDER BY proctime(){direction}) as rowNum
  FROM T
)
WHERE rowNum = 1
"""
    records = changelog(sql, [("t", {"a": a, "b": b, "c": c}) for a, b, c in TUPLE_DATA3])
    last = {key: value for key, value in records}
    assert sorted(f"{r['a']},{r['b']},{r['c']}" for r in last.values()) == sorted(expected)
    assert len(records) == (len(expected) if not direction else len(TUPLE_DATA3))
