"""MATCH_RECOGNIZE as Flink runs it, through the test driver: the inputs and expected rows
of Flink's ``MatchRecognizeITCase`` (stream), then the examples of Flink's documentation
page on pattern recognition (skip strategies, greedy and reluctant quantifiers, WITHIN).

Ported as written but for: pattern variables Flink quotes with a ``"`` in their name
(``A"``, ``DOWN"``) are plain here (an identifier here holds no ``"``); ``LIKE`` (not
compiled here) is left out of one DEFINE that it does not decide; Flink's explicit
watermarks become a WATERMARK delay and, for the end of Flink's bounded input (a
watermark at +infinity), a row far later.
"""

from __future__ import annotations

from typing import Any

import pytest
from flink_itcases import flink_rows

from streaming import TopologyTestDriver, serdes
from streaming.sql import SqlError, compile


def run(
    sql: str, rows: list[dict[str, Any]], functions: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The rows ``sql`` writes to ``out`` for ``rows`` piped (keyless, in order) to ``t1``."""
    with TopologyTestDriver(compile(sql, functions=functions)) as driver:
        source = driver.create_input_topic("t1", key_serde=serdes.String())
        for row in rows:
            source.pipe_input(None, row)
        out = driver.create_output_topic("out", key_serde=serdes.String())
        return [r.value for r in out.read_records_to_list()]


def table(columns: str, name: str = "MyTable") -> str:
    return (
        f"CREATE TABLE {name} ({columns}) "
        "WITH ('connector' = 'kafka', 'topic' = 't1', 'format' = 'json');\n"
    )


def sink(columns: str) -> str:
    return (
        f"CREATE TABLE out ({columns}) "
        "WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');\n"
    )


def values(out: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((tuple(row.values()) for row in out), key=repr)


def test_simple_pattern():
    # MatchRecognizeITCase.testSimplePattern
    sql = (
        table("id INT, name STRING, proctime AS PROCTIME()")
        + sink("aid INT, bid INT, cid INT")
        + """INSERT INTO out
SELECT T.aid, T.bid, T.cid
FROM MyTable
MATCH_RECOGNIZE (
  ORDER BY proctime
  MEASURES
    `A`.id AS aid,
    l.id AS bid,
    C.id AS cid
  PATTERN (`A` l C)
  DEFINE
    `A` AS name = 'a',
    l AS name = 'b',
    C AS name = 'c'
) AS T"""
    )
    data = [(1, "a"), (2, "z"), (3, "b"), (4, "c"), (5, "d"), (6, "a"), (7, "b"), (8, "c")]
    data.append((9, "h"))
    out = run(sql, [{"id": i, "name": n} for i, n in data])
    assert values(out) == flink_rows(["6,7,8"], "iii")


def test_simple_pattern_with_nulls():
    # MatchRecognizeITCase.testSimplePatternWithNulls
    sql = (
        table("id INT, name STRING, nullField STRING, proctime AS PROCTIME()")
        + sink("aid INT, bNull STRING, cid INT, aNull STRING")
        + """INSERT INTO out
SELECT T.aid, T.bNull, T.cid, T.aNull
FROM MyTable
MATCH_RECOGNIZE (
  ORDER BY proctime
  MEASURES
    A.id AS aid,
    A.nullField AS aNull,
    LAST(B.nullField) AS bNull,
    C.id AS cid
  PATTERN (A B C)
  DEFINE
    A AS name = 'a' AND nullField IS NULL,
    B AS name = 'b' AND LAST(A.nullField) IS NULL,
    C AS name = 'c'
) AS T"""
    )
    names = ["a", "b", "c", "d", None, "a", "b", "c", None]
    out = run(sql, [{"id": i, "name": n, "nullField": None} for i, n in enumerate(names, 1)])
    assert values(out) == flink_rows(["1,null,3,null", "6,null,8,null"], "isis")


def test_partition_by_two_columns_and_select_star():
    # MatchRecognizeITCase.testCodeSplitsAreProperlyGenerated (without its LIKE)
    sql = (
        table("id INT, name STRING, key1 STRING, key2 STRING, proctime AS PROCTIME()")
        + sink("key1 STRING, key2 STRING, aid INT, akey1 STRING, bid INT, cid INT, ckey2 STRING")
        + """INSERT INTO out
SELECT *
FROM MyTable
MATCH_RECOGNIZE (
  PARTITION BY key1, key2
  ORDER BY proctime
  MEASURES
    A.id AS aid,
    A.key1 AS akey1,
    LAST(B.id) AS bid,
    C.id AS cid,
    C.key2 AS ckey2
  PATTERN (A B C)
  DEFINE
    A AS name = 'a' AND id > 0,
    B AS name = 'b' AND LAST(A.name, 2) IS NULL,
    C AS name = 'c' AND LAST(A.name) = 'a'
) AS T"""
    )
    data = [
        (1, "a", "key1", "second_key3"),
        (2, "b", "key1", "second_key3"),
        (3, "c", "key1", "second_key3"),
        (4, "d", "key", "second_key"),
        (5, "e", "key", "second_key"),
        (6, "a", "key2", "second_key4"),
        (7, "b", "key2", "second_key4"),
        (8, "c", "key2", "second_key4"),
        (9, "f", "key", "second_key"),
    ]
    out = run(sql, [{"id": i, "name": n, "key1": a, "key2": b} for i, n, a, b in data])
    expected = [
        "key1,second_key3,1,key1,2,3,second_key3",
        "key2,second_key4,6,key2,7,8,second_key4",
    ]
    assert values(out) == flink_rows(expected, "ssisiis")


def test_events_are_properly_ordered():
    # MatchRecognizeITCase.testEventsAreProperlyOrdered: rows are matched in the order of
    # rowtime, then secondaryOrder DESC, then ternaryOrder, whatever order they come in
    sql = (
        table(
            "secondaryOrder INT, ternaryOrder INT, name STRING, id INT, rowtime TIMESTAMP(3), "
            "WATERMARK FOR rowtime AS rowtime - INTERVAL '0.002' SECOND"
        )
        + sink("aid INT, bid INT, cid INT")
        + """INSERT INTO out
SELECT T.aid, T.bid, T.cid
FROM MyTable
MATCH_RECOGNIZE (
  ORDER BY rowtime, secondaryOrder DESC, ternaryOrder ASC
  MEASURES
    A.id AS aid,
    B.id AS bid,
    C.id AS cid
  PATTERN (A B C)
  DEFINE
    A AS name = 'a',
    B AS name = 'b',
    C AS name = 'c'
) AS T"""
    )
    data = [
        (2, 12, 1, "a", 1),
        (1, 11, 2, "b", 2),
        (3, 10, 3, "c", 3),  # event time order breaks this match
        (4, 8, 4, "a", 4),
        (4, 9, 5, "b", 5),
        (5, 7, 6, "c", 6),  # secondary order breaks this match
        (6, 6, 8, "a", 7),
        (6, 6, 7, "b", 8),
        (8, 4, 9, "c", 9),  # ternary order breaks this match
        (9, 3, 10, "a", 10),
        (10, 2, 11, "b", 11),
        (11, 1, 12, "c", 12),
        (1000, 0, 0, "end", 0),  # the end of Flink's bounded input
    ]
    rows = [
        {"rowtime": ts, "secondaryOrder": s, "ternaryOrder": t, "name": n, "id": i}
        for ts, s, t, n, i in data
    ]
    assert values(run(sql, rows)) == flink_rows(["10,11,12"], "iii")


TICKER = "symbol STRING, tstamp BIGINT, price INT, tax INT, proctime AS PROCTIME()"


def ticker(data: list[tuple[str, int, int, int]]) -> list[dict[str, Any]]:
    return [{"symbol": s, "tstamp": t, "price": p, "tax": x} for s, t, p, x in data]


def test_logical_offsets():
    # MatchRecognizeITCase.testLogicalOffsets
    sql = (
        table(TICKER, "Ticker")
        + sink(
            "start_tstamp BIGINT, bottom_tstamp BIGINT, end_tstamp BIGINT, "
            "bottom_total INT, end_total INT"
        )
        + """INSERT INTO out
SELECT *
FROM Ticker
MATCH_RECOGNIZE (
  ORDER BY proctime
  MEASURES
    FIRST(DOWN.tstamp) AS start_tstamp,
    LAST(DOWN.tstamp) AS bottom_tstamp,
    UP.tstamp AS end_tstamp,
    FIRST(DOWN.price + DOWN.tax + 1) AS bottom_total,
    UP.price + UP.tax AS end_total
  ONE ROW PER MATCH
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (DOWN{2,} UP)
  DEFINE
    DOWN AS price < LAST(DOWN.price, 1) OR LAST(DOWN.price, 1) IS NULL,
    UP AS price < FIRST(DOWN.price)
) AS T"""
    )
    data = [
        ("ACME", 1, 19, 1),
        ("ACME", 2, 17, 2),
        ("ACME", 3, 13, 3),
        ("ACME", 4, 20, 4),
        ("ACME", 5, 20, 5),
        ("ACME", 6, 26, 6),
        ("ACME", 7, 20, 7),
        ("ACME", 8, 25, 8),
    ]
    assert values(run(sql, ticker(data))) == flink_rows(["6,7,8,33,33"], "iiiii")


def test_partition_by_with_parallel_source():
    # MatchRecognizeITCase.testPartitionByWithParallelSource (event time)
    sql = (
        table(
            "symbol STRING, rowtime TIMESTAMP(3), price INT, tax INT, "
            "WATERMARK FOR rowtime AS rowtime - INTERVAL '0' SECOND",
            "Ticker",
        )
        + sink("symbol STRING, bottom_tax INT, end_tax INT")
        + """INSERT INTO out
SELECT *
FROM Ticker
MATCH_RECOGNIZE (
  PARTITION BY symbol
  ORDER BY rowtime
  MEASURES
    DOWN.tax AS bottom_tax,
    UP.tax AS end_tax
  ONE ROW PER MATCH
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (DOWN UP)
  DEFINE
    DOWN AS DOWN.price = 13,
    UP AS UP.price = 20
) AS T"""
    )
    data = [("ACME", 1, 19, 1), ("ACME", 2, 17, 2), ("ACME", 3, 13, 3), ("ACME", 4, 20, 4)]
    data.append(("ACME", 1000, 0, 0))  # the end of Flink's bounded input
    rows = [{"symbol": s, "rowtime": t, "price": p, "tax": x} for s, t, p, x in data]
    assert values(run(sql, rows)) == flink_rows(["ACME,3,4"], "sii")


def test_logical_offsets_with_star_variable():
    # MatchRecognizeITCase.testLogicalOffsetsWithStarVariable
    measures = ",\n".join(
        [f"FIRST(id, {i}) AS id{i}" for i in range(8)]
        + [f"LAST(id, {i}) AS id{i + 8}" for i in range(8)]
    )
    sql = (
        table("id INT, symbol STRING, tstamp BIGINT, price INT, proctime AS PROCTIME()", "Ticker")
        + sink(", ".join(f"id{i} INT" for i in range(16)))
        + f"""INSERT INTO out
SELECT *
FROM Ticker
MATCH_RECOGNIZE (
  ORDER BY proctime
  MEASURES
{measures}
  ONE ROW PER MATCH
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (`DOWN`{{2,}} UP)
  DEFINE
    `DOWN` AS price < LAST(price, 1) OR LAST(price, 1) IS NULL,
    UP AS price = FIRST(price) AND price > FIRST(price, 3) AND price = LAST(price, 7)
) AS T"""
    )
    prices = [20, 19, 18, 17, 16, 15, 14, 20]
    rows = [{"id": i, "symbol": "ACME", "tstamp": i, "price": p} for i, p in enumerate(prices, 1)]
    expected = ["1,2,3,4,5,6,7,8,8,7,6,5,4,3,2,1"]
    assert values(run(sql, rows)) == flink_rows(expected, "i" * 16)


def test_logical_offset_outside_of_range_in_measures():
    # MatchRecognizeITCase.testLogicalOffsetOutsideOfRangeInMeasures
    sql = (
        table(TICKER, "Ticker")
        + sink("`first` INT, `last` INT, nullPrice INT")
        + """INSERT INTO out
SELECT *
FROM Ticker
MATCH_RECOGNIZE (
  ORDER BY proctime
  MEASURES
    FIRST(DOWN.price) as `first`,
    LAST(DOWN.price) as `last`,
    FIRST(DOWN.price, 5) as nullPrice
  ONE ROW PER MATCH
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (DOWN{2,} UP)
  DEFINE
    DOWN AS price < LAST(DOWN.price, 1) OR LAST(DOWN.price, 1) IS NULL,
    UP AS price > LAST(DOWN.price)
) AS T"""
    )
    data = [("ACME", 1, 19, 1), ("ACME", 2, 17, 2), ("ACME", 3, 13, 3), ("ACME", 4, 20, 4)]
    assert values(run(sql, ticker(data))) == flink_rows(["19,13,null"], "iii")


class WeightedAvg:
    """Flink's ``JavaUserDefinedAggFunctions.WeightedAvg``: sum(value * weight) /
    sum(weight), in whole numbers."""

    def create_accumulator(self) -> list[int]:
        return [0, 0]

    def accumulate(self, acc: list[int], value: int | None, weight: int | None) -> None:
        if value is not None and weight is not None:
            acc[0] += value * weight
            acc[1] += weight

    def get_value(self, acc: list[int]) -> int | None:
        return acc[0] // acc[1] if acc[1] else None


def test_aggregates():
    # MatchRecognizeITCase.testAggregates: COUNT of no rows is 0, SUM of none NULL,
    # aggregates of several arguments (a Python one) and of expressions
    sql = (
        table("id INT, name STRING, price BIGINT, rate DOUBLE, weight INT, proctime AS PROCTIME()")
        + sink(
            "startId INT, sumA BIGINT, countD BIGINT, sumD BIGINT, wAvg BIGINT, avgB DOUBLE, "
            "sumExprB DOUBLE, endId INT"
        )
        + """INSERT INTO out
SELECT *
FROM MyTable
MATCH_RECOGNIZE (
  ORDER BY proctime
  MEASURES
    FIRST(id) as startId,
    SUM(A.price) AS sumA,
    COUNT(D.price) AS countD,
    SUM(D.price) as sumD,
    weightedAvg(price, weight) as wAvg,
    AVG(B.price) AS avgB,
    SUM(B.price * B.rate) as sumExprB,
    LAST(id) as endId
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A+ B+ C D? E )
  DEFINE
    A AS SUM(A.price) < 6,
    B AS SUM(B.price * B.rate) < SUM(A.price) AND
         SUM(B.price * B.rate) > 0.2 AND
         SUM(B.price) >= 1 AND
         AVG(B.price) >= 1 AND
         weightedAvg(price, weight) > 1
) AS T"""
    )
    data = [
        (1, "a", 1, 0.8, 1),
        (2, "z", 2, 0.8, 3),
        (3, "b", 1, 0.8, 2),
        (4, "c", 1, 0.8, 5),
        (5, "d", 4, 0.1, 5),
        (6, "a", 2, 1.5, 2),
        (7, "b", 2, 0.8, 3),
        (8, "c", 1, 0.8, 2),
        (9, "h", 4, 0.8, 3),
        (10, "h", 4, 0.8, 3),
        (11, "h", 2, 0.8, 3),
        (12, "h", 2, 0.8, 3),
    ]
    rows = [{"id": i, "name": n, "price": p, "rate": r, "weight": w} for i, n, p, r, w in data]
    out = run(sql, rows, functions={"weightedAvg": WeightedAvg})
    # Flink's AVG of a BIGINT is a BIGINT (3 and 4); here AVG is a DOUBLE (3.0, 4.0)
    expected = flink_rows(["1,5,0,null,2,3,3.4,8", "9,4,0,null,3,4,3.2,12"], "iiiiiidi")
    assert [(*row[:6], round(row[6], 9), row[7]) for row in values(out)] == expected


def test_aggregates_with_null_inputs():
    # MatchRecognizeITCase.testAggregatesWithNullInputs
    sql = (
        table("id INT, name STRING, price INT, proctime AS PROCTIME()")
        + sink(
            "sumA INT, countAId BIGINT, countAPrice BIGINT, countAll BIGINT, "
            "countAllPrice BIGINT, endId INT"
        )
        + """INSERT INTO out
