"""Flink SQL as Flink users write it: statement sets, backtick identifiers, fractional
intervals, subqueries without an alias, INSERT column lists; and every construct the
compiler does not handle refused by name, at its line and column."""

from __future__ import annotations

import pytest
from flink_itcases import run

from streaming.sql import SqlError, compile

TABLES = """CREATE TABLE orders (order_id STRING, region STRING, amount DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json');
CREATE TABLE shipments (order_id STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
  WITH ('connector' = 'kafka', 'topic' = 'shipments', 'format' = 'json');
CREATE TABLE out (a STRING, b DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
CREATE TABLE big (a STRING, b DOUBLE) WITH ('connector' = 'kafka', 'topic' = 'big', 'format' = 'json');
"""

ORDERS = [
    ("orders", {"order_id": "o1", "region": "EU", "amount": 5.0, "ts": "2024-01-01 10:00:00"}),
    ("orders", {"order_id": "o2", "region": "US", "amount": 50.0, "ts": "2024-01-01 10:00:01"}),
]


@pytest.mark.parametrize(
    "statement_set",
    [
        "EXECUTE STATEMENT SET\nBEGIN\n{inserts}\nEND;",
        "BEGIN STATEMENT SET;\n{inserts}\nEND;",
        "execute statement set begin {inserts} end;",
    ],
)
def test_a_statement_set_runs_its_inserts_in_one_application(statement_set):
    inserts = (
        "INSERT INTO out SELECT region, amount FROM orders;\n"
        "INSERT INTO big SELECT region, amount FROM orders WHERE amount > 10;"
    )
    sql = TABLES + statement_set.format(inserts=inserts)
    assert run(sql, ORDERS, "out") == [{"a": "EU", "b": 5.0}, {"a": "US", "b": 50.0}]
    assert run(sql, ORDERS, "big") == [{"a": "US", "b": 50.0}]
    # one source node for the two INSERTs over orders
    assert str(compile(sql).describe()).count("Source:") == 1


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        (
            "BEGIN STATEMENT SET;\nINSERT INTO out SELECT region, amount FROM orders;\n",
            "BEGIN",
            "STATEMENT SET without END",
        ),
        ("INSERT INTO out SELECT region, amount FROM orders;\nEND;", "END", "END without BEGIN"),
        (
            "BEGIN STATEMENT SET;\nCREATE VIEW v AS SELECT region FROM orders;\nEND;",
            "CREATE VIEW",
            "a STATEMENT SET holds INSERT INTO statements only",
        ),
    ],
)
def test_statement_set_errors(text, where, message):
    with pytest.raises(SqlError) as info:
        compile(TABLES + text)
    assert message in info.value.message
    offset = len(TABLES) + text.index(where)
    sql = TABLES + text
    line = sql.count("\n", 0, offset) + 1
    assert (info.value.line, info.value.column) == (line, offset - sql.rfind("\n", 0, offset))


def test_backtick_identifiers_are_flinks_quoting():
    sql = TABLES + (
        "INSERT INTO `out` SELECT `region`, `amount` FROM `orders` "
        "WHERE `region` <> 'a `quoted` text' -- a `comment`\n;"
    )
    assert run(sql, ORDERS, "out") == [{"a": "EU", "b": 5.0}, {"a": "US", "b": 50.0}]


def test_an_unclosed_backtick_is_an_error_at_it():
    with pytest.raises(SqlError) as info:
        compile("INSERT INTO out SELECT `region FROM orders;")
    assert "a backtick identifier needs its closing `" in info.value.message
    assert (info.value.line, info.value.column) == (1, 24)


def test_intervals_take_fractions_of_their_unit():
    sql = TABLES + (
        "CREATE TABLE n (w TIMESTAMP(3), c BIGINT) WITH ('topic' = 'n', 'format' = 'json');\n"
        "INSERT INTO n SELECT TUMBLE_START(ts, INTERVAL '0.5' SECOND), COUNT(*) FROM orders "
        "GROUP BY TUMBLE(ts, INTERVAL '0.5' SECOND);"
    )
    rows = [*ORDERS, ("orders", {"order_id": "o3", "ts": "2024-01-01 10:00:05"})]
    assert run(sql, rows, "n") == [
        {"w": "2024-01-01 10:00:00.000", "c": 1},
        {"w": "2024-01-01 10:00:01.000", "c": 1},
    ]
    with pytest.raises(SqlError) as info:
        compile(sql.replace("'0.5' SECOND", "'0.0005' SECOND"))
    assert "INTERVAL '0.0005' SECOND is not a whole number of milliseconds" in info.value.message


