"""SQL joins of more than two tables and RIGHT joins vs hand-written DSL topologies: the
same random trace through both, the same output records (keys, values, timestamps,
tombstones)."""

from __future__ import annotations

import random

import pytest
from test_sql_joins import (
    BASE,
    ENRICHED,
    LINE,
    TABLES,
    TOPICS,
    S,
    error_of,
    pair,
    run,
    stream,
    trace,
)

from streaming import (
    Grouped,
    Joined,
    JoinWindows,
    Materialized,
    StreamJoined,
    StreamsBuilder,
    serdes,
)
from streaming.sql import compile
from streaming.sql.timestamps import ColumnTimestampExtractor

MORE_TABLES = """
CREATE TABLE products (
  id STRING, title STRING, price DOUBLE, PRIMARY KEY (id) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = 'products');
CREATE TABLE ratings (
  customer_id STRING, score BIGINT, PRIMARY KEY (customer_id) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = 'ratings');
CREATE TABLE carts (
  id STRING, customer_id STRING, product_id STRING, PRIMARY KEY (id) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = 'carts');
"""
CHAIN_TOPICS = (*TOPICS, "products", "ratings", "carts")
TABLE_SINK = """
CREATE TABLE out (
  id STRING, tier STRING, balance DOUBLE, score BIGINT, PRIMARY KEY (id) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = 'out');
"""
JOINED = Joined.with_(key_serde=serdes.String(), value_serde=serdes.Json())
STREAM_JOINED = StreamJoined.with_(
    key_serde=serdes.String(), value_serde=serdes.Json(), other_value_serde=serdes.Json()
)


def chain_trace(seed: int) -> list[tuple[str, str, dict | None, int]]:
    """``trace(seed)`` with a product on each order, and upserts and deletes of products,
    ratings and carts in between."""
    rng = random.Random(seed + 1000)
    records = []
    for topic, key, value, ts in trace(seed, n=120):
        if topic == "orders":
            value = {**value, "product_id": rng.choice(["p1", "p2", "p3", None])}
        records.append((topic, key, value, ts))
        roll = rng.random()
        if roll < 0.2:
            product = rng.choice(["p1", "p2", "p3"])
            row = {"id": product, "title": f"t{len(records)}", "price": rng.choice([None, 0.5, 9])}
            records.append(("products", product, None if rng.random() < 0.15 else row, ts))
        elif roll < 0.35:
            customer = rng.choice(["c1", "c2", "c3", "c4"])
            row = {"customer_id": customer, "score": rng.randint(0, 9)}
            records.append(("ratings", customer, None if rng.random() < 0.15 else row, ts))
        elif roll < 0.55:
            cart = f"k{rng.randint(0, 5)}"
            row = {
                "id": cart,
                "customer_id": rng.choice(["c1", "c2", "c3", None]),
                "product_id": rng.choice(["p1", "p2", "p3", None]),
            }
            records.append(("carts", cart, None if rng.random() < 0.15 else row, ts))
    return records


def at(row, *path):
    """The value at ``path`` of a nested joined row (None past a missing side)."""
    for step in path:
        row = row.get(step) if isinstance(row, dict) else None
    return row


def compare(sql: str, builder: StreamsBuilder, seed: int) -> list[tuple]:
    """The compiled SQL's output equals the hand-written topology's (and is not empty)."""
    records = chain_trace(seed)
    topology = builder.build()
    expected = run(topology, records, topics=CHAIN_TOPICS)
    assert expected
    compiled = compile(sql)
    assert run(compiled, records, topics=CHAIN_TOPICS) == expected
    # the test driver has one partition: the re-keyings a real broker needs are checked on
    # the topologies, each repartition the hand-written one has
    assert repartitions(compiled) == repartitions(topology), str(compiled.describe())
    return expected


def repartitions(topology) -> int:
    """How many repartition topics ``topology`` writes."""
    import re

    return len(set(re.findall(r"topic: (\S+-repartition)\)", str(topology.describe()))))


