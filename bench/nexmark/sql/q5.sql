-- Query 5: Hot items. Nexmark's q5.sql (the Flink 1.13 version over HOP window TVFs): per
-- 10 s window sliding by 2 s, the auctions with the most bids, one row per auction.
-- Deviation: the sink also has the window's starttime and endtime (Nexmark writes only
-- auction and num), so that the rows can be compared window by window.
CREATE TABLE nexmark_q5 (
  auction BIGINT,
  num BIGINT,
  starttime TIMESTAMP(3),
  endtime TIMESTAMP(3)
) WITH ('connector' = 'kafka', 'topic' = '${OUTPUT_TOPIC}', 'format' = 'json',
        'key.fields' = 'auction');

INSERT INTO nexmark_q5
SELECT AuctionBids.auction, AuctionBids.num, AuctionBids.starttime, AuctionBids.endtime
FROM (
  SELECT
    auction,
    count(*) AS num,
    window_start AS starttime,
    window_end AS endtime
  FROM TABLE(
    HOP(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
  GROUP BY auction, window_start, window_end
) AS AuctionBids
JOIN (
  SELECT
    max(CountBids.num) AS maxn,
    CountBids.starttime,
    CountBids.endtime
  FROM (
    SELECT
      count(*) AS num,
      window_start AS starttime,
      window_end AS endtime
    FROM TABLE(
      HOP(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
    GROUP BY auction, window_start, window_end
  ) AS CountBids
  GROUP BY CountBids.starttime, CountBids.endtime
) AS MaxBids
ON AuctionBids.starttime = MaxBids.starttime AND
   AuctionBids.endtime = MaxBids.endtime AND
   AuctionBids.num >= MaxBids.maxn;
