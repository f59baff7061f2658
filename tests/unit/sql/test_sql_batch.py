"""streaming.sql.batch: the DuckDB translation of a query agrees with the streaming query.

Each test compiles the statements, feeds a random trace through the topology
(``TopologyTestDriver``) and runs the translated query in DuckDB over the same rows; the
streaming results must equal the batch results for every window that closed and had no
record dropped as late (the drops are simulated from the trace's stream time, as Kafka
Streams decides them: a record is late for a window once stream time - grace >= its end).
"""

from __future__ import annotations

import math
import random
from typing import Any

import duckdb
import pandas as pd
import pytest

from streaming import TopologyTestDriver, serdes
from streaming.sql import SqlError, compile
from streaming.sql.batch import to_duckdb
from streaming.sql.timestamps import format_timestamp

S = {"key_serde": serdes.String(), "value_serde": serdes.Json()}
MINUTE = 60_000
GRACE = MINUTE

ORDERS = """
CREATE TABLE orders (
  id STRING, region STRING, amount DOUBLE, qty BIGINT, code STRING, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE
) WITH ('connector' = 'kafka', 'topic' = 'orders', 'key.fields' = 'id');
"""


def orders_trace(seed: int, n: int = 300) -> list[dict[str, Any]]:
    """Random orders, mostly in time order: some out of order within the grace, some late
    beyond it; a few NULL amounts and regions; ``ts`` as TIMESTAMP text, ``_ms`` its ms."""
    rng = random.Random(seed)
    rows, clock = [], 1_700_000_000_000
    for i in range(n):
        clock += rng.randint(0, 20_000)
        ts = clock - rng.choice([0] * 8 + [30_000, 4 * MINUTE])
        rows.append(
            {
                "id": f"o{i}",
                "region": rng.choice(["EU", "NA", "APAC", None]),
                "amount": rng.choice([None, 1.25, 9.99, 12.5, 100.0, -3.5]),
                "qty": rng.randint(-5, 9),
                "code": rng.choice(["7", "12.9", "x", None]),
                "ts": format_timestamp(ts),
                "_ms": ts,
            }
        )
    return rows


def run_stream(sql: str, topic: str, rows: list[dict[str, Any]], sink: str) -> list[dict]:
    """The sink rows the compiled statements write for ``rows`` piped in order."""
    with TopologyTestDriver(compile(sql)) as driver:
        source = driver.create_input_topic(topic, **S)
        for row in rows:
            value = {k: v for k, v in row.items() if not k.startswith("_")}
            source.pipe_input(row["id"], value, timestamp=row["_ms"])
        out = driver.create_output_topic(sink, **S)
        return [r.value for r in out.read_records_to_list()]


def run_batch(sql: str, relations: dict[str, list[dict[str, Any]]]) -> list[dict]:
    """The translated query's rows in DuckDB over ``relations`` (table -> rows)."""
    query = to_duckdb(sql)
    frames = {
        name: pd.DataFrame([{k: v for k, v in r.items() if not k.startswith("_")} for r in rows])
        for name, rows in relations.items()
    }
    con = duckdb.connect()
    try:
        return query.run(con, frames)
    finally:
        con.close()


def late_windows(
    rows: list[dict[str, Any]], starts: Any, size: int, group: str
) -> set[tuple[Any, int]]:
    """(group value, window start) of every window that dropped a record as late."""
    stream_time, late = -1, set()
    for row in rows:
        stream_time = max(stream_time, row["_ms"])
        for start in starts(row["_ms"]):
            if start + size <= stream_time - GRACE:
                late.add((row[group], start))
    return late


def tumbling(size: int):
    return lambda ts: [ts - ts % size]


def hopping(size: int, slide: int):
    def starts(ts: int) -> list[int]:
        last = ts - ts % slide
        return [s for s in range(last - size + slide, last + 1, slide) if s >= 0 and s + size > ts]

    return starts