SELECT *
FROM MyTable
MATCH_RECOGNIZE (
  ORDER BY proctime
  MEASURES
    SUM(A.price) as sumA,
    COUNT(A.id) as countAId,
    COUNT(A.price) as countAPrice,
    COUNT(*) as countAll,
    COUNT(price) as countAllPrice,
    LAST(id) as endId
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A+ C)
  DEFINE
    A AS SUM(A.price) < 30,
    C AS C.name = 'c'
) AS T"""
    )
    data = [
        (1, "a", 10),
        (2, "z", 10),
        (3, "b", None),
        (4, "c", None),
        (5, "d", 3),
        (6, "c", 3),
        (7, "c", 3),
        (8, "c", 3),
        (9, "c", 2),
    ]
    out = run(sql, [{"id": i, "name": n, "price": p} for i, n, p in data])
    assert values(out) == flink_rows(["29,7,5,8,6,8"], "iiiiii")


class CountFrom:
    """Flink's test ``RichAggFunc``: a sum that starts at 4 (its job parameter)."""

    def create_accumulator(self) -> list[int]:
        return [4]

    def accumulate(self, acc: list[int], value: int | None) -> None:
        acc[0] += value or 0

    def get_value(self, acc: list[int]) -> int:
        return acc[0]


def prefix(value: str | None) -> str:
    """Flink's test ``PrefixingScalarFunc`` with its job parameter ``PREF``."""
    return f"PREF:{value}"