def write_enriched(joined, project, keep=lambda v: True) -> None:
    """The stream half of a query into ENRICHED: filter, key by the order id, write."""
    joined.filter(lambda k, v: keep(v)).map(lambda k, v: (project(v)["id"], project(v))).to(
        "out", **S
    )


def customers_table(builder: StreamsBuilder, materialized=None):
    return builder.table(
        "customers",
        materialized=materialized,
        **S,
        timestamp_extractor=ColumnTimestampExtractor("updated"),
    )


def versioned(name: str) -> Materialized:
    return (
        Materialized.as_versioned(name, 86_400_000)
        .with_key_serde(serdes.String())
        .with_value_serde(serdes.Json())
    )


# -- chains of stream-table joins ---------------------------------------------------------


@pytest.mark.parametrize(("first", "second"), [("", ""), ("LEFT", "LEFT"), ("", "LEFT")])
@pytest.mark.parametrize("seed", [1, 2])
def test_chain_of_stream_table_joins_rekeys_before_each_join(seed, first, second):
    sql = (
        TABLES
        + MORE_TABLES
        + ENRICHED
        + f"""
    INSERT INTO out SELECT o.id, c.tier, p.price, title
    FROM orders o {first} JOIN customers c ON o.customer_id = c.id
    {second} JOIN products p ON o.product_id = p.id
    WHERE p.price IS NULL OR p.price > 1;
    """
    )
    builder = StreamsBuilder()
    customers = customers_table(builder)
    products = builder.table("products", **S)
    orders = stream(builder, "orders", "ts").select_key(lambda k, v: v.get("customer_id"))
    with_customer = (orders.left_join if first else orders.join)(customers, pair, joined=JOINED)
    by_product = with_customer.select_key(lambda k, v: at(v, "left", "product_id"))
    rows = (by_product.left_join if second else by_product.join)(products, pair, joined=JOINED)

    def keep(v):
        price = at(v, "right", "price")
        return price is None or price > 1

    def project(v):
        return {
            "id": at(v, "left", "left", "id"),
            "tier": at(v, "left", "right", "tier"),
            "doubled": at(v, "right", "price"),
            "name": at(v, "right", "title"),
        }

    write_enriched(rows, project, keep)
    compare(sql, builder, seed)


@pytest.mark.parametrize(
    ("first", "column", "rekeyed"),
    [("", "c.id", False), ("LEFT", "o.customer_id", False), ("LEFT", "c.id", True)],
)
def test_a_chain_rekeys_only_when_the_key_is_not_the_join_column(first, column, rekeyed):
    # after orders JOIN customers the stream is keyed by the customer id: a join on it
    # needs no repartition, unless a LEFT join may have left c.id NULL
    sql = (
        TABLES
        + MORE_TABLES
        + ENRICHED
        + f"""
    INSERT INTO out SELECT o.id, c.tier, a.balance, c.name
    FROM orders o {first} JOIN customers c ON o.customer_id = c.id
    JOIN accounts a ON {column} = a.customer_id;
    """
    )
    builder = StreamsBuilder()
    customers = customers_table(builder)
    accounts = builder.table("accounts", **S)
    orders = stream(builder, "orders", "ts").select_key(lambda k, v: v.get("customer_id"))
    rows = (orders.left_join if first else orders.join)(customers, pair, joined=JOINED)
    if rekeyed:
        rows = rows.select_key(lambda k, v: at(v, "right", "id"))
    rows = rows.join(accounts, pair, joined=JOINED)

    def project(v):
        return {
            "id": at(v, "left", "left", "id"),
            "tier": at(v, "left", "right", "tier"),
            "doubled": at(v, "right", "balance"),
            "name": at(v, "left", "right", "name"),
        }

    write_enriched(rows, project)
    repartitions = str(builder.build().describe()).count("repartition")
    assert str(compile(sql).describe()).count("repartition") == repartitions
    compare(sql, builder, 3)