def comparable(
    stream: list[dict], batch: list[dict], keys: tuple[str, ...], *, closed_before: int, skip: set
) -> tuple[dict, dict]:
    """Both sides keyed by ``keys``: windows closed at the final stream time, none of
    ``skip`` (late drops), rows whose group is NULL left to the batch side as they are."""

    def keep(row: dict) -> bool:
        key = (row[keys[0]], row["window_start"])
        return row["window_end"] + GRACE <= closed_before and key not in skip

    def index(rows: list[dict]) -> dict:
        return {tuple(r[k] for k in keys): r for r in rows if keep(r)}

    return index(stream), index(batch)


def close(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9)
    return a == b


REVENUE = (
    ORDERS
    + """
CREATE TABLE revenue (region STRING, window_start BIGINT, window_end BIGINT,
  total DOUBLE, orders BIGINT, avg_amount DOUBLE, smallest DOUBLE, biggest DOUBLE,
  units BIGINT, half_units BIGINT)
  WITH ('connector' = 'kafka', 'topic' = 'revenue', 'key.fields' = 'region');
INSERT INTO revenue
SELECT region, window_start, window_end, SUM(amount), COUNT(*), AVG(amount), MIN(amount),
  MAX(amount), SUM(qty), SUM(qty) / 2
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '5' MINUTES))
WHERE amount IS NOT NULL
GROUP BY window_start, window_end, region
EMIT FINAL;
"""
)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_tumbling_tvf_aggregation_agrees(seed: int) -> None:
    rows = orders_trace(seed)
    stream = run_stream(REVENUE, "orders", rows, "revenue")
    batch = run_batch(REVENUE, {"orders": rows})
    size = 5 * MINUTE
    late = late_windows(rows, tumbling(size), size, "region")
    final_time = max(r["_ms"] for r in rows)
    s, b = comparable(
        stream, batch, ("region", "window_start"), closed_before=final_time, skip=late
    )
    assert len(b) > 20 and late, "the trace should close many windows and drop some rows"
    assert s.keys() == b.keys()
    for key, row in b.items():
        assert all(close(row[c], s[key][c]) for c in row), (key, row, s[key])
    # windows with a late drop differ (or are missing), so excluding them is needed
    every_stream = {(r["region"], r["window_start"]): r for r in stream}
    every_batch = {(r["region"], r["window_start"]): r for r in batch}
    differing = [k for k in late if k in every_batch and every_stream.get(k) != every_batch[k]]
    assert differing


HOP = (
    ORDERS
    + """
CREATE TABLE hopping (region STRING, wstart TIMESTAMP(3), wend TIMESTAMP(3), orders BIGINT,
  units BIGINT) WITH ('connector' = 'kafka', 'topic' = 'hopping', 'key.fields' = 'region');
INSERT INTO hopping
SELECT region, HOP_START(ts, INTERVAL '2' MINUTE, INTERVAL '6' MINUTE),
  HOP_END(ts, INTERVAL '2' MINUTE, INTERVAL '6' MINUTE), COUNT(*), SUM(qty)
FROM orders
WHERE region <> 'NA'
GROUP BY HOP(ts, INTERVAL '2' MINUTE, INTERVAL '6' MINUTE), region
EMIT FINAL;
"""
)


def test_hopping_group_window_agrees_with_timestamp_bounds() -> None:
    rows = orders_trace(7)
    size, slide = 6 * MINUTE, 2 * MINUTE
    stream = run_stream(HOP, "orders", rows, "hopping")
    batch = run_batch(HOP, {"orders": rows})
    assert batch and all(isinstance(r["wstart"], str) for r in batch)

    def with_ms(rows: list[dict]) -> list[dict]:
        out = []
        for r in rows:
            start = pd.Timestamp(r["wstart"], tz="UTC").value // 1_000_000
            end = pd.Timestamp(r["wend"], tz="UTC").value // 1_000_000
            assert format_timestamp(start) == r["wstart"]
            out.append({**r, "window_start": start, "window_end": end})
        return out

    late = late_windows(rows, hopping(size, slide), size, "region")
    final_time = max(r["_ms"] for r in rows)
    s, b = comparable(
        with_ms(stream),
        with_ms(batch),
        ("region", "window_start"),
        closed_before=final_time,
        skip=late,
    )
    assert len(b) > 30
    assert s == b


