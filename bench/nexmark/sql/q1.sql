-- Query 1: Currency conversion. Nexmark's q1.sql; the sink is keyed by the auction id.
-- Deviation: the sink's price is DOUBLE (Nexmark: BIGINT, to which Flink casts the
-- DECIMAL product); the DSL version and DuckDB keep the product as a double.
CREATE TABLE nexmark_q1 (
  auction BIGINT,
  bidder BIGINT,
  price DOUBLE,
  dateTime TIMESTAMP(3),
  extra VARCHAR
) WITH ('connector' = 'kafka', 'topic' = '${OUTPUT_TOPIC}', 'format' = 'json',
        'key.fields' = 'auction');

INSERT INTO nexmark_q1
SELECT
    auction,
    bidder,
    0.908 * price AS price, -- dollars to euros
    dateTime,
    extra
FROM bid;
