"""OVER aggregations as Flink runs them: one row per input row with its frame's
aggregates, once the watermark passes it, append-only. Inputs and expected rows from
Flink's ``OverAggregateITCase`` (Flink's explicit watermarks become a WATERMARK delay
and a last row far later, the end of Flink's bounded input)."""

from __future__ import annotations

from typing import Any

import pytest
from flink_itcases import run

from streaming.sql import SqlError, compile

#: ``testRowTimeBounded*RangeOver``: rowtime (ms), a, b, c
RANGE_DATA = [
    (1500, 1, 15, "Hello"),
    (1600, 1, 16, "Hello"),
    (1000, 1, 1, "Hello"),
    (2000, 2, 2, "Hello"),
    (2000, 2, 2, "Hello"),
    (2000, 2, 3, "Hello"),
    (3000, 3, 3, "Hello"),
    (4000, 4, 4, "Hello"),
    (5000, 5, 5, "Hello"),
    (6000, 6, 6, "Hello"),
    (6500, 6, 65, "Hello"),
    (9000, 6, 9, "Hello"),
    (9500, 6, 18, "Hello"),
    (9000, 6, 9, "Hello"),
    (10000, 7, 7, "Hello World"),
    (11000, 7, 17, "Hello World"),
    (11000, 7, 77, "Hello World"),
    (14000, 7, 18, "Hello World"),
    (15000, 8, 8, "Hello World"),
    (20000, 20, 20, "Hello World"),
]

#: ``testRowTimeUnBounded*RangeOver``: rowtime (ms), a, b, c
UNBOUNDED_RANGE_DATA = [
    (14000005, 1, 1, "Hi"),
    (14000000, 2, 1, "Hello"),
    (14000002, 1, 1, "Hello"),
    (14000002, 1, 2, "Hello"),
    (14000002, 1, 3, "Hello world"),
    (14000003, 2, 2, "Hello world"),
    (14000003, 2, 3, "Hello world"),
    (14000021, 1, 4, "Hello world"),
    (14000022, 1, 5, "Hello world"),
    (14000022, 1, 6, "Hello world"),
    (14000022, 1, 7, "Hello world"),
    (14000023, 2, 4, "Hello world"),
    (14000023, 2, 5, "Hello world"),
]


def table(delay: str = "'10' SECOND", a: str = "BIGINT", b: str = "INT") -> str:
    return f"""
CREATE TABLE T1 (a {a}, b {b}, c STRING, rowtime TIMESTAMP(3),
  WATERMARK FOR rowtime AS rowtime - INTERVAL {delay}
) WITH ('connector' = 'kafka', 'topic' = 't1', 'format' = 'json');
"""


def sink(columns: str) -> str:
    return f"""
CREATE TABLE out ({columns}) WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
"""


def inputs(data: list[tuple[Any, ...]], end: int | None = 10**9) -> list[tuple[str, dict]]:
    rows = [("t1", {"rowtime": ts, "a": a, "b": b, "c": c}) for ts, a, b, c in data]
    # Flink's bounded input ends with a watermark at +infinity; here a later row
    return rows + ([("t1", {"rowtime": end, "a": 0, "b": 0, "c": "end"})] if end else [])