def test_user_defined_functions():
    # MatchRecognizeITCase.testUserDefinedFunctions: a Python scalar function and a Python
    # aggregate function in MEASURES and DEFINE
    sql = (
        table("id INT, name STRING, price BIGINT, proctime AS PROCTIME()")
        + sink("firstId INT, prefixedNameA STRING, countFromA BIGINT, lastId INT")
        + """INSERT INTO out
SELECT *
FROM MyTable
MATCH_RECOGNIZE (
  ORDER BY proctime
  MEASURES
    FIRST(id) as firstId,
    prefix(A.name) as prefixedNameA,
    countFrom(A.price) as countFromA,
    LAST(id) as lastId
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A+ C)
  DEFINE
    A AS prefix(A.name) = 'PREF:a' AND countFrom(A.price) <= 8
) AS T"""
    )
    names = ["a", "a", "a", "a", "a", "b", "a", "a", "f"]
    rows = [{"id": i, "name": n, "price": 1} for i, n in enumerate(names, 1)]
    out = run(sql, rows, functions={"prefix": prefix, "countFrom": CountFrom})
    assert values(out) == flink_rows(["1,PREF:a,8,5", "7,PREF:a,6,9"], "isii")


# -- the examples of Flink's documentation page ----------------------------------------

DOC_TICKER = table(
    "symbol STRING, rowtime TIMESTAMP(3), price INT, tax INT, "
    "WATERMARK FOR rowtime AS rowtime - INTERVAL '1' SECOND",
    "Ticker",
)