@pytest.mark.parametrize("seed", [4, 5])
def test_chain_of_temporal_joins_reads_each_table_as_of_the_order_time(seed):
    sql = (
        TABLES
        + MORE_TABLES
        + ENRICHED
        + """
    INSERT INTO out SELECT o.id, c.tier, p.price, p.title
    FROM orders o JOIN customers FOR SYSTEM_TIME AS OF o.ts AS c ON o.customer_id = c.id
    LEFT JOIN products FOR SYSTEM_TIME AS OF o.ts AS p ON o.product_id = p.id;
    """
    )
    builder = StreamsBuilder()
    customers = customers_table(builder, versioned("c"))
    products = builder.table("products", materialized=versioned("p"), **S)
    graced = Joined.with_(key_serde=serdes.String(), value_serde=serdes.Json(), grace_period=30_000)
    orders = stream(builder, "orders", "ts").select_key(lambda k, v: v.get("customer_id"))
    with_customer = orders.filter(lambda k, v: k is not None).join(customers, pair, joined=graced)
    by_product = with_customer.select_key(lambda k, v: at(v, "left", "product_id"))
    rows = (
        by_product.filter(lambda k, v: k is not None)
        .left_join(products, pair, joined=graced)
        .merge(by_product.filter(lambda k, v: k is None).map_values(lambda v: pair(v, None)))
    )

    def project(v):
        return {
            "id": at(v, "left", "left", "id"),
            "tier": at(v, "left", "right", "tier"),
            "doubled": at(v, "right", "price"),
            "name": at(v, "right", "title"),
        }

    write_enriched(rows, project)
    compare(sql, builder, seed)


def test_a_global_table_in_a_chain_keeps_the_stream_as_it_is_keyed():
    # the global join re-keys nothing: the join on accounts after it re-keys the orders
    sql = (
        TABLES.replace("'topic' = 'customers')", "'topic' = 'customers', 'table.type' = 'global')")
        + MORE_TABLES
        + ENRICHED
        + """
    INSERT INTO out SELECT o.id, c.tier, a.balance, c.name
    FROM orders o LEFT JOIN customers c ON o.customer_id = c.id
    JOIN accounts a ON o.customer_id = a.customer_id;
    """
    )
    builder = StreamsBuilder()
    customers = builder.global_table(
        "customers", **S, timestamp_extractor=ColumnTimestampExtractor("updated")
    )
    accounts = builder.table("accounts", **S)
    rows = (
        stream(builder, "orders", "ts")
        .left_join(customers, lambda k, v: v.get("customer_id"), pair)
        .select_key(lambda k, v: at(v, "left", "customer_id"))
        .join(accounts, pair, joined=JOINED)
    )

    def project(v):
        return {
            "id": at(v, "left", "left", "id"),
            "tier": at(v, "left", "right", "tier"),
            "doubled": at(v, "right", "balance"),
            "name": at(v, "left", "right", "name"),
        }

    write_enriched(rows, project)
    compare(sql, builder, 15)


# -- an interval join, then stream-table joins ---------------------------------------------

INTERVAL = "p.ts BETWEEN o.ts - INTERVAL '1' MINUTE AND o.ts + INTERVAL '10' MINUTE"


