"""Tutorial: filtering and enriching high-value orders, in the DSL and in SQL.

``docs/tutorials/filter-enrich.md`` includes this file's sections (between the ``--8<--``
markers); ``tests/unit/test_docs_examples.py`` runs both topologies and checks that each
writes ``EXPECTED``. ``python docs/examples/filter_enrich.py`` prints what each writes.
"""

from __future__ import annotations

from typing import Any

from streaming import StreamsBuilder, Topology, TopologyTestDriver, serdes
from streaming.sql import compile

# --8<-- [start:orders]
ORDERS = [
    ("o1", {"order_id": "o1", "region": "eu", "amount": 250.0}),
    ("o2", {"order_id": "o2", "region": "us", "amount": 12.5}),
    ("o3", {"order_id": "o3", "region": "us", "amount": 120.0}),
]
# --8<-- [end:orders]


# --8<-- [start:dsl]
def dsl_topology() -> Topology:
    builder = StreamsBuilder()
    orders = builder.stream("orders", key_serde=serdes.String(), value_serde=serdes.Json())
    (
        orders.filter(lambda order_id, order: order["amount"] >= 100)
        .map_values(
            lambda order: {
                "order_id": order["order_id"],
                "region": order["region"].upper(),
                "amount": order["amount"],
                "priority": "top" if order["amount"] >= 200 else "high",
            }
        )
        .to("high-value-orders", key_serde=serdes.String(), value_serde=serdes.Json())
    )
    return builder.build()


# --8<-- [end:dsl]


# --8<-- [start:sql]
def sql_topology() -> Topology:
    return compile("""
        CREATE TABLE orders (order_id STRING, region STRING, amount DOUBLE)
          WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json');

        CREATE TABLE high_value_orders (
          order_id STRING, region STRING, amount DOUBLE, priority STRING
        ) WITH ('connector' = 'kafka', 'topic' = 'high-value-orders', 'format' = 'json',
                'key.fields' = 'order_id');

        INSERT INTO high_value_orders
        SELECT order_id, UPPER(region), amount,
               CASE WHEN amount >= 200 THEN 'top' ELSE 'high' END
        FROM orders
        WHERE amount >= 100;
    """)


# --8<-- [end:sql]


# --8<-- [start:run]
def run(topology: Topology) -> list[tuple[Any, Any]]:
    """Pipe the orders through ``topology``; what it wrote to high-value-orders."""
    with TopologyTestDriver(topology) as driver:
        orders = driver.create_input_topic("orders", key_serde=serdes.String())
        for order_id, order in ORDERS:
            orders.pipe_input(order_id, order)
        out = driver.create_output_topic("high-value-orders", key_serde=serdes.String())
        return [(r.key, r.value) for r in out.read_records_to_list()]


# --8<-- [end:run]


# --8<-- [start:expected]
EXPECTED = [
    ("o1", {"order_id": "o1", "region": "EU", "amount": 250.0, "priority": "top"}),
    ("o3", {"order_id": "o3", "region": "US", "amount": 120.0, "priority": "high"}),
]
# --8<-- [end:expected]

if __name__ == "__main__":
    print("DSL:", run(dsl_topology()))
    print("SQL:", run(sql_topology()))
