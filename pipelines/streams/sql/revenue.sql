-- windowed-revenue-sql: revenue and order count per region in 5-minute tumbling windows,
-- one final row per window when it closes (1 minute of grace: the WATERMARK delay), as
-- the DSL application windowed-revenue writes to revenue-per-region-5m.
--
-- Run as written: python -m streaming sql pipelines/streams/sql/revenue.sql --config app.properties
-- The platform (pipelines.streams.sql.app) reads the same file and renames the topics
-- after its StreamAppConfig.

CREATE TABLE orders (
  order_id STRING,
  customer_id STRING,
  region STRING,
  amount DOUBLE,
  location STRING,  -- not summed: the late records it reports carry the whole order
  event_time BIGINT,
  WATERMARK FOR event_time AS event_time - INTERVAL '1' MINUTE
) WITH (
  'connector' = 'kafka',
  'topic' = 'orders',
  'format' = 'json',
  'scan.startup.mode' = 'earliest-offset'
);

CREATE TABLE revenue_5m (
  region STRING,
  window_start BIGINT,
  window_end BIGINT,
  revenue DOUBLE,
  order_count BIGINT,
  revenue_cents BIGINT
) WITH (
  'connector' = 'kafka',
  'topic' = 'revenue-per-region-5m-sql',
  'format' = 'json',
  'key.fields' = 'region'
);

-- money in integer cents (amount * 100 rounded half away from zero), so stream, batch
-- and DuckDB sum the same integers
INSERT INTO revenue_5m
SELECT
  region,
  window_start,
  window_end,
  CAST(SUM(CAST(amount * 100 + CASE WHEN amount < 0 THEN -0.5 ELSE 0.5 END AS BIGINT)) AS DOUBLE) / 100,
  COUNT(*),
  SUM(CAST(amount * 100 + CASE WHEN amount < 0 THEN -0.5 ELSE 0.5 END AS BIGINT))
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(event_time), INTERVAL '5' MINUTES))
WHERE region IS NOT NULL AND amount IS NOT NULL
GROUP BY window_start, window_end, region;
