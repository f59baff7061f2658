"""streaming.sql.batch over Top-N and deduplication (``batch_rank``): the DuckDB result is
what the streaming result ends with (its updates applied, the last row per sink key).

The traces have no rows later than the WATERMARK delay. ``trace`` has no ties on the
ORDER BY columns; ``tied_trace`` has many, which the translation breaks as the stream does,
by the order the rows are read: their position in the relation, or its ``_offset``
column (``batch_order``).
"""

from __future__ import annotations

import random
from typing import Any

import duckdb
import pandas as pd
import pytest

from streaming import TopologyTestDriver, serdes
from streaming.sql import SqlError
from streaming.sql import compile as compile_sql
from streaming.sql.batch import to_duckdb
from streaming.sql.timestamps import format_timestamp

T0 = 1_700_000_000_000

ORDERS = """
CREATE TABLE orders (id STRING, customer STRING, amount DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE
) WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json');
"""


def trace(seed: int, n: int = 120) -> list[dict[str, Any]]:
    """Orders of a few customers, distinct times (some out of order within the delay) and
    distinct amounts."""
    rng = random.Random(seed)
    amounts = rng.sample(range(1, 10_000), n)
    times = sorted(rng.sample(range(0, 3_600_000, 1_000), n))
    rows = []
    for i, (amount, ms) in enumerate(zip(amounts, times, strict=True)):
        jitter = rng.choice([0, 0, 0, -20_000])  # within the 1 minute delay
        rows.append(
            {
                "id": f"o{i}",
                "customer": rng.choice(["ann", "bob", "cid", "dee", None]),
                "amount": amount / 100,
                "ts": format_timestamp(T0 + ms + jitter),
            }
        )
    # distinct times after the jitter too
    seen: set[str] = set()
    return [r for r in rows if not (r["ts"] in seen or seen.add(r["ts"]))]


def stream_final(sql: str, rows: list[dict[str, Any]], sink: str = "out") -> list[dict]:
    """The last row per sink key the stream writes (deletes applied)."""
    with TopologyTestDriver(compile_sql(sql)) as driver:
        source = driver.create_input_topic("orders", key_serde=serdes.String())
        for row in rows:
            source.pipe_input(None, row)
        out = driver.create_output_topic(sink, key_serde=serdes.String())
        final: dict[Any, Any] = {}
        for record in out.read_records_to_list():
            final[record.key] = record.value
    return [row for row in final.values() if row is not None]


def batch(sql: str, rows: list[dict[str, Any]]) -> list[dict]:
    con = duckdb.connect()
    try:
        return to_duckdb(sql).run(con, {"orders": pd.DataFrame(rows)})
    finally:
        con.close()


def ordered(rows: list[dict]) -> list[tuple]:
    return sorted((tuple(r.values()) for r in rows), key=repr)


DEDUP_SINK = """
CREATE TABLE out (customer STRING, id STRING, amount DOUBLE, ts TIMESTAMP(3),
  PRIMARY KEY (customer) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'format' = 'json');
"""


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("direction", ["ASC", "DESC"])
def test_deduplication_on_event_time_agrees(seed: int, direction: str) -> None:
    sql = (
        ORDERS
        + DEDUP_SINK
        + f"""
INSERT INTO out
SELECT customer, id, amount, ts FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY customer ORDER BY ts {direction}) AS rn
  FROM orders
) WHERE rn = 1
"""
    )
    rows = trace(seed)
    # the first rows come out once the watermark passes them: a later row lets them out
    closing = {"id": "end", "customer": "zed", "amount": 0.0, "ts": format_timestamp(T0 + 10**8)}
    stream = stream_final(sql, [*rows, closing])
    expected = batch(sql, [*rows, closing])
    if direction == "ASC":  # the closing row's own key waits for a later watermark
        expected = [r for r in expected if r["customer"] != "zed"]
    else:  # the last row of the NULL customer has no raw Kafka key to upsert
        expected = [r for r in expected if r["customer"] is not None]
    assert ordered(stream) == ordered(expected)
    assert len(expected) >= 4


TOP_SINK = """
CREATE TABLE out (customer STRING, id STRING, amount DOUBLE, rn BIGINT,
  PRIMARY KEY (customer, rn) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'key.format' = 'json',
  'value.format' = 'json');
"""


@pytest.mark.parametrize("seed", [3, 4])
def test_top_n_agrees(seed: int) -> None:
    sql = (
        ORDERS
        + TOP_SINK
        + """
INSERT INTO out
SELECT * FROM (
  SELECT customer, id, amount,
    ROW_NUMBER() OVER (PARTITION BY customer ORDER BY amount DESC) AS rn
  FROM orders
) WHERE rn <= 3
"""
    )
    rows = trace(seed)
    expected = batch(sql, rows)
    assert ordered(stream_final(sql, rows)) == ordered(expected)
    assert len(expected) == 15


