-- Query 2: Selection. Nexmark's q2.sql as it is; the sink is keyed by the auction id.
CREATE TABLE nexmark_q2 (
  auction BIGINT,
  price BIGINT
) WITH ('connector' = 'kafka', 'topic' = '${OUTPUT_TOPIC}', 'format' = 'json',
        'key.fields' = 'auction');

INSERT INTO nexmark_q2
SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0;
