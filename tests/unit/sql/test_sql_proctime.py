"""``name AS PROCTIME()``: Flink's processing-time attribute, the wall clock at which a
row is read (the test driver's clock here)."""

from __future__ import annotations

import pytest
from flink_itcases import WINDOW_DATA, rows_of

from streaming import TopologyTestDriver, serdes
from streaming.sql import SqlError, compile
from streaming.sql.timestamps import format_timestamp

#: 2023-11-14 22:13:20 UTC
NOW = 1_700_000_000_000

ORDERS = """
CREATE TABLE orders (order_id STRING, region STRING, amount DOUBLE,
  proctime AS PROCTIME()
) WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json');
"""


def driver_of(sql: str) -> TopologyTestDriver:
    return TopologyTestDriver(compile(sql), initial_wall_clock_time_ms=NOW)


def test_proctime_is_the_wall_clock_when_the_row_is_read():
    sql = (
        ORDERS
        + """
CREATE TABLE out (order_id STRING, seen TIMESTAMP(3), seen_ms BIGINT)
  WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
INSERT INTO out SELECT order_id, proctime, proctime FROM orders;
"""
    )
    with driver_of(sql) as driver:
        orders = driver.create_input_topic("orders", key_serde=serdes.String())
        # the record's own timestamp plays no part
        orders.pipe_input("o1", {"order_id": "o1", "region": "EU", "amount": 1.0}, timestamp=5)
        driver.advance_wall_clock_time(1_500)
        # a proctime field in the value is not read: the column is computed
        orders.pipe_input("o2", {"order_id": "o2", "proctime": "1999-01-01 00:00:00"})
        out = driver.create_output_topic("out", key_serde=serdes.String())
        assert out.read_values_to_list() == [
            {"order_id": "o1", "seen": format_timestamp(NOW), "seen_ms": NOW},
            {"order_id": "o2", "seen": format_timestamp(NOW + 1_500), "seen_ms": NOW + 1_500},
        ]


PER_MINUTE = (
    ORDERS
    + """
CREATE TABLE out (region STRING, w_start TIMESTAMP(3), w_end TIMESTAMP(3), n BIGINT)
  WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
INSERT INTO out
SELECT region, TUMBLE_START(proctime, INTERVAL '1' MINUTE),
       TUMBLE_END(proctime, INTERVAL '1' MINUTE), COUNT(*)
FROM orders GROUP BY region, TUMBLE(proctime, INTERVAL '1' MINUTE);
"""
)


def test_a_processing_time_window_closes_on_the_wall_clock():
    with driver_of(PER_MINUTE) as driver:
        orders = driver.create_input_topic("orders", key_serde=serdes.String())
        out = driver.create_output_topic("out", key_serde=serdes.String())
        orders.pipe_input("o1", {"region": "EU"})  # 22:13:20, window 22:13-22:14
        driver.advance_wall_clock_time(10_000)
        orders.pipe_input("o2", {"region": "EU"})
        orders.pipe_input("o3", {"region": "US"})
        driver.advance_wall_clock_time(29_999)  # 22:13:59.999: the window is open
        assert out.read_values_to_list() == []
        driver.advance_wall_clock_time(1)  # 22:14:00: it closes, no record needed
        window = {"w_start": "2023-11-14 22:13:00.000", "w_end": "2023-11-14 22:14:00.000"}
        assert sorted(out.read_values_to_list(), key=repr) == [
            {"region": "EU", **window, "n": 2},
            {"region": "US", **window, "n": 1},
        ]
        orders.pipe_input("o4", {"region": "EU"})  # the next window, never late
        driver.advance_wall_clock_time(60_000)
        assert [(r["region"], r["w_start"][11:], r["n"]) for r in out.read_values_to_list()] == [
            ("EU", "22:14:00.000", 1)
        ]