@pytest.mark.parametrize("side", ["", "LEFT", "RIGHT"])
@pytest.mark.parametrize("seed", [6, 7])
def test_interval_join_then_a_table_join(seed, side):
    sql = (
        TABLES
        + MORE_TABLES
        + "CREATE TABLE out (id STRING, pid STRING, tier STRING, paid DOUBLE) "
        + "WITH ('topic' = 'out', 'key.fields' = 'pid');\n"
        + f"""
    INSERT INTO out SELECT o.id, p.pid, c.tier, paid
    FROM orders o {side} JOIN payments p ON o.id = p.order_id AND {INTERVAL}
    LEFT JOIN customers c ON o.customer_id = c.id;
    """
    )
    builder = StreamsBuilder()
    customers = customers_table(builder)
    orders = stream(builder, "orders", "ts")
    payments = stream(builder, "payments", "ts").select_key(lambda k, v: v.get("order_id"))
    joinable_orders = orders.filter(lambda k, v: k is not None and v.get("id") is not None)
    joinable_payments = payments.filter(
        lambda k, v: k is not None and v.get("order_id") is not None
    )
    if side == "RIGHT":
        # the mirrored LEFT join: payments first, the bounds mirrored
        windows = JoinWindows(before_ms=600_000, after_ms=60_000, grace_ms=60_000)
        rows = joinable_payments.left_join(
            joinable_orders, lambda p, o: pair(o, p), windows, stream_joined=STREAM_JOINED
        ).merge(
            payments.filter(lambda k, v: k is None or v.get("order_id") is None).map_values(
                lambda v: pair(None, v)
            )
        )
    else:
        windows = JoinWindows(before_ms=60_000, after_ms=600_000, grace_ms=60_000)
        join = joinable_orders.left_join if side else joinable_orders.join
        rows = join(joinable_payments, pair, windows, stream_joined=STREAM_JOINED)
        if side:
            rows = rows.merge(
                orders.filter(lambda k, v: k is None or v.get("id") is None).map_values(
                    lambda v: pair(v, None)
                )
            )
    rows = rows.select_key(lambda k, v: at(v, "left", "customer_id")).left_join(
        customers, pair, joined=JOINED
    )

    def project(v):
        return {
            "id": at(v, "left", "left", "id"),
            "pid": at(v, "left", "right", "pid"),
            "tier": at(v, "right", "tier"),
            "paid": at(v, "left", "right", "paid"),
        }

    rows.map(lambda k, v: (project(v)["pid"], project(v))).to("out", **S)
    compare(sql, builder, seed)


# -- chains of table-table joins -------------------------------------------------------------


def table_rows(rows, project) -> None:
    """The table half of a query into TABLE_SINK: project, keep the keys, write."""
    rows.filter(lambda k, v: isinstance(v, dict)).map_values(
        lambda v: None if v is None else project(v)
    ).to_stream().to("out", **S)


@pytest.mark.parametrize(
    ("first", "second", "methods"),
    [
        ("", "", ("join", "join")),
        ("LEFT", "LEFT", ("left_join", "left_join")),
        ("LEFT", "FULL", ("left_join", "outer_join")),
        ("LEFT", "RIGHT", ("left_join", "mirrored")),
    ],
)
def test_chain_of_table_joins_on_the_keys(first, second, methods):
    sql = (
        TABLES
        + MORE_TABLES
        + TABLE_SINK
        + f"""
    INSERT INTO out SELECT COALESCE(c.id, r.customer_id), tier, balance, score
    FROM customers c {first} JOIN accounts a ON c.id = a.customer_id
    {second} JOIN ratings r ON c.id = r.customer_id;
    """
    )
    builder = StreamsBuilder()
    customers = customers_table(builder)
    accounts = builder.table("accounts", **S)
    ratings = builder.table("ratings", **S)
    rows = getattr(customers, methods[0])(accounts, pair)
    if methods[1] == "mirrored":
        rows = ratings.left_join(rows, lambda r, ca: pair(ca, r))
    else:
        rows = getattr(rows, methods[1])(ratings, pair)
    table_rows(
        rows,
        lambda v: {
            "id": at(v, "left", "left", "id") or at(v, "right", "customer_id"),
            "tier": at(v, "left", "left", "tier"),
            "balance": at(v, "left", "right", "balance"),
            "score": at(v, "right", "score"),
        },
    )
    expected = compare(sql, builder, 8)
    # (the trace deletes no rating that was there: a RIGHT join on ratings deletes none)
    assert any(v is None for _, v, _ in expected) or second == "RIGHT"