PROJECTION = (
    ORDERS
    + """
CREATE TABLE shaped (id STRING, label STRING, units_per_2 BIGINT, remainder BIGINT,
  per_zero BIGINT, code_num BIGINT, code_real DOUBLE, flagged BOOLEAN, at_ms BIGINT,
  at TIMESTAMP(3))
  WITH ('connector' = 'kafka', 'topic' = 'shaped', 'key.fields' = 'id');
INSERT INTO shaped
SELECT id, UPPER(COALESCE(region, 'none')) || '-' || CAST(qty AS STRING), qty / 2, qty % 4,
  qty / 0, CAST(code AS BIGINT), CAST(code AS DOUBLE),
  CASE WHEN amount > 10 THEN TRUE ELSE FALSE END, ts, ts
FROM orders
WHERE qty > -3 OR region IS NULL;
"""
)


def test_projection_and_where_agree_row_by_row() -> None:
    rows = orders_trace(11, n=200)
    stream = run_stream(PROJECTION, "orders", rows, "shaped")
    batch = run_batch(PROJECTION, {"orders": rows})
    assert len(batch) > 100
    by_id = {r["id"]: r for r in batch}
    assert {r["id"] for r in stream} == set(by_id)
    for row in stream:
        assert row == by_id[row["id"]], row
    # integer division truncates toward zero and % keeps the dividend's sign, as the stream's
    negative = next(r for r in batch if r["units_per_2"] is not None and r["remainder"] < 0)
    assert negative["units_per_2"] <= 0 and negative["per_zero"] is None


JOIN = """
CREATE TABLE orders (id STRING, customer_id STRING, amount DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '30' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'orders', 'key.fields' = 'id');
CREATE TABLE customers (id STRING, tier STRING, updated TIMESTAMP(3),
  WATERMARK FOR updated AS updated, PRIMARY KEY (id) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = 'customers');
CREATE TABLE enriched (id STRING, customer_id STRING, tier STRING, amount DOUBLE)
  WITH ('connector' = 'kafka', 'topic' = 'enriched', 'key.fields' = 'id');
INSERT INTO enriched
SELECT o.id, o.customer_id, COALESCE(c.tier, 'unknown'), o.amount
FROM orders AS o
LEFT JOIN customers FOR SYSTEM_TIME AS OF o.ts AS c ON o.customer_id = c.id;
"""


