"""SQL joins vs hand-written DSL joins: the same random trace through both, same output."""

from __future__ import annotations

import random

import pytest

from streaming import (
    Joined,
    JoinWindows,
    Materialized,
    StreamJoined,
    StreamsBuilder,
    TopologyTestDriver,
    serdes,
)
from streaming.sql import SqlError, compile
from streaming.sql.timestamps import ColumnTimestampExtractor, format_timestamp

TABLES = """
CREATE TABLE orders (
  id STRING, customer_id STRING, product_id STRING, amount DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '30' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'orders', 'key.fields' = 'id');
CREATE TABLE customers (
  id STRING, name STRING, tier STRING, updated TIMESTAMP(3),
  WATERMARK FOR updated AS updated - INTERVAL '10' SECOND,
  PRIMARY KEY (id) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = 'customers');
CREATE TABLE payments (
  pid STRING, order_id STRING, paid DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE
) WITH ('connector' = 'kafka', 'topic' = 'payments', 'key.fields' = 'pid');
CREATE TABLE accounts (
  customer_id STRING, balance DOUBLE, PRIMARY KEY (customer_id) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = 'accounts');
"""

S = {"key_serde": serdes.String(), "value_serde": serdes.Json()}


def trace(seed: int, n: int = 80) -> list[tuple[str, str, dict | None, int]]:
    """Random (topic, key, value, timestamp): orders, customer and account upserts and
    deletes, payments of some orders; partly out of order."""
    rng = random.Random(seed)
    records, clock = [], 0
    for i in range(n):
        clock += rng.randint(0, 60_000)
        ts = max(0, clock - rng.choice([0, 0, 0, 20_000, 90_000]))
        kind = rng.choice(["order", "order", "customer", "payment", "payment", "account"])
        customer = rng.choice(["c1", "c2", "c3", "c4", None])
        if kind == "order":
            value = {
                "id": f"o{i}",
                "customer_id": customer,
                "amount": rng.choice([None, 5.0, 12.5, 40.0, 99.0]),
                "ts": format_timestamp(ts),
            }
            records.append(("orders", f"o{i}", value, ts))
        elif kind == "payment":
            order = f"o{rng.randint(max(0, i - 10), i)}"
            value = {"pid": f"p{i}", "order_id": order, "paid": 1.0 * i, "ts": format_timestamp(ts)}
            records.append(("payments", f"p{i}", value, ts))
        elif kind == "customer":
            key = customer or "c1"
            gone = rng.random() < 0.15
            value = {
                "id": key,
                "name": f"n{i}",
                "tier": rng.choice(["gold", "silver"]),
                "updated": format_timestamp(ts),
            }
            records.append(("customers", key, None if gone else value, ts))
        else:
            key = customer or "c2"
            gone = rng.random() < 0.2
            records.append(
                ("accounts", key, None if gone else {"customer_id": key, "balance": 1.0 * i}, ts)
            )
    return records


TOPICS = ("orders", "customers", "payments", "accounts")


def run(topology, records, key_serde=None, topics=TOPICS) -> list[tuple]:
    """The output records of ``records`` piped into the ``topics`` the topology reads."""
    with TopologyTestDriver(topology) as driver:
        described = str(topology.describe())
        inputs = {
            name: driver.create_input_topic(name, **S)
            for name in topics
            if f"topics: [{name}]" in described
        }
        for topic, key, value, ts in records:
            if topic in inputs:
                inputs[topic].pipe_input(key, value, timestamp=ts)
        out = driver.create_output_topic(
            "out", key_serde=key_serde or serdes.String(), value_serde=serdes.Json()
        )
        return [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]


def stream(builder: StreamsBuilder, topic: str, column: str):
    return builder.stream(topic, **S, timestamp_extractor=ColumnTimestampExtractor(column)).filter(
        lambda k, v: isinstance(v, dict)
    )


def pair(left, right):
    return {"left": left, "right": right}