def doc_rows(data: list[tuple[str, int, int]], symbol: str = "XYZ") -> list[dict[str, Any]]:
    """Ticker rows of (time 'HH:MM:SS' on 2018-09-17, price, tax) and a last row an hour
    later (the end of the input)."""
    rows = [
        {"symbol": symbol, "rowtime": f"2018-09-17 {t}.000", "price": p, "tax": x}
        for t, p, x in data
    ]
    return [*rows, {"symbol": symbol, "rowtime": "2018-09-17 23:00:00.000", "price": 0, "tax": 0}]


SKIP_DATA = [
    ("10:00:01", 7, 1),
    ("10:00:02", 9, 2),
    ("10:00:03", 10, 1),
    ("10:00:04", 5, 2),
    ("10:00:05", 10, 2),
    ("10:00:06", 7, 2),
    ("10:00:07", 14, 2),
]


def skip_query(strategy: str) -> str:
    return (
        DOC_TICKER
        + sink("symbol STRING, sumPrice INT, startTime TIMESTAMP(3), endTime TIMESTAMP(3)")
        + f"""INSERT INTO out
SELECT *
FROM Ticker
    MATCH_RECOGNIZE(
        PARTITION BY symbol
        ORDER BY rowtime
        MEASURES
            SUM(A.price) AS sumPrice,
            FIRST(rowtime) AS startTime,
            LAST(rowtime) AS endTime
        ONE ROW PER MATCH
        {strategy}
        PATTERN (A+ C)
        DEFINE
            A AS SUM(A.price) < 30
    )"""
    )