def test_as_of_join_agrees_with_duckdb_asof_join() -> None:
    rng = random.Random(5)
    clock = 1_700_000_000_000
    trace: list[tuple[str, dict[str, Any]]] = []
    for i in range(300):
        clock += rng.randint(0, 10_000)
        if rng.random() < 0.3:
            cid = rng.choice(["c1", "c2", "c3"])
            tier = rng.choice(["gold", "silver", "bronze"])
            trace.append(("customers", {"id": cid, "tier": tier, "updated": clock}))
        else:
            ts = clock - rng.randint(0, 20_000)  # within the 30 s the join waits
            customer = rng.choice(["c1", "c2", "c3", "c9", None])
            order = {"id": f"o{i}", "customer_id": customer, "amount": float(i), "ts": ts}
            trace.append(("orders", order))
    with TopologyTestDriver(compile(JOIN)) as driver:
        topics = {t: driver.create_input_topic(t, **S) for t in ("orders", "customers")}
        for topic, row in trace:
            key = row["id"]
            time = row["updated"] if topic == "customers" else row["ts"]
            text_time = {"updated": format_timestamp(time)} if topic == "customers" else {}
            text_ts = {"ts": format_timestamp(time)} if topic == "orders" else {}
            topics[topic].pipe_input(key, {**row, **text_time, **text_ts}, timestamp=time)
        stream = [
            r.value for r in driver.create_output_topic("enriched", **S).read_records_to_list()
        ]
    orders = [
        {**r, "ts": format_timestamp(r["ts"]), "_ms": r["ts"]} for t, r in trace if t == "orders"
    ]
    versions = [
        {**r, "updated": format_timestamp(r["updated"])} for t, r in trace if t == "customers"
    ]
    batch = run_batch(JOIN, {"orders": orders, "customers": versions})
    by_id = {r["id"]: r for r in batch}
    assert len(by_id) == len(orders)
    emitted = {r["id"]: r for r in stream}
    assert emitted.keys() <= by_id.keys()
    final_time = max(o["_ms"] for o in orders)
    due = {o["id"] for o in orders if o["_ms"] + 30_000 < final_time}
    assert due <= emitted.keys()
    assert len(due) > 150
    assert {i: emitted[i] for i in emitted} == {i: by_id[i] for i in emitted}
    tiers = {r["tier"] for r in emitted.values()}
    assert {"unknown", "gold"} <= tiers


def test_the_statements_are_compiled_first_and_relations_are_required() -> None:
    with pytest.raises(SqlError, match="unknown table"):
        to_duckdb(
            ORDERS + "CREATE TABLE s (n BIGINT) WITH ('topic' = 's');"
            "INSERT INTO s SELECT COUNT(*) FROM nowhere;"
        )
    query = to_duckdb(REVENUE)
    assert [t.name for t in query.tables] == ["orders"]
    assert query.columns[:3] == ("region", "window_start", "window_end")
    with pytest.raises(ValueError, match="no relation for table"):
        query.run(duckdb.connect(), {})


def test_the_insert_is_chosen_by_its_sink() -> None:
    # (a second INSERT from the same table fails to compile: the compiler registers the
    # source topic once per INSERT)
    two = (
        REVENUE
        + """
CREATE TABLE returns (id STRING, amount DOUBLE) WITH ('topic' = 'returns');
CREATE TABLE shaped (id STRING, cents BIGINT) WITH ('topic' = 'shaped');
INSERT INTO shaped SELECT id, CAST(amount * 100 AS BIGINT) FROM returns;
"""
    )
    with pytest.raises(
        SqlError,
        match=r"expected INSERTs into one sink in the statements, found INSERTs into revenue, "
        r"shaped \(name the sink\)",
    ):
        to_duckdb(two)
    assert to_duckdb(two, sink="shaped").sink.name == "shaped"
    assert to_duckdb(two, sink="revenue").columns[-1] == "half_units"
    with pytest.raises(SqlError, match="expected an INSERT INTO nowhere"):
        to_duckdb(two, sink="nowhere")


def test_the_inserts_into_one_sink_are_the_union_all_of_their_rows() -> None:
    sql = """
    CREATE TABLE a (id STRING, n BIGINT) WITH ('connector'='kafka','topic'='a');
    CREATE TABLE b (id STRING, m BIGINT) WITH ('connector'='kafka','topic'='b');
    CREATE TABLE out (src STRING, id STRING, v BIGINT) WITH ('connector'='kafka','topic'='o');
    INSERT INTO out SELECT 'a', id, n * 10 FROM a WHERE n > 1;
    INSERT INTO out SELECT 'b', id, m FROM b;
    """
    query = to_duckdb(sql)
    assert sorted(t.name for t in query.tables) == ["a", "b"]
    rows = query.run(
        duckdb.connect(),
        {
            "a": pd.DataFrame([{"id": "x", "n": 1}, {"id": "y", "n": 2}]),
            "b": pd.DataFrame([{"id": "x", "m": 1}, {"id": "x", "m": 1}]),
        },
    )
    assert sorted(tuple(r.values()) for r in rows) == [("a", "y", 20), ("b", "x", 1), ("b", "x", 1)]
    assert to_duckdb(sql, sink="out").sql == query.sql


