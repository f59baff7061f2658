-- Query 11: User sessions. Nexmark's q11.sql; the sink is keyed by the bidder. One row per
-- session once it closes, as Flink's group window aggregation emits on the watermark.
-- Sessions are Kafka's: bids up to the gap apart, inclusive, are in one session (Flink:
-- strictly less than the gap).
CREATE TABLE nexmark_q11 (
  bidder BIGINT,
  bid_count BIGINT,
  starttime TIMESTAMP(3),
  endtime TIMESTAMP(3)
) WITH ('connector' = 'kafka', 'topic' = '${OUTPUT_TOPIC}', 'format' = 'json',
        'key.fields' = 'bidder');

INSERT INTO nexmark_q11
SELECT
    B.bidder,
    count(*) AS bid_count,
    SESSION_START(B.dateTime, INTERVAL '10' SECOND) AS starttime,
    SESSION_END(B.dateTime, INTERVAL '10' SECOND) AS endtime
FROM bid B
GROUP BY B.bidder, SESSION(B.dateTime, INTERVAL '10' SECOND);