ENRICHED = "CREATE TABLE out (id STRING, tier STRING, doubled DOUBLE, name STRING) WITH ('topic' = 'out', 'key.fields' = 'id');\n"


@pytest.mark.parametrize("side", ["", "LEFT"])
@pytest.mark.parametrize("seed", [1, 2])
def test_stream_table_join_rekeys_the_stream_like_the_dsl(seed, side):
    sql = (
        TABLES
        + ENRICHED
        + f"""
    INSERT INTO out SELECT o.id, c.tier, o.amount * 2, name
    FROM orders AS o {side} JOIN customers c ON o.customer_id = c.id
    WHERE o.amount > 10 OR c.tier = 'gold';
    """
    )
    builder = StreamsBuilder()
    customers = builder.table(
        "customers", **S, timestamp_extractor=ColumnTimestampExtractor("updated")
    )
    orders = stream(builder, "orders", "ts").select_key(lambda k, v: v.get("customer_id"))
    join = orders.left_join if side else orders.join
    joined = join(
        customers, pair, joined=Joined.with_(key_serde=serdes.String(), value_serde=serdes.Json())
    )

    def keep(v):
        o, c = v["left"], v["right"]
        big = None if o["amount"] is None else o["amount"] > 10
        gold = None if c is None or c["tier"] is None else c["tier"] == "gold"
        return big is True or gold is True

    def project(v):
        o, c = v["left"], v["right"]
        return {
            "id": o["id"],
            "tier": c and c["tier"],
            "doubled": None if o["amount"] is None else o["amount"] * 2,
            "name": c and c["name"],
        }

    joined.filter(lambda k, v: keep(v)).map(lambda k, v: (v["left"]["id"], project(v))).to(
        "out", **S
    )
    records = trace(seed)
    expected = run(builder.build(), records)
    assert expected
    assert run(compile(sql), records) == expected


def test_stream_table_join_without_rekey_when_the_stream_is_keyed_by_the_column():
    sql = """
    CREATE TABLE orders (id STRING, customer_id STRING, amount DOUBLE)
      WITH ('topic' = 'orders', 'key.fields' = 'customer_id');
    CREATE TABLE customers (id STRING, tier STRING, PRIMARY KEY (id) NOT ENFORCED)
      WITH ('connector' = 'upsert-kafka', 'topic' = 'customers');
    CREATE TABLE out (id STRING, tier STRING) WITH ('topic' = 'out');
    EXPLAIN INSERT INTO out SELECT o.id, tier FROM orders o JOIN customers c ON c.id = o.customer_id;
    """
    assert "repartition" not in str(compile(sql).describe())
    builder = StreamsBuilder()
    customers = builder.table("customers", **S)
    (
        builder.stream("orders", **S)
        .filter(lambda k, v: isinstance(v, dict))
        .join(
            customers,
            pair,
            joined=Joined.with_(key_serde=serdes.String(), value_serde=serdes.Json()),
        )
        .filter(lambda k, v: True)
        .map(lambda k, v: (None, {"id": v["left"]["id"], "tier": v["right"]["tier"]}))
        .to("out", **S)
    )
    records = [
        ("customers", "c1", {"id": "c1", "tier": "gold"}, 1),
        ("orders", "c1", {"id": "o1", "customer_id": "c1", "amount": 1.0}, 2),
        ("orders", "c2", {"id": "o2", "customer_id": "c2", "amount": 1.0}, 3),
        ("customers", "c2", {"id": "c2", "tier": "silver"}, 4),
        ("orders", "c2", {"id": "o3", "customer_id": "c2", "amount": 1.0}, 5),
    ]
    expected = run(builder.build(), records)
    assert [v["id"] for _, v, _ in expected] == ["o1", "o3"]
    assert run(compile(sql), records) == expected


