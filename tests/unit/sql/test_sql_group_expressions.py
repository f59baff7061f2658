"""GROUP BY an expression (Flink's ``GROUP BY DATE_FORMAT(ts, 'yyyy-MM-dd')``, the SELECT
list repeating it) and aggregates with ``FILTER (WHERE ...)``, as Nexmark's q15-q17 use."""

from __future__ import annotations

import pytest

from streaming import TopologyTestDriver, serdes
from streaming.sql import SqlError, compile

DDL = """
CREATE TABLE bids (bidder BIGINT, price BIGINT, ts TIMESTAMP(3))
WITH ('connector' = 'kafka', 'topic' = 'bids', 'format' = 'json');
CREATE TABLE out (`day` STRING, total BIGINT, cheap BIGINT, bidders BIGINT,
                  cheap_bidders BIGINT, dear_sum BIGINT, PRIMARY KEY (`day`) NOT ENFORCED)
WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'format' = 'json');
"""

QUERY = """
INSERT INTO out
SELECT DATE_FORMAT(ts, 'yyyy-MM-dd') AS `day`, count(*),
       count(*) FILTER (WHERE price < 10),
       count(DISTINCT bidder),
       count(DISTINCT bidder) FILTER (WHERE price < 10),
       sum(price) FILTER (WHERE price >= 10)
FROM bids
GROUP BY DATE_FORMAT(ts, 'yyyy-MM-dd');
"""

ROWS = [
    {"bidder": 1, "price": 5, "ts": "2024-01-01 10:00:00.000"},
    {"bidder": 1, "price": 7, "ts": "2024-01-01 11:00:00.000"},
    {"bidder": 2, "price": 50, "ts": "2024-01-01 12:00:00.000"},
    {"bidder": 2, "price": 3, "ts": "2024-01-02 00:00:00.000"},
    {"bidder": 3, "price": None, "ts": "2024-01-02 01:00:00.000"},
]


def final_rows(sql: str) -> dict[str, dict]:
    with TopologyTestDriver(compile(sql)) as driver:
        source = driver.create_input_topic("bids", key_serde=serdes.String())
        for row in ROWS:
            source.pipe_input(str(row["bidder"]), row)
        out = driver.create_output_topic("out", key_serde=serdes.String())
        return {r.value["day"]: r.value for r in out.read_records_to_list()}


def test_group_by_an_expression_with_filtered_aggregates():
    rows = final_rows(DDL + QUERY)
    assert rows == {
        "2024-01-01": {
            "day": "2024-01-01",
            "total": 3,
            "cheap": 2,
            "bidders": 2,
            "cheap_bidders": 1,
            "dear_sum": 50,
        },
        "2024-01-02": {
            "day": "2024-01-02",
            "total": 2,
            "cheap": 1,
            "bidders": 2,
            "cheap_bidders": 1,
            "dear_sum": None,
        },
    }


def test_a_column_under_a_group_expression_is_not_a_group_column():
    query = QUERY.replace("DATE_FORMAT(ts, 'yyyy-MM-dd') AS `day`", "CAST(ts AS STRING)", 1)
    with pytest.raises(SqlError, match="column ts must be in GROUP BY"):
        compile(DDL + query)


def test_group_by_an_aggregate_is_an_error():
    query = QUERY.replace("GROUP BY DATE_FORMAT(ts, 'yyyy-MM-dd')", "GROUP BY count(*)")
    with pytest.raises(SqlError, match="an aggregate is not allowed here"):
        compile(DDL + query)


def test_a_filter_condition_reads_the_source_columns():
    query = QUERY.replace("count(*) FILTER (WHERE price < 10)", "count(*) FILTER (WHERE x)", 1)
    with pytest.raises(SqlError, match="unknown column x"):
        compile(DDL + query)
