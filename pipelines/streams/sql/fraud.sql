-- fraud-alerts-sql: card testing, a small charge followed by a large one from the same
-- customer within minutes (a fraudster checks a stolen card with a small order, then
-- spends), found by MATCH_RECOGNIZE; each alert carries a risk score from a Python
-- function (pipelines/streams/sql/udfs.py). The thresholds are pipelines.domain's
-- CARD_TESTING_SMALL (5), CARD_TESTING_LARGE (500) and CARD_TESTING_WITHIN (5 minutes).
--
-- The orders of a customer are matched in event-time order once the watermark (1 minute
-- behind the latest order) passes them; other orders may come between the two charges.
--
-- Run as written: python -m streaming sql pipelines/streams/sql/fraud.sql --config app.properties
-- The platform (pipelines.streams.sql.app) reads the same file and renames the topics
-- after its StreamAppConfig.

CREATE FUNCTION risk_score AS 'pipelines.streams.sql.udfs.risk_score' LANGUAGE PYTHON;

CREATE TABLE orders (
  order_id STRING,
  customer_id STRING,
  amount DOUBLE,
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
  small_order_id STRING,
  small_amount DOUBLE,
  small_event_time BIGINT,
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
  small_order_id,
  small_amount,
  small_time,
  risk_score(small_amount, large_amount, large_time - small_time)
FROM orders
  MATCH_RECOGNIZE (
    PARTITION BY customer_id
    ORDER BY event_time
    MEASURES
      SMALL.order_id AS small_order_id,
      SMALL.amount AS small_amount,
      SMALL.event_time AS small_time,
      LARGE.order_id AS large_order_id,
      LARGE.amount AS large_amount,
      LARGE.event_time AS large_time
    ONE ROW PER MATCH
    AFTER MATCH SKIP PAST LAST ROW
    PATTERN (SMALL OTHER*? LARGE) WITHIN INTERVAL '5' MINUTE
    DEFINE
      SMALL AS SMALL.amount < 5,
      LARGE AS LARGE.amount >= 500
  ) AS T;
