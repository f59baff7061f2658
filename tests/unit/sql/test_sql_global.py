"""Global tables (``'table.type' = 'global'``): a stream joins a GlobalKTable by its join
column without re-keying, with the rows the hand-written DSL join gives; misuse is an
error at the table."""

from __future__ import annotations

import pytest
from test_sql_joins import ENRICHED, TABLES, S, pair, run, stream, trace

from streaming import StreamsBuilder, serdes
from streaming.sql import SqlError, compile
from streaming.sql.timestamps import ColumnTimestampExtractor

GLOBAL_TABLES = TABLES.replace(
    "WITH ('connector' = 'upsert-kafka', 'topic' = 'customers')",
    "WITH ('connector' = 'upsert-kafka', 'topic' = 'customers', 'table.type' = 'global')",
)
QUERY = """INSERT INTO out SELECT o.id, c.tier, o.amount * 2, name
FROM orders AS o {side} JOIN customers c ON o.customer_id = c.id
WHERE o.amount > 10 OR c.tier = 'gold';"""


def dsl(side: str):
    builder = StreamsBuilder()
    customers = builder.global_table(
        "customers", **S, timestamp_extractor=ColumnTimestampExtractor("updated")
    )
    orders = stream(builder, "orders", "ts")
    join = orders.left_join if side else orders.join
    joined = join(customers, lambda k, v: v.get("customer_id"), pair)

    def keep(v):
        o, c = v["left"], v["right"]
        big = None if o["amount"] is None else o["amount"] > 10
        gold = None if c is None or c["tier"] is None else c["tier"] == "gold"
        return big is True or gold is True

    def row(v):
        o, c = v["left"], v["right"] or {}
        doubled = None if o["amount"] is None else o["amount"] * 2
        return {"id": o["id"], "tier": c.get("tier"), "doubled": doubled, "name": c.get("name")}

    joined.filter(lambda k, v: keep(v)).map(lambda k, v: (v["left"]["id"], row(v))).to(
        "out", key_serde=serdes.String(), value_serde=serdes.Json()
    )
    return builder.build()


@pytest.mark.parametrize("side", ["", "LEFT"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_stream_global_table_join_matches_the_dsl_without_repartitioning(seed, side):
    topology = compile(GLOBAL_TABLES + ENRICHED + QUERY.format(side=side))
    assert "repartition" not in str(topology.describe())
    records = trace(seed)
    expected = run(dsl(side), records)
    assert len(expected) >= 3
    assert run(topology, records) == expected
    # the partitioned table (the stream re-keyed to it) gives the same rows here
    assert run(compile(TABLES + ENRICHED + QUERY.format(side=side)), records) == expected


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (
            "INSERT INTO out SELECT id, tier, 1.0, name FROM customers;",
            "customers is a global table",
        ),
        (
            "INSERT INTO out SELECT o.id, c.tier, 1.0, c.name FROM orders o JOIN customers "
            "FOR SYSTEM_TIME AS OF o.ts AS c ON o.customer_id = c.id;",
            "keeps no versions",
        ),
    ],
)
def test_a_global_table_only_joins_as_the_table_of_a_stream(query, message):
    with pytest.raises(SqlError, match=message):
        compile(GLOBAL_TABLES + ENRICHED + query)


def test_a_global_table_needs_a_key_and_a_known_type():
    with pytest.raises(SqlError, match="a global table is an upsert table"):
        compile("CREATE TABLE t (k STRING) WITH ('topic' = 't', 'table.type' = 'global');")
    with pytest.raises(SqlError, match=r"unsupported 'table\.type' 'replicated'"):
        compile(
            "CREATE TABLE t (k STRING, PRIMARY KEY (k) NOT ENFORCED) "
            "WITH ('topic' = 't', 'table.type' = 'replicated');"
        )