def test_a_subquery_in_from_needs_no_alias():
    sql = TABLES + (
        "INSERT INTO out SELECT region, amount FROM (SELECT region, amount FROM orders "
        "WHERE amount > 10) WHERE region <> 'EU';"
    )
    assert run(sql, ORDERS, "out") == [{"a": "US", "b": 50.0}]


def test_nested_subqueries_without_aliases():
    sql = TABLES + (
        "INSERT INTO out SELECT region, amount FROM (SELECT region, amount FROM (SELECT "
        "region, amount FROM orders WHERE amount > 1) WHERE amount < 20);"
    )
    assert run(sql, ORDERS, "out") == [{"a": "EU", "b": 5.0}]


def test_subqueries_without_aliases_as_both_sides_of_a_join():
    # each gets its own internal name; unqualified columns resolve across them
    sql = TABLES + (
        "INSERT INTO out SELECT region, amount FROM (SELECT order_id, region, amount, ts "
        "FROM orders) JOIN (SELECT order_id AS sid, ts AS sts FROM shipments) "
        "ON order_id = sid AND sts BETWEEN ts AND ts + INTERVAL '1' HOUR;"
    )
    rows = [*ORDERS, ("shipments", {"order_id": "o2", "ts": "2024-01-01 10:30:00"})]
    assert run(sql, rows, "out") == [{"a": "US", "b": 50.0}]


def test_an_insert_column_list_maps_by_name():
    sql = TABLES + "INSERT INTO out (b, a) SELECT amount, region FROM orders;"
    assert run(sql, ORDERS[:1], "out") == [{"a": "EU", "b": 5.0}]
    sql = TABLES + "INSERT INTO out (a) SELECT region FROM orders;"
    assert run(sql, ORDERS[:1], "out") == [{"a": "EU", "b": None}]
    with pytest.raises(SqlError) as info:
        compile(TABLES + "INSERT INTO out (a, x) SELECT region, amount FROM orders;")
    assert "unknown column x in table out" in info.value.message