@pytest.mark.parametrize("second", ["", "LEFT"])
def test_chain_of_foreign_key_joins(second):
    sql = (
        TABLES
        + MORE_TABLES
        + """
    CREATE TABLE out (id STRING, tier STRING, title STRING, PRIMARY KEY (id) NOT ENFORCED)
      WITH ('connector' = 'upsert-kafka', 'topic' = 'out');
    """
        + f"""
    INSERT INTO out SELECT k.id, c.tier, p.title
    FROM carts k JOIN customers c ON k.customer_id = c.id
    {second} JOIN products p ON k.product_id = p.id;
    """
    )
    builder = StreamsBuilder()
    carts = builder.table("carts", **S)
    customers = customers_table(builder)
    products = builder.table("products", **S)
    rows = carts.join(customers, lambda v: v.get("customer_id"), pair)
    join = rows.left_join if second else rows.join
    rows = join(products, lambda v: at(v, "left", "product_id"), pair)
    table_rows(
        rows,
        lambda v: {
            "id": at(v, "left", "left", "id"),
            "tier": at(v, "left", "right", "tier"),
            "title": at(v, "right", "title"),
        },
    )
    expected = compare(sql, builder, 9)
    assert any(v is None for _, v, _ in expected)


# -- RIGHT joins of two tables -----------------------------------------------------------------


@pytest.mark.parametrize("seed", [10, 11])
def test_right_interval_join_is_the_mirrored_left_join(seed):
    sql = (
        TABLES
        + "CREATE TABLE out (id STRING, pid STRING, amount DOUBLE, paid DOUBLE) "
        + "WITH ('topic' = 'out', 'key.fields' = 'pid');\n"
        + f"""
    INSERT INTO out SELECT o.id, p.pid, amount, paid
    FROM orders o RIGHT OUTER JOIN payments p ON o.id = p.order_id AND {INTERVAL};
    """
    )
    builder = StreamsBuilder()
    orders = stream(builder, "orders", "ts")
    payments = stream(builder, "payments", "ts").select_key(lambda k, v: v.get("order_id"))
    # payments LEFT JOIN orders, the DSL's own orientation: {"left": payment, "right": order}
    rows = payments.left_join(
        orders,
        pair,
        JoinWindows(before_ms=600_000, after_ms=60_000, grace_ms=60_000),
        stream_joined=STREAM_JOINED,
    )

    def project(v):
        return {
            "id": at(v, "right", "id"),
            "pid": at(v, "left", "pid"),
            "amount": at(v, "right", "amount"),
            "paid": at(v, "left", "paid"),
        }

    rows.map(lambda k, v: (project(v)["pid"], project(v))).to("out", **S)
    expected = compare(sql, builder, seed)
    assert any(v["id"] is None for _, v, _ in expected)


def test_right_table_join_is_the_mirrored_left_join():
    sql = (
        TABLES
        + MORE_TABLES
        + TABLE_SINK
        + """
    INSERT INTO out SELECT a.customer_id, tier, balance, CAST(NULL AS BIGINT)
    FROM customers c RIGHT JOIN accounts a ON c.id = a.customer_id
    WHERE balance > 5;
    """
    )
    builder = StreamsBuilder()
    customers = customers_table(builder)
    accounts = builder.table("accounts", **S)
    rows = accounts.left_join(customers, pair).filter(
        lambda k, v: isinstance(v, dict) and v["left"]["balance"] > 5
    )
    table_rows(
        rows,
        lambda v: {
            "id": v["left"]["customer_id"],
            "tier": at(v, "right", "tier"),
            "balance": v["left"]["balance"],
            "score": None,
        },
    )
    expected = compare(sql, builder, 12)
    assert any(v is None for _, v, _ in expected)


# -- shapes that stay errors -------------------------------------------------------------------

CHAIN_BASE = BASE + MORE_TABLES
CHAIN_LINE = LINE + MORE_TABLES.count("\n")