def sums(out: list[dict[str, Any]]) -> list[tuple[int, str, str]]:
    return [(r["sumPrice"], r["startTime"][11:19], r["endTime"][11:19]) for r in out]


def test_after_match_skip_past_last_row():
    out = run(skip_query("AFTER MATCH SKIP PAST LAST ROW"), doc_rows(SKIP_DATA))
    assert sums(out) == [(26, "10:00:01", "10:00:04"), (17, "10:00:05", "10:00:07")]


def test_after_match_skip_to_next_row():
    out = run(skip_query("AFTER MATCH SKIP TO NEXT ROW"), doc_rows(SKIP_DATA))
    assert sums(out) == [
        (26, "10:00:01", "10:00:04"),
        (24, "10:00:02", "10:00:05"),
        (25, "10:00:03", "10:00:06"),
        (22, "10:00:04", "10:00:07"),
        (17, "10:00:05", "10:00:07"),
    ]
    # SKIP TO NEXT ROW is the default (Calcite's, so Flink's)
    assert run(skip_query(""), doc_rows(SKIP_DATA)) == out


def test_after_match_skip_to_last_variable():
    out = run(skip_query("AFTER MATCH SKIP TO LAST A"), doc_rows(SKIP_DATA))
    assert sums(out) == [
        (26, "10:00:01", "10:00:04"),
        (25, "10:00:03", "10:00:06"),
        (17, "10:00:05", "10:00:07"),
    ]
    # SKIP TO A is SKIP TO LAST A (Calcite's)
    assert run(skip_query("AFTER MATCH SKIP TO A"), doc_rows(SKIP_DATA)) == out


QUANTIFIER_DATA = [
    ("10:00:02", 10, 1),
    ("10:00:03", 11, 2),
    ("10:00:04", 12, 1),
    ("10:00:05", 13, 2),
    ("10:00:06", 14, 1),
    ("10:00:07", 16, 2),
]


def quantifier_query(b: str) -> str:
    return (
        DOC_TICKER
        + sink("symbol STRING, lastPrice INT")
        + f"""INSERT INTO out
SELECT *
FROM Ticker
    MATCH_RECOGNIZE(
        PARTITION BY symbol
        ORDER BY rowtime
        MEASURES
            C.price AS lastPrice
        ONE ROW PER MATCH
        AFTER MATCH SKIP PAST LAST ROW
        PATTERN (A {b} C)
        DEFINE
            A AS A.price > 10,
            B AS B.price < 15,
            C AS C.price > 12
    )"""
    )


def test_greedy_and_reluctant_quantifiers():
    # a greedy B* swallows 12, 13 and 14; a reluctant B*? stops at the first C
    greedy = run(quantifier_query("B*"), doc_rows(QUANTIFIER_DATA))
    assert [r["lastPrice"] for r in greedy] == [16]
    reluctant = run(quantifier_query("B*?"), doc_rows(QUANTIFIER_DATA))
    assert [r["lastPrice"] for r in reluctant] == [13, 16]


WITHIN_DATA = [
    ("10:00:00", 20, 1),
    ("10:20:00", 17, 2),
    ("10:40:00", 18, 1),
    ("11:00:00", 11, 3),
    ("11:20:00", 14, 2),
    ("11:40:00", 9, 1),
    ("12:00:00", 15, 1),
    ("12:20:00", 14, 2),
    ("12:40:00", 24, 2),
    ("13:00:00", 1, 2),
    ("13:20:00", 19, 1),
]


def within_query(within: str) -> str:
    return (
        DOC_TICKER
        + sink("symbol STRING, dropTime TIMESTAMP(3), dropDiff INT")
        + f"""INSERT INTO out
SELECT *
FROM Ticker
    MATCH_RECOGNIZE(
        PARTITION BY symbol
        ORDER BY rowtime
        MEASURES
            C.rowtime AS dropTime,
            A.price - C.price AS dropDiff
        ONE ROW PER MATCH
        AFTER MATCH SKIP PAST LAST ROW
        PATTERN (A B* C) {within}
        DEFINE
            B AS B.price > A.price - 10,
            C AS C.price < A.price - 10
    )"""
    )


def test_within_bounds_the_time_of_a_match():
    # the documentation's WITHIN example: without WITHIN the drop of 11 from 20 (10:00) to
    # 9 (11:40) is found; within an hour it is not. The documentation shows the drop from
    # 15 (12:00) to 1 (13:00), exactly an hour; Flink's NFA drops a partial match whose
    # first row is WITHIN or more before the row (``timestamp - start >= windowTime``), so
    # the match is the drop from 14 (12:20) to 1 (13:00)
    unbounded = run(within_query(""), doc_rows(WITHIN_DATA, "ACME"))
    assert [(r["dropTime"][11:19], r["dropDiff"]) for r in unbounded] == [
        ("11:40:00", 11),
        ("13:00:00", 14),
    ]
    out = run(within_query("WITHIN INTERVAL '1' HOUR"), doc_rows(WITHIN_DATA, "ACME"))
    assert [(r["dropTime"][11:19], r["dropDiff"]) for r in out] == [("13:00:00", 13)]