def test_integer_division_of_coalesce_and_case_truncates() -> None:
    sql = """
    CREATE TABLE a (id STRING, n BIGINT, m BIGINT) WITH ('connector'='kafka','topic'='a');
    CREATE TABLE o (id STRING, q DOUBLE, r DOUBLE, s DOUBLE)
      WITH ('connector'='kafka','topic'='o');
    INSERT INTO o SELECT id, COALESCE(n, 0) / 2, CASE WHEN n > 0 THEN n ELSE m END / 2,
      (n - 1) / 2 FROM a;
    """
    rows = [{"id": "k", "n": 5, "m": 3, "_ms": 0}, {"id": "j", "n": None, "m": 7, "_ms": 1}]
    stream = run_stream(sql, "a", rows, "o")
    batch = run_batch(sql, {"a": rows})
    assert stream == [
        {"id": "k", "q": 2, "r": 2, "s": 2},
        {"id": "j", "q": 0, "r": 3, "s": None},
    ]
    assert sorted(batch, key=lambda r: r["id"]) == sorted(stream, key=lambda r: r["id"])


TIMED = """
CREATE TABLE b (id STRING, aid BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector'='kafka','topic'='b');
CREATE TABLE o (id STRING, ts TIMESTAMP(3), early BOOLEAN) WITH ('connector'='kafka','topic'='o');
"""
T0 = 1_704_103_200_000  # 2024-01-01 10:00:00Z


def test_timestamp_comparisons_compare_instants() -> None:
    sql = TIMED + (
        "INSERT INTO o SELECT id, ts, ts <= '2024-01-01T10:00:01Z' FROM b "
        "WHERE ts < '2024-01-01 10:00:10' AND ts >= '2024-01-01 11:00:00+01:00';"
    )
    rows = [
        {"id": "iso", "aid": 1, "ts": "2024-01-01T10:00:05Z", "_ms": T0 + 5_000},
        {"id": "sql", "aid": 1, "ts": "2024-01-01 10:00:00.500", "_ms": T0 + 500},
        {"id": "offset", "aid": 1, "ts": "2024-01-01 12:00:08+02:00", "_ms": T0 + 8_000},
        {"id": "after", "aid": 1, "ts": "2024-01-01 10:00:30", "_ms": T0 + 30_000},
        {"id": "before", "aid": 1, "ts": "2024-01-01 09:59:59.999", "_ms": T0 - 1},
    ]
    stream = run_stream(sql, "b", rows, "o")
    assert [(r["id"], r["early"]) for r in stream] == [
        ("iso", False),
        ("sql", True),
        ("offset", False),
    ]
    batch = run_batch(sql, {"b": rows})
    assert sorted(batch, key=lambda r: r["id"]) == sorted(stream, key=lambda r: r["id"])


def test_timestamp_text_with_an_offset_is_its_instant_in_any_session_time_zone() -> None:
    sql = (
        TIMED + "INSERT INTO o SELECT id, window_start, FALSE FROM TABLE(TUMBLE(TABLE b, "
        "DESCRIPTOR(ts), INTERVAL '1' HOUR)) GROUP BY id, window_start, window_end EMIT FINAL;"
    )
    query = to_duckdb(sql)
    frame = pd.DataFrame(
        {
            "id": ["a", "b", "c"],
            "aid": [1, 1, 1],
            "ts": ["2024-01-01 10:00:00+02:00", "2024-01-01T10:00:00-0330", "2024-01-01 10:00:00"],
        }
    )
    con = duckdb.connect()
    con.execute("SET TimeZone = 'America/New_York'")
    rows = sorted(query.run(con, {"b": frame}), key=lambda r: r["id"])
    assert [r["ts"] for r in rows] == [
        "2024-01-01 08:00:00.000",
        "2024-01-01 13:00:00.000",
        "2024-01-01 10:00:00.000",
    ]


