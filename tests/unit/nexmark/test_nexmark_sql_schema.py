"""``bench.nexmark.model.SQL_DDL`` reads the generated topics: Nexmark's q2 written in
Streaming SQL over it gives DuckDB's result, as the DSL's q2 does."""

from __future__ import annotations

from bench.nexmark.generator import GeneratorConfig, closing_events, generate
from bench.nexmark.model import BID_TOPIC, SQL_DDL
from bench.nexmark.reference import check
from streaming import TopologyTestDriver, serdes
from streaming.sql import compile as compile_sql

Q2 = """
CREATE TABLE q2 (auction BIGINT, price BIGINT)
  WITH ('connector' = 'kafka', 'topic' = 'nexmark-q2', 'format' = 'json',
        'key.fields' = 'auction');
INSERT INTO q2 SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0;
"""


def test_q2_in_sql_over_the_ddl_matches_duckdb() -> None:
    events = generate(4_000, GeneratorConfig(seed=7, events_per_second=200))
    events += closing_events(events)
    with TopologyTestDriver(compile_sql(SQL_DDL + Q2)) as driver:
        bids = driver.create_input_topic(
            BID_TOPIC, key_serde=serdes.String(), value_serde=serdes.Json()
        )
        out = driver.create_output_topic(
            "nexmark-q2", key_serde=serdes.String(), value_serde=serdes.Json()
        )
        for event in events:
            if event.topic == BID_TOPIC:
                bids.pipe_input(event.key, event.value, timestamp=event.timestamp)
        records = [(r.key, r.value) for r in out.read_records_to_list()]
    assert records
    assert check("q2", events, records) == []