@pytest.mark.parametrize("seed", [3, 4])
def test_temporal_join_uses_a_versioned_table(seed):
    sql = (
        TABLES
        + ENRICHED
        + """
    INSERT INTO out SELECT o.id, c.tier, o.amount, c.name
    FROM orders o LEFT JOIN customers FOR SYSTEM_TIME AS OF o.ts AS c ON o.customer_id = c.id;
    """
    )
    builder = StreamsBuilder()
    customers = builder.table(
        "customers",
        materialized=Materialized.as_versioned("v", 86_400_000)
        .with_key_serde(serdes.String())
        .with_value_serde(serdes.Json()),
        **S,
        timestamp_extractor=ColumnTimestampExtractor("updated"),
    )
    orders = stream(builder, "orders", "ts").select_key(lambda k, v: v.get("customer_id"))
    # the join's grace buffer takes no null keys: those orders pass on with no customer
    (
        orders.filter(lambda k, v: k is not None)
        .left_join(
            customers,
            pair,
            joined=Joined.with_(
                key_serde=serdes.String(), value_serde=serdes.Json(), grace_period=30_000
            ),
        )
        .merge(orders.filter(lambda k, v: k is None).map_values(lambda v: pair(v, None)))
        .filter(lambda k, v: True)
        .map(
            lambda k, v: (
                v["left"]["id"],
                {
                    "id": v["left"]["id"],
                    "tier": v["right"] and v["right"]["tier"],
                    "doubled": v["left"]["amount"],
                    "name": v["right"] and v["right"]["name"],
                },
            )
        )
        .to("out", **S)
    )
    records = trace(seed)
    expected = run(builder.build(), records)
    assert expected
    assert run(compile(sql), records) == expected


def test_temporal_join_sees_the_row_as_of_the_order_time():
    sql = (
        TABLES
        + ENRICHED
        + """
    INSERT INTO out SELECT o.id, c.tier, o.amount, c.name
    FROM orders o JOIN customers FOR SYSTEM_TIME AS OF o.ts AS c ON o.customer_id = c.id;
    """
    )
    t = format_timestamp
    records = [
        ("customers", "c1", {"id": "c1", "name": "a", "tier": "gold", "updated": t(0)}, 0),
        ("customers", "c1", {"id": "c1", "name": "a", "tier": "silver", "updated": t(20_000)}, 0),
        ("orders", "o1", {"id": "o1", "customer_id": "c1", "amount": 1.0, "ts": t(10_000)}, 0),
        ("orders", "o2", {"id": "o2", "customer_id": "c1", "amount": 2.0, "ts": t(25_000)}, 0),
        ("orders", "o3", {"id": "o3", "customer_id": "c1", "amount": 3.0, "ts": t(90_000)}, 0),
    ]
    out = run(compile(sql), records)
    # o1 (before the silver update) meets gold; each waits for the 30 s watermark delay
    assert [(k, v["tier"], ts) for k, v, ts in out] == [
        ("o1", "gold", 10_000),
        ("o2", "silver", 25_000),
    ]


INTERVAL_SINK = "CREATE TABLE out (id STRING, pid STRING, amount DOUBLE, paid DOUBLE) WITH ('topic' = 'out', 'key.fields' = 'id');\n"


@pytest.mark.parametrize(
    "bound",
    [
        "p.ts BETWEEN o.ts - INTERVAL '1' MINUTE AND o.ts + INTERVAL '10' MINUTE",
        "o.ts BETWEEN p.ts - INTERVAL '10' MINUTE AND p.ts + INTERVAL '1' MINUTE",
    ],
)
@pytest.mark.parametrize(
    ("side", "method"), [("", "join"), ("LEFT", "left_join"), ("FULL OUTER", "outer_join")]
)
def test_interval_join_maps_to_join_windows(side, method, bound):
    sql = (
        TABLES
        + INTERVAL_SINK
        + f"""
    INSERT INTO out SELECT o.id, p.pid, amount, paid
    FROM orders o {side} JOIN payments p ON o.id = p.order_id AND {bound}
    WHERE paid IS NULL OR paid > 3;
    """
    )
    builder = StreamsBuilder()
    orders = stream(builder, "orders", "ts")
    payments = stream(builder, "payments", "ts").select_key(lambda k, v: v.get("order_id"))
    joined = getattr(orders, method)(
        payments,
        pair,
        JoinWindows(before_ms=60_000, after_ms=600_000, grace_ms=60_000),
        stream_joined=StreamJoined.with_(
            key_serde=serdes.String(), value_serde=serdes.Json(), other_value_serde=serdes.Json()
        ),
    )

    def get(row, name):
        return None if row is None else row[name]

    def keep(v):
        paid = get(v["right"], "paid")
        return paid is None or paid > 3

    def project(v):
        o, p = v["left"], v["right"]
        return {
            "id": get(o, "id"),
            "pid": get(p, "pid"),
            "amount": get(o, "amount"),
            "paid": get(p, "paid"),
        }

    joined.filter(lambda k, v: keep(v)).map(lambda k, v: (project(v)["id"], project(v))).to(
        "out", **S
    )
    records = trace(5)
    expected = run(builder.build(), records)
    assert expected
    assert run(compile(sql), records) == expected


