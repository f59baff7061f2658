"""Tutorial: deduplicating orders (the first order of each id wins), in the DSL and in SQL.

``docs/tutorials/dedup.md`` includes this file's sections (between the ``--8<--`` markers);
``tests/unit/test_docs_examples.py`` runs both topologies and checks that each writes
``EXPECTED``. ``python docs/examples/dedup.py`` prints what each writes.
"""

from __future__ import annotations

from typing import Any

from streaming import (
    FixedKeyProcessor,
    Record,
    StreamsBuilder,
    Topology,
    TopologyTestDriver,
    serdes,
)
from streaming.sql import compile
from streaming.state import Stores

# --8<-- [start:orders]
ORDERS = [  # a producer that retried sent o1 twice
    ("o1", {"order_id": "o1", "amount": 10.0}),
    ("o2", {"order_id": "o2", "amount": 4.5}),
    ("o1", {"order_id": "o1", "amount": 10.0}),
    ("o3", {"order_id": "o3", "amount": 7.0}),
]
# --8<-- [end:orders]


# --8<-- [start:dsl]
class FirstPerKey(FixedKeyProcessor):
    """Forward a record only when its key was never seen (remembered in a store)."""

    def init(self, context: Any) -> None:
        self.context = context
        self.seen = context.get_state_store("seen-order-ids")

    def process(self, record: Record) -> None:
        if self.seen.get(record.key) is None:
            self.seen.put(record.key, record.timestamp)
            self.context.forward(record)


def dsl_topology() -> Topology:
    builder = StreamsBuilder()
    builder.add_state_store(
        Stores.key_value_store_builder(
            Stores.persistent_key_value_store("seen-order-ids"),
            serdes.String(),
            serdes.Long(),
        )
    )
    orders = builder.stream("orders", key_serde=serdes.String(), value_serde=serdes.Json())
    orders.process_values(FirstPerKey, "seen-order-ids").to(
        "orders-deduped", key_serde=serdes.String(), value_serde=serdes.Json()
    )
    return builder.build()


# --8<-- [end:dsl]


# --8<-- [start:sql]
def sql_topology() -> Topology:
    return compile("""
        CREATE TABLE orders (order_id STRING, amount DOUBLE, proctime AS PROCTIME())
          WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json');

        CREATE TABLE orders_deduped (order_id STRING, amount DOUBLE)
          WITH ('connector' = 'kafka', 'topic' = 'orders-deduped', 'format' = 'json',
                'key.fields' = 'order_id');

        INSERT INTO orders_deduped
        SELECT order_id, amount FROM (
          SELECT *, ROW_NUMBER() OVER (PARTITION BY order_id ORDER BY proctime) AS rn
          FROM orders)
        WHERE rn = 1;
    """)


# --8<-- [end:sql]


# --8<-- [start:run]
def run(topology: Topology) -> list[tuple[Any, Any]]:
    """Pipe the orders through ``topology``; what it wrote to orders-deduped."""
    with TopologyTestDriver(topology) as driver:
        orders = driver.create_input_topic("orders", key_serde=serdes.String())
        for order_id, order in ORDERS:
            orders.pipe_input(order_id, order)
        out = driver.create_output_topic("orders-deduped", key_serde=serdes.String())
        return [(r.key, r.value) for r in out.read_records_to_list()]


# --8<-- [end:run]


# --8<-- [start:expected]
EXPECTED = [
    ("o1", {"order_id": "o1", "amount": 10.0}),
    ("o2", {"order_id": "o2", "amount": 4.5}),
    ("o3", {"order_id": "o3", "amount": 7.0}),
]
# --8<-- [end:expected]

if __name__ == "__main__":
    print("DSL:", run(dsl_topology()))
    print("SQL:", run(sql_topology()))