def test_match_recognize_applied_to_windowed_grouping():
    # MatchRecognizeITCase.testMatchRecognizeAppliedToWindowedGrouping: MATCH_RECOGNIZE
    # over an unaliased subquery of window results, ordered by their time attribute.
    # TUMBLE_ROWTIME (not compiled here) becomes TUMBLE_END; ACME1's rows come after
    # ACME's at 8 s and are late here as in Flink (its watermarks ascend with the rows)
    sql = (
        table(
            "symbol STRING, rowtime TIMESTAMP(3), price INT, tax INT, "
            "WATERMARK FOR rowtime AS rowtime - INTERVAL '0' SECOND",
            "Ticker",
        )
        + sink("symbol STRING, dPrice INT, dTime TIMESTAMP(3)")
        + """INSERT INTO out
SELECT *
FROM (
   SELECT
      symbol,
      SUM(price) as price,
      TUMBLE_END(rowtime, interval '3' second) as rowTime,
      TUMBLE_START(rowtime, interval '3' second) as startTime
   FROM Ticker
   GROUP BY symbol, TUMBLE(rowtime, interval '3' second)
)
MATCH_RECOGNIZE (
  PARTITION BY symbol
  ORDER BY rowTime
  MEASURES
    B.price as dPrice,
    B.startTime as dTime
  ONE ROW PER MATCH
  PATTERN (A B)
  DEFINE
    B AS B.price < A.price
)"""
    )
    data = [
        ("ACME", 1, 1, 1),
        ("ACME", 2, 2, 2),
        ("ACME", 4, 1, 4),
        ("ACME", 5, 1, 3),
        ("ACME", 7, 2, 3),
        ("ACME", 8, 2, 3),
        ("ACME1", 1, 20, 4),
        ("ACME1", 1, 24, 4),
        ("ACME1", 1, 25, 3),
        ("ACME1", 1, 19, 8),
        ("ACME", 100, 0, 0),  # the end of the input: closes the windows, and the next
        ("ACME", 200, 0, 0),  # window result moves the watermark past the last one
    ]
    rows = [{"symbol": s, "rowtime": t * 1000, "price": p, "tax": x} for s, t, p, x in data]
    assert values(run(sql, rows)) == flink_rows(["ACME,2,1970-01-01T00:00:03"], "sit")


def test_windowed_grouping_applied_to_match_recognize():
    # MatchRecognizeITCase.testWindowedGroupingAppliedToMatchRecognize: MATCH_ROWTIME() is
    # the time attribute of the matches, so a window aggregation follows. TUMBLE_ROWTIME
    # (not compiled here) becomes TUMBLE_END, Flink's rowtime plus 1 ms
    sql = (
        table(
            "symbol STRING, rowtime TIMESTAMP(3), price INT, tax INT, "
            "WATERMARK FOR rowtime AS rowtime - INTERVAL '0' SECOND",
            "Ticker",
        )
        + sink("symbol STRING, price INT, endTime TIMESTAMP(3), startTime TIMESTAMP(3)")
        + """INSERT INTO out
SELECT
  symbol,
  SUM(price) as price,
  TUMBLE_END(matchRowtime, interval '3' second) as endTime,
  TUMBLE_START(matchRowtime, interval '3' second) as startTime
FROM Ticker
MATCH_RECOGNIZE (
  PARTITION BY symbol
  ORDER BY rowtime
  MEASURES
    A.price as price,
    A.tax as tax,
    MATCH_ROWTIME() as matchRowtime
  ONE ROW PER MATCH
  PATTERN (A)
  DEFINE
    A AS A.price > 0
) AS T
GROUP BY symbol, TUMBLE(matchRowtime, interval '3' second)"""
    )
    data = [("ACME", 1000, 1, 1), ("ACME", 2000, 2, 2), ("ACME", 4000, 1, 4), ("ACME", 5000, 1, 3)]
    # the end of the input: the first row far later comes out of the match (and closes
    # the windows) once the second moves the watermark past it
    data += [("ACME", 100_000, 1, 0), ("ACME", 100_001, 1, 0)]
    rows = [{"symbol": s, "rowtime": t, "price": p, "tax": x} for s, t, p, x in data]
    expected = [
        "ACME,3,1970-01-01T00:00:03,1970-01-01T00:00",
        "ACME,2,1970-01-01T00:00:06,1970-01-01T00:00:03",
    ]
    assert values(run(sql, rows)) == flink_rows(expected, "sitt")


PAYMENTS = table(
    "card STRING, amount DOUBLE, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND",
    "payments",
)