@pytest.mark.parametrize(
    ("side", "method"), [("", "join"), ("LEFT", "left_join"), ("FULL", "outer_join")]
)
def test_table_table_join_on_the_keys(side, method):
    sql = (
        TABLES
        + """
    CREATE TABLE out (id STRING, tier STRING, balance DOUBLE, PRIMARY KEY (id) NOT ENFORCED)
      WITH ('connector' = 'upsert-kafka', 'topic' = 'out');
    """
        + f"""
    INSERT INTO out SELECT COALESCE(c.id, a.customer_id), tier, balance
    FROM customers c {side} JOIN accounts a ON c.id = a.customer_id
    WHERE balance IS NULL OR balance > 5;
    """
    )
    builder = StreamsBuilder()
    customers = builder.table(
        "customers", **S, timestamp_extractor=ColumnTimestampExtractor("updated")
    )
    accounts = builder.table("accounts", **S)

    def get(row, name):
        return None if row is None else row[name]

    def keep(v):
        balance = get(v["right"], "balance")
        return balance is None or balance > 5

    (
        getattr(customers, method)(accounts, pair)
        .filter(lambda k, v: isinstance(v, dict) and keep(v))
        .map_values(
            lambda v: None
            if v is None
            else {
                "id": get(v["left"], "id") or get(v["right"], "customer_id"),
                "tier": get(v["left"], "tier"),
                "balance": get(v["right"], "balance"),
            }
        )
        .to_stream()
        .to("out", **S)
    )
    records = trace(6)
    expected = run(builder.build(), records)
    assert any(v is None for _, v, _ in expected) and any(v for _, v, _ in expected)
    assert run(compile(sql), records) == expected


def error_of(sql: str) -> SqlError:
    with pytest.raises(SqlError) as info:
        compile(sql)
    return info.value


BASE = TABLES + INTERVAL_SINK
LINE = BASE.count("\n") + 1


