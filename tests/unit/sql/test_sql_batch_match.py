"""MATCH_RECOGNIZE in the DuckDB translation (``streaming.sql.batch_match``): the stream's
matches (``TopologyTestDriver``) equal the batch query's over the same rows.

The stream's output is read once a row far later, in a partition of its own, has moved
the watermark past every row plus WITHIN (so every partial match has ended); the batch
is given the rows the stream did not drop as late (a row at or behind the watermark when
read, computed from the trace as the stream decides it).
"""

from __future__ import annotations

import random
from typing import Any

import duckdb
import pandas as pd
import pytest

from pipelines import domain
from pipelines.streams.config import StreamAppConfig
from pipelines.streams.sql import FRAUD_SQL
from streaming import TopologyTestDriver, serdes
from streaming.sql import SqlError, compile
from streaming.sql.batch import to_duckdb

MINUTE = 60_000
DELAY = 10_000
FLUSH = "~flush"

TICKS = f"""
CREATE TABLE ticks (
  sym STRING, seq BIGINT, price DOUBLE, tag STRING, ts BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '{DELAY // 1000}' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'ticks', 'format' = 'json');
"""


def big(price: float | None) -> bool | None:
    """A Python function for DEFINE."""
    return None if price is None else price >= 50


def ticks_trace(seed: int, n: int = 120) -> list[dict[str, Any]]:
    """Random ticks of three symbols, mostly in time order, some out of order within the
    WATERMARK delay, a few late beyond it, some of one time, a few NULL prices."""
    rng = random.Random(seed)
    rows, clock = [], 1_000_000
    for i in range(n):
        clock += rng.choice([0, 1_000, 2_000, 5_000])
        ts = clock - rng.choice([0] * 12 + [3_000, 8_000, 30_000])
        price = rng.choice([None, *range(10, 100, 7)])
        rows.append(
            {
                "sym": rng.choice(["A", "B", "C"]),
                "seq": i,
                "price": None if price is None else float(price),
                "tag": rng.choice(["x", "y", None]),
                "ts": ts,
            }
        )
    return rows


def not_late(rows: list[dict[str, Any]], column: str, delay: int) -> list[dict[str, Any]]:
    """The rows the stream matches: not at or behind the watermark when read."""
    kept, stream_time = [], None
    for row in rows:
        ts = row[column]
        if stream_time is not None and ts <= stream_time - delay - 1:
            continue
        kept.append(row)
        stream_time = ts if stream_time is None else max(stream_time, ts)
    return kept


def stream_rows(sql: str, rows: list[dict[str, Any]], functions: dict[str, Any]) -> list[dict]:
    """The sink's rows for ``rows`` piped in order, then a flush row a day later."""
    flush = {"sym": FLUSH, "seq": -1, "price": None, "tag": None}
    flush["ts"] = max(r["ts"] for r in rows) + 24 * 60 * MINUTE
    with TopologyTestDriver(compile(sql, functions=functions)) as driver:
        source = driver.create_input_topic("ticks", key_serde=serdes.String())
        for row in [*rows, flush]:
            source.pipe_input(None, row)
        out = driver.create_output_topic("out", key_serde=serdes.String())
        return [r.value for r in out.read_records_to_list()]


def batch_rows(
    sql: str, relations: dict[str, list[dict[str, Any]]], functions: dict[str, Any] | None = None
) -> list[dict]:
    query = to_duckdb(sql, functions=functions)
    con = duckdb.connect()
    try:
        return query.run(con, {name: pd.DataFrame(rows) for name, rows in relations.items()})
    finally:
        con.close()


def ordered(rows: list[dict]) -> list[tuple]:
    return sorted((tuple(sorted(r.items())) for r in rows), key=repr)


def query(pattern: str, skip: str, defines: str, within: str = "", order: str = "ts") -> str:
    return (
        TICKS + "CREATE TABLE out (sym STRING, first_seq BIGINT, last_seq BIGINT, n BIGINT, "
        "total DOUBLE, last_tag STRING) "
        "WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');\n"
        "INSERT INTO out SELECT sym, first_seq, last_seq, n, total, last_tag FROM ticks "
        f"MATCH_RECOGNIZE (PARTITION BY sym ORDER BY {order} "
        "MEASURES FIRST(seq) AS first_seq, LAST(seq) AS last_seq, COUNT(*) AS n, "
        "SUM(price) AS total, LAST(tag) AS last_tag "
        f"ONE ROW PER MATCH AFTER MATCH {skip} PATTERN ({pattern}){within} "
        f"DEFINE {defines}) AS T WHERE n > 1"
    )