def small_then_large(clauses: str = "") -> str:
    return (
        PAYMENTS
        + sink("card STRING, small DOUBLE, large DOUBLE")
        + f"""INSERT INTO out SELECT * FROM payments MATCH_RECOGNIZE (
  PARTITION BY card ORDER BY ts
  MEASURES A.amount AS small, B.amount AS large
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B) {clauses}
  DEFINE A AS A.amount < 5, B AS B.amount > A.amount * 100
)"""
    )


def payment(card: str, amount: float, second: int) -> dict[str, Any]:
    return {"card": card, "amount": amount, "ts": f"2024-01-01 00:00:{second:02d}.000"}


def test_event_time_order_and_late_rows():
    # rows of a card are matched in time order whatever order they come in; a row behind
    # the watermark (stream time - 5 s - 1 ms) when it comes is dropped, as Flink drops it
    rows = [
        payment("c1", 900.0, 12),  # before its small charge in time: matched after it
        payment("c1", 1.0, 10),
        payment("c2", 2.0, 20),
        payment("c2", 500.0, 30),  # stream time 30: the watermark passes 24.999
        payment("c1", 1.0, 21),  # late: dropped
        payment("c1", 800.0, 26),
        payment("c1", 0.0, 59),  # the end of the input
    ]
    out = run(small_then_large(), rows)
    assert out == [
        {"card": "c1", "small": 1.0, "large": 900.0},
        {"card": "c2", "small": 2.0, "large": 500.0},
    ]


def test_a_view_of_matches_with_prev_and_select_star():
    # a rise of two or more payments then a drop: PREV is the row before among the
    # match's rows; the view's SELECT * is card (PARTITION BY) then the MEASURES
    sql = (
        PAYMENTS
        + sink("card STRING, first_amount DOUBLE, last_amount DOUBLE, n BIGINT")
        + """CREATE VIEW rising AS SELECT * FROM payments MATCH_RECOGNIZE (
  PARTITION BY card ORDER BY ts
  MEASURES FIRST(UP.amount) AS first_amount, LAST(UP.amount) AS last_amount,
    COUNT(UP.amount) AS n
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (START UP{2,}? DOWN)
  DEFINE UP AS UP.amount > PREV(UP.amount), DOWN AS DOWN.amount < PREV(amount, 1)
) AS R;
INSERT INTO out SELECT card, first_amount, last_amount, n FROM rising WHERE n >= 3;"""
    )
    amounts = [5.0, 6.0, 7.0, 8.0, 3.0, 1.0, 2.0, 4.0, 0.5]
    rows = [payment("c", a, i) for i, a in enumerate(amounts)] + [payment("c", 0.0, 59)]
    # 5 then 6, 7, 8 up then 3: a match; 1 then 2, 4 up then 0.5: only two rises (n = 2)
    assert run(sql, rows) == [{"card": "c", "first_amount": 6.0, "last_amount": 8.0, "n": 3}]


def test_matches_survive_a_restart_of_the_application():
    # the partial matches and the waiting rows are in state stores: a new driver over the
    # same state directory goes on where the first stopped
    import tempfile

    sql = small_then_large()
    with tempfile.TemporaryDirectory() as state_dir:
        config = {"state.dir": state_dir}
        with TopologyTestDriver(compile(sql), config) as driver:
            source = driver.create_input_topic("t1", key_serde=serdes.String())
            source.pipe_input(None, payment("c1", 1.0, 10))
            source.pipe_input(None, payment("c1", 2.0, 20))  # releases the first row
        with TopologyTestDriver(compile(sql), config) as driver:
            source = driver.create_input_topic("t1", key_serde=serdes.String())
            source.pipe_input(None, payment("c1", 300.0, 21))
            source.pipe_input(None, payment("c1", 0.0, 59))
            out = driver.create_output_topic("out", key_serde=serdes.String())
            assert [r.value for r in out.read_records_to_list()] == [
                {"card": "c1", "small": 2.0, "large": 300.0}
            ]


def clause(body: str, source: str = "payments") -> str:
    return (
        PAYMENTS
        + "CREATE TABLE accounts (card STRING, amount DOUBLE, PRIMARY KEY (card) NOT ENFORCED) "
        "WITH ('connector' = 'upsert-kafka', 'topic' = 'accounts', 'format' = 'json');\n"
        + sink("card STRING, small DOUBLE")
        + f"INSERT INTO out SELECT * FROM {source} MATCH_RECOGNIZE ({body}) AS T"
    )


def body(
    pattern: str = "A B",
    define: str = "DEFINE A AS A.amount < 5",
    rows: str = "",
    within: str = "",
    order: str = "ORDER BY ts",
    measures: str = "A.amount AS small",
) -> str:
    return (
        f"PARTITION BY card {order} MEASURES {measures} {rows} PATTERN ({pattern}) {within} "
        f"{define}"
    )


