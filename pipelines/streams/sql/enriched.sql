-- enriched-orders-sql: each order with its customer's profile and a credit-limit flag,
-- as the DSL application enriched-orders writes to enriched-orders (keyed by customer id).
-- Orders of unknown customers are kept (LEFT JOIN) with customer_known = FALSE.
--
-- Differences from the DSL application: no known_locations column (a JSON list; the SQL
-- dialect has no ARRAY type), and the customers are read with their record timestamps
-- where the DSL application stamps them 0 to apply every profile before any order.
--
-- Run as written: python -m streaming sql pipelines/streams/sql/enriched.sql --config app.properties
-- The platform (pipelines.streams.sql.app) reads the same file and renames the topics
-- after its StreamAppConfig.

CREATE TABLE orders (
  order_id STRING,
  customer_id STRING,
  amount DOUBLE,
  region STRING,
  location STRING,
  event_time BIGINT,
  WATERMARK FOR event_time AS event_time - INTERVAL '1' MINUTE
) WITH (
  'connector' = 'kafka',
  'topic' = 'orders',
  'format' = 'json',
  'scan.startup.mode' = 'earliest-offset'
);

CREATE TABLE customers (
  customer_id STRING,
  name STRING,
  tier STRING,
  credit_limit DOUBLE,
  PRIMARY KEY (customer_id) NOT ENFORCED
) WITH (
  'connector' = 'upsert-kafka',
  'topic' = 'customers',
  'format' = 'json',
  'scan.startup.mode' = 'earliest-offset'
);

CREATE TABLE enriched_orders (
  order_id STRING,
  customer_id STRING,
  amount DOUBLE,
  region STRING,
  location STRING,
  event_time BIGINT,
  customer_known BOOLEAN,
  customer_name STRING,
  tier STRING,
  credit_limit DOUBLE,
  within_credit_limit BOOLEAN
) WITH (
  'connector' = 'kafka',
  'topic' = 'enriched-orders-sql',
  'format' = 'json',
  'key.fields' = 'customer_id'
);

INSERT INTO enriched_orders
SELECT
  o.order_id,
  o.customer_id,
  o.amount,
  o.region,
  o.location,
  o.event_time,
  c.customer_id IS NOT NULL,
  c.name,
  c.tier,
  c.credit_limit,
  COALESCE(o.amount <= c.credit_limit, FALSE)
FROM orders AS o
LEFT JOIN customers AS c ON o.customer_id = c.customer_id;