@pytest.mark.parametrize(
    ("query", "column", "message"),
    [
        (
            "INSERT INTO out SELECT o.id, p.pid, c.tier, paid FROM orders o JOIN customers c ON o.customer_id = c.id JOIN payments p ON o.id = p.order_id AND "
            + INTERVAL
            + ";",
            110,
            "a join of joined rows with the stream payments is not supported yet: an interval join comes first",
        ),
        (
            "INSERT INTO out SELECT o.id, p.pid, c.tier, paid FROM orders o JOIN payments p ON o.id = p.order_id AND "
            + INTERVAL
            + " JOIN customers FOR SYSTEM_TIME AS OF o.ts AS c ON o.customer_id = c.id;",
            214,
            "FOR SYSTEM_TIME AS OF needs the time attribute of the joined rows",
        ),
        (
            "INSERT INTO out SELECT c.id, c.id, tier, balance FROM customers c JOIN accounts a ON c.id = a.customer_id AND a.balance > 1 FULL JOIN ratings r ON c.id = r.customer_id;",
            111,
            "a condition besides the join key (a.balance > 1) before a FULL join is not supported yet",
        ),
        (
            "INSERT INTO out SELECT o.id, customer_id, tier, amount FROM orders o JOIN customers c ON o.customer_id = c.id JOIN accounts a ON c.id = a.customer_id;",
            30,
            "ambiguous column customer_id: qualify it as o.customer_id or a.customer_id",
        ),
        (
            "INSERT INTO out SELECT o.id, c.id, tier, amount FROM orders o JOIN customers c ON o.customer_id = c.id JOIN customers c ON o.customer_id = c.id;",
            109,
            "both tables are called c",
        ),
    ],
)
def test_chain_errors_point_at_line_and_column(query, column, message):
    error = error_of(CHAIN_BASE + query)
    assert message in error.message
    assert (error.line, error.column) == (CHAIN_LINE, column), str(error)


# -- an aggregation over a chain ---------------------------------------------------------------


def test_group_by_over_a_chain_aggregates_the_joined_rows():
    sql = (
        TABLES
        + MORE_TABLES
        + """
    CREATE TABLE out (tier STRING, n BIGINT, top DOUBLE, PRIMARY KEY (tier) NOT ENFORCED)
      WITH ('connector' = 'upsert-kafka', 'topic' = 'out');
    INSERT INTO out SELECT c.tier, COUNT(*), MAX(p.price)
    FROM orders o JOIN customers c ON o.customer_id = c.id
    LEFT JOIN products p ON o.product_id = p.id
    GROUP BY c.tier;
    """
    )
    builder = StreamsBuilder()
    customers = customers_table(builder)
    products = builder.table("products", **S)
    orders = stream(builder, "orders", "ts").select_key(lambda k, v: v.get("customer_id"))
    rows = (
        orders.join(customers, pair, joined=JOINED)
        .select_key(lambda k, v: at(v, "left", "product_id"))
        .left_join(products, pair, joined=JOINED)
    )

    def add(k, v, acc):
        price = at(v, "right", "price")
        top = acc[1] if price is None or (acc[1] is not None and acc[1] >= price) else price
        return [acc[0] + 1, top]

    (
        rows.group_by(
            lambda k, v: [at(v, "left", "right", "tier")],
            Grouped.with_(key_serde=serdes.Json(), value_serde=serdes.Json()),
        )
        .aggregate(
            lambda: [0, None],
            add,
            materialized=Materialized.as_("agg")
            .with_key_serde(serdes.Json())
            .with_value_serde(serdes.Json()),
        )
        .to_stream()
        .map(lambda k, a: (k[0], {"tier": k[0], "n": a[0], "top": a[1]}))
        .to("out", **S)
    )
    compare(sql, builder, 13)


