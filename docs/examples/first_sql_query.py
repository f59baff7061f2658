"""Getting started: a first SQL query, 5-minute revenue per region, in the test driver.

``docs/getting-started/first-sql-query.md`` includes this file; ``tests/unit/test_docs_examples.py``
runs it and checks what it prints.
"""

# --8<-- [start:code]
from streaming import TopologyTestDriver, serdes
from streaming.sql import compile

topology = compile("""
CREATE TABLE orders (order_id STRING, region STRING, amount DOUBLE, order_time TIMESTAMP(3),
  WATERMARK FOR order_time AS order_time - INTERVAL '1' MINUTE
) WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json');

CREATE TABLE revenue (region STRING, window_start TIMESTAMP(3), window_end TIMESTAMP(3),
  revenue DOUBLE
) WITH ('connector' = 'kafka', 'topic' = 'revenue', 'format' = 'json');

INSERT INTO revenue
SELECT region, window_start, window_end, SUM(amount)
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(order_time), INTERVAL '5' MINUTE))
GROUP BY region, window_start, window_end;
""")

with TopologyTestDriver(topology) as driver:
    orders = driver.create_input_topic("orders", key_serde=serdes.String())
    orders.pipe_input("o1", {"region": "EU", "amount": 10.0, "order_time": "2024-01-01 10:01:00"})
    orders.pipe_input("o2", {"region": "EU", "amount": 4.5, "order_time": "2024-01-01 10:03:30"})
    orders.pipe_input("o3", {"region": "US", "amount": 1.0, "order_time": "2024-01-01 10:07:00"})
    revenue = driver.create_output_topic("revenue", key_serde=serdes.String())
    for row in revenue.read_values_to_list():
        print(row)
# {'region': 'EU', 'window_start': '2024-01-01 10:00:00.000', 'window_end': '2024-01-01 10:05:00.000', 'revenue': 14.5}
# --8<-- [end:code]
