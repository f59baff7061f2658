"""``t.*`` and ``*`` beside other items, expanded to the columns they stand for
(Nexmark's q9 selects ``A.*`` from a join; Flink expands both)."""

from __future__ import annotations

from streaming import TopologyTestDriver, serdes
from streaming.sql import compile

DDL = """
CREATE TABLE orders (id BIGINT, cust BIGINT, amount BIGINT)
WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json');
CREATE TABLE customers (cid BIGINT, name STRING)
WITH ('connector' = 'kafka', 'topic' = 'customers', 'format' = 'json');
"""


def run(sql: str, orders: list[dict], customers: list[dict] = ()) -> list[dict]:
    with TopologyTestDriver(compile(DDL + sql)) as driver:
        if customers:
            people = driver.create_input_topic("customers", key_serde=serdes.String())
            for row in customers:
                people.pipe_input(str(row["cid"]), row)
        source = driver.create_input_topic("orders", key_serde=serdes.String())
        for row in orders:
            source.pipe_input(str(row["id"]), row)
        out = driver.create_output_topic("out", key_serde=serdes.String())
        return [r.value for r in out.read_records_to_list()]


def test_qualified_star_in_a_join_is_the_tables_columns():
    sql = """
    CREATE TABLE out (id BIGINT, cust BIGINT, amount BIGINT, name STRING)
    WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
    INSERT INTO out SELECT O.*, C.name FROM orders O JOIN customers C ON O.cust = C.cid;
    """
    rows = run(sql, [{"id": 1, "cust": 7, "amount": 30}], [{"cid": 7, "name": "ann"}])
    assert rows == [{"id": 1, "cust": 7, "amount": 30, "name": "ann"}]


def test_star_beside_an_expression_in_a_view():
    sql = """
    CREATE VIEW big AS SELECT *, amount * 2 AS doubled FROM orders WHERE amount > 10;
    CREATE TABLE out (id BIGINT, doubled BIGINT)
    WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
    INSERT INTO out SELECT id, doubled FROM big;
    """
    rows = run(sql, [{"id": 1, "cust": 7, "amount": 30}, {"id": 2, "cust": 7, "amount": 5}])
    assert rows == [{"id": 1, "doubled": 60}]


def test_star_over_a_join_is_every_column_of_both():
    sql = """
    CREATE TABLE out (id BIGINT, cust BIGINT, amount BIGINT, cid BIGINT, name STRING)
    WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
    INSERT INTO out SELECT * FROM orders O JOIN customers C ON O.cust = C.cid;
    """
    rows = run(sql, [{"id": 1, "cust": 7, "amount": 30}], [{"cid": 7, "name": "ann"}])
    assert rows == [{"id": 1, "cust": 7, "amount": 30, "cid": 7, "name": "ann"}]