def test_a_processing_time_window_over_a_table_with_event_time_too():
    # WindowAggregateITCase.testRelaxFormProctimeCascadeWindowAgg's table: both a
    # WATERMARK (event time, late rows) and a PROCTIME() column; the processing-time
    # window counts every row, late in event time or not, and no event-time window
    # closes here
    sql = """
CREATE TABLE proctime_src (
 `rowtime` TIMESTAMP(3), `int` INT, `double` DOUBLE, `float` FLOAT, `bigdec` DECIMAL(10, 2),
 `string` STRING, `name` STRING,
 `proctime` AS PROCTIME(),
 WATERMARK FOR rowtime AS rowtime - INTERVAL '1' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'src', 'format' = 'json');

CREATE TABLE out (window_start TIMESTAMP(3), window_end TIMESTAMP(3), cnt BIGINT,
  PRIMARY KEY (window_start, window_end, cnt) NOT ENFORCED)
  WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');

INSERT INTO out
SELECT
  window_start,
  window_end,
  COUNT(*)
FROM
(
    SELECT
    `name`,
    window_start,
    window_end,
    COUNT(DISTINCT `string`) AS cnt
    FROM TABLE(
      TUMBLE(TABLE proctime_src, DESCRIPTOR(proctime), INTERVAL '1' SECOND))
    GROUP BY `name`, window_start, window_end
) GROUP BY window_start, window_end;
"""
    with driver_of(sql) as driver:
        src = driver.create_input_topic("src", key_serde=serdes.String())
        for row in rows_of(WINDOW_DATA):
            src.pipe_input(None, row)
        driver.advance_wall_clock_time(1_000)
        out = driver.create_output_topic("out", key_serde=serdes.Json())
        # all eleven rows in one second of processing time: three names (a, b, NULL);
        # the outer GROUP BY is a regular (updating) aggregation, as in Flink
        rows = out.read_values_to_list()
        assert rows[-1] == {
            "window_start": format_timestamp(NOW),
            "window_end": format_timestamp(NOW + 1_000),
            "cnt": 3,
        }


def test_for_system_time_as_of_the_processing_time_is_a_lookup_join():
    # Flink's lookup join: each order meets the customer's row as it is when the order
    # is read, whatever the order's event time
    sql = """
CREATE TABLE orders (order_id STRING, customer_id STRING, order_time TIMESTAMP(3),
  proc AS PROCTIME(), WATERMARK FOR order_time AS order_time - INTERVAL '5' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json');
CREATE TABLE customers (id STRING, tier STRING, PRIMARY KEY (id) NOT ENFORCED)
  WITH ('connector' = 'upsert-kafka', 'topic' = 'customers', 'format' = 'json');
CREATE TABLE out (order_id STRING, tier STRING)
  WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
INSERT INTO out
SELECT o.order_id, c.tier
FROM orders AS o
LEFT JOIN customers FOR SYSTEM_TIME AS OF o.proc AS c ON o.customer_id = c.id;
"""
    with driver_of(sql) as driver:
        customers = driver.create_input_topic("customers", key_serde=serdes.String())
        orders = driver.create_input_topic("orders", key_serde=serdes.String())
        customers.pipe_input("c1", {"id": "c1", "tier": "gold"})
        orders.pipe_input(
            None, {"order_id": "o1", "customer_id": "c1", "order_time": "2024-01-01 10:00:00"}
        )
        customers.pipe_input("c1", {"id": "c1", "tier": "silver"})
        # an event time before the update: still the current row
        orders.pipe_input(
            None, {"order_id": "o2", "customer_id": "c1", "order_time": "2020-01-01 10:00:00"}
        )
        orders.pipe_input(
            None, {"order_id": "o3", "customer_id": "c9", "order_time": "2024-01-01 10:00:01"}
        )
        out = driver.create_output_topic("out", key_serde=serdes.String())
        assert out.read_values_to_list() == [
            {"order_id": "o1", "tier": "gold"},
            {"order_id": "o2", "tier": "silver"},
            {"order_id": "o3", "tier": None},
        ]


