"""CREATE TABLE AS SELECT, views and subqueries in FROM vs hand-written DSL topologies:
the same random trace through both, the same output records; errors at line and column."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from streaming import (
    BufferConfig,
    Grouped,
    Joined,
    Materialized,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    TopologyTestDriver,
    serdes,
)
from streaming.sql import SqlError, compile
from streaming.sql.compiler import Compiler
from streaming.sql.timestamps import ColumnTimestampExtractor, format_timestamp
from streaming.topology.processor import FixedKeyProcessor

TABLES = """
CREATE TABLE orders (
  id STRING, region STRING, customerId STRING, amount DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '30' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'orders', 'key.fields' = 'id');
CREATE TABLE customers (
  id STRING, tier STRING, PRIMARY KEY (id) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = 'customers');
"""

S = {"key_serde": serdes.String(), "value_serde": serdes.Json()}
J = {"key_serde": serdes.Json(), "value_serde": serdes.Json()}


def trace(seed: int, n: int = 90) -> list[tuple[str, str, dict | None, int]]:
    """Random orders (partly out of order, some NULL amounts) and customer upserts."""
    rng = random.Random(seed)
    records, clock = [], 0
    for i in range(n):
        clock += rng.choice([1_000, 5_000, 20_000, 60_000])
        ts = max(0, clock - rng.choice([0, 0, 0, 20_000, 90_000]))
        if rng.random() < 0.8:
            value = {
                "id": f"o{i}",
                "region": rng.choice(["EU", "US", None]),
                "customerId": rng.choice(["c1", "c2", "c3"]),
                "amount": rng.choice([None, 5.0, 30.0, 70.0]),
                "ts": format_timestamp(ts),
            }
            records.append(("orders", f"o{i}", value, ts))
        else:
            key = rng.choice(["c1", "c2", "c3"])
            value = {"id": key, "tier": rng.choice(["gold", "silver", "x"])}
            records.append(("customers", key, None if rng.random() < 0.2 else value, ts))
    return records


def run(topology, records, key_serde=None) -> list[tuple]:
    with TopologyTestDriver(topology) as driver:
        described = str(topology.describe())
        topics = {
            name: driver.create_input_topic(name, **S)
            for name in ("orders", "customers")
            if f"topics: [{name}]" in described
        }
        for topic, key, value, ts in records:
            if topic in topics:
                topics[topic].pipe_input(key, value, timestamp=ts)
        out = driver.create_output_topic(
            "out", key_serde=key_serde or serdes.String(), value_serde=serdes.Json()
        )
        return [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]


def orders(builder: StreamsBuilder):
    return builder.stream("orders", **S, timestamp_extractor=ColumnTimestampExtractor("ts")).filter(
        lambda k, v: isinstance(v, dict)
    )


class StampAt(FixedKeyProcessor):
    """Sets each record's time to the epoch ms of its row's TIMESTAMP column."""

    def __init__(self, column: str) -> None:
        self.column = column

    def process(self, record):
        when = datetime.fromisoformat(record.value[self.column]).replace(tzinfo=UTC)
        self.context.forward(record.with_timestamp(int(when.timestamp() * 1000)))


def store(name: str):
    return Materialized.as_(name).with_key_serde(serdes.Json()).with_value_serde(serdes.Json())


@pytest.mark.parametrize("seed", [1, 2])
def test_create_table_as_select_group_by_matches_the_dsl(seed):
    sql = (
        TABLES
        + """
    CREATE TABLE out WITH ('connector' = 'kafka', 'topic' = 'out') AS
    SELECT region, COUNT(*) AS n, SUM(amount) AS total FROM orders GROUP BY region;
    """
    )
    builder = StreamsBuilder()

    def add(k, v, a):
        amount = v["amount"]
        return [a[0] + 1, a[1] if amount is None else (a[1] or 0) + amount]

    (
        orders(builder)
        .group_by(lambda k, v: [v["region"]], Grouped.with_(**J))
        .aggregate(lambda: [0, None], add, materialized=store("out"))
        .to_stream()
        .map(lambda k, a: (k[0], {"region": k[0], "n": a[0], "total": a[1]}))
        .to("out", **S)
    )
    records = trace(seed)
    expected = run(builder.build(), records)
    assert len(expected) > 20
    assert run(compile(sql), records) == expected


def test_create_table_as_select_declares_the_table():
    # names from aliases and columns (EXPR$i otherwise), kinds from the query, the GROUP BY
    # columns as the primary key: later statements read the table from its topic
    compiler = Compiler(
        TABLES
        + """
    CREATE TABLE totals WITH ('topic' = 'totals') AS
    SELECT region, customerId, COUNT(*), AVG(amount) AS mean, MAX(ts) AS last
    FROM orders GROUP BY customerId, region;
    CREATE TABLE big WITH ('topic' = 'out') AS
    SELECT customerId, region, mean FROM totals WHERE mean > 10;
    """
    )
    compiler.compile_all()
    totals = compiler.tables["totals"]
    assert totals.columns == {
        "region": "STRING",
        "customerId": "STRING",
        "EXPR$2": "BIGINT",
        "mean": "DOUBLE",
        "last": "TIMESTAMP",
    }
    assert totals.primary_key == ("customerId", "region") and totals.is_upsert
    assert totals.key_format == "json" and totals.topic == "totals"
    big = compiler.tables["big"]
    # a query over an upsert table keeps its key, written as the table writes it
    assert big.primary_key == ("customerId", "region") and big.key_format == "json"
    assert big.columns == {"customerId": "STRING", "region": "STRING", "mean": "DOUBLE"}


def test_create_table_as_select_with_columns_and_primary_key():
    sql = (
        TABLES
        + """
    CREATE TABLE out (cid STRING, n BIGINT, PRIMARY KEY (cid) NOT ENFORCED)
      WITH ('topic' = 'out') AS
    SELECT customerId, COUNT(*) FROM orders WHERE amount > 10 GROUP BY customerId;
    """
    )
    records = [
        ("orders", "o1", {"id": "o1", "customerId": "c1", "amount": 20.0, "ts": 1}, 1),
        ("orders", "o2", {"id": "o2", "customerId": "c1", "amount": 5.0, "ts": 2}, 2),
        ("orders", "o3", {"id": "o3", "customerId": "c1", "amount": 50.0, "ts": 3}, 3),
    ]
    rows = [(k, v) for k, v, _ in run(compile(sql), records)]
    assert rows == [("c1", {"cid": "c1", "n": 1}), ("c1", {"cid": "c1", "n": 2})]


@pytest.mark.parametrize("seed", [3, 4])
def test_view_then_window_over_it_matches_the_dsl(seed):
    # the view's rows stay in the topology; its ts passes through, so it stays the time
    # attribute (the records keep their event time) with the source's WATERMARK delay
    sql = (
        TABLES
        + """
    CREATE TEMPORARY VIEW big AS
      SELECT id, region, amount * 2 AS doubled, ts FROM orders WHERE amount > 10;
    CREATE TABLE out (region STRING, window_start TIMESTAMP(3), n BIGINT, total DOUBLE)
      WITH ('topic' = 'out', 'key.fields' = 'region');
    INSERT INTO out
    SELECT region, window_start, COUNT(*), SUM(doubled)
    FROM TABLE(TUMBLE(TABLE big, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
    GROUP BY region, window_start, window_end EMIT FINAL;
    """
    )
    builder = StreamsBuilder()
    view = (
        orders(builder)
        .filter(lambda k, v: v["amount"] is not None and v["amount"] > 10)
        .map(
            lambda k, v: (
                None,
                {"id": v["id"], "region": v["region"], "doubled": v["amount"] * 2, "ts": v["ts"]},
            )
        )
    )
    (
        view.filter(lambda k, v: isinstance(v, dict))
        .group_by(lambda k, v: [v["region"]], Grouped.with_(**J))
        .windowed_by(TimeWindows.of_size_and_grace(60_000, 30_000))
        .aggregate(
            lambda: [0, None],
            lambda k, v, a: [a[0] + 1, (a[1] or 0) + v["doubled"]],
            materialized=store("out"),
        )
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .map(
            lambda k, a: (
                k.key[0],
                {
                    "region": k.key[0],
                    "window_start": format_timestamp(k.window.start),
                    "n": a[0],
                    "total": a[1],
                },
            )
        )
        .to("out", **S)
    )
    records = trace(seed)
    expected = run(builder.build(), records)
    assert len(expected) > 5
    assert run(compile(sql), records) == expected


@pytest.mark.parametrize("seed", [5, 6])
def test_aggregation_of_a_windowed_subquery_matches_the_dsl(seed):
    # the subquery's window aggregation emits final rows (append-only), aggregated again
    sql = (
        TABLES
        + """
    CREATE TABLE out WITH ('topic' = 'out') AS
    SELECT region, MAX(n) AS top, COUNT(*) AS windows
    FROM (
      SELECT region, window_start AS starttime, COUNT(*) AS n
      FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
      GROUP BY region, window_start, window_end
    ) AS w
    GROUP BY region;
    """
    )
    builder = StreamsBuilder()
    windows = (
        orders(builder)
        .group_by(lambda k, v: [v["region"]], Grouped.with_(**J))
        .windowed_by(TimeWindows.of_size_and_grace(60_000, 30_000))
        .aggregate(lambda: [0], lambda k, v, a: [a[0] + 1], materialized=store("w"))
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .map(
            lambda k, a: (
                None,
                {
                    "region": k.key[0],
                    "starttime": format_timestamp(k.window.start),
                    "n": a[0],
                },
            )
        )
        # the window start is the subquery's time attribute: each row at its window start
        .process_values(lambda: StampAt("starttime"))
    )
    (
        windows.filter(lambda k, v: isinstance(v, dict))
        .group_by(lambda k, v: [v["region"]], Grouped.with_(**J))
        .aggregate(
            lambda: [None, 0],
            lambda k, v, a: [v["n"] if a[0] is None else max(a[0], v["n"]), a[1] + 1],
            materialized=store("out"),
        )
        .to_stream()
        .map(lambda k, a: (k[0], {"region": k[0], "top": a[0], "windows": a[1]}))
        .to("out", **S)
    )
    records = trace(seed)
    expected = run(builder.build(), records)
    assert len(expected) > 5
    assert run(compile(sql), records) == expected


@pytest.mark.parametrize("side", ["", "LEFT"])
@pytest.mark.parametrize("seed", [7, 8])
def test_subquery_as_the_table_side_of_a_join_matches_the_dsl(seed, side):
    # a subquery over an upsert table keeps its key (selected): a table the stream joins
    sql = (
        TABLES
        + f"""
    CREATE TABLE out (id STRING, tier STRING, amount DOUBLE)
      WITH ('topic' = 'out', 'key.fields' = 'id');
    INSERT INTO out SELECT o.id, c.level, o.amount
    FROM orders o {side} JOIN (
      SELECT id, UPPER(tier) AS level FROM customers WHERE tier <> 'x'
    ) AS c ON o.customerId = c.id;
    """
    )
    builder = StreamsBuilder()
    customers = (
        builder.table("customers", **S)
        .filter(lambda k, v: isinstance(v, dict) and v["tier"] is not None and v["tier"] != "x")
        .map_values(lambda v: None if v is None else {"id": v["id"], "level": v["tier"].upper()})
        .to_stream()
        .to_table(Materialized.with_(serdes.String(), serdes.Json()))
    )
    stream = orders(builder).select_key(lambda k, v: v["customerId"])
    join = stream.left_join if side else stream.join
    (
        join(
            customers,
            lambda o, c: {"left": o, "right": c},
            joined=Joined.with_(key_serde=serdes.String(), value_serde=serdes.Json()),
        )
        .map(
            lambda k, v: (
                v["left"]["id"],
                {
                    "id": v["left"]["id"],
                    "tier": None if v["right"] is None else v["right"]["level"],
                    "amount": v["left"]["amount"],
                },
            )
        )
        .to("out", **S)
    )
    records = trace(seed)
    expected = run(builder.build(), records)
    assert any(v["tier"] for _, v, _ in expected)
    assert run(compile(sql), records) == expected


OUT = "CREATE TABLE out (a STRING) WITH ('topic' = 'out');\n"


@pytest.mark.parametrize(
    ("query", "column", "message"),
    [
        (
            "INSERT INTO out SELECT a FROM (SELECT region AS a FROM orders) AS orders;",
            67,
            "table orders already exists",
        ),
        (
            "CREATE TABLE t WITH ('topic' = 't') AS SELECT COUNT(*) AS n FROM orders;",
            1,
            "the sink t is append-only (no PRIMARY KEY, 'connector' = 'kafka') but the result "
            "is updating",
        ),
        (
            "CREATE VIEW v AS SELECT region FROM orders; INSERT INTO v SELECT region FROM orders;",
            57,
            "v is a view: INSERT INTO needs a table",
        ),
        (
            "CREATE TABLE t (a STRING) WITH ('topic' = 't') AS SELECT region, amount FROM orders;",
            14,
            "t lists 1 columns, its query has 2",
        ),
        (
            "CREATE VIEW v AS SELECT COUNT(*) AS n FROM orders;",
            25,
            "the result of v is updating but has no key: a view of an aggregation without "
            "GROUP BY is not supported yet",
        ),
        (
            "CREATE VIEW v WITH ('topic' = 'v') AS SELECT region FROM orders;",
            13,
            "a view takes no WITH options",
        ),
    ],
)
def test_view_and_query_table_errors_point_at_line_and_column(query, column, message):
    with pytest.raises(SqlError) as info:
        compile(TABLES + OUT + query)
    assert message in info.value.message
    assert (info.value.line, info.value.column) == ((TABLES + OUT).count("\n") + 1, column), str(
        info.value
    )


def test_a_query_over_a_table_must_keep_its_key():
    with pytest.raises(SqlError) as info:
        compile(TABLES + "CREATE VIEW v AS SELECT tier FROM customers;")
    assert (
        "the result of v is updating (it reads the table customers) but has no key: select "
        "its primary key (id)" in info.value.message
    )
    assert (info.value.line, info.value.column) == (TABLES.count("\n") + 1, 13)


def test_a_query_over_a_json_keyed_table_keeps_its_key_names():
    sql = """
    CREATE TABLE t (a STRING, b STRING, x DOUBLE, PRIMARY KEY (a, b) NOT ENFORCED)
      WITH ('connector' = 'upsert-kafka', 'topic' = 't');
    CREATE VIEW v AS SELECT a AS aa, b, x FROM t;"""
    with pytest.raises(SqlError) as info:
        compile(sql)
    assert "v keeps the keys of t: its key is (a, b), not renamed" in info.value.message
    assert (info.value.line, info.value.column) == (4, 17), str(info.value)


def test_docs_sql_composition_example_runs_as_written(capsys):
    from pathlib import Path

    page = (Path(__file__).resolve().parents[3] / "docs" / "sql" / "index.md").read_text()
    section = page.split("# Streaming SQL\n", 1)[1]
    section = section.split("Queries compose without intermediate topics", 1)[1]
    block = section.split("```python\n", 1)[1].split("```", 1)[0]
    exec(block, {})
    assert capsys.readouterr().out.splitlines() == [
        "{'auction': 2, 'price': 9, 'dateTime': '2024-01-01 10:00:04'}",
        "{'auction': 1, 'price': 9, 'dateTime': '2024-01-01 10:00:08'}",
    ]


def test_a_view_of_a_foreign_key_join_feeds_two_tables():
    # one view, read by two statements; renamed by its column list; an updating view
    # (keyed by the orders' key) whose changes the aggregation takes back
    sql = """
    CREATE TABLE orders_t (id STRING, customer_id STRING, amount DOUBLE,
      PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'orders_t');
    CREATE TABLE customers (id STRING, name STRING, PRIMARY KEY (id) NOT ENFORCED)
      WITH ('connector' = 'upsert-kafka', 'topic' = 'customers');
    CREATE VIEW named (oid, who, amount) AS
      SELECT o.id, c.name, o.amount FROM orders_t o JOIN customers c ON o.customer_id = c.id;
    CREATE TABLE per_name WITH ('topic' = 'per_name') AS
      SELECT who, SUM(amount) AS total, COUNT(*) AS n FROM named GROUP BY who;
    CREATE TABLE big WITH ('topic' = 'big') AS SELECT oid, who FROM named WHERE amount > 10;
    """
    compiler = Compiler(sql)
    compiler.compile_all()
    named = compiler.tables["named"]
    assert named.is_view and named.primary_key == ("oid",)
    assert compiler.tables["per_name"].primary_key == ("who",)
    assert compiler.tables["big"].primary_key == ("oid",)
    with TopologyTestDriver(compile(sql)) as driver:
        orders_t = driver.create_input_topic("orders_t", **S)
        customers = driver.create_input_topic("customers", **S)
        customers.pipe_input("c1", {"id": "c1", "name": "ann"})
        orders_t.pipe_input("o1", {"id": "o1", "customer_id": "c1", "amount": 20.0})
        orders_t.pipe_input("o2", {"id": "o2", "customer_id": "c1", "amount": 5.0})
        customers.pipe_input("c1", {"id": "c1", "name": "bea"})  # both orders move
        orders_t.pipe_input("o1", None)
        per_name = driver.create_output_topic("per_name", **S).read_records_to_list()
        big = driver.create_output_topic("big", **S).read_records_to_list()
    assert [(r.key, r.value and (r.value["total"], r.value["n"])) for r in per_name] == [
        ("ann", (20.0, 1)),
        ("ann", (25.0, 2)),
        ("ann", (5.0, 1)),
        ("bea", (20.0, 1)),
        ("ann", None),
        ("bea", (25.0, 2)),
        ("bea", (5.0, 1)),
    ]
    assert [(r.key, r.value) for r in big] == [
        ("o1", {"oid": "o1", "who": "ann"}),
        ("o2", None),
        ("o1", {"oid": "o1", "who": "bea"}),
        ("o2", None),
        ("o1", None),
    ]


def test_explain_shows_a_create_table_as_select():
    from streaming.sql import explain

    text = explain(
        TABLES + "EXPLAIN CREATE TABLE out WITH ('topic' = 'out') AS "
        "SELECT region, COUNT(*) AS n FROM orders GROUP BY region;"
    )
    assert "out-group-by-repartition" in text and "topic: out" in text


@pytest.mark.parametrize("seed", [9, 10])
def test_group_by_over_a_stream_table_join_matches_the_dsl(seed):
    # the join is a subquery passing on the columns the aggregation names
    sql = (
        TABLES
        + """
    CREATE TABLE out (tier STRING, n BIGINT, total DOUBLE, PRIMARY KEY (tier) NOT ENFORCED)
      WITH ('topic' = 'out');
    INSERT INTO out SELECT c.tier, COUNT(*), SUM(o.amount)
    FROM orders o JOIN customers c ON o.customerId = c.id
    WHERE o.amount > 5 GROUP BY c.tier;
    """
    )
    builder = StreamsBuilder()
    customers = builder.table("customers", **S)
    joined = (
        orders(builder)
        .select_key(lambda k, v: v["customerId"])
        .join(
            customers,
            lambda o, c: {"left": o, "right": c},
            joined=Joined.with_(key_serde=serdes.String(), value_serde=serdes.Json()),
        )
        .filter(lambda k, v: v["left"]["amount"] is not None and v["left"]["amount"] > 5)
        .map(lambda k, v: (None, {"c.tier": v["right"]["tier"], "o.amount": v["left"]["amount"]}))
    )

    def add(k, v, a):
        return [a[0] + 1, (a[1] or 0) + v["o.amount"]]

    (
        joined.filter(lambda k, v: isinstance(v, dict))
        .group_by(lambda k, v: [v["c.tier"]], Grouped.with_(**J))
        .aggregate(lambda: [0, None], add, materialized=store("out"))
        .to_stream()
        .map(lambda k, a: (k[0], {"tier": k[0], "n": a[0], "total": a[1]}))
        .to("out", **S)
    )
    records = trace(seed)
    expected = run(builder.build(), records)
    assert len(expected) > 10
    assert run(compile(sql), records) == expected


def test_a_create_table_as_select_aggregation_is_queryable():
    # its store is named after the table (pull queries); a subquery's store is not
    from streaming.sql.results import catalog_of

    topology = compile(
        TABLES
        + """
    CREATE TABLE region_max WITH ('topic' = 'region_max') AS
    SELECT region, MAX(n) AS top
    FROM (SELECT region, customerId, COUNT(*) AS n FROM orders GROUP BY region, customerId) q
    GROUP BY region;
    """
    )
    catalog = catalog_of(topology)
    assert set(catalog.results) == {"region_max"}
    result = catalog.results["region_max"]
    assert (result.store, result.kind, result.group_columns) == (
        "region_max",
        "keyvalue",
        ("region",),
    )
    assert "q" not in catalog.tables and "region_max" in catalog.tables


def test_two_tables_on_one_topic_are_an_error():
    sql = (
        TABLES
        + "CREATE TABLE again (id STRING) WITH ('topic' = 'orders');\n"
        + "CREATE TABLE x WITH ('topic' = 'x') AS SELECT id FROM orders;\n"
        + "CREATE TABLE y WITH ('topic' = 'y') AS SELECT id FROM again;"
    )
    with pytest.raises(SqlError) as info:
        compile(sql)
    assert "tables orders and again both read the topic orders" in info.value.message
    assert (info.value.line, info.value.column) == (sql.count("\n") + 1, 1)
