"""``t.*`` and ``*`` beside other items, expanded to the columns they stand for
(Nexmark's q9 selects ``A.*`` from a join; Flink expands both)."""

from __future__ import annotations

from typing import Any

import duckdb
import pandas as pd
import pytest

from streaming import TopologyTestDriver, serdes
from streaming.sql import SqlError, compile
from streaming.sql.batch import to_duckdb
from streaming.sql.timestamps import format_timestamp

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


# -- ``SELECT *`` over subqueries: the subquery's output columns in order ----------------

T0 = 1_704_103_200_000  # 2024-01-01 10:00:00Z
SECOND = 1_000

BIDS = """
CREATE TABLE bid (item BIGINT, price BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'bid', 'format' = 'json');
"""


def bid_events(n: int = 40) -> list[tuple[dict[str, Any], int]]:
    """Bids on 3 items, one every 700 ms from T0, prices cycling (value, event time)."""
    return [
        (
            {"item": i % 3, "price": 10 * (1 + i % 4), "ts": format_timestamp(T0 + i * 700)},
            T0 + i * 700,
        )
        for i in range(n)
    ]


def stream_rows(sql: str, events: list[tuple[dict[str, Any], int]], *, upsert: bool) -> list:
    """The sink ``out``'s rows for the bids piped in order: every row, or (``upsert``) the
    last row of each key."""
    with TopologyTestDriver(compile(BIDS + sql)) as driver:
        bids = driver.create_input_topic("bid", key_serde=serdes.String())
        for value, ms in events:
            bids.pipe_input(None, value, timestamp=ms)
        out = driver.create_output_topic("out", key_serde=serdes.String())
        records = out.read_records_to_list()
    if not upsert:
        return [r.value for r in records]
    last = {repr(r.key): r.value for r in records}
    return [row for row in last.values() if row is not None]


def batch_rows(sql: str, events: list[tuple[dict[str, Any], int]]) -> list[dict[str, Any]]:
    """``to_duckdb``'s rows of the same statements over the bids."""
    query = to_duckdb(BIDS + sql)
    con = duckdb.connect()
    try:
        return query.run(con, {"bid": pd.DataFrame([value for value, _ in events])})
    finally:
        con.close()


