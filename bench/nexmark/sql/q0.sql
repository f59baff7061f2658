-- Query 0: Pass through. Nexmark's q0.sql as it is; the sink is a Kafka topic (Nexmark:
-- 'blackhole') keyed by the auction id, the key of the bid topic.
CREATE TABLE nexmark_q0 (
  auction BIGINT,
  bidder BIGINT,
  price BIGINT,
  dateTime TIMESTAMP(3),
  extra VARCHAR
) WITH ('connector' = 'kafka', 'topic' = '${OUTPUT_TOPIC}', 'format' = 'json',
        'key.fields' = 'auction');

INSERT INTO nexmark_q0
SELECT auction, bidder, price, dateTime, extra FROM bid;