def rows(out: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((tuple(row.values()) for row in out), key=repr)


def expected(lines: list[str], kinds: str) -> list[tuple[Any, ...]]:
    read = {"s": str, "i": int, "d": float}
    return sorted(
        (tuple(read[k](v) for v, k in zip(line.split(","), kinds, strict=True)) for line in lines),
        key=repr,
    )


RANGE_1S = "RANGE BETWEEN INTERVAL '1' SECOND PRECEDING AND CURRENT ROW"


def test_row_time_bounded_partitioned_range_over():
    # OverAggregateITCase.testRowTimeBoundedPartitionedRangeOver (without its LTCNT UDAF)
    w = f"(PARTITION BY c ORDER BY rowtime {RANGE_1S})"
    sql = (
        table()
        + sink("c STRING, b INT, cnt BIGINT, s BIGINT")
        + f"INSERT INTO out SELECT c, b, COUNT(a) OVER {w}, SUM(a) OVER {w} FROM T1"
    )
    flink = [
        "Hello,1,1,1", "Hello,15,2,2", "Hello,16,3,3", "Hello,2,6,9", "Hello,3,6,9",
        "Hello,2,6,9", "Hello,3,4,9", "Hello,4,2,7", "Hello,5,2,9", "Hello,6,2,11",
        "Hello,65,2,12", "Hello,9,2,12", "Hello,9,2,12", "Hello,18,3,18",
        "Hello World,17,3,21", "Hello World,7,1,7", "Hello World,77,3,21",
        "Hello World,18,1,7", "Hello World,8,2,15", "Hello World,20,1,20",
    ]  # fmt: skip
    assert rows(run(sql, inputs(RANGE_DATA))) == expected(flink, "siii")


def test_row_time_bounded_non_partitioned_range_over():
    # OverAggregateITCase.testRowTimeBoundedNonPartitionedRangeOver
    sql = (
        table()
        + sink("c STRING, b INT, cnt BIGINT, s BIGINT")
        + f"""INSERT INTO out SELECT c, b,
  COUNT(a) OVER (ORDER BY rowtime {RANGE_1S}),
  SUM(a) OVER (ORDER BY rowtime {RANGE_1S})
FROM T1"""
    )
    flink = [
        "Hello,1,1,1", "Hello,15,2,2", "Hello,16,3,3", "Hello,2,6,9", "Hello,3,6,9",
        "Hello,2,6,9", "Hello,3,4,9", "Hello,4,2,7", "Hello,5,2,9", "Hello,6,2,11",
        "Hello,65,2,12", "Hello,9,2,12", "Hello,9,2,12", "Hello,18,3,18",
        "Hello World,7,4,25", "Hello World,17,3,21", "Hello World,77,3,21",
        "Hello World,18,1,7", "Hello World,8,2,15", "Hello World,20,1,20",
    ]  # fmt: skip
    assert rows(run(sql, inputs(RANGE_DATA))) == expected(flink, "siii")


def test_row_time_bounded_partitioned_rows_over():
    # OverAggregateITCase.testRowTimeBoundedPartitionedRowsOver (without LTCNT)
    data = [
        (1, 1, 1, "Hello"), (2, 2, 2, "Hello"), (1, 1, 1, "Hello"), (2, 2, 2, "Hello"),
        (2, 2, 2, "Hello"), (1, 1, 1, "Hello"), (3, 7, 7, "Hello World"),
        (1, 7, 7, "Hello World"), (1, 7, 7, "Hello World"), (3, 3, 3, "Hello"),
        (4, 4, 4, "Hello"), (5, 5, 5, "Hello"), (6, 6, 6, "Hello"),
        (20, 20, 20, "Hello World"), (8, 8, 8, "Hello World"), (7, 7, 7, "Hello World"),
    ]  # fmt: skip
    rows_2 = "ROWS BETWEEN 2 PRECEDING AND CURRENT ROW"
    sql = (
        table()
        + sink("c STRING, a BIGINT, cnt BIGINT, s BIGINT")
        + f"""INSERT INTO out SELECT c, a,
  COUNT(1) OVER (PARTITION BY c ORDER BY rowtime {rows_2}),
  SUM(a) OVER (PARTITION BY c ORDER BY rowtime {rows_2})
FROM T1"""
    )
    flink = [
        "Hello,1,1,1", "Hello,1,2,2", "Hello,1,3,3", "Hello,2,3,4", "Hello,2,3,5",
        "Hello,2,3,6", "Hello,3,3,7", "Hello,4,3,9", "Hello,5,3,12", "Hello,6,3,15",
        "Hello World,7,1,7", "Hello World,7,2,14", "Hello World,7,3,21",
        "Hello World,7,3,21", "Hello World,8,3,22", "Hello World,20,3,35",
    ]  # fmt: skip
    assert rows(run(sql, inputs(data))) == expected(flink, "siii")


def test_row_time_bounded_non_partitioned_rows_over_drops_a_late_row():
    # OverAggregateITCase.testRowTimeBoundedNonPartitionedRowsOver: Flink's watermark 3
    # after the row at 20 is here the 15 ms delay behind 20 (watermark 4); the row at 2
    # that follows is late (its partition emitted time 2 already) and dropped
    data = [
        (2, 2, 2, "Hello"), (2, 2, 2, "Hello"), (1, 1, 1, "Hello"), (1, 1, 1, "Hello"),
        (2, 2, 2, "Hello"), (1, 1, 1, "Hello"), (20, 20, 20, "Hello World"),
        (2, 2, 2, "Hello"),  # late
        (3, 3, 3, "Hello"), (4, 4, 4, "Hello"), (5, 5, 5, "Hello"), (6, 6, 6, "Hello"),
        (7, 7, 7, "Hello World"), (9, 9, 9, "Hello World"), (8, 8, 8, "Hello World"),
        (8, 8, 8, "Hello World"),
    ]  # fmt: skip
    sql = (
        table("'0.015' SECOND")
        + sink("c STRING, a BIGINT, cnt BIGINT, s BIGINT")
        + """INSERT INTO out SELECT c, a,
  COUNT(a) OVER (ORDER BY rowtime ROWS BETWEEN 2 preceding AND CURRENT ROW),
  SUM(a) OVER (ORDER BY rowtime ROWS BETWEEN 2 preceding AND CURRENT ROW)
FROM T1"""
    )
    flink = [
        "Hello,1,1,1", "Hello,1,2,2", "Hello,1,3,3", "Hello,2,3,4", "Hello,2,3,5",
        "Hello,2,3,6", "Hello,3,3,7", "Hello,4,3,9", "Hello,5,3,12", "Hello,6,3,15",
        "Hello World,7,3,18", "Hello World,8,3,21", "Hello World,8,3,23",
        "Hello World,9,3,25", "Hello World,20,3,37",
    ]  # fmt: skip
    assert rows(run(sql, inputs(data, end=1000))) == expected(flink, "siii")


UNBOUNDED_RANGE = "RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"


def test_row_time_unbounded_partitioned_range_over():
    # OverAggregateITCase.testRowTimeUnBoundedPartitionedRangeOver (without LTCNT; AVG
    # is a DOUBLE here, Flink's AVG of a BIGINT a BIGINT)
    w = f"(PARTITION BY a ORDER BY rowtime {UNBOUNDED_RANGE})"
    sql = (
        table(a="INT", b="BIGINT")
        + sink("a INT, b BIGINT, c STRING, s BIGINT, n BIGINT, av DOUBLE, mx BIGINT, mn BIGINT")
        + f"""INSERT INTO out SELECT a, b, c, SUM(b) OVER {w}, COUNT(b) OVER {w},
  AVG(b) OVER {w}, MAX(b) OVER {w}, MIN(b) OVER {w} FROM T1"""
    )
    flink = [
        f"1,1,Hello,6,3,{6 / 3},3,1", f"1,2,Hello,6,3,{6 / 3},3,1",
        f"1,3,Hello world,6,3,{6 / 3},3,1", f"1,1,Hi,7,4,{7 / 4},3,1",
        f"2,1,Hello,1,1,{1 / 1},1,1", f"2,2,Hello world,6,3,{6 / 3},3,1",
        f"2,3,Hello world,6,3,{6 / 3},3,1", f"1,4,Hello world,11,5,{11 / 5},4,1",
        f"1,5,Hello world,29,8,{29 / 8},7,1", f"1,6,Hello world,29,8,{29 / 8},7,1",
        f"1,7,Hello world,29,8,{29 / 8},7,1", f"2,4,Hello world,15,5,{15 / 5},5,1",
        f"2,5,Hello world,15,5,{15 / 5},5,1",
    ]  # fmt: skip
    out = run(sql, inputs(UNBOUNDED_RANGE_DATA))
    assert rows(out) == expected(flink, "iisiidii")


def test_row_time_unbounded_partitioned_rows_over():
    # OverAggregateITCase.testRowTimeUnBoundedPartitionedRowsOver (without LTCNT and AVG)
    data = [
        (14000005, 1, 1, "Hi"), (14000000, 2, 1, "Hello"), (14000002, 3, 1, "Hello"),
        (14000003, 1, 2, "Hello"), (14000004, 1, 3, "Hello world"),
        (14000007, 3, 2, "Hello world"), (14000008, 2, 2, "Hello world"),
        (14000012, 1, 5, "Hello world"), (14000021, 1, 6, "Hello world"),
        (14000023, 2, 5, "Hello world"), (14000024, 3, 5, "Hello world"),
        (14000026, 1, 7, "Hello world"), (14000025, 1, 8, "Hello world"),
        (14000022, 1, 9, "Hello world"),
    ]  # fmt: skip
    w = "(PARTITION BY a ORDER BY rowtime ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"
    sql = (
        table(a="INT", b="BIGINT")
        + sink("a INT, b BIGINT, c STRING, s BIGINT, n BIGINT, mx BIGINT, mn BIGINT")
        + f"""INSERT INTO out SELECT a, b, c, SUM(b) OVER {w}, COUNT(b) OVER {w},
  MAX(b) OVER {w}, MIN(b) OVER {w} FROM T1"""
    )
    flink = [
        "1,2,Hello,2,1,2,2", "1,3,Hello world,5,2,3,2", "1,1,Hi,6,3,3,1",
        "2,1,Hello,1,1,1,1", "2,2,Hello world,3,2,2,1", "3,1,Hello,1,1,1,1",
        "3,2,Hello world,3,2,2,1", "1,5,Hello world,11,4,5,1", "1,6,Hello world,17,5,6,1",
        "1,9,Hello world,26,6,9,1", "1,8,Hello world,34,7,9,1", "1,7,Hello world,41,8,9,1",
        "2,5,Hello world,8,3,5,1", "3,5,Hello world,8,3,5,1",
    ]  # fmt: skip
    assert rows(run(sql, inputs(data))) == expected(flink, "iisiiii")


ORDERS = """
CREATE TABLE orders (product STRING, amount INT, order_time TIMESTAMP(3),
  WATERMARK FOR order_time AS order_time - INTERVAL '1' MINUTE
) WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json');
CREATE TABLE out (product STRING, amount INT, one_hour_sum INT, n BIGINT)
  WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
"""


def orders(*data: tuple[str, int, str]) -> list[tuple[str, dict]]:
    return [
        ("orders", {"product": p, "amount": a, "order_time": f"2024-01-01 {t}"}) for p, a, t in data
    ]


def test_named_window_where_and_late_rows():
    # Flink's documentation's example, with a named window: WHERE filters before the
    # aggregation (its rows still move stream time); a row behind the watermark when
    # read (its partition emitted a later time) is dropped
    sql = (
        ORDERS
        + """INSERT INTO out
SELECT product, amount, SUM(amount) OVER w AS one_hour_sum, COUNT(*) OVER w
FROM orders WHERE amount > 0
WINDOW w AS (PARTITION BY product ORDER BY order_time
  RANGE BETWEEN INTERVAL '1' HOUR PRECEDING AND CURRENT ROW)"""
    )
    out = run(
        sql,
        orders(
            ("a", 1, "00:00:00"),
            ("a", 2, "00:00:00"),  # a peer: both rows see each other
            ("b", 5, "00:10:00"),
            ("a", 3, "00:30:00"),
            ("a", 4, "01:20:00"),  # the rows at 00:00 are out of its hour
            ("a", 9, "00:00:00"),  # late
            ("z", 0, "05:00:00"),  # filtered out, still moves the watermark past 01:20
        ),
    )
    assert out == [
        {"product": "a", "amount": 1, "one_hour_sum": 3, "n": 2},
        {"product": "a", "amount": 2, "one_hour_sum": 3, "n": 2},
        {"product": "b", "amount": 5, "one_hour_sum": 5, "n": 1},
        {"product": "a", "amount": 3, "one_hour_sum": 6, "n": 3},
        {"product": "a", "amount": 4, "one_hour_sum": 7, "n": 2},
    ]


def test_a_row_waits_for_the_watermark():
    sql = (
        ORDERS
        + """INSERT INTO out SELECT product, amount,
  SUM(amount) OVER (PARTITION BY product ORDER BY order_time),
  COUNT(amount) OVER (PARTITION BY product ORDER BY order_time)
FROM orders"""
    )
    # stream time 00:01:00 puts the watermark 1 ms before 00:00:00: nothing is out
    assert run(sql, orders(("a", 1, "00:00:00"), ("a", 2, "00:01:00"))) == []
    out = run(sql, orders(("a", 1, "00:00:00"), ("a", 2, "00:01:00"), ("b", 1, "00:01:01")))
    assert out == [{"product": "a", "amount": 1, "one_hour_sum": 1, "n": 1}]


def test_unbounded_frame_drops_rows_behind_the_watermark():
    sql = (
        ORDERS
        + """INSERT INTO out SELECT product, amount,
  SUM(amount) OVER (PARTITION BY product ORDER BY order_time
    ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW),
  COUNT(amount) OVER (PARTITION BY product ORDER BY order_time
    ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
FROM orders"""
    )
    out = run(
        sql,
        orders(
            ("a", 1, "00:00:00"),
            ("a", 2, "00:05:00"),
            ("b", 7, "00:03:00"),  # behind the watermark (00:03:59.999): late
            ("a", 3, "00:04:30"),
            ("a", 4, "00:10:00"),
        ),
    )
    assert out == [
        {"product": "a", "amount": 1, "one_hour_sum": 1, "n": 1},
        {"product": "a", "amount": 3, "one_hour_sum": 4, "n": 2},
        {"product": "a", "amount": 2, "one_hour_sum": 6, "n": 3},
    ]


@pytest.mark.parametrize(
    ("window", "at", "message"),
    [
        ("PARTITION BY product ORDER BY amount", "amount), 1", "ORDER BY amount: an OVER"),
        ("PARTITION BY product ORDER BY order_time DESC", "order_time DESC", "ascending time"),
        (
            "ORDER BY order_time ROWS BETWEEN 2 PRECEDING AND 1 FOLLOWING",
            "2 PRECEDING",
            "ends at CURRENT ROW",
        ),
        (
            "ORDER BY order_time RANGE BETWEEN 2 PRECEDING AND CURRENT ROW",
            "2 PRECEDING",
            "RANGE on time needs an INTERVAL",
        ),
        ("PARTITION BY nope ORDER BY order_time", "nope", "PARTITION BY nope"),
    ],
)
def test_wrong_frames_are_errors_at_their_place(window: str, at: str, message: str):
    query = f"INSERT INTO out SELECT product, amount, SUM(amount) OVER ({window}), 1 FROM orders"
    sql = ORDERS + query
    with pytest.raises(SqlError, match=message) as caught:
        compile(sql)
    offset = sql.index(at)
    line = sql.count("\n", 0, offset) + 1
    column = offset - sql.rfind("\n", 0, offset)
    assert (caught.value.line, caught.value.column) == (line, column)


def test_different_windows_and_processing_time_are_errors():
    sql = (
        ORDERS
        + """INSERT INTO out SELECT product, amount,
  SUM(amount) OVER (ORDER BY order_time),
  COUNT(amount) OVER (PARTITION BY product ORDER BY order_time) FROM orders"""
    )
    with pytest.raises(SqlError, match="must be the same"):
        compile(sql)
    proctime = """
CREATE TABLE p (product STRING, amount INT, pt AS PROCTIME())
  WITH ('connector' = 'kafka', 'topic' = 'p', 'format' = 'json');
CREATE TABLE out (product STRING, s INT) WITH ('connector' = 'kafka', 'topic' = 'out',
  'format' = 'json');
INSERT INTO out SELECT product, SUM(amount) OVER (PARTITION BY product ORDER BY pt) FROM p
"""
    with pytest.raises(SqlError, match="processing time"):
        compile(proctime)


def test_over_aggregation_in_a_view():
    sql = """
CREATE TABLE orders (product STRING, amount INT, order_time TIMESTAMP(3),
  WATERMARK FOR order_time AS order_time - INTERVAL '1' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json');
CREATE TABLE out (product STRING, s INT)
  WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
CREATE VIEW v AS SELECT product, order_time,
  SUM(amount) OVER (PARTITION BY product ORDER BY order_time) AS s FROM orders;
INSERT INTO out SELECT product, s FROM v WHERE s > 1;
"""
    out = run(
        sql,
        orders(("a", 1, "00:00:00"), ("a", 2, "00:00:01"), ("b", 5, "00:10:00")),
    )
    assert out == [{"product": "a", "s": 3}]