CASES = [
    ("A B+? C", "SKIP PAST LAST ROW", "A AS big(A.price), C AS C.price < 30", " WITHIN INTERVAL '20' SECOND"),
    ("A B* C", "SKIP TO NEXT ROW", "A AS A.price > 40, B AS B.price > 20, C AS C.price < 25", " WITHIN INTERVAL '30' SECOND"),
    ("A{2} B", "SKIP TO NEXT ROW", "A AS A.price > 20, B AS B.price < PREV(price)", ""),
    ("A B? C", "SKIP PAST LAST ROW", "A AS A.tag = 'x', B AS B.price > 50, C AS big(C.price)", " WITHIN INTERVAL '20' SECOND"),
    ("A B+ C", "SKIP TO FIRST B", "A AS A.price < 40, B AS B.price > 30, C AS C.price < 40", " WITHIN INTERVAL '15' SECOND"),
    ("A B+ C", "SKIP TO LAST B", "B AS B.price > LAST(A.price), C AS C.tag IS NULL", " WITHIN INTERVAL '25' SECOND"),
    ("A+ B", "SKIP PAST LAST ROW", "A AS A.price >= 30, B AS B.price < 30", " WITHIN INTERVAL '10' SECOND"),
]  # fmt: skip


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("seed", [1, 2])
def test_random_traces_match_as_the_stream_matches(case, seed):
    pattern, skip, defines, within = CASES[case]
    sql = query(pattern, skip, defines, within)
    rows = ticks_trace(seed * 100 + case)
    functions = {"big": big}
    stream = stream_rows(sql, rows, functions)
    batch = batch_rows(sql, {"ticks": not_late(rows, "ts", DELAY)}, functions)
    assert batch, "the trace should hold matches"
    assert ordered(stream) == ordered(batch)


def test_rows_of_one_time_are_matched_by_the_further_order_by_columns():
    # the rows of one time in ORDER BY ts, seq DESC order: the later seq first
    sql = query(
        "A B", "SKIP PAST LAST ROW", "A AS A.price < 30, B AS B.price >= 30", "", "ts, seq DESC"
    )
    rows = [
        {"sym": "A", "seq": 1, "price": 40.0, "tag": "x", "ts": 1_000},
        {"sym": "A", "seq": 2, "price": 20.0, "tag": "y", "ts": 1_000},
        {"sym": "A", "seq": 3, "price": 20.0, "tag": None, "ts": 2_000},
        {"sym": "A", "seq": 4, "price": 60.0, "tag": None, "ts": 3_000},
    ]
    stream = stream_rows(sql, rows, {})
    batch = batch_rows(sql, {"ticks": rows})
    expected = {"sym": "A", "first_seq": 2, "last_seq": 1, "n": 2, "total": 60.0, "last_tag": "x"}
    assert (
        ordered(stream)
        == ordered(batch)
        == ordered(
            [expected, {**expected, "first_seq": 3, "last_seq": 4, "total": 80.0, "last_tag": None}]
        )
    )


def test_the_batch_gives_the_matches_the_stream_still_holds_back():
    # no WITHIN: the partial match started at seq 1 (A B+? C, its C never found) stays
    # open, so the stream holds back the later match of seq 2..4 however far the
    # watermark goes; at the end of the batch's input every partial match ends
    sql = query("A B+? C", "SKIP TO NEXT ROW", "A AS A.tag = 'x', C AS C.price = A.price", "")
    rows = [
        {"sym": "A", "seq": 1, "price": 10.0, "tag": "x", "ts": 1_000},
        {"sym": "A", "seq": 2, "price": 15.0, "tag": "x", "ts": 2_000},
        {"sym": "A", "seq": 3, "price": 20.0, "tag": None, "ts": 3_000},
        {"sym": "A", "seq": 4, "price": 15.0, "tag": None, "ts": 4_000},
    ]
    assert stream_rows(sql, rows, {}) == []
    match = {"sym": "A", "first_seq": 2, "last_seq": 4, "n": 3, "total": 50.0, "last_tag": None}
    assert batch_rows(sql, {"ticks": rows}) == [match]


def test_processing_time_match_recognize_is_not_translated():
    sql = (
        "CREATE TABLE t (k STRING, v BIGINT, pt AS PROCTIME()) "
        "WITH ('connector' = 'kafka', 'topic' = 't', 'format' = 'json');\n"
        "CREATE TABLE out (k STRING, a BIGINT) "
        "WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');\n"
        "INSERT INTO out SELECT k, a FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY pt "
        "MEASURES A.v AS a PATTERN (A B) DEFINE A AS A.v > 1) AS T"
    )
    with pytest.raises(SqlError, match=r"processing time \(PROCTIME\(\)\) is not translated"):
        to_duckdb(sql)


# -- the platform's fraud application, read from its file -----------------------------

T0 = 1_700_000_000_000


def orders_trace(seed: int, customers: int = 6, n: int = 150) -> list[dict[str, Any]]:
    """Random orders: card tests (a small charge, then a large one minutes later),
    impossible travel (consecutive orders from two regions), noise, some out of order
    within the minute of WATERMARK delay and a few late."""
    rng = random.Random(seed)
    cities = [c for cs in domain.LOCATIONS.values() for c in cs]
    home = {f"c{i}": rng.choice(list(domain.LOCATIONS)) for i in range(customers)}
    rows, clock = [], T0
    for i in range(n):
        clock += rng.randint(0, 40_000)
        customer = rng.choice(list(home))
        amount = rng.choice([1.0, 2.5, 4.99, 20.0, 80.0, 499.99, 500.0, 900.0])
        travels = rng.random() < 0.15
        location = rng.choice(cities if travels else domain.LOCATIONS[home[customer]])
        ts = clock - rng.choice([0] * 10 + [20_000, 50_000, 3 * MINUTE])
        rows.append(
            {
                "order_id": f"o{i}",
                "customer_id": customer,
                "amount": amount,
                "region": "EU",
                "location": location,
                "event_time": ts,
            }
        )
    return rows