def test_a_table_chain_joins_by_a_column_of_an_earlier_table():
    # carts JOIN customers is keyed by the cart: ratings joins by c.id, a foreign key
    sql = (
        TABLES
        + MORE_TABLES
        + TABLE_SINK
        + """
    INSERT INTO out SELECT k.id, c.tier, CAST(NULL AS DOUBLE), r.score
    FROM carts k LEFT JOIN customers c ON k.customer_id = c.id
    JOIN ratings r ON c.id = r.customer_id;
    """
    )
    builder = StreamsBuilder()
    carts = builder.table("carts", **S)
    customers = customers_table(builder)
    ratings = builder.table("ratings", **S)
    rows = carts.left_join(customers, lambda v: v.get("customer_id"), pair).join(
        ratings, lambda v: at(v, "right", "id"), pair
    )
    table_rows(
        rows,
        lambda v: {
            "id": at(v, "left", "left", "id"),
            "tier": at(v, "left", "right", "tier"),
            "balance": None,
            "score": at(v, "right", "score"),
        },
    )
    expected = compare(sql, builder, 14)
    assert any(v is None for _, v, _ in expected)


# -- the sink's key of a chain of tables ------------------------------------------------------


KEYED_SINK = """
CREATE TABLE out (id STRING, tier STRING, title STRING, PRIMARY KEY (id) NOT ENFORCED)
  WITH ('connector' = 'upsert-kafka', 'topic' = 'out');
"""


@pytest.mark.parametrize(
    "query",
    [
        # carts, customers and products all have a key column id: the rows of a
        # foreign-key join keep the carts' key, so c.id or p.id is not the sink's key
        "INSERT INTO out SELECT c.id, c.tier, p.title FROM carts k "
        "JOIN customers c ON k.customer_id = c.id JOIN products p ON k.product_id = p.id;",
        "INSERT INTO out SELECT p.id, c.tier, p.title FROM carts k "
        "JOIN customers c ON k.customer_id = c.id LEFT JOIN products p ON k.product_id = p.id;",
    ],
)
def test_the_sink_key_of_joined_tables_is_the_kept_key_not_a_namesake(query):
    error = error_of(TABLES + MORE_TABLES + KEYED_SINK + query)
    assert "the rows of carts keep its key (id, 'key.format' raw)" in error.message
    assert "INSERT" in (TABLES + MORE_TABLES + KEYED_SINK + query).splitlines()[error.line - 1]
    # the kept key itself is accepted
    compile(
        TABLES
        + MORE_TABLES
        + KEYED_SINK
        + "INSERT INTO out SELECT k.id, c.tier, p.title FROM carts k "
        "JOIN customers c ON k.customer_id = c.id JOIN products p ON k.product_id = p.id;"
    )


@pytest.mark.parametrize(
    ("key", "joins", "accepted"),
    [
        ("c.id", "LEFT JOIN accounts a ON c.id = a.customer_id", True),
        # an outer join leaves these NULL where the key is another table's
        ("a.customer_id", "LEFT JOIN accounts a ON c.id = a.customer_id", False),
        ("c.id", "RIGHT JOIN accounts a ON c.id = a.customer_id", False),
        ("a.customer_id", "RIGHT JOIN accounts a ON c.id = a.customer_id", True),
        ("c.id", "FULL JOIN accounts a ON c.id = a.customer_id", False),
        ("COALESCE(c.id, a.customer_id)", "FULL JOIN accounts a ON c.id = a.customer_id", True),
        (
            "c.id",
            "JOIN accounts a ON c.id = a.customer_id RIGHT JOIN ratings r ON c.id = r.customer_id",
            False,
        ),
        (
            "r.customer_id",
            "JOIN accounts a ON c.id = a.customer_id RIGHT JOIN ratings r ON c.id = r.customer_id",
            True,
        ),
    ],
)
def test_the_sink_key_of_outer_joined_tables_is_never_null(key, joins, accepted):
    sql = (
        TABLES
        + MORE_TABLES
        + TABLE_SINK
        + f"INSERT INTO out SELECT {key}, c.tier, a.balance, 1 FROM customers c {joins};"
    )
    if accepted:
        compile(sql)
    else:
        assert "select it into the key of the sink out" in error_of(sql).message