#: (statement, the text the error points at, what the message says)
UNSUPPORTED = [
    (
        "INSERT INTO out SELECT o.region, SUM(o.amount) OVER (PARTITION BY o.region ORDER BY "
        "o.ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM orders o JOIN shipments s "
        "ON o.order_id = s.order_id AND s.ts BETWEEN o.ts AND o.ts + INTERVAL '1' HOUR;",
        "SUM(o.amount) OVER",
        "OVER aggregation (SUM(o.amount) OVER (...)) is not supported yet here: only in the "
        "SELECT list of a query over one table",
    ),
    (
        "INSERT INTO out SELECT region, amount FROM orders WINDOW w AS (PARTITION BY region "
        "ORDER BY ts);",
        "WINDOW w",
        "a named window (WINDOW w AS ...) without OVER w is not supported yet",
    ),
    (
        "INSERT INTO out SELECT region, amount FROM (SELECT *, RANK() OVER (PARTITION BY "
        "region ORDER BY amount DESC) AS rownum FROM orders) WHERE rownum > 3;",
        "RANK()",
        "Top-N or deduplication (RANK() OVER (PARTITION BY ... ORDER BY ...)) is not supported yet",
    ),
    (
        "INSERT INTO out SELECT region, amount FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY "
        "window_start, window_end ORDER BY amount DESC) AS rownum FROM TABLE(SESSION(TABLE "
        "orders PARTITION BY region, DESCRIPTOR(ts), INTERVAL '10' MINUTES))) WHERE rownum <= 3;",
        "TABLE(SESSION",
        "window Top-N or window deduplication over a SESSION window is not supported",
    ),
    (
        "INSERT INTO out SELECT region, amount FROM orders MATCH_RECOGNIZE (PARTITION BY "
        "region ORDER BY ts MEASURES A.region AS region, B.amount AS amount ONE ROW PER MATCH "
        "AFTER MATCH SKIP PAST LAST ROW PATTERN (A B | C) DEFINE A AS A.amount < 10, "
        "B AS B.amount > 100) AS T;",
        "| C)",
        "an alternation (|) in a pattern is not supported (as in Flink)",
    ),
    (
        "INSERT INTO out SELECT region, SUM(amount) FROM TABLE(CUMULATE(TABLE orders, "
        "DESCRIPTOR(ts), INTERVAL '2' MINUTES, INTERVAL '10' MINUTES, INTERVAL '1' MINUTES)) "
        "GROUP BY window_start, window_end, region;",
        "INTERVAL '1' MINUTES",
        "a CUMULATE window offset (its last argument) is not supported yet",
    ),
    (
        "INSERT INTO out SELECT region, SUM(amount) FROM TABLE(TUMBLE(TABLE orders, "
        "DESCRIPTOR(ts), INTERVAL '1' DAY, INTERVAL '8' HOUR)) "
        "GROUP BY window_start, window_end, region;",
        "INTERVAL '8' HOUR",
        "a TUMBLE window offset (its last argument) is not supported yet",
    ),
    (
        "INSERT INTO out SELECT region, amount FROM orders, LATERAL TABLE(split(region)) AS "
        "T(word);",
        "split(region)",
        "unknown table function split",
    ),
    (
        "INSERT INTO out SELECT region, amount FROM orders UNION ALL SELECT region, amount "
        "FROM orders;",
        "UNION",
        "UNION ALL is not supported yet",
    ),
    (
        "INSERT INTO out WITH q AS (SELECT region, amount FROM orders) SELECT region, amount "
        "FROM q;",
        "WITH",
        "WITH (a common table expression) is not supported yet",
    ),
    (
        "INSERT INTO out SELECT region, amount FROM orders WHERE order_id IN "
        "(SELECT order_id FROM shipments);",
        "SELECT order_id FROM shipments",
        "a subquery in an expression (IN, EXISTS or a scalar subquery) is not supported yet",
    ),
    (
        "INSERT INTO out SELECT region, amount FROM orders QUALIFY ROW_NUMBER() OVER "
        "(PARTITION BY region ORDER BY ts) = 1;",
        "QUALIFY",
        "QUALIFY is not supported yet",
    ),
    (
        "INSERT INTO out SELECT /*+ OPTIONS('scan.startup.mode'='earliest-offset') */ region, "
        "amount FROM orders;",
        "/*+",
        "a hint (/*+ ... */) is not supported yet",
    ),
    (
        "INSERT INTO out SELECT region, amount FROM orders /*+ OPTIONS('scan.startup.mode'="
        "'earliest-offset') */ WHERE amount > 1;",
        "/*+",
        "a hint (/*+ ... */) is not supported yet",
    ),
    ("INSERT INTO out VALUES ('a', 1.0);", "VALUES", "INSERT INTO ... VALUES is not supported yet"),
    (
        "INSERT OVERWRITE out SELECT region, amount FROM orders;",
        "OVERWRITE",
        "INSERT OVERWRITE is not supported",
    ),
    (
        "INSERT INTO out SELECT DISTINCT region, amount FROM orders;",
        "DISTINCT",
        "DISTINCT is not supported yet",
    ),
    (
        "INSERT INTO out SELECT region, amount FROM orders ORDER BY ts LIMIT 3;",
        "ORDER BY",
        "ORDER BY is not supported yet",
    ),
    (
        "INSERT INTO out SELECT region, amount FROM orders WHERE ts > CURRENT_TIMESTAMP;",
        "ts > CURRENT_TIMESTAMP",
        "unsupported expression CURRENT_TIMESTAMP()",
    ),
    (
        "CREATE FUNCTION f AS 'no_such_module.f' LANGUAGE PYTHON;",
        "'no_such_module.f'",
        "CREATE FUNCTION f: cannot import module no_such_module",
    ),
    (
        "CREATE TEMPORARY SYSTEM FUNCTION f AS 'com.acme.F' LANGUAGE JAVA;",
        "'com.acme.F'",
        "CREATE FUNCTION f: the Java class com.acme.F cannot be loaded here (no JVM)",
    ),
    (
        "CREATE TABLE m (id STRING, METADATA FROM 'timestamp') WITH ('topic' = 'm');",
        "METADATA",
        "METADATA declares a column of a CREATE TABLE's column list",
    ),
    (
        "CREATE TABLE o3 WITH ('topic' = 'x') LIKE orders;",
        "o3",
        "CREATE TABLE ... LIKE is not supported yet",
    ),
    (
        "INSERT INTO out SELECT region, SUM(amount) FROM (SELECT region, SUM(amount) AS amount, "
        "TUMBLE_ROWTIME(ts, INTERVAL '1' MINUTE) AS rt FROM orders GROUP BY region, "
        "TUMBLE(ts, INTERVAL '1' MINUTE)) GROUP BY region, TUMBLE(rt, INTERVAL '1' HOUR);",
        "TUMBLE_ROWTIME",
        "TUMBLE_ROWTIME (a group window's time attribute) is not supported yet",
    ),
]


@pytest.mark.parametrize(("statement", "at", "message"), UNSUPPORTED)
def test_an_unsupported_construct_is_named_at_its_position(statement, at, message):
    with pytest.raises(SqlError) as info:
        compile(TABLES + statement)
    assert message in info.value.message
    line = TABLES.count("\n") + 1
    assert (info.value.line, info.value.column) == (line, statement.index(at) + 1), str(info.value)
