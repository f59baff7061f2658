"""Tutorial: counting orders per region, in the DSL and in SQL.

``docs/tutorials/count-per-region.md`` includes this file's sections (between the ``--8<--``
markers); ``tests/unit/test_docs_examples.py`` runs both topologies and checks that each
writes ``EXPECTED``. ``python docs/examples/count_per_region.py`` prints what each writes.
"""

from __future__ import annotations

from typing import Any

from streaming import StreamsBuilder, Topology, TopologyTestDriver, serdes
from streaming.sql import compile

# --8<-- [start:orders]
ORDERS = [
    ("o1", {"order_id": "o1", "region": "EU", "amount": 10.0}),
    ("o2", {"order_id": "o2", "region": "US", "amount": 4.5}),
    ("o3", {"order_id": "o3", "region": "EU", "amount": 7.0}),
]
# --8<-- [end:orders]


# --8<-- [start:dsl]
def dsl_topology() -> Topology:
    builder = StreamsBuilder()
    orders = builder.stream("orders", key_serde=serdes.String(), value_serde=serdes.Json())
    counts = orders.group_by(lambda order_id, order: order["region"]).count(
        materialized="orders-per-region"
    )
    (
        counts.to_stream()
        .map_values(lambda region, n: {"region": region, "orders": n}, with_key=True)
        .to("orders-per-region", key_serde=serdes.String(), value_serde=serdes.Json())
    )
    return builder.build()


# --8<-- [end:dsl]


# --8<-- [start:sql]
def sql_topology() -> Topology:
    return compile("""
        CREATE TABLE orders (order_id STRING, region STRING, amount DOUBLE)
          WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json');

        CREATE TABLE orders_per_region (region STRING, orders BIGINT,
          PRIMARY KEY (region) NOT ENFORCED
        ) WITH ('connector' = 'upsert-kafka', 'topic' = 'orders-per-region',
                'format' = 'json');

        INSERT INTO orders_per_region
        SELECT region, COUNT(*) FROM orders GROUP BY region;
    """)


# --8<-- [end:sql]


# --8<-- [start:run]
def run(topology: Topology) -> list[tuple[Any, Any]]:
    """Pipe the orders through ``topology``; what it wrote to orders-per-region."""
    with TopologyTestDriver(topology) as driver:
        orders = driver.create_input_topic("orders", key_serde=serdes.String())
        for order_id, order in ORDERS:
            orders.pipe_input(order_id, order)
        out = driver.create_output_topic("orders-per-region", key_serde=serdes.String())
        return [(r.key, r.value) for r in out.read_records_to_list()]


# --8<-- [end:run]


# --8<-- [start:expected]
EXPECTED = [
    ("EU", {"region": "EU", "orders": 1}),
    ("US", {"region": "US", "orders": 1}),
    ("EU", {"region": "EU", "orders": 2}),
]
# --8<-- [end:expected]

if __name__ == "__main__":
    print("DSL:", run(dsl_topology()))
    print("SQL:", run(sql_topology()))