def test_a_comma_join_with_its_time_bound_in_where_agrees() -> None:
    sql = """
    CREATE TABLE a (id STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
      WITH ('connector'='kafka','topic'='a');
    CREATE TABLE b (id STRING, aid STRING, ts TIMESTAMP(3),
      WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector'='kafka','topic'='b');
    CREATE TABLE o (id STRING, bid STRING) WITH ('connector'='kafka','topic'='o');
    INSERT INTO o SELECT A.id, B.id FROM a A, b B
    WHERE A.id = B.aid AND B.ts BETWEEN A.ts AND A.ts + INTERVAL '10' SECOND;
    """
    a = [{"id": "1", "ts": "2024-01-01 10:00:00", "_ms": T0}]
    b = [
        {"id": "in", "aid": "1", "ts": "2024-01-01T10:00:05Z", "_ms": T0 + 5_000},
        {"id": "out", "aid": "1", "ts": "2024-01-01 10:00:30", "_ms": T0 + 30_000},
    ]
    with TopologyTestDriver(compile(sql)) as driver:
        for topic, rows in (("a", a), ("b", b)):
            source = driver.create_input_topic(topic, **S)
            for row in rows:
                value = {k: v for k, v in row.items() if not k.startswith("_")}
                source.pipe_input(row["id"], value, timestamp=row["_ms"])
        stream = [r.value for r in driver.create_output_topic("o", **S).read_records_to_list()]
    assert stream == [{"id": "1", "bid": "in"}]
    assert run_batch(sql, {"a": a, "b": b}) == stream


def test_simple_views_and_subqueries_are_merged_and_agree() -> None:
    rows = [
        {"id": "a", "aid": 1, "ts": "2024-01-01 10:00:01", "_ms": T0 + 1_000},
        {"id": "b", "aid": 7, "ts": "2024-01-01T10:00:02Z", "_ms": T0 + 2_000},
        {"id": "c", "aid": 9, "ts": "2024-01-01 10:00:30", "_ms": T0 + 30_000},
    ]
    for query in (
        "INSERT INTO o SELECT id, t, aid2 > 10 FROM (SELECT id, ts AS t, aid * 2 AS aid2 "
        "FROM b WHERE aid > 1) AS q WHERE t < '2024-01-01 10:00:10';",
        "CREATE VIEW v AS SELECT id, aid, ts FROM b WHERE aid > 1; "
        "CREATE VIEW w AS SELECT id, ts AS t, aid * 2 AS aid2 FROM v; "
        "INSERT INTO o SELECT w.id, w.t, w.aid2 > 10 FROM w WHERE t < '2024-01-01 10:00:10';",
    ):
        sql = TIMED + query
        stream = run_stream(sql, "b", rows, "o")
        assert stream == [{"id": "b", "ts": "2024-01-01T10:00:02Z", "early": True}]
        assert run_batch(sql, {"b": rows}) == stream


def test_flink_syntax_translates_as_the_stream_runs_it() -> None:
    # an unaliased subquery, backtick identifiers, an INSERT column list, a statement set
    rows = [
        {"id": "a", "aid": 1, "ts": "2024-01-01 10:00:01", "_ms": T0 + 1_000},
        {"id": "b", "aid": 7, "ts": "2024-01-01 10:00:02", "_ms": T0 + 2_000},
    ]
    query = (
        "EXECUTE STATEMENT SET BEGIN INSERT INTO o (early, id) SELECT `aid2` > 10, id FROM "
        "(SELECT id, aid * 2 AS aid2 FROM b WHERE aid > 1); END;"
    )
    sql = TIMED + query
    stream = run_stream(sql, "b", rows, "o")
    assert stream == [{"id": "b", "ts": None, "early": True}]
    assert run_batch(sql, {"b": rows}) == stream


