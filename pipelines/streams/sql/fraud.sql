-- fraud-alerts-sql: two fraud patterns over each customer's orders, found by
-- MATCH_RECOGNIZE with Python functions (pipelines/streams/sql/udfs.py):
--
-- - small_then_large (card testing): a small charge followed by a large one within
--   minutes (a fraudster checks a stolen card with a small order, then spends), other
--   orders allowed between; scored by risk_score. Thresholds: pipelines.domain's
--   CARD_TESTING_SMALL (5), CARD_TESTING_LARGE (500), CARD_TESTING_WITHIN (5 minutes).
-- - impossible_travel: two consecutive orders from locations in different regions
--   (region_of, in DEFINE) within IMPOSSIBLE_TRAVEL_WITHIN (10 minutes).
--
-- An alert is the order that completed the pattern with the first order of it. The
-- orders of a customer are matched in event-time order once the watermark (1 minute
-- behind the latest order) passes them.
--
-- Run as written: python -m streaming sql pipelines/streams/sql/fraud.sql --config app.properties
-- The platform (pipelines.streams.sql.app) reads the same file and renames the topics
-- after its StreamAppConfig.

CREATE FUNCTION risk_score AS 'pipelines.streams.sql.udfs.risk_score' LANGUAGE PYTHON;
CREATE FUNCTION region_of AS 'pipelines.streams.sql.udfs.region_of' LANGUAGE PYTHON;

CREATE TABLE orders (
  order_id STRING,
  customer_id STRING,
  amount DOUBLE,
  region STRING,  -- not used here: the dead-letter gate checks every order has one
  location STRING,
  event_time BIGINT,
  WATERMARK FOR event_time AS event_time - INTERVAL '1' MINUTE
) WITH (
  'connector' = 'kafka',
  'topic' = 'orders',
  'format' = 'json',
  'scan.startup.mode' = 'earliest-offset'
);

CREATE TABLE fraud_alerts (
  rule STRING,
  customer_id STRING,
  order_id STRING,
  amount DOUBLE,
  event_time BIGINT,
  location STRING,
  first_order_id STRING,
  first_amount DOUBLE,
  first_event_time BIGINT,
  first_location STRING,
  risk DOUBLE
) WITH (
  'connector' = 'kafka',
  'topic' = 'fraud-alerts-sql',
  'format' = 'json',
  'key.fields' = 'customer_id'
);

INSERT INTO fraud_alerts
SELECT
  'small_then_large',
  customer_id,
  large_order_id,
  large_amount,
  large_time,
  large_location,
  small_order_id,
  small_amount,
  small_time,
  small_location,
  risk_score(small_amount, large_amount, large_time - small_time)
FROM orders
  MATCH_RECOGNIZE (
    PARTITION BY customer_id
    ORDER BY event_time
    MEASURES
      SMALL.order_id AS small_order_id,
      SMALL.amount AS small_amount,
      SMALL.event_time AS small_time,
      SMALL.location AS small_location,
      LARGE.order_id AS large_order_id,
      LARGE.amount AS large_amount,
      LARGE.event_time AS large_time,
      LARGE.location AS large_location
    ONE ROW PER MATCH
    AFTER MATCH SKIP PAST LAST ROW
    PATTERN (SMALL OTHER*? LARGE) WITHIN INTERVAL '5' MINUTE
    DEFINE
      SMALL AS SMALL.amount < 5,
      LARGE AS LARGE.amount >= 500
  ) AS T;

INSERT INTO fraud_alerts
SELECT
  'impossible_travel',
  customer_id,
  order_id,
  amount,
  event_time,
  location,
  first_order_id,
  first_amount,
  first_time,
  first_location,
  CAST(NULL AS DOUBLE)
FROM orders
  MATCH_RECOGNIZE (
    PARTITION BY customer_id
    ORDER BY event_time
    MEASURES
      HERE.order_id AS first_order_id,
      HERE.amount AS first_amount,
      HERE.event_time AS first_time,
      HERE.location AS first_location,
      THERE.order_id AS order_id,
      THERE.amount AS amount,
      THERE.event_time AS event_time,
      THERE.location AS location
    ONE ROW PER MATCH
    AFTER MATCH SKIP TO LAST THERE
    PATTERN (HERE THERE) WITHIN INTERVAL '10' MINUTE
    DEFINE
      THERE AS region_of(THERE.location) <> region_of(HERE.location)
  ) AS T;
