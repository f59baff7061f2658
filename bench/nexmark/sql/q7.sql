-- Query 7: Highest bid. Nexmark's q7.sql; the sink is keyed by the auction id.
-- Deviations:
--  * the sink lists its columns in the SELECT's order (auction, price, bidder): Nexmark's
--    sink declares (auction, bidder, price), so by position its bidder column gets the price;
--  * `B.dateTime < B1.dateTime`: the window is [start, end), as the DSL version's (Kafka's
--    windows); Nexmark's BETWEEN also matches a bid exactly at window_end (in the next
--    window) if its price equals this window's maximum.
CREATE TABLE nexmark_q7 (
  auction BIGINT,
  price BIGINT,
  bidder BIGINT,
  dateTime TIMESTAMP(3),
  extra VARCHAR
) WITH ('connector' = 'kafka', 'topic' = '${OUTPUT_TOPIC}', 'format' = 'json',
        'key.fields' = 'auction');

INSERT INTO nexmark_q7
SELECT B.auction, B.price, B.bidder, B.dateTime, B.extra
FROM bid B
JOIN (
  SELECT MAX(price) AS maxprice, window_end AS dateTime
  FROM TABLE(
    TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
  GROUP BY window_start, window_end
) B1
ON B.price = B1.maxprice
WHERE B.dateTime BETWEEN B1.dateTime - INTERVAL '10' SECOND AND B1.dateTime
  AND B.dateTime < B1.dateTime;