def test_a_query_over_the_processing_time_is_not_translated() -> None:
    sql = (
        "CREATE TABLE p (id STRING, pt AS PROCTIME()) WITH ('topic' = 'p');\n"
        "CREATE TABLE q (id STRING) WITH ('topic' = 'q');\n"
        "INSERT INTO q SELECT id FROM p WHERE pt IS NOT NULL;"
    )
    with pytest.raises(SqlError) as info:
        to_duckdb(sql)
    assert "pt is the processing time of p (PROCTIME())" in info.value.message
    assert (info.value.line, info.value.column) == (3, 38)


def test_other_views_in_from_are_rejected_at_the_node() -> None:
    # (the same query as a subquery in FROM is translated: ``batch_subqueries``)
    sink = (
        "CREATE TABLE u (id STRING, ts TIMESTAMP(3), PRIMARY KEY (id) NOT ENFORCED) "
        "WITH ('connector'='upsert-kafka','topic'='u');"
    )
    grouped = "SELECT id, MAX(ts) AS ts FROM b GROUP BY id"
    assert to_duckdb(TIMED + sink + f"INSERT INTO u SELECT id, ts FROM ({grouped}) AS q;")
    with pytest.raises(SqlError, match="v is a view"):
        to_duckdb(TIMED + sink + f"CREATE VIEW v AS {grouped}; INSERT INTO u SELECT id, ts FROM v;")


def test_a_window_tvf_over_a_simple_view_is_merged() -> None:
    sql = TIMED + (
        "CREATE TABLE c (ws TIMESTAMP(3), n BIGINT) WITH ('connector'='kafka','topic'='c');"
        "CREATE VIEW v AS SELECT id, aid, ts FROM b WHERE aid > 1;"
        "INSERT INTO c SELECT window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE v, DESCRIPTOR(ts),"
        " INTERVAL '1' MINUTE)) GROUP BY window_start, window_end EMIT FINAL;"
    )
    rows = [
        {"id": "a", "aid": 1, "ts": "2024-01-01 10:00:00", "_ms": T0},
        {"id": "b", "aid": 2, "ts": "2024-01-01 10:00:01", "_ms": T0 + 1_000},
        {"id": "c", "aid": 3, "ts": "2024-01-01 10:02:00", "_ms": T0 + 120_000},
    ]
    stream = run_stream(sql, "b", rows, "c")
    assert stream == [{"ws": "2024-01-01 10:00:00.000", "n": 1}]
    batch = run_batch(sql, {"b": rows})
    assert stream[0] in batch


CHAIN = """
CREATE TABLE orders (id STRING, customer_id STRING, product_id STRING, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'orders', 'key.fields' = 'id');
CREATE TABLE customers (id STRING, tier STRING, updated TIMESTAMP(3),
  WATERMARK FOR updated AS updated, PRIMARY KEY (id) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = 'customers');
CREATE TABLE products (id STRING, title STRING, updated TIMESTAMP(3),
  WATERMARK FOR updated AS updated, PRIMARY KEY (id) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = 'products');
CREATE TABLE enriched (id STRING, tier STRING, title STRING)
  WITH ('connector' = 'kafka', 'topic' = 'enriched', 'key.fields' = 'id');
INSERT INTO enriched SELECT o.id, c.tier, p.title
FROM orders AS o
JOIN customers FOR SYSTEM_TIME AS OF o.ts AS c ON o.customer_id = c.id
LEFT JOIN products FOR SYSTEM_TIME AS OF o.ts AS p ON o.product_id = p.id;
"""


