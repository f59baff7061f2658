-- Query 4: Average price for a category. Nexmark's q4.sql; an upsert sink keyed by the
-- category (the result is an updating table).
-- Deviations:
--  * `B.dateTime BETWEEN A.dateTime AND A.expires` has no fixed bound (Kafka's join
--    windows have fixed sizes): the bound is the longest auction of the generator's
--    configuration (${MAX_AUCTION_LENGTH_MS} ms, filled in by the loader) and
--    `B.dateTime <= A.expires` filters the joined rows.
--  * final is DOUBLE: AVG returns a DOUBLE here (Flink's AVG of BIGINT truncates).
CREATE TABLE nexmark_q4 (
  id BIGINT,
  final DOUBLE,
  PRIMARY KEY (id) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = '${OUTPUT_TOPIC}', 'format' = 'json');

INSERT INTO nexmark_q4
SELECT
    Q.category,
    AVG(Q.final)
FROM (
    SELECT MAX(B.price) AS final, A.category
    FROM auction A, bid B
    WHERE A.id = B.auction
      AND B.dateTime BETWEEN A.dateTime
                         AND A.dateTime + INTERVAL '${MAX_AUCTION_LENGTH_MS}' MILLISECOND
      AND B.dateTime <= A.expires
    GROUP BY A.id, A.category
) Q
GROUP BY Q.category;