def test_a_ranking_over_the_processing_time_is_not_translated() -> None:
    sql = """
CREATE TABLE p (id STRING, k STRING, pt AS PROCTIME())
  WITH ('connector' = 'kafka', 'topic' = 'p', 'format' = 'json');
CREATE TABLE q (k STRING, id STRING, PRIMARY KEY (k) NOT ENFORCED)
  WITH ('connector' = 'upsert-kafka', 'topic' = 'q', 'format' = 'json');
INSERT INTO q SELECT k, id FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY pt DESC) AS rn FROM p
) WHERE rn = 1;
"""
    with pytest.raises(SqlError, match="pt is the processing time of p"):
        to_duckdb(sql)
    with pytest.raises(SqlError, match="PROCTIME\\(\\) is the processing time") as info:
        to_duckdb(sql.replace("ORDER BY pt DESC", "ORDER BY PROCTIME() DESC"))
    assert info.value.line == 7


RANK_SINK = """
CREATE TABLE out (customer STRING, id STRING, amount DOUBLE, rn BIGINT,
  PRIMARY KEY (customer, id, amount) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'key.format' = 'json',
  'value.format' = 'json');
"""


@pytest.mark.parametrize("function", ["RANK", "DENSE_RANK"])
def test_rank_and_dense_rank_with_ties_agree(function: str) -> None:
    # ties number alike, so the rows within the limit are the same however they are read
    sql = (
        ORDERS
        + RANK_SINK
        + f"""
INSERT INTO out
SELECT * FROM (
  SELECT customer, id, amount,
    {function}() OVER (PARTITION BY customer ORDER BY amount DESC) AS rn
  FROM orders
) WHERE rn <= 3
"""
    )
    rng = random.Random(5)
    rows = [{**row, "amount": float(rng.randint(1, 6))} for row in trace(5)]
    expected = batch(sql, rows)
    assert ordered(stream_final(sql, rows)) == ordered(expected)
    assert len(expected) > 15  # ties kept more than 3 rows per customer


def test_top_n_over_a_group_by_agrees() -> None:
    # Flink's retract rank: the ranked rows are aggregates that keep updating
    sql = (
        ORDERS
        + """
CREATE TABLE out (customer STRING, orders BIGINT, biggest DOUBLE, rn BIGINT,
  PRIMARY KEY (rn) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'key.format' = 'json',
  'value.format' = 'json');
INSERT INTO out
SELECT * FROM (
  SELECT customer, orders, biggest, ROW_NUMBER() OVER (ORDER BY biggest DESC) AS rn
  FROM (SELECT customer, COUNT(*) AS orders, MAX(amount) AS biggest FROM orders
        GROUP BY customer)
) WHERE rn <= 3
"""
    )
    # (a GROUP BY view keyed by one column has no raw Kafka key for a NULL group: left out)
    rows = [row for row in trace(6) if row["customer"] is not None]
    expected = batch(sql, rows)
    assert ordered(stream_final(sql, rows)) == ordered(expected)
    assert [r["rn"] for r in sorted(expected, key=lambda r: r["rn"])] == [1, 2, 3]


WINDOW_SINK = """
CREATE TABLE out (window_start TIMESTAMP(3), window_end TIMESTAMP(3), customer STRING,
  id STRING, amount DOUBLE, ts TIMESTAMP(3))
  WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
"""


