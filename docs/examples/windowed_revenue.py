"""Tutorial: 5-minute revenue per region, tumbling and hopping, in the DSL and in SQL.

``docs/tutorials/windowed-revenue.md`` includes this file's sections (between the ``--8<--``
markers); ``tests/unit/test_docs_examples.py`` runs the four topologies and checks that each
writes what its ``EXPECTED_...`` says. ``python docs/examples/windowed_revenue.py`` prints
what each writes.
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

# --8<-- [start:orders]
MINUTE = 60_000
T0 = 1_704_067_200_000  # 2024-01-01 00:00 UTC in epoch milliseconds
ORDERS = [  # (order id, order); "ts" is the event time
    ("o1", {"region": "EU", "amount": 10.0, "ts": T0 + 1 * MINUTE}),
    ("o2", {"region": "EU", "amount": 4.5, "ts": T0 + 3 * MINUTE}),
    ("o3", {"region": "US", "amount": 8.0, "ts": T0 + 4 * MINUTE}),
    ("o4", {"region": "EU", "amount": 2.0, "ts": T0 + 2 * MINUTE}),  # out of order, in grace
    ("o5", {"region": "EU", "amount": 1.0, "ts": T0 + 7 * MINUTE}),
    ("o6", {"region": "US", "amount": 5.0, "ts": T0 + 17 * MINUTE}),  # moves stream time on
]
# --8<-- [end:orders]


# --8<-- [start:dsl-tumbling]
def dsl_tumbling() -> Topology:
    builder = StreamsBuilder()
    orders = builder.stream(
        "orders",
        key_serde=serdes.String(),
        value_serde=serdes.Json(),
        timestamp_extractor=FieldTimestampExtractor("ts"),  # event time from the value
    )
    revenue = (
        orders.group_by(lambda order_id, order: order["region"])
        .windowed_by(TimeWindows.of_size_and_grace(timedelta(minutes=5), timedelta(minutes=1)))
        .emit_strategy(EmitStrategy.on_window_close())  # one final row per window
        .aggregate(lambda: 0.0, lambda region, order, total: total + order["amount"])
    )
    (
        revenue.to_stream()
        .map(
            lambda window, total: (
                window.key,
                {
                    "region": window.key,
                    "window_start": window.window.start,
                    "window_end": window.window.end,
                    "revenue": total,
                },
            )
        )
        .to("revenue-5m", key_serde=serdes.String(), value_serde=serdes.Json())
    )
    return builder.build()


# --8<-- [end:dsl-tumbling]


# --8<-- [start:sql-tumbling]
SOURCE = """
    CREATE TABLE orders (region STRING, amount DOUBLE, ts BIGINT,
      WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE
    ) WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json');