@pytest.mark.parametrize(
    ("query", "column", "message"),
    [
        (
            "INSERT INTO out SELECT ts, pid, amount, paid FROM orders o JOIN payments p ON o.id = p.order_id AND p.ts BETWEEN o.ts AND o.ts + INTERVAL '1' MINUTE;",
            24,
            "ambiguous column ts: qualify it as o.ts or p.ts",
        ),
        (
            "INSERT INTO out SELECT o.id, c.name, amount, amount FROM orders o JOIN customers c ON o.amount > 1;",
            87,
            "unsupported join condition o.amount > 1: a join needs an equality",
        ),
        (
            "INSERT INTO out SELECT o.id, c.name, amount, amount FROM orders o JOIN customers c ON o.id = o.customer_id;",
            87,
            "a join needs an equality on a column of each table",
        ),
        (
            "INSERT INTO out SELECT o.id, p.pid, amount, paid FROM orders o JOIN payments p ON o.id = p.order_id AND p.paid BETWEEN o.ts AND o.ts;",
            105,
            "paid is not a time attribute of payments: declare WATERMARK FOR paid",
        ),
        (
            "INSERT INTO out SELECT o.id, c.name, amount, amount FROM orders o JOIN customers FOR SYSTEM_TIME AS OF o.amount AS c ON o.customer_id = c.id;",
            104,
            "FOR SYSTEM_TIME AS OF needs the time attribute of orders (ts)",
        ),
        (
            "INSERT INTO out SELECT o.id, c.name, amount, amount FROM orders o JOIN customers c ON o.customer_id = c.id GROUP BY o.id;",
            30,
            "column c.name must be in GROUP BY or inside an aggregate",
        ),
        (
            "INSERT INTO out SELECT o.id, c.name, amount, amount FROM orders o CROSS JOIN customers c;",
            78,
            "CROSS JOIN is not supported yet",
        ),
        (
            "INSERT INTO out SELECT o.id, c.name, amount, amount FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) o JOIN customers c ON o.customer_id = c.id;",
            58,
            "a window TVF in a join is not supported yet",
        ),
        (
            "INSERT INTO out SELECT o.id, c.nope, amount, amount FROM orders o JOIN customers c ON o.customer_id = c.id;",
            30,
            "unknown column nope in table customers",
        ),
        (
            "INSERT INTO out SELECT o.id, c.name, amount, amount FROM orders o JOIN customers c ON o.amount = c.id;",
            87,
            "type mismatch: join columns o.amount = c.id are DOUBLE and STRING",
        ),
    ],
)
def test_join_errors_point_at_line_and_column(query, column, message):
    error = error_of(BASE + query)
    assert message in error.message
    assert (error.line, error.column) == (LINE, column), str(error)


def test_table_table_join_of_keys_written_differently_is_a_regular_join():
    """Two tables whose keys are written differently are not co-partitioned: they join
    as a regular join, both re-keyed by the join column."""
    sql = """CREATE TABLE a (id STRING, x DOUBLE, PRIMARY KEY (id) NOT ENFORCED) WITH ('topic' = 'a');
CREATE TABLE b (id STRING, y DOUBLE, PRIMARY KEY (id) NOT ENFORCED)
  WITH ('topic' = 'b', 'key.format' = 'json');
CREATE TABLE out (id STRING, y DOUBLE, PRIMARY KEY (id) NOT ENFORCED) WITH ('topic' = 'out');
INSERT INTO out SELECT a.id, y FROM a JOIN b ON a.id = b.id;"""
    with TopologyTestDriver(compile(sql)) as driver:
        driver.create_input_topic("a", key_serde=serdes.String()).pipe_input(
            "k", {"id": "k", "x": 1.0}
        )
        b = driver.create_input_topic("b", key_serde=serdes.Json())
        b.pipe_input({"id": "k"}, {"id": "k", "y": 2.0})
        b.pipe_input({"id": "k"}, {"id": "k", "y": 3.0})
        out = driver.create_output_topic("out", key_serde=serdes.String())
        records = [(r.key, r.value) for r in out.read_records_to_list()]
    # b's new row retracts the row it joined before (a delete), then joins again
    assert records == [
        ("k", {"id": "k", "y": 2.0}),
        ("k", None),
        ("k", {"id": "k", "y": 3.0}),
    ]


def test_docs_sql_join_example_runs_as_written(capsys):
    from pathlib import Path

    page = (Path(__file__).resolve().parents[3] / "docs" / "sql" / "index.md").read_text()
    section = page.split("# Streaming SQL\n", 1)[1].split("An enrichment join", 1)[1]
    block = section.split("```python\n", 1)[1].split("```", 1)[0]
    exec(block, {})
    assert capsys.readouterr().out.splitlines() == [
        "o1 {'id': 'o1', 'tier': 'gold', 'amount': 3.0}",
        "o2 {'id': 'o2', 'tier': 'unknown', 'amount': 8.0}",
    ]


