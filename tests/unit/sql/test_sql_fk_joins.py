"""SQL foreign-key joins of two tables vs the hand-written DSL foreign-key join: the same
random trace of upserts and deletes through both, the same output records."""

from __future__ import annotations

import random

import pytest

from streaming import StreamsBuilder, TopologyTestDriver, serdes
from streaming.sql import compile

TABLES = """
CREATE TABLE orders_t (
  id STRING, customer_id STRING, amount DOUBLE, PRIMARY KEY (id) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = 'orders_t');
CREATE TABLE customers (
  id STRING, name STRING, tier STRING, PRIMARY KEY (id) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = 'customers');
CREATE TABLE out (id STRING, name STRING, amount DOUBLE, PRIMARY KEY (id) NOT ENFORCED)
  WITH ('connector' = 'upsert-kafka', 'topic' = 'out');
"""

S = {"key_serde": serdes.String(), "value_serde": serdes.Json()}


def trace(seed: int, n: int = 120) -> list[tuple[str, str, dict | None]]:
    """Random upserts and deletes of a few orders (whose customer changes) and customers."""
    rng = random.Random(seed)
    records = []
    for i in range(n):
        if rng.random() < 0.6:
            key = f"o{rng.randint(0, 6)}"
            value = {
                "id": key,
                "customer_id": rng.choice(["c1", "c2", "c3", "c4", None]),
                "amount": rng.choice([None, 5.0, 12.5, 40.0]),
            }
            records.append(("orders_t", key, None if rng.random() < 0.15 else value))
        else:
            key = rng.choice(["c1", "c2", "c3", "c4"])
            value = {"id": key, "name": f"n{i}", "tier": rng.choice(["gold", "silver"])}
            records.append(("customers", key, None if rng.random() < 0.15 else value))
    return records


def run(topology, records) -> list[tuple]:
    with TopologyTestDriver(topology) as driver:
        topics = {name: driver.create_input_topic(name, **S) for name in ("orders_t", "customers")}
        for i, (topic, key, value) in enumerate(records):
            topics[topic].pipe_input(key, value, timestamp=i * 1_000)
        out = driver.create_output_topic("out", **S)
        return [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]


def pair(left, right):
    return {"left": left, "right": right}


def get(row, name):
    return None if row is None else row[name]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize(("side", "method"), [("", "join"), ("LEFT", "left_join")])
def test_foreign_key_join_matches_the_dsl(seed, side, method):
    sql = (
        TABLES
        + f"""
    INSERT INTO out SELECT o.id, c.name, o.amount
    FROM orders_t o {side} JOIN customers c ON o.customer_id = c.id
    WHERE o.amount IS NULL OR o.amount > 6;
    """
    )
    builder = StreamsBuilder()
    orders = builder.table("orders_t", **S)
    customers = builder.table("customers", **S)

    def keep(v):
        amount = v["left"]["amount"]
        return amount is None or amount > 6

    (
        getattr(orders, method)(customers, lambda v: v.get("customer_id"), pair)
        .filter(lambda k, v: isinstance(v, dict) and keep(v))
        .map_values(
            lambda v: None
            if v is None
            else {
                "id": v["left"]["id"],
                "name": get(v["right"], "name"),
                "amount": v["left"]["amount"],
            }
        )
        .to_stream()
        .to("out", **S)
    )
    records = trace(seed)
    expected = run(builder.build(), records)
    assert any(v is None for _, v, _ in expected) and any(v for _, v, _ in expected)
    assert run(compile(sql), records) == expected


def test_foreign_key_join_follows_both_sides():
    # a customer's change reaches every order that names it; a delete of the customer is
    # a tombstone for each of its orders (inner join), as Kafka's foreign-key join does
    sql = (
        TABLES
        + "INSERT INTO out SELECT o.id, c.name, o.amount "
        + "FROM orders_t o JOIN customers c ON o.customer_id = c.id;"
    )
    records = [
        ("customers", "c1", {"id": "c1", "name": "ann", "tier": "gold"}),
        ("orders_t", "o1", {"id": "o1", "customer_id": "c1", "amount": 1.0}),
        ("orders_t", "o2", {"id": "o2", "customer_id": "c1", "amount": 2.0}),
        ("customers", "c1", {"id": "c1", "name": "bea", "tier": "gold"}),
        ("customers", "c1", None),
    ]
    rows = sorted(((k, v and v["name"]) for k, v, _ in run(compile(sql), records)), key=str)
    assert rows == sorted(
        [("o1", "ann"), ("o2", "ann"), ("o1", "bea"), ("o2", "bea"), ("o1", None), ("o2", None)],
        key=str,
    )


def test_foreign_key_join_to_a_json_keyed_table():
    # the foreign key is written as the right table writes its keys: {"id": ...}
    sql = """
    CREATE TABLE orders_t (id STRING, customer_id STRING, amount DOUBLE,
      PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'orders_t');
    CREATE TABLE customers (id STRING, name STRING, PRIMARY KEY (id) NOT ENFORCED)
      WITH ('connector' = 'upsert-kafka', 'topic' = 'customers', 'key.format' = 'json');
    CREATE TABLE out (id STRING, name STRING, PRIMARY KEY (id) NOT ENFORCED)
      WITH ('connector' = 'upsert-kafka', 'topic' = 'out');
    INSERT INTO out SELECT o.id, c.name FROM orders_t o LEFT JOIN customers c
      ON o.customer_id = c.id;
    """
    with TopologyTestDriver(compile(sql)) as driver:
        customers = driver.create_input_topic(
            "customers", key_serde=serdes.Json(), value_serde=serdes.Json()
        )
        orders = driver.create_input_topic("orders_t", **S)
        customers.pipe_input({"id": "c1"}, {"id": "c1", "name": "ann"})
        orders.pipe_input("o1", {"id": "o1", "customer_id": "c1", "amount": 1.0})
        orders.pipe_input("o2", {"id": "o2", "customer_id": "c9", "amount": 1.0})
        out = driver.create_output_topic("out", **S)
        rows = [(r.key, r.value) for r in out.read_records_to_list()]
    assert rows == [("o1", {"id": "o1", "name": "ann"}), ("o2", {"id": "o2", "name": None})]


@pytest.mark.parametrize(
    "query",
    [
        "INSERT INTO out SELECT o.id, c.name, o.amount FROM orders_t o FULL JOIN customers c "
        "ON o.customer_id = c.id;",
        "INSERT INTO out SELECT o.id, c.name, o.amount FROM orders_t o JOIN customers c "
        "ON o.customer_id = c.name;",
    ],
)
def test_joins_a_foreign_key_join_does_not_run_are_regular_joins(query):
    """A FULL join on a foreign key, or an equality on no key, is a regular join
    (``regular_join``): it compiles into the sink with a PRIMARY KEY."""
    topology = compile(TABLES + query)
    assert any("join-process" in node for node in str(topology.describe()).split())