"""


def sql_tumbling() -> Topology:
    return compile(
        SOURCE
        + """
        CREATE TABLE revenue_5m (region STRING, window_start BIGINT, window_end BIGINT,
          revenue DOUBLE
        ) WITH ('connector' = 'kafka', 'topic' = 'revenue-5m', 'format' = 'json',
                'key.fields' = 'region');

        INSERT INTO revenue_5m
        SELECT region, window_start, window_end, SUM(amount)
        FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '5' MINUTE))
        GROUP BY region, window_start, window_end;
    """
    )


# --8<-- [end:sql-tumbling]


# --8<-- [start:dsl-hopping]
def dsl_hopping() -> Topology:
    builder = StreamsBuilder()
    orders = builder.stream(
        "orders",
        key_serde=serdes.String(),
        value_serde=serdes.Json(),
        timestamp_extractor=FieldTimestampExtractor("ts"),
    )
    windows = TimeWindows.of_size_and_grace(timedelta(minutes=10), timedelta(minutes=1)).advance_by(
        timedelta(minutes=5)
    )
    revenue = (
        orders.group_by(lambda order_id, order: order["region"])
        .windowed_by(windows)
        .emit_strategy(EmitStrategy.on_window_close())
        .aggregate(lambda: 0.0, lambda region, order, total: total + order["amount"])
    )
    (
        revenue.to_stream()
        .map(
            lambda window, total: (
                window.key,
                {
                    "region": window.key,
                    "window_start": window.window.start,
                    "window_end": window.window.end,
                    "revenue": total,
                },
            )
        )
        .to("revenue-10m-every-5m", key_serde=serdes.String(), value_serde=serdes.Json())
    )
    return builder.build()


# --8<-- [end:dsl-hopping]


# --8<-- [start:sql-hopping]
def sql_hopping() -> Topology:
    return compile(
        SOURCE
        + """
        CREATE TABLE revenue_hopping (region STRING, window_start BIGINT, window_end BIGINT,
          revenue DOUBLE
        ) WITH ('connector' = 'kafka', 'topic' = 'revenue-10m-every-5m', 'format' = 'json',
                'key.fields' = 'region');

        INSERT INTO revenue_hopping
        SELECT region, window_start, window_end, SUM(amount)
        FROM TABLE(HOP(TABLE orders, DESCRIPTOR(ts), INTERVAL '5' MINUTE, INTERVAL '10' MINUTE))
        GROUP BY region, window_start, window_end;
    """
    )


# --8<-- [end:sql-hopping]


# --8<-- [start:run]
def run(topology: Topology, topic: str) -> list[tuple[Any, Any]]:
    """Pipe the orders through ``topology``; what it wrote to ``topic``."""
    with TopologyTestDriver(topology) as driver:
        orders = driver.create_input_topic("orders", key_serde=serdes.String())
        for order_id, order in ORDERS:
            orders.pipe_input(order_id, order)
        out = driver.create_output_topic(topic, key_serde=serdes.String())
        return [(r.key, r.value) for r in out.read_records_to_list()]


# --8<-- [end:run]


# fmt: off
# --8<-- [start:expected-tumbling]
EXPECTED_TUMBLING = [  # windows [00:00, 00:05) and [00:05, 00:10), once each had closed
    ("EU", {"region": "EU", "window_start": T0, "window_end": T0 + 5 * MINUTE, "revenue": 16.5}),
    ("US", {"region": "US", "window_start": T0, "window_end": T0 + 5 * MINUTE, "revenue": 8.0}),
    ("EU", {"region": "EU", "window_start": T0 + 5 * MINUTE, "window_end": T0 + 10 * MINUTE, "revenue": 1.0}),
]
# --8<-- [end:expected-tumbling]

# --8<-- [start:expected-hopping]
EXPECTED_HOPPING = [  # 10-minute windows every 5 minutes: each order is in two of them
    ("EU", {"region": "EU", "window_start": T0 - 5 * MINUTE, "window_end": T0 + 5 * MINUTE, "revenue": 16.5}),
    ("US", {"region": "US", "window_start": T0 - 5 * MINUTE, "window_end": T0 + 5 * MINUTE, "revenue": 8.0}),
    ("EU", {"region": "EU", "window_start": T0, "window_end": T0 + 10 * MINUTE, "revenue": 17.5}),
    ("US", {"region": "US", "window_start": T0, "window_end": T0 + 10 * MINUTE, "revenue": 8.0}),
    ("EU", {"region": "EU", "window_start": T0 + 5 * MINUTE, "window_end": T0 + 15 * MINUTE, "revenue": 1.0}),
]
# --8<-- [end:expected-hopping]
# fmt: on

if __name__ == "__main__":
    print("DSL tumbling:", run(dsl_tumbling(), "revenue-5m"))
    print("SQL tumbling:", run(sql_tumbling(), "revenue-5m"))
    print("DSL hopping:", run(dsl_hopping(), "revenue-10m-every-5m"))
    print("SQL hopping:", run(sql_hopping(), "revenue-10m-every-5m"))
