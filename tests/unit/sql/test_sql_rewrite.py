"""The token-level rewrite of Flink clauses that sqlglot does not parse, and expressions."""

from __future__ import annotations

import pytest
import sqlglot

from streaming.sql import SqlError
from streaming.sql.catalog import TableDef
from streaming.sql.expressions import compile_expression
from streaming.sql.rewrite import split_statements
from streaming.sql.scopes import RowScope


def test_watermark_is_taken_out_and_positions_are_kept():
    text = (
        "CREATE TABLE o (id STRING, ts TIMESTAMP(3),\n"
        "  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND,\n"
        "  PRIMARY KEY (id) NOT ENFORCED) WITH ('topic' = 'o')"
    )
    (statement,) = split_statements(text)
    assert statement.watermark is not None
    assert (statement.watermark.column, statement.watermark.delay_ms) == ("ts", 5_000)
    assert len(statement.text) == len(text)
    assert statement.text.count("\n") == 2 and "WATERMARK" not in statement.text
    assert statement.text.index("PRIMARY") == text.index("PRIMARY")
    sqlglot.parse_one(statement.text)  # what is left parses


def test_watermark_first_and_without_delay():
    text = "CREATE TABLE o (WATERMARK FOR ts AS ts, ts BIGINT) WITH ('topic' = 'o')"
    (statement,) = split_statements(text)
    assert statement.watermark is not None and statement.watermark.delay_ms == 0
    create = sqlglot.parse_one(statement.text)
    assert [c.name for c in create.this.expressions] == ["ts"]


def test_emit_explain_and_statement_split():
    text = "EXPLAIN INSERT INTO s SELECT a FROM t EMIT FINAL;\n-- a comment; still one\nINSERT INTO s SELECT a FROM t EMIT CHANGES"
    first, second = split_statements(text)
    assert (first.explain, first.emit, second.explain, second.emit) == (
        True,
        "FINAL",
        False,
        "CHANGES",
    )
    assert "EMIT" not in first.text and "EXPLAIN" not in first.text
    assert first.text[: first.end + 1].strip() == "INSERT INTO s SELECT a FROM t"
    assert second.text.strip() == "INSERT INTO s SELECT a FROM t"


@pytest.mark.parametrize(
    ("tvf", "kind", "size", "slide"),
    [
        ("TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '5' MINUTES)", "TUMBLE", 300_000, 300_000),
        (
            "HOP(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '1' HOUR)",
            "HOP",
            3_600_000,
            60_000,
        ),
        (
            "SESSION(TABLE orders PARTITION BY a, b, DESCRIPTOR(ts), INTERVAL '2' MINUTE)",
            "SESSION",
            120_000,
            120_000,
        ),
    ],
)
def test_window_tvf_becomes_its_table(tvf, kind, size, slide):
    text = f"INSERT INTO s SELECT window_start FROM TABLE({tvf}) GROUP BY window_start"
    (statement,) = split_statements(text)
    window = statement.window_tvf
    assert window is not None
    assert (window.kind, window.table, window.column, window.size_ms, window.slide_ms) == (
        kind,
        "orders",
        "ts",
        size,
        slide,
    )
    tree = sqlglot.parse_one(statement.text)
    assert tree.expression.args["from_"].this.name == "orders"
    assert statement.text.index("orders") == text.index("orders")
    assert window.partition == (("a", "b") if kind == "SESSION" else ())


def test_session_group_window_is_renamed_in_place():
    text = "SELECT k FROM t GROUP BY session(ts, INTERVAL '1' MINUTE), k"
    (statement,) = split_statements(text)
    assert statement.text == text.replace("session", "SESSWIN")
    call = sqlglot.parse_one(statement.text).args["group"].expressions[0]
    assert call.name == "SESSWIN"


@pytest.mark.parametrize(
    ("text", "column", "message"),
    [
        ("INSERT INTO s SELECT a FROM t EMIT SOMETIMES", 36, "EMIT SOMETIMES is not supported"),
        ("CREATE TABLE o (ts BIGINT, WATERMARK FOR ts AS other) WITH ()", 48, "must be AS ts"),
        (
            "SELECT a FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts)))",
            21,
            "TUMBLE takes (TABLE t, DESCRIPTOR(ts), size)",
        ),
        (
            "SELECT a FROM TABLE(CUMULATE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTE))",
            21,
            "CUMULATE takes (TABLE t, DESCRIPTOR(ts), step, size)",
        ),
        (
            "SELECT a FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' WEEK))",
            53,
            "unsupported INTERVAL unit WEEK",
        ),
    ],
)
def test_rewrite_errors_point_at_the_clause(text, column, message):
    with pytest.raises(SqlError) as info:
        split_statements(text)
    assert message in info.value.message
    assert (info.value.line, info.value.column) == (1, column)


TABLE = TableDef(
    name="t",
    columns={"a": "BIGINT", "b": "BIGINT", "s": "STRING", "f": "BOOLEAN"},
    topic="t",
    connector="kafka",
    primary_key=(),
    key_fields=(),
    key_format="raw",
    watermark=None,
    options={},
)


def evaluate(sql: str, row: dict):
    node = sqlglot.parse_one(sql)
    return compile_expression(node, RowScope(TABLE, sql)).fn(row)


@pytest.mark.parametrize(
    ("sql", "row", "value"),
    [
        ("a / b", {"a": -7, "b": 2}, -3),
        ("a / b", {"a": 7, "b": 0}, None),
        ("a + b", {"a": 1, "b": None}, None),
        ("a > 1 AND b > 1", {"a": 0, "b": None}, False),
        ("a > 1 OR b > 1", {"a": 2, "b": None}, True),
        ("a > 1 OR b > 1", {"a": 0, "b": None}, None),
        ("NOT f", {"f": None}, None),
        ("CAST(s AS BIGINT)", {"s": "12"}, 12),
        ("CAST(s AS BIGINT)", {"s": "twelve"}, None),
        ("CAST(f AS STRING)", {"f": True}, "TRUE"),
        ("CASE a WHEN 1 THEN 'one' WHEN 2 THEN 'two' ELSE 'many' END", {"a": 2}, "two"),
        ("CASE a WHEN 1 THEN 'one' END", {"a": None}, None),
        ("s || '-' || CAST(a AS STRING)", {"s": "x", "a": 3}, "x-3"),
        ("CONCAT(s, NULL)", {"s": "x"}, None),
        ("SUBSTRING(s, 2)", {"s": "hello"}, "ello"),
        ("CHAR_LENGTH(TRIM(s))", {"s": " ab "}, 2),
        ("COALESCE(a, b, 0)", {"a": None, "b": None}, 0),
        ("s IS NULL", {"s": None}, True),
    ],
)
def test_expressions_follow_sql_null_and_type_rules(sql, row, value):
    assert evaluate(sql, row) == value