def test_a_chain_of_as_of_joins_agrees_with_duckdb() -> None:
    def row(topic: str, ms: int, **values: Any) -> tuple[str, dict[str, Any], int]:
        time = "updated" if topic != "orders" else "ts"
        return topic, {**values, time: format_timestamp(T0 + ms)}, T0 + ms

    trace = [
        row("customers", 0, id="c1", tier="gold"),
        row("products", 0, id="p1", title="old"),
        row("orders", 1_000, id="o1", customer_id="c1", product_id="p1"),
        row("products", 2_000, id="p1", title="new"),
        row("customers", 3_000, id="c1", tier="silver"),
        row("orders", 2_500, id="o2", customer_id="c1", product_id="p1"),
        row("orders", 4_000, id="o3", customer_id="c1", product_id="p9"),
        row("orders", 5_000, id="o4", customer_id="c9", product_id="p1"),
        row("orders", 9_000, id="o5", customer_id="c1", product_id=None),
        row("orders", 30_000, id="o6", customer_id="c1", product_id="p1"),
    ]
    names = ("orders", "customers", "products")
    with TopologyTestDriver(compile(CHAIN)) as driver:
        topics = {name: driver.create_input_topic(name, **S) for name in names}
        for topic, value, ms in trace:
            topics[topic].pipe_input(value["id"], value, timestamp=ms)
        stream = [
            r.value for r in driver.create_output_topic("enriched", **S).read_records_to_list()
        ]
    batch = run_batch(CHAIN, {name: [v for t, v, _ in trace if t == name] for name in names})
    # each join waits for the watermark (1 s) past a row's time, as its own stream time
    # reaches it (o5's NULL product_id passes the LEFT join at once, moving no time):
    # o3 and o6 still wait in the stream, the batch has them
    assert {r["id"] for r in batch} == {"o1", "o2", "o3", "o5", "o6"}
    by_id = {r["id"]: r for r in batch}
    assert stream == [by_id["o1"], by_id["o2"], by_id["o5"]]
    assert [by_id["o1"], by_id["o2"], by_id["o3"]] == [
        {"id": "o1", "tier": "gold", "title": "old"},
        {"id": "o2", "tier": "gold", "title": "new"},
        {"id": "o3", "tier": "silver", "title": None},
    ]


def test_a_right_interval_join_agrees_with_duckdb() -> None:
    sql = """
    CREATE TABLE a (id STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
      WITH ('connector'='kafka','topic'='a');
    CREATE TABLE b (id STRING, aid STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
      WITH ('connector'='kafka','topic'='b');
    CREATE TABLE o (bid STRING, aid STRING) WITH ('connector'='kafka','topic'='o');
    INSERT INTO o SELECT B.id, A.id FROM a A RIGHT JOIN b B
    ON A.id = B.aid AND B.ts BETWEEN A.ts AND A.ts + INTERVAL '10' SECOND;
    """
    a = [{"id": "1", "ts": "2024-01-01 10:00:00", "_ms": T0}]
    b = [
        {"id": "in", "aid": "1", "ts": "2024-01-01 10:00:05", "_ms": T0 + 5_000},
        {"id": "late", "aid": "1", "ts": "2024-01-01 10:00:30", "_ms": T0 + 30_000},
        {"id": "alone", "aid": "2", "ts": "2024-01-01 10:00:31", "_ms": T0 + 31_000},
        {"id": "end", "aid": "9", "ts": "2024-01-01 10:05:00", "_ms": T0 + 300_000},
    ]
    with TopologyTestDriver(compile(sql)) as driver:
        for topic, rows in (("a", a), ("b", b)):
            source = driver.create_input_topic(topic, **S)
            for row in rows:
                value = {k: v for k, v in row.items() if not k.startswith("_")}
                source.pipe_input(row["id"], value, timestamp=row["_ms"])
        stream = [r.value for r in driver.create_output_topic("o", **S).read_records_to_list()]
    batch = run_batch(sql, {"a": a, "b": b})
    # "end" is still in its window (no later record closes it): only the batch has it
    assert sorted(stream, key=str) == sorted([r for r in batch if r["bid"] != "end"], key=str)
    assert {"bid": "late", "aid": None} in stream and {"bid": "in", "aid": "1"} in stream
