-- Query 3: Local item suggestion. Nexmark's q3.sql; the sink is keyed by the auction id.
-- Deviation: the persons are read as an upsert table (person_table, the person topic with
-- PRIMARY KEY (id)), so the join is a stream-table join: Flink's regular join of two
-- streams keeps both sides forever, a join of two streams here needs a time bound. An
-- auction meets its seller if the person came first, which the generator guarantees.
CREATE TABLE nexmark_q3 (
  name VARCHAR,
  city VARCHAR,
  state VARCHAR,
  id BIGINT
) WITH ('connector' = 'kafka', 'topic' = '${OUTPUT_TOPIC}', 'format' = 'json',
        'key.fields' = 'id');

INSERT INTO nexmark_q3
SELECT
    P.name, P.city, P.state, A.id
FROM
    auction AS A INNER JOIN person_table AS P ON A.seller = P.id
WHERE
    A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA');