@pytest.mark.parametrize(
    ("tvf", "order", "limit"),
    [
        ("TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '5' MINUTES)", "ts DESC", 1),
        ("TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '5' MINUTES)", "ts", 1),
        (
            "HOP(TABLE orders, DESCRIPTOR(ts), INTERVAL '2' MINUTES, INTERVAL '6' MINUTES)",
            "amount DESC",
            2,
        ),
        (
            "CUMULATE(TABLE orders, DESCRIPTOR(ts), INTERVAL '5' MINUTES, INTERVAL '15' MINUTES)",
            "ts DESC",
            1,
        ),
    ],
)
def test_window_deduplication_and_top_n_over_a_tvf_agree(tvf: str, order: str, limit: int) -> None:
    sql = (
        ORDERS
        + WINDOW_SINK
        + f"""
INSERT INTO out
SELECT window_start, window_end, customer, id, amount, ts FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, customer
                               ORDER BY {order}) AS rn
  FROM TABLE({tvf})
) WHERE rn <= {limit}
"""
    )
    rows = trace(7)
    with TopologyTestDriver(compile_sql(sql)) as driver:
        source = driver.create_input_topic("orders", key_serde=serdes.String())
        for row in rows:
            source.pipe_input(None, row)
        stream = [r.value for r in driver.create_output_topic("out").read_records_to_list()]
    last = max(row["ts"] for row in rows)
    # the windows that closed: those that end a minute (the delay) before the last row
    closed_until = format_timestamp(int(pd.Timestamp(last).value // 1_000_000) - 60_000 + 1)
    expected = [r for r in batch(sql, rows) if r["window_end"] < closed_until]
    assert ordered(stream) == ordered(expected)
    assert len(expected) > 20


def tied_trace(seed: int, n: int = 150) -> list[dict[str, Any]]:
    """Orders whose times (some out of order within the delay) and amounts repeat: many
    rows of a customer tie on each."""
    rng = random.Random(seed)
    rows, clock = [], T0
    for i in range(n):
        clock += rng.choice([0, 0, 10_000, 30_000])
        rows.append(
            {
                "id": f"o{i}",
                "customer": rng.choice(["ann", "bob", "cid"]),
                "amount": float(rng.choice([1, 2, 3])),
                "ts": format_timestamp(clock - rng.choice([0, 0, 10_000])),
            }
        )
    return rows


def ties(rows: list[dict[str, Any]], *columns: str) -> int:
    """How many rows tie with an earlier row of their customer on ``columns``."""
    keys = [tuple(r[c] for c in ("customer", *columns)) for r in rows]
    return len(keys) - len(set(keys))


def batch_with_offsets(sql: str, rows: list[dict[str, Any]]) -> list[dict]:
    """The batch rows over ``rows`` with their ``_offset`` (their order), shuffled."""
    frame = pd.DataFrame(rows).assign(_offset=range(len(rows))).sample(frac=1, random_state=1)
    con = duckdb.connect()
    try:
        return to_duckdb(sql).run(con, {"orders": frame})
    finally:
        con.close()


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("direction", ["ASC", "DESC"])
def test_deduplication_breaks_ties_as_the_stream(seed: int, direction: str) -> None:
    """Keep-last keeps the last row read among those of the latest time, keep-first the
    first read of the earliest."""
    sql = (
        ORDERS
        + DEDUP_SINK
        + f"""
INSERT INTO out
SELECT customer, id, amount, ts FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY customer ORDER BY ts {direction}) AS rn
  FROM orders
) WHERE rn <= 1
"""
    )
    rows = tied_trace(seed)
    closing = {"id": "end", "customer": "zed", "amount": 0.0, "ts": format_timestamp(T0 + 10**8)}
    stream = stream_final(sql, [*rows, closing])
    expected = batch(sql, [*rows, closing])
    if direction == "ASC":  # the closing row's own key waits for a later watermark
        expected = [r for r in expected if r["customer"] != "zed"]
    assert ties(rows, "ts") > 20
    assert ordered(stream) == ordered(expected)
    offsets = batch_with_offsets(sql, [*rows, closing])
    assert ordered(offsets) == ordered(batch(sql, [*rows, closing]))


@pytest.mark.parametrize("seed", [3, 4])
def test_top_n_breaks_ties_as_the_stream(seed: int) -> None:
    """Rows of one amount rank in the order read."""
    sql = (
        ORDERS
        + TOP_SINK
        + """
INSERT INTO out
SELECT * FROM (
  SELECT customer, id, amount,
    ROW_NUMBER() OVER (PARTITION BY customer ORDER BY amount DESC) AS rn
  FROM orders
) WHERE rn <= 3
"""
    )
    rows = tied_trace(seed)
    expected = batch(sql, rows)
    assert ties(rows, "amount") > 100
    assert ordered(stream_final(sql, rows)) == ordered(expected)
    assert ordered(batch_with_offsets(sql, rows)) == ordered(expected)
    # the first three rows read of each customer's largest amount
    first = {}
    for row in rows:
        if row["amount"] == 3.0:
            first.setdefault(row["customer"], []).append(row["id"])
    assert sorted(r["id"] for r in expected) == sorted(i for ids in first.values() for i in ids[:3])


@pytest.mark.parametrize(("order", "limit"), [("ts DESC", 1), ("ts", 1), ("amount DESC", 2)])
def test_window_ranking_over_a_tvf_breaks_ties_as_the_stream(order: str, limit: int) -> None:
    sql = (
        ORDERS
        + WINDOW_SINK
        + f"""
INSERT INTO out
SELECT window_start, window_end, customer, id, amount, ts FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, customer
                               ORDER BY {order}) AS rn
  FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '2' MINUTES))
) WHERE rn <= {limit}
"""
    )
    rows = tied_trace(5)
    with TopologyTestDriver(compile_sql(sql)) as driver:
        source = driver.create_input_topic("orders", key_serde=serdes.String())
        for row in rows:
            source.pipe_input(None, row)
        stream = [r.value for r in driver.create_output_topic("out").read_records_to_list()]
    last = max(row["ts"] for row in rows)
    closed_until = format_timestamp(int(pd.Timestamp(last).value // 1_000_000) - 60_000 + 1)
    expected = [r for r in batch(sql, rows) if r["window_end"] < closed_until]
    assert ordered(stream) == ordered(expected)
    assert len(expected) > 20
