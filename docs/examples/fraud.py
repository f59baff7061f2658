"""Tutorial: fraud rules, a velocity rule over windows and an amount rule over a join, in the
DSL and in SQL.

``docs/tutorials/fraud.md`` includes this file's sections (between the ``--8<--`` markers);
``tests/unit/test_docs_examples.py`` runs the four topologies and checks that each writes
what its ``EXPECTED_...`` says. ``python docs/examples/fraud.py`` prints what each writes.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from streaming import (
    EmitStrategy,
    StreamsBuilder,
    TimeWindows,
    Topology,
    TopologyTestDriver,
    serdes,
)
from streaming.sql import compile
from streaming.time import FieldTimestampExtractor

# --8<-- [start:input]
MINUTE = 60_000
T0 = 1_704_067_200_000  # 2024-01-01 00:00 UTC in epoch milliseconds
CUSTOMERS = [
    ("c1", {"id": "c1", "credit_limit": 500.0}),
    ("c2", {"id": "c2", "credit_limit": 50.0}),
]
ORDERS = [  # (order id, order); "ts" is the event time
    ("o1", {"order_id": "o1", "customer_id": "c1", "amount": 20.0, "ts": T0 + 1 * MINUTE}),
    ("o2", {"order_id": "o2", "customer_id": "c1", "amount": 25.0, "ts": T0 + 2 * MINUTE}),
    ("o3", {"order_id": "o3", "customer_id": "c2", "amount": 80.0, "ts": T0 + 2 * MINUTE}),
    ("o4", {"order_id": "o4", "customer_id": "c1", "amount": 15.0, "ts": T0 + 3 * MINUTE}),
    ("o5", {"order_id": "o5", "customer_id": "c1", "amount": 30.0, "ts": T0 + 4 * MINUTE}),
    ("o6", {"order_id": "o6", "customer_id": "c2", "amount": 10.0, "ts": T0 + 11 * MINUTE}),
]
# --8<-- [end:input]


# --8<-- [start:dsl-velocity]
def dsl_velocity() -> Topology:
    """More than 3 orders of one customer in a 5-minute window."""
    builder = StreamsBuilder()
    orders = builder.stream(
        "orders",
        key_serde=serdes.String(),
        value_serde=serdes.Json(),
        timestamp_extractor=FieldTimestampExtractor("ts"),
    )
    counts = (
        orders.group_by(lambda order_id, order: order["customer_id"])
        .windowed_by(TimeWindows.of_size_and_grace(timedelta(minutes=5), timedelta(minutes=1)))
        .emit_strategy(EmitStrategy.on_window_close())
        .count()
    )
    (
        counts.to_stream()
        .filter(lambda window, n: n > 3)
        .map(
            lambda window, n: (
                window.key,
                {"customer_id": window.key, "window_start": window.window.start, "orders": n},
            )
        )
        .to("velocity-alerts", key_serde=serdes.String(), value_serde=serdes.Json())
    )
    return builder.build()


# --8<-- [end:dsl-velocity]


# --8<-- [start:sql-velocity]
ORDERS_TABLE = """
    CREATE TABLE orders (order_id STRING, customer_id STRING, amount DOUBLE, ts BIGINT,
      WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE
    ) WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json');
"""


def sql_velocity() -> Topology:
    return compile(
        ORDERS_TABLE
        + """
        CREATE TABLE velocity_alerts (customer_id STRING, window_start BIGINT, orders BIGINT)
          WITH ('connector' = 'kafka', 'topic' = 'velocity-alerts', 'format' = 'json',
                'key.fields' = 'customer_id');

        INSERT INTO velocity_alerts
        SELECT customer_id, window_start, COUNT(*)
        FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '5' MINUTE))
        GROUP BY customer_id, window_start, window_end
        HAVING COUNT(*) > 3;
    """
    )


# --8<-- [end:sql-velocity]


# --8<-- [start:dsl-limit]
def dsl_over_limit() -> Topology:
    """An order above its customer's credit limit."""
    builder = StreamsBuilder()
    json = {"key_serde": serdes.String(), "value_serde": serdes.Json()}
    customers = builder.table("customers", **json)
    orders = builder.stream("orders", **json)
    (
        orders.select_key(lambda order_id, order: order["customer_id"])
        .join(
            customers,
            lambda order, customer: {
                "order_id": order["order_id"],
                "amount": order["amount"],
                "credit_limit": customer["credit_limit"],
            },
        )
        .filter(lambda customer_id, alert: alert["amount"] > alert["credit_limit"])
        .select_key(lambda customer_id, alert: alert["order_id"])
        .to("over-limit-alerts", **json)
    )
    return builder.build()


# --8<-- [end:dsl-limit]


# --8<-- [start:sql-limit]
def sql_over_limit() -> Topology:
    return compile(
        ORDERS_TABLE
        + """
        CREATE TABLE customers (id STRING, credit_limit DOUBLE, PRIMARY KEY (id) NOT ENFORCED)
          WITH ('connector' = 'upsert-kafka', 'topic' = 'customers', 'format' = 'json');

        CREATE TABLE over_limit_alerts (order_id STRING, amount DOUBLE, credit_limit DOUBLE)
          WITH ('connector' = 'kafka', 'topic' = 'over-limit-alerts', 'format' = 'json',
                'key.fields' = 'order_id');

        INSERT INTO over_limit_alerts
        SELECT o.order_id, o.amount, c.credit_limit
        FROM orders AS o JOIN customers AS c ON o.customer_id = c.id
        WHERE o.amount > c.credit_limit;
    """
    )


# --8<-- [end:sql-limit]


# --8<-- [start:run]
def run(topology: Topology, topic: str, inputs: dict[str, list]) -> list[tuple[Any, Any]]:
    """Pipe ``inputs`` (records per topic, topic after topic) through ``topology``; what it
    wrote to ``topic``."""
    with TopologyTestDriver(topology) as driver:
        for name, records in inputs.items():
            source = driver.create_input_topic(name, key_serde=serdes.String())
            for key, value in records:
                source.pipe_input(key, value, timestamp=value.get("ts", T0))
        out = driver.create_output_topic(topic, key_serde=serdes.String())
        return [(r.key, r.value) for r in out.read_records_to_list()]


# --8<-- [end:run]


# --8<-- [start:expected-velocity]
EXPECTED_VELOCITY = [("c1", {"customer_id": "c1", "window_start": T0, "orders": 4})]
# --8<-- [end:expected-velocity]

# --8<-- [start:expected-limit]
EXPECTED_OVER_LIMIT = [("o3", {"order_id": "o3", "amount": 80.0, "credit_limit": 50.0})]
# --8<-- [end:expected-limit]

if __name__ == "__main__":
    velocity = {"orders": ORDERS}
    print("DSL velocity:", run(dsl_velocity(), "velocity-alerts", velocity))
    print("SQL velocity:", run(sql_velocity(), "velocity-alerts", velocity))
    over_limit = {"customers": CUSTOMERS, "orders": ORDERS}
    print("DSL over limit:", run(dsl_over_limit(), "over-limit-alerts", over_limit))
    print("SQL over limit:", run(sql_over_limit(), "over-limit-alerts", over_limit))
