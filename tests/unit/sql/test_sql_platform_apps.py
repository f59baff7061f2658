"""The platform's SQL stream applications without a broker: topic renaming (CTAS
included), lineage (CTAS, views, subqueries) and the catalog offered to queries."""

from __future__ import annotations

from pathlib import Path

from pipelines.streams.sql.app import PlatformSqlCompiler, SqlApp
from pipelines.streams.sql.lineage import read_lineage
from streaming import StreamsBuilder
from streaming.sql.results import catalog_of

ORDERS = """CREATE TABLE orders (order_id STRING, region STRING, amount DOUBLE, event_time BIGINT,
  WATERMARK FOR event_time AS event_time - INTERVAL '1' MINUTE)
  WITH ('connector'='kafka','topic'='orders','format'='json');
"""


def test_a_ctas_writes_the_renamed_topic() -> None:
    text = (
        ORDERS
        + """CREATE TABLE big WITH ('connector'='kafka','topic'='big','format'='json')
  AS SELECT order_id, amount FROM orders WHERE amount > 100;
CREATE TABLE out (order_id STRING, amount DOUBLE)
  WITH ('connector'='kafka','topic'='out','format'='json');
INSERT INTO out SELECT order_id, amount FROM big;
"""
    )
    renames = {"orders": "orders-x", "big": "big-x", "out": "out-x"}
    compiler = PlatformSqlCompiler(text, renames, StreamsBuilder())
    compiler.compile_all()
    described = str(compiler.builder.build().describe())
    assert "(topic: big-x)" in described
    assert "(topic: big)" not in described
    assert "[big-x]" in described and "(topic: out-x)" in described
    assert {n: t.topic for n, t in compiler.tables.items()} == renames


def test_lineage_of_a_ctas() -> None:
    text = (
        ORDERS
        + """CREATE TABLE big WITH ('connector'='kafka','topic'='big-orders','format'='json')
  AS SELECT order_id, amount FROM orders WHERE amount > 100;"""
    )
    lineage = read_lineage(text)
    assert lineage.source_topics == ("orders",)
    assert lineage.sink_topics == ("big-orders",)


def test_lineage_expands_views_and_subqueries() -> None:
    text = (
        ORDERS
        + """CREATE VIEW v AS SELECT order_id, region, amount FROM orders WHERE amount > 100;
CREATE VIEW w AS SELECT order_id, amount FROM v;
CREATE TABLE out (order_id STRING, amount DOUBLE)
  WITH ('connector'='kafka','topic'='out','format'='json');
INSERT INTO out SELECT order_id, amount FROM w;
CREATE TABLE out2 (order_id STRING, amount DOUBLE)
  WITH ('connector'='kafka','topic'='out2','format'='json');
INSERT INTO out2 SELECT order_id, amount FROM (SELECT order_id, amount FROM orders) AS q;
"""
    )
    lineage = read_lineage(text)
    assert [t.name for t in lineage.sources] == ["orders"]
    assert lineage.source_topics == ("orders",)
    assert lineage.sink_topics == ("out", "out2")


def test_the_registered_catalog_leaves_views_out(tmp_path: Path) -> None:
    file = tmp_path / "app.sql"
    file.write_text(
        ORDERS
        + """CREATE VIEW v AS SELECT order_id, amount FROM orders WHERE amount > 100;
CREATE TABLE out (order_id STRING, amount DOUBLE)
  WITH ('connector'='kafka','topic'='out','format'='json');
INSERT INTO out SELECT order_id, amount FROM v;
"""
    )
    catalog = catalog_of(SqlApp("app-sql", file).build())
    assert catalog is not None
    assert set(catalog.tables) == {"orders", "out"}