def fraud_stream(rows: list[dict[str, Any]]) -> list[dict]:
    """The alerts of the platform's application (``FRAUD_SQL``, as deployed), a flush
    order a day later read last."""
    config = StreamAppConfig()
    last = max(r["event_time"] for r in rows)
    flush = {**rows[0], "order_id": "flush", "customer_id": FLUSH}
    flush["event_time"] = last + 24 * 60 * MINUTE
    with TopologyTestDriver(
        FRAUD_SQL.build(config), initial_wall_clock_time_ms=flush["event_time"]
    ) as driver:
        source = driver.create_input_topic(config.orders_topic, key_serde=serdes.String())
        for row in [*rows, flush]:
            source.pipe_input(row["order_id"], row, timestamp=row["event_time"])
        out = driver.create_output_topic(config.fraud_sql_topic, key_serde=serdes.String())
        return [r.value for r in out.read_records_to_list()]


def fraud_batch(rows: list[dict[str, Any]]) -> list[dict]:
    """The alerts of ``fraud.sql`` translated by ``to_duckdb``: both INSERTs' rows."""
    return batch_rows(FRAUD_SQL.text, {"orders": rows})


@pytest.mark.parametrize("seed", [7, 8, 9])
def test_fraud_sql_alerts_equal_the_batch_alerts(seed):
    rows = orders_trace(seed)
    stream = fraud_stream(rows)
    batch = fraud_batch(not_late(rows, "event_time", MINUTE))
    assert {r["rule"] for r in batch} == {"small_then_large", "impossible_travel"}
    assert ordered(stream) == ordered(batch)


def test_a_row_the_stream_drops_as_late_is_matched_by_the_batch():
    # seq 3 comes after the watermark passed its time: the stream drops it, the batch
    # (no late rows) matches it
    sql = query("A B", "SKIP PAST LAST ROW", "A AS A.price < 30, B AS B.price >= 30", "")
    rows = [
        {"sym": "A", "seq": 1, "price": 40.0, "tag": None, "ts": 1_000},
        {"sym": "B", "seq": 2, "price": 40.0, "tag": None, "ts": 60_000},
        {"sym": "A", "seq": 3, "price": 20.0, "tag": None, "ts": 2_000},
        {"sym": "A", "seq": 4, "price": 70.0, "tag": None, "ts": 70_000},
    ]
    assert stream_rows(sql, rows, {}) == []
    match = {"sym": "A", "first_seq": 3, "last_seq": 4, "n": 2, "total": 90.0, "last_tag": None}
    assert batch_rows(sql, {"ticks": rows}) == [match]
    assert batch_rows(sql, {"ticks": not_late(rows, "ts", DELAY)}) == []


class Spread:
    """MAX - MIN of the prices (a Python aggregate function in MEASURES)."""

    def create_accumulator(self) -> list:
        return []

    def accumulate(self, acc: list, value: float | None) -> None:
        if value is not None:
            acc.append(value)

    def get_value(self, acc: list) -> float | None:
        return max(acc) - min(acc) if acc else None


@pytest.mark.parametrize("seed", [5, 6])
def test_python_aggregates_in_measures_match_as_the_stream_does(seed):
    sql = query(
        "A B+? C",
        "SKIP TO NEXT ROW",
        "A AS A.price < 40, C AS big(C.price)",
        " WITHIN INTERVAL '20' SECOND",
    ).replace("SUM(price) AS total", "spread(B.price) AS total")
    rows = ticks_trace(seed)
    functions = {"big": big, "spread": Spread}
    stream = stream_rows(sql, rows, functions)
    batch = batch_rows(sql, {"ticks": not_late(rows, "ts", DELAY)}, functions)
    assert batch
    assert ordered(stream) == ordered(batch)


def test_null_comes_first_ascending_in_the_further_order_by_columns():
    # at one time: NULL tag first (ascending), then 'a', then 'b'
    sql = query("A B", "SKIP PAST LAST ROW", "A AS A.price < 30", "", "ts, tag, seq DESC")
    rows = [
        {"sym": "A", "seq": 1, "price": 40.0, "tag": "b", "ts": 1_000},
        {"sym": "A", "seq": 2, "price": 20.0, "tag": None, "ts": 1_000},
        {"sym": "A", "seq": 3, "price": 50.0, "tag": "a", "ts": 1_000},
    ]
    match = {"sym": "A", "first_seq": 2, "last_seq": 3, "n": 2, "total": 70.0, "last_tag": "a"}
    assert stream_rows(sql, rows, {}) == batch_rows(sql, {"ticks": rows}) == [match]