@pytest.mark.parametrize(
    ("sql", "where", "message"),
    [
        (
            clause(body(rows="ALL ROWS PER MATCH")),
            "ALL ROWS",
            "ALL ROWS PER MATCH is not supported (as in Flink): ONE ROW PER MATCH",
        ),
        (
            clause(body(pattern="A B+")),
            "+)",
            "a greedy quantifier on the last variable (B) is not supported (as in Flink)",
        ),
        (
            clause(body(pattern="A (B C)+")),
            "(B C)",
            "a pattern group (parentheses inside PATTERN) in a pattern is not supported",
        ),
        (
            clause(body(order="ORDER BY amount")),
            "amount MEASURES",
            "MATCH_RECOGNIZE orders by a time attribute first, ascending: ORDER BY ts",
        ),
        (
            clause(body(order="")),
            "MATCH_RECOGNIZE",
            "MATCH_RECOGNIZE needs ORDER BY a time attribute first: ORDER BY ts",
        ),
        (
            clause(body(measures="A.amount, A.amount AS small")),
            "A.amount, A",
            "the measure A.amount needs a name: ... AS name",
        ),
        (
            clause(body(define="DEFINE C AS C.amount > 1")),
            "C AS",
            "DEFINE C: C is no variable of PATTERN",
        ),
        (
            clause(body(define="DEFINE A AS Z.amount > 1")),
            "Z.amount",
            "unknown pattern variable Z in Z.amount",
        ),
        (
            clause(body(define="DEFINE B AS LAST(A.amount * B.amount) > 1")),
            "A.amount * B",
            "A.amount * B.amount reads the rows of A, B: it may read one pattern variable's",
        ),
        (
            clause(body(define="DEFINE B AS B.amount")),
            "B.amount",
            "type mismatch: DEFINE B needs a BOOLEAN, B.amount is DOUBLE",
        ),
        (
            clause(body(define="DEFINE A AS CLASSIFIER() = 'A'")),
            "CLASSIFIER",
            "CLASSIFIER() in MATCH_RECOGNIZE is not supported (as in Flink)",
        ),
        (
            clause(body(define="SUBSET S = (A, B) DEFINE A AS A.amount < 5")),
            "SUBSET",
            "SUBSET is not supported (as in Flink)",
        ),
        (
            clause(body(rows="AFTER MATCH SKIP TO FIRST A")),
            "AFTER",
            "AFTER MATCH SKIP TO FIRST A skips to the first row of every match",
        ),
        (
            clause(body(), source="accounts"),
            "MATCH_RECOGNIZE",
            "MATCH_RECOGNIZE over the updating table accounts is not supported",
        ),
        (
            clause(body(), source="payments") + " JOIN accounts AS a ON T.card = a.card",
            "MATCH_RECOGNIZE",
            "MATCH_RECOGNIZE in a join is not supported yet: join its view",
        ),
        (
            clause(body(within="WITHIN INTERVAL '0' SECOND")),
            "WITHIN",
            "WITHIN needs a positive interval",
        ),
    ],
)
def test_errors_name_the_construct_and_point_at_it(sql, where, message):
    with pytest.raises(SqlError) as info:
        compile(sql)
    assert message in info.value.message
    insert = sql.index("INSERT INTO out")
    assert (info.value.line, info.value.column) == _position(sql, sql.index(where, insert))


def _position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def test_match_recognize_in_a_pull_or_push_query_is_refused():
    from streaming.sql.queries import plan
    from streaming.sql.results import catalog_of

    catalog = catalog_of(compile(small_then_large()))
    for emit in ("", " EMIT CHANGES"):
        query = (
            "SELECT * FROM payments MATCH_RECOGNIZE (PARTITION BY card ORDER BY ts "
            f"MEASURES A.amount AS small PATTERN (A B) DEFINE A AS A.amount < 5){emit}"
        )
        with pytest.raises(SqlError, match="MATCH_RECOGNIZE in a pull or push query") as error:
            plan(catalog, query)
        assert (error.value.line, error.value.column) == (1, 24)


def test_the_watermark_times_out_a_quiet_partitions_partial_matches():
    # card c's match (2.0 then 150.0) waits for the partial match that started earlier at
    # 0.5 (its C needs A >= 1, so it only takes rows); no more rows of c come, but the
    # other card's rows move the watermark past WITHIN: the partial match ends (and
    # leaves the store) and the match comes out, as in Flink
    sql = (
        PAYMENTS
        + sink("card STRING, small DOUBLE, large DOUBLE")
        + """INSERT INTO out SELECT * FROM payments MATCH_RECOGNIZE (
  PARTITION BY card ORDER BY ts
  MEASURES A.amount AS small, C.amount AS large
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B*? C) WITHIN INTERVAL '10' SECOND
  DEFINE C AS C.amount >= 100 AND A.amount >= 1
)"""
    )
    with TopologyTestDriver(compile(sql)) as driver:
        source = driver.create_input_topic("t1", key_serde=serdes.String())
        out = driver.create_output_topic("out", key_serde=serdes.String())
        for row in (payment("c", 0.5, 0), payment("c", 2.0, 1), payment("c", 150.0, 2)):
            source.pipe_input(None, row)
        source.pipe_input(None, payment("other", 1.0, 9))  # releases c's rows: no match yet
        assert out.read_records_to_list() == []
        source.pipe_input(None, payment("other", 1.0, 16))  # the watermark passes 0 + 10 s
        assert [r.value for r in out.read_records_to_list()] == [
            {"card": "c", "small": 2.0, "large": 150.0}
        ]
        store = driver.get_key_value_store("payments-match")
        assert store.get(["c"])["threads"] == []
