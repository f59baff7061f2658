-- Revenue and order count per region in 1-minute tumbling windows over the orders that
-- `make run`'s generator writes, one final row per window once it closes (10 seconds of
-- grace: the WATERMARK delay). Beside `make run`:
--
--   python -m streaming sql examples/sql/revenue_per_region.sql \
--       --config examples/sql/app.properties --create-topics
--
-- It reads the orders written from its start on ('latest-offset'; committed offsets win on
-- a restart) and writes example-revenue-per-region (--create-topics creates it and the
-- dead-letter topic on the first run).

CREATE TABLE orders (
  order_id STRING,
  customer_id STRING,
  region STRING,
  amount DOUBLE,
  event_time BIGINT,
  WATERMARK FOR event_time AS event_time - INTERVAL '10' SECOND
) WITH (
  'connector' = 'kafka',
  'topic' = 'orders',
  'format' = 'json',
  'scan.startup.mode' = 'latest-offset'
);

CREATE TABLE revenue (
  region STRING,
  window_start BIGINT,
  window_end BIGINT,
  revenue DOUBLE,
  orders BIGINT
) WITH (
  'connector' = 'kafka',
  'topic' = 'example-revenue-per-region',
  'format' = 'json',
  'key.fields' = 'region'
);

INSERT INTO revenue
SELECT region, window_start, window_end, SUM(amount), COUNT(*)
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(event_time), INTERVAL '1' MINUTE))
WHERE region IS NOT NULL AND amount IS NOT NULL AND event_time IS NOT NULL
GROUP BY window_start, window_end, region;