def test_a_view_passes_the_processing_time_on():
    sql = (
        ORDERS
        + """
CREATE VIEW eu AS SELECT region, proctime AS pt FROM orders WHERE region = 'EU';
CREATE TABLE out (w_end TIMESTAMP(3), n BIGINT)
  WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
INSERT INTO out SELECT TUMBLE_END(pt, INTERVAL '1' MINUTE), COUNT(*)
FROM eu GROUP BY TUMBLE(pt, INTERVAL '1' MINUTE);
"""
    )
    with driver_of(sql) as driver:
        orders = driver.create_input_topic("orders", key_serde=serdes.String())
        for region in ("EU", "US", "EU"):
            orders.pipe_input(None, {"region": region})
        driver.advance_wall_clock_time(40_000)
        out = driver.create_output_topic("out", key_serde=serdes.String())
        assert out.read_values_to_list() == [{"w_end": "2023-11-14 22:14:00.000", "n": 2}]


@pytest.mark.parametrize(
    ("ddl", "where", "message"),
    [
        (
            "CREATE TABLE t (k STRING, p AS PROCTIME(), PRIMARY KEY (k) NOT ENFORCED) "
            "WITH ('connector' = 'upsert-kafka', 'topic' = 't');",
            "p AS",
            "p AS PROCTIME() on an upsert table is not supported yet",
        ),
        (
            "CREATE TABLE t (k STRING, p AS PROCTIME(), WATERMARK FOR p AS p) "
            "WITH ('topic' = 't');",
            "WATERMARK",
            "WATERMARK FOR p: p is the processing time (PROCTIME())",
        ),
        (
            "CREATE TABLE t (k STRING, p AS PROCTIME(), q AS PROCTIME()) WITH ('topic' = 't');",
            "q AS",
            "a table has one PROCTIME() column: p is already its processing time",
        ),
        (
            "CREATE TABLE t (k STRING, p AS PROCTIME()) WITH ('topic' = 't', 'key.fields' = 'p');",
            "p AS",
            "p AS PROCTIME() is computed: it is not a key column",
        ),
    ],
)
def test_proctime_declaration_errors(ddl, where, message):
    with pytest.raises(SqlError) as info:
        compile(ddl)
    assert message in info.value.message
    assert (info.value.line, info.value.column) == (1, ddl.index(where) + 1), str(info.value)


def test_an_interval_join_on_the_processing_time_names_it():
    sql = """
CREATE TABLE a (id STRING, p AS PROCTIME()) WITH ('topic' = 'a');
CREATE TABLE b (id STRING, p AS PROCTIME()) WITH ('topic' = 'b');
CREATE TABLE out (x STRING) WITH ('topic' = 'out');
INSERT INTO out SELECT a.id FROM a JOIN b ON a.id = b.id
  AND b.p BETWEEN a.p - INTERVAL '1' MINUTE AND a.p;
"""
    with pytest.raises(SqlError) as info:
        compile(sql)
    assert "a join bound on the processing time (p AS PROCTIME() of b)" in info.value.message
    assert (info.value.line, info.value.column) == (6, 7)


def test_a_proctime_table_reads_and_writes_formats_without_the_column():
    # the CSV value holds the physical columns only
    sql = """
CREATE TABLE src (id STRING, n BIGINT, p AS PROCTIME())
  WITH ('topic' = 'src', 'format' = 'csv');
CREATE TABLE out (id STRING, n BIGINT, p TIMESTAMP(3)) WITH ('topic' = 'out', 'format' = 'csv');
INSERT INTO out SELECT id, n, p FROM src;
"""
    with driver_of(sql) as driver:
        src = driver.create_input_topic(
            "src", key_serde=serdes.String(), value_serde=serdes.String()
        )
        src.pipe_input(None, "a,1")
        out = driver.create_output_topic(
            "out", key_serde=serdes.String(), value_serde=serdes.String()
        )
        assert out.read_values_to_list() == [f"a,1,{format_timestamp(NOW)}"]
