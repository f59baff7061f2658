"""Getting started: a first SQL query, 5-minute revenue per region and a Python function, in the
test driver.

``docs/getting-started/first-sql-query.md`` includes this file; ``tests/unit/test_docs_examples.py``
runs it and checks what it prints.
"""

# --8<-- [start:code]
from streaming import TopologyTestDriver, serdes
from streaming.sql import compile, udf


@udf
def order_size(amount: float) -> str:
    return "large" if amount >= 10 else "small"


topology = compile("""
CREATE TABLE orders (order_id STRING, region STRING, amount DOUBLE, order_time TIMESTAMP(3),
  WATERMARK FOR order_time AS order_time - INTERVAL '1' MINUTE
) WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json');

CREATE TABLE windowed_revenue (region STRING, window_start TIMESTAMP(3),
  window_end TIMESTAMP(3), revenue DOUBLE
) WITH ('connector' = 'kafka', 'topic' = 'windowed-revenue', 'format' = 'json');

CREATE TABLE sized_orders (order_id STRING, size STRING)
  WITH ('connector' = 'kafka', 'topic' = 'sized-orders', 'format' = 'json');

INSERT INTO windowed_revenue
SELECT region, TUMBLE_START(order_time, INTERVAL '5' MINUTE),
  TUMBLE_END(order_time, INTERVAL '5' MINUTE), SUM(amount)
FROM orders
GROUP BY region, TUMBLE(order_time, INTERVAL '5' MINUTE);

INSERT INTO sized_orders SELECT order_id, order_size(amount) FROM orders;
""")

with TopologyTestDriver(topology) as driver:
    orders = driver.create_input_topic("orders", key_serde=serdes.String())
    for order_id, region, amount, at in [
        ("o1", "EU", 10.0, "10:01:00"),
        ("o2", "EU", 4.5, "10:03:30"),
        ("o3", "US", 1.0, "10:07:00"),
    ]:
        order = {"order_id": order_id, "region": region, "amount": amount}
        orders.pipe_input(order_id, {**order, "order_time": f"2024-01-01 {at}"})
    revenue = driver.create_output_topic("windowed-revenue", key_serde=serdes.String())
    for row in revenue.read_values_to_list():
        print(row)
    sized = driver.create_output_topic("sized-orders", key_serde=serdes.String())
    print(sized.read_values_to_list())
# {'region': 'EU', 'window_start': '2024-01-01 10:00:00.000', 'window_end': '2024-01-01 10:05:00.000', 'revenue': 14.5}
# [{'order_id': 'o1', 'size': 'large'}, {'order_id': 'o2', 'size': 'small'}, {'order_id': 'o3', 'size': 'small'}]
# --8<-- [end:code]