def ordered(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(repr(sorted(row.items())) for row in rows)


UPSERT_OUT = """
CREATE TABLE out (item BIGINT, bids BIGINT, top BIGINT, PRIMARY KEY (item) NOT ENFORCED)
WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'key.format' = 'raw',
  'value.format' = 'json');
"""


def test_star_over_an_aggregating_subquery_is_its_columns():
    sql = (
        UPSERT_OUT
        + """
    INSERT INTO out
    SELECT * FROM (SELECT item, COUNT(*) AS bids, MAX(price) AS top FROM bid GROUP BY item);
    """
    )
    events = bid_events()
    stream = stream_rows(sql, events, upsert=True)
    assert ordered(stream) == ordered(
        [
            {"item": 0, "bids": 14, "top": 40},
            {"item": 1, "bids": 13, "top": 40},
            {"item": 2, "bids": 13, "top": 40},
        ]
    )
    assert ordered(stream) == ordered(batch_rows(sql, events))


def test_star_over_a_subquery_of_a_subquery():
    sql = (
        UPSERT_OUT
        + """
    INSERT INTO out
    SELECT * FROM (
      SELECT * FROM (SELECT item, COUNT(*) AS bids, MAX(price) AS top FROM bid GROUP BY item)
      WHERE bids > 13
    );
    """
    )
    events = bid_events()
    stream = stream_rows(sql, events, upsert=True)
    assert ordered(stream) == ordered([{"item": 0, "bids": 14, "top": 40}])
    assert ordered(stream) == ordered(batch_rows(sql, events))


def test_star_over_a_subquery_of_a_table_star():
    sql = """
    CREATE TABLE out (item BIGINT, price BIGINT, ts TIMESTAMP(3))
    WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
    INSERT INTO out SELECT * FROM (SELECT * FROM bid WHERE price > 30);
    """
    events = bid_events(8)
    stream = stream_rows(sql, events, upsert=False)
    assert stream == [value for value, _ in events if value["price"] > 30]
    assert ordered(stream) == ordered(batch_rows(sql, events))


def test_star_over_a_window_tvf_aggregation_subquery():
    sql = """
    CREATE TABLE out (item BIGINT, window_start TIMESTAMP(3), window_end TIMESTAMP(3),
      bids BIGINT
    ) WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
    INSERT INTO out SELECT * FROM (
      SELECT item, window_start, window_end, COUNT(*) AS bids
      FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECOND))
      GROUP BY item, window_start, window_end
    );
    """
    events = bid_events()
    stream = stream_rows(sql, events, upsert=False)
    # windows close once the watermark (1 s behind) passes their end: all but the last
    closed = [
        r for r in batch_rows(sql, events) if r["window_end"] <= format_timestamp(T0 + 26_300)
    ]
    assert len(stream) == 6  # 3 items in each of the two closed windows
    assert {r["window_start"] for r in stream} == {
        format_timestamp(T0),
        format_timestamp(T0 + 10 * SECOND),
    }
    assert ordered(stream) == ordered(closed)


def test_star_in_a_view_over_an_aggregating_subquery_then_star_over_the_view():
    sql = (
        UPSERT_OUT
        + """
    CREATE VIEW tops AS
    SELECT * FROM (SELECT item, COUNT(*) AS bids, MAX(price) AS top FROM bid GROUP BY item);
    INSERT INTO out SELECT * FROM tops;
    """
    )
    stream = stream_rows(sql, bid_events(), upsert=True)
    assert ordered(stream) == ordered(
        [
            {"item": 0, "bids": 14, "top": 40},
            {"item": 1, "bids": 13, "top": 40},
            {"item": 2, "bids": 13, "top": 40},
        ]
    )


def test_qualified_star_over_an_aliased_subquery():
    sql = (
        UPSERT_OUT
        + """
    INSERT INTO out
    SELECT Q.* FROM (SELECT item, COUNT(*) AS bids, MAX(price) AS top FROM bid GROUP BY item) Q;
    """
    )
    events = bid_events()
    assert ordered(stream_rows(sql, events, upsert=True)) == ordered(batch_rows(sql, events))


def test_star_over_a_table_into_a_sink_with_its_columns():
    sql = """
    CREATE TABLE out (item BIGINT, price BIGINT, ts TIMESTAMP(3))
    WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
    INSERT INTO out SELECT * FROM bid WHERE price = 40;
    """
    events = bid_events(8)
    assert stream_rows(sql, events, upsert=False) == [v for v, _ in events if v["price"] == 40]


def test_star_into_a_sink_with_other_columns_names_the_counts():
    sql = (
        UPSERT_OUT.replace("top BIGINT, ", "top BIGINT, extra BIGINT, ")
        + """
    INSERT INTO out
    SELECT * FROM (SELECT item, COUNT(*) AS bids, MAX(price) AS top FROM bid GROUP BY item);
    """
    )
    with pytest.raises(
        SqlError, match=r"line \d+, column \d+: the query has 3 columns, sink out has 4"
    ):
        compile(BIDS + sql)


def test_star_over_a_window_tvfs_rows_is_an_error_at_the_star():
    sql = """
    CREATE TABLE out (item BIGINT, price BIGINT, ts TIMESTAMP(3), ws TIMESTAMP(3),
      we TIMESTAMP(3)) WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
    INSERT INTO out SELECT * FROM (
      SELECT * FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECOND)));
    """
    with pytest.raises(SqlError, match=r"line 9, column 14: SELECT \* is not supported yet"):
        compile(BIDS + sql)


def test_create_table_as_select_star_and_a_repeated_name():
    # Flink's unique names: the second item named amount is amount0
    sql = """
    CREATE TABLE copy WITH ('connector' = 'kafka', 'topic' = 'copy', 'format' = 'json')
    AS SELECT * FROM orders;
    CREATE TABLE twice WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json')
    AS SELECT id, amount, amount * 2 AS amount FROM copy;
    """
    rows = run(sql, [{"id": 1, "cust": 7, "amount": 30}])
    assert rows == [{"id": 1, "amount": 30, "amount0": 60}]
