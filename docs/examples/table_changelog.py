"""Tutorial: the changelog stream of a table (the gold customers, as their tiers change), in
the DSL and in SQL.

``docs/tutorials/table-changelog.md`` includes this file's sections (between the ``--8<--``
markers); ``tests/unit/test_docs_examples.py`` runs both topologies and checks that each
writes ``EXPECTED``. ``python docs/examples/table_changelog.py`` prints what each writes.
"""

from __future__ import annotations

from typing import Any

from streaming import StreamsBuilder, Topology, TopologyTestDriver, serdes
from streaming.sql import compile

# --8<-- [start:customers]
CUSTOMERS = [  # profile updates on a compacted topic keyed by customer id; None deletes
    ("c1", {"id": "c1", "tier": "gold"}),
    ("c2", {"id": "c2", "tier": "silver"}),
    ("c1", {"id": "c1", "tier": "silver"}),  # c1 leaves gold
    ("c2", {"id": "c2", "tier": "gold"}),  # c2 joins it
    ("c2", None),  # c2 is deleted
]
# --8<-- [end:customers]


# --8<-- [start:dsl]
def dsl_topology() -> Topology:
    builder = StreamsBuilder()
    customers = builder.table("customers", key_serde=serdes.String(), value_serde=serdes.Json())
    gold = customers.filter(lambda customer_id, customer: customer["tier"] == "gold")
    gold.to_stream().to("gold-customers", key_serde=serdes.String(), value_serde=serdes.Json())
    return builder.build()


# --8<-- [end:dsl]


# --8<-- [start:sql]
def sql_topology() -> Topology:
    return compile("""
        CREATE TABLE customers (id STRING, tier STRING, PRIMARY KEY (id) NOT ENFORCED)
          WITH ('connector' = 'upsert-kafka', 'topic' = 'customers', 'format' = 'json');

        CREATE TABLE gold_customers (id STRING, tier STRING, PRIMARY KEY (id) NOT ENFORCED)
          WITH ('connector' = 'upsert-kafka', 'topic' = 'gold-customers', 'format' = 'json');

        INSERT INTO gold_customers SELECT id, tier FROM customers WHERE tier = 'gold';
    """)


# --8<-- [end:sql]


# --8<-- [start:run]
def run(topology: Topology) -> list[tuple[Any, Any]]:
    """Pipe the profile updates through ``topology``; what it wrote to gold-customers."""
    with TopologyTestDriver(topology) as driver:
        customers = driver.create_input_topic("customers", key_serde=serdes.String())
        for customer_id, profile in CUSTOMERS:
            customers.pipe_input(customer_id, profile)
        out = driver.create_output_topic("gold-customers", key_serde=serdes.String())
        return [(r.key, r.value) for r in out.read_records_to_list()]


# --8<-- [end:run]


# --8<-- [start:expected]
EXPECTED = [
    ("c1", {"id": "c1", "tier": "gold"}),
    ("c2", None),
    ("c1", None),
    ("c2", {"id": "c2", "tier": "gold"}),
    ("c2", None),
]
# --8<-- [end:expected]

if __name__ == "__main__":
    print("DSL:", run(dsl_topology()))
    print("SQL:", run(sql_topology()))