@pytest.mark.parametrize("right_key", ["k", "bid"])
@pytest.mark.parametrize(
    ("side", "expected"),
    [
        ("", [("x-z", "y-z")]),
        ("LEFT", [("x-null", None), ("x-z", "y-z")]),
        ("FULL", [(None, "y-null"), ("x-null", None), ("x-z", "y-z")]),
    ],
)
def test_interval_join_never_matches_null_keys(right_key, side, expected):
    # 'key.format' = 'json' keys a NULL join column as {"k": null}: SQL NULL still equals
    # nothing, and LEFT / FULL joins pass such rows on unjoined
    sql = f"""
    CREATE TABLE a (k STRING, x STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
      WITH ('topic' = 'a', 'key.fields' = 'k', 'key.format' = 'json');
    CREATE TABLE b (k STRING, bid STRING, y STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
      WITH ('topic' = 'b', 'key.fields' = '{right_key}', 'key.format' = 'json');
    CREATE TABLE out (x STRING, y STRING) WITH ('topic' = 'out');
    INSERT INTO out SELECT a.x, b.y FROM a {side} JOIN b
    ON a.k = b.k AND b.ts BETWEEN a.ts - INTERVAL '1' MINUTE AND a.ts + INTERVAL '1' MINUTE;
    """
    ts = format_timestamp(1_000)
    with TopologyTestDriver(compile(sql)) as driver:
        a = driver.create_input_topic("a", key_serde=serdes.Json(), value_serde=serdes.Json())
        b = driver.create_input_topic("b", key_serde=serdes.Json(), value_serde=serdes.Json())
        for k in (None, "z"):
            name = "null" if k is None else k
            a.pipe_input({"k": k}, {"k": k, "x": f"x-{name}", "ts": ts}, timestamp=1_000)
            b_key = {"k": k} if right_key == "k" else {"bid": f"b-{name}"}
            row = {"k": k, "bid": f"b-{name}", "y": f"y-{name}", "ts": ts}
            b.pipe_input(b_key, row, timestamp=1_000)
        out = driver.create_output_topic(
            "out", key_serde=serdes.String(), value_serde=serdes.Json()
        )
        rows = [(r.value["x"], r.value["y"]) for r in out.read_records_to_list()]
    assert sorted(rows, key=str) == sorted(expected, key=str)


@pytest.mark.parametrize(
    ("queries", "line", "column", "message"),
    [
        (
            "INSERT INTO out SELECT o.id, c.name, amount, amount FROM orders o JOIN customers c ON o.customer_id = c.id;\n"
            "INSERT INTO out SELECT o.id, c.name, amount, amount FROM orders o JOIN customers FOR SYSTEM_TIME AS OF o.ts AS c ON o.customer_id = c.id;",
            2,
            72,
            "FOR SYSTEM_TIME AS OF needs customers read into a versioned store: customers is read elsewhere too",
        ),
        (
            "INSERT INTO out SELECT o.id, c.name, amount, amount FROM orders o JOIN customers FOR SYSTEM_TIME AS OF o.ts AS c ON o.customer_id = c.id;\n"
            "INSERT INTO out SELECT o.id, c.name, amount, amount FROM orders o JOIN customers c ON o.customer_id = c.id;",
            2,
            1,
            "customers is read FOR SYSTEM_TIME AS OF (into a versioned store): reading it again is not supported yet",
        ),
    ],
)
def test_a_versioned_table_is_read_once(queries, line, column, message):
    error = error_of(BASE + queries)
    assert message in error.message
    assert (error.line, error.column) == (LINE + line - 1, column), str(error)


def test_two_queries_read_one_topic():
    # every statement that reads a table shares its topic's source node
    sql = (
        BASE
        + "INSERT INTO out SELECT id, customer_id, amount, amount FROM orders WHERE amount > 10;\n"
        + "INSERT INTO out SELECT id, customer_id, amount, amount FROM orders WHERE amount <= 10;"
    )
    records = [r for r in trace(3) if r[0] == "orders"]
    rows = run(compile(sql), records)
    assert sorted(v["id"] for _, v, _ in rows) == sorted(
        v["id"] for _, _, v, _ in records if v["amount"] is not None
    )
