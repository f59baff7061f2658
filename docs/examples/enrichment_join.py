"""Tutorial: enriching orders with a customer table (stream-table and temporal joins), in
the DSL and in SQL.

``docs/tutorials/enrichment-join.md`` includes this file's sections (between the ``--8<--``
markers); ``tests/unit/test_docs_examples.py`` runs the four topologies and checks that each
writes what its ``EXPECTED_...`` says. ``python docs/examples/enrichment_join.py`` prints
what each writes.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from streaming import Joined, Materialized, StreamsBuilder, Topology, TopologyTestDriver, serdes
from streaming.sql import compile
from streaming.time import FieldTimestampExtractor

# --8<-- [start:input]
MINUTE = 60_000
# (topic, key, value) in the order they arrive; "ts" is the event time in epoch ms
EVENTS = [
    ("customers", "c1", {"id": "c1", "tier": "gold", "ts": 0}),
    ("orders", "o1", {"order_id": "o1", "customer_id": "c1", "amount": 30.0, "ts": 1 * MINUTE}),
    ("customers", "c1", {"id": "c1", "tier": "silver", "ts": 3 * MINUTE}),
    ("orders", "o2", {"order_id": "o2", "customer_id": "c9", "amount": 5.0, "ts": 4 * MINUTE}),
    # late: placed at minute 2, when c1 was still gold, but it arrives after the update
    ("orders", "o3", {"order_id": "o3", "customer_id": "c1", "amount": 8.0, "ts": 2 * MINUTE}),
    ("orders", "o4", {"order_id": "o4", "customer_id": "c1", "amount": 1.0, "ts": 9 * MINUTE}),
]
# --8<-- [end:input]


# --8<-- [start:dsl-lookup]
def dsl_lookup() -> Topology:
    builder = StreamsBuilder()
    json = {"key_serde": serdes.String(), "value_serde": serdes.Json()}
    customers = builder.table("customers", **json)
    orders = builder.stream("orders", **json)
    (
        orders.select_key(lambda order_id, order: order["customer_id"])  # repartition
        .left_join(
            customers,
            lambda order, customer: {
                "order_id": order["order_id"],
                "tier": customer["tier"] if customer else "unknown",
                "amount": order["amount"],
            },
        )
        .select_key(lambda customer_id, enriched: enriched["order_id"])
        .to("enriched-orders", **json)
    )
    return builder.build()


# --8<-- [end:dsl-lookup]


# --8<-- [start:sql-lookup]
TABLES = """
    CREATE TABLE orders (order_id STRING, customer_id STRING, amount DOUBLE, ts BIGINT,
      WATERMARK FOR ts AS ts - INTERVAL '5' MINUTE
    ) WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json');

    CREATE TABLE customers (id STRING, tier STRING, ts BIGINT,
      WATERMARK FOR ts AS ts, PRIMARY KEY (id) NOT ENFORCED
    ) WITH ('connector' = 'upsert-kafka', 'topic' = 'customers', 'format' = 'json');

    CREATE TABLE enriched_orders (order_id STRING, tier STRING, amount DOUBLE)
      WITH ('connector' = 'kafka', 'topic' = 'enriched-orders', 'format' = 'json',
            'key.fields' = 'order_id');
"""


def sql_lookup() -> Topology:
    return compile(
        TABLES
        + """
        INSERT INTO enriched_orders
        SELECT o.order_id, COALESCE(c.tier, 'unknown'), o.amount
        FROM orders AS o
        LEFT JOIN customers AS c ON o.customer_id = c.id;
    """
    )


# --8<-- [end:sql-lookup]


# --8<-- [start:dsl-temporal]
def dsl_temporal() -> Topology:
    builder = StreamsBuilder()
    json = {"key_serde": serdes.String(), "value_serde": serdes.Json()}
    event_time = FieldTimestampExtractor("ts")
    customers = builder.table(
        "customers",
        materialized=Materialized.as_versioned(
            "customers-versions", history_retention=timedelta(days=1)
        ),
        timestamp_extractor=event_time,
        **json,
    )
    orders = builder.stream("orders", timestamp_extractor=event_time, **json)
    (
        orders.select_key(lambda order_id, order: order["customer_id"])
        .left_join(
            customers,
            lambda order, customer: {
                "order_id": order["order_id"],
                "tier": customer["tier"] if customer else "unknown",
                "amount": order["amount"],
            },
            joined=Joined.with_(grace_period=timedelta(minutes=5)),  # waits for late orders
        )
        .select_key(lambda customer_id, enriched: enriched["order_id"])
        .to("enriched-orders", **json)
    )
    return builder.build()


# --8<-- [end:dsl-temporal]


# --8<-- [start:sql-temporal]
def sql_temporal() -> Topology:
    return compile(
        TABLES
        + """
        INSERT INTO enriched_orders
        SELECT o.order_id, COALESCE(c.tier, 'unknown'), o.amount
        FROM orders AS o
        LEFT JOIN customers FOR SYSTEM_TIME AS OF o.ts AS c ON o.customer_id = c.id;
    """
    )


# --8<-- [end:sql-temporal]


# --8<-- [start:run]
def run(topology: Topology) -> list[tuple[Any, Any]]:
    """Pipe the events through ``topology``; what it wrote to enriched-orders."""
    with TopologyTestDriver(topology) as driver:
        topics = {
            name: driver.create_input_topic(name, key_serde=serdes.String())
            for name in ("orders", "customers")
        }
        for topic, key, value in EVENTS:
            topics[topic].pipe_input(key, value, timestamp=value["ts"])
        out = driver.create_output_topic("enriched-orders", key_serde=serdes.String())
        return [(r.key, r.value) for r in out.read_records_to_list()]


# --8<-- [end:run]


# --8<-- [start:expected-lookup]
EXPECTED_LOOKUP = [  # each order meets the customer row of the moment it is processed
    ("o1", {"order_id": "o1", "tier": "gold", "amount": 30.0}),
    ("o2", {"order_id": "o2", "tier": "unknown", "amount": 5.0}),
    ("o3", {"order_id": "o3", "tier": "silver", "amount": 8.0}),
    ("o4", {"order_id": "o4", "tier": "silver", "amount": 1.0}),
]
# --8<-- [end:expected-lookup]

# --8<-- [start:expected-temporal]
EXPECTED_TEMPORAL = [  # each order meets the customer row as of its event time
    ("o1", {"order_id": "o1", "tier": "gold", "amount": 30.0}),
    ("o3", {"order_id": "o3", "tier": "gold", "amount": 8.0}),
    ("o2", {"order_id": "o2", "tier": "unknown", "amount": 5.0}),
]
# --8<-- [end:expected-temporal]

if __name__ == "__main__":
    print("DSL lookup:", run(dsl_lookup()))
    print("SQL lookup:", run(sql_lookup()))
    print("DSL temporal:", run(dsl_temporal()))
    print("SQL temporal:", run(sql_temporal()))
