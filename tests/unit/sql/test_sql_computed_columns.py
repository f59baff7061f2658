"""Flink's computed columns (``name AS expression``) and Kafka METADATA columns
(``name type METADATA [FROM 'key'] [VIRTUAL]``) in CREATE TABLE, through the test driver
(which reads every record from partition 0, offsets counting from 0 per topic)."""

from __future__ import annotations

from typing import Any

import duckdb
import pandas as pd
import pytest

from streaming import TopologyTestDriver, serdes
from streaming.sql import SqlError, compile
from streaming.sql.batch import to_duckdb
from streaming.sql.timestamps import format_timestamp

S = {"key_serde": serdes.String(), "value_serde": serdes.Json()}
T0 = 1_700_000_000_000

PAYMENTS = """
CREATE TABLE payments (
  payment_id STRING,
  region STRING,
  amount DOUBLE,
  paid_at BIGINT,
  ts AS TO_TIMESTAMP_LTZ(paid_at, 3),
  cents AS CAST(amount * 100 AS BIGINT),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'payments', 'format' = 'json');
"""

CLICKS = """
CREATE TABLE clicks (
  user_id STRING,
  url STRING,
  event_time TIMESTAMP_LTZ(3) METADATA FROM 'timestamp',
  part INT METADATA FROM 'partition' VIRTUAL,
  `offset` BIGINT METADATA VIRTUAL,
  src STRING METADATA FROM 'topic' VIRTUAL,
  WATERMARK FOR event_time AS event_time - INTERVAL '1' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'clicks', 'format' = 'json');
"""

WINDOWED_SINK = """
CREATE TABLE out (region STRING, w_start TIMESTAMP(3), n BIGINT, total DOUBLE)
  WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
"""


def run(sql: str, topic: str, records: list[tuple[str, dict[str, Any], int]], sink: str) -> list:
    """The records ``sql`` writes to ``sink`` for ``records`` (key, value, timestamp)."""
    with TopologyTestDriver(compile(sql)) as driver:
        source = driver.create_input_topic(topic, **S)
        for key, value, timestamp in records:
            source.pipe_input(key, value, timestamp=timestamp)
        return driver.create_output_topic(sink, **S).read_records_to_list()


def test_a_computed_column_is_evaluated_per_row_and_not_read_from_the_value():
    sql = (
        PAYMENTS
        + """
CREATE TABLE out (payment_id STRING, ts TIMESTAMP(3), cents BIGINT, doubled BIGINT)
  WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
INSERT INTO out SELECT payment_id, ts, cents, cents * 2 FROM payments WHERE cents > 100;
"""
    )
    rows = [
        ("p1", {"payment_id": "p1", "amount": 12.5, "paid_at": T0, "ts": "1999-01-01"}, 1),
        ("p2", {"payment_id": "p2", "amount": 0.5, "paid_at": T0 + 1}, 1),
        ("p3", {"payment_id": "p3", "amount": 2.0, "paid_at": None, "cents": 7}, 1),
    ]
    out = run(sql, "payments", rows, "out")
    assert [r.value for r in out] == [
        {"payment_id": "p1", "ts": format_timestamp(T0), "cents": 1250, "doubled": 2500},
        {"payment_id": "p3", "ts": None, "cents": 200, "doubled": 400},
    ]


WINDOWED = """
INSERT INTO out
SELECT region, window_start, COUNT(*), SUM(amount)
FROM TABLE(TUMBLE(TABLE {table}, DESCRIPTOR({time}), INTERVAL '10' SECOND))
GROUP BY region, window_start, window_end;
"""

EXPLICIT = """
CREATE TABLE explicit (payment_id STRING, region STRING, amount DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'explicit', 'format' = 'json');
"""

#: (offset from T0 in ms, region, amount): out of order within the 5 s delay, one late
TRACE = [
    (0, "EU", 1.0),
    (3_000, "US", 2.0),
    (9_000, "EU", 4.0),
    (6_000, "EU", 8.0),
    (12_000, "US", 16.0),
    (16_000, "EU", 32.0),
    (2_000, "EU", 64.0),  # late: stream time 16 s - 5 s passed the first window's end
    (31_000, "EU", 128.0),
]


def explicit_results() -> list[dict[str, Any]]:
    """The windows of the trace over an explicit TIMESTAMP(3) event-time column."""
    rows = [
        (
            f"p{i}",
            {"payment_id": f"p{i}", "region": r, "amount": a, "ts": format_timestamp(T0 + d)},
            0,
        )
        for i, (d, r, a) in enumerate(TRACE)
    ]
    sql = EXPLICIT + WINDOWED_SINK + WINDOWED.format(table="explicit", time="ts")
    return [r.value for r in run(sql, "explicit", rows, "out")]


def test_a_window_over_a_computed_rowtime_equals_one_over_an_explicit_timestamp():
    rows = [
        (f"p{i}", {"payment_id": f"p{i}", "region": r, "amount": a, "paid_at": T0 + d}, 0)
        for i, (d, r, a) in enumerate(TRACE)
    ]
    sql = PAYMENTS + WINDOWED_SINK + WINDOWED.format(table="payments", time="ts")
    computed = [r.value for r in run(sql, "payments", rows, "out")]
    expected = explicit_results()
    assert computed == expected
    # the windows that closed: [T0, +10 s) without the late row, [T0 + 10 s, +20 s)
    assert {(r["region"], r["n"], r["total"]) for r in expected} == {
        ("EU", 3, 13.0),
        ("US", 1, 2.0),
        ("US", 1, 16.0),
        ("EU", 1, 32.0),
    }


def test_a_window_over_the_record_timestamp_equals_one_over_an_explicit_timestamp():
    sql = (
        CLICKS.replace("url STRING", "region STRING, amount DOUBLE")
        + WINDOWED_SINK
        + WINDOWED.format(table="clicks", time="event_time")
    )
    rows = [(f"c{i}", {"region": r, "amount": a}, T0 + d) for i, (d, r, a) in enumerate(TRACE)]
    assert [r.value for r in run(sql, "clicks", rows, "out")] == explicit_results()


def test_metadata_columns_read_the_kafka_record():
    sql = (
        CLICKS
        + """
CREATE TABLE out (user_id STRING, seen TIMESTAMP(3), seen_ms BIGINT, part INT, o BIGINT,
  src STRING) WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
INSERT INTO out SELECT user_id, event_time, event_time, part, `offset`, src FROM clicks;
"""
    )
    # a field named after a metadata column in the value is not read
    rows = [("u1", {"user_id": "u1", "part": 9}, T0), ("u2", {"user_id": "u2"}, T0 + 7)]
    out = run(sql, "clicks", rows, "out")
    assert [(r.value, r.timestamp) for r in out] == [
        (
            {
                "user_id": "u1",
                "seen": format_timestamp(T0),
                "seen_ms": T0,
                "part": 0,
                "o": 0,
                "src": "clicks",
            },
            T0,
        ),
        (
            {
                "user_id": "u2",
                "seen": format_timestamp(T0 + 7),
                "seen_ms": T0 + 7,
                "part": 0,
                "o": 1,
                "src": "clicks",
            },
            T0 + 7,
        ),
    ]


def test_a_computed_column_may_read_a_metadata_column():
    sql = """
CREATE TABLE events (id STRING, ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp',
  second_of AS ts + INTERVAL '1' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'events', 'format' = 'json');
CREATE TABLE out (id STRING, later BIGINT)
  WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
INSERT INTO out SELECT id, second_of FROM events;
"""
    out = run(sql, "events", [("e", {"id": "e"}, T0)], "out")
    assert [r.value for r in out] == [{"id": "e", "later": T0 + 1_000}]


SINK_WITH_TIMESTAMP = """
CREATE TABLE stamped (payment_id STRING, amount DOUBLE,
  written_at TIMESTAMP(3) METADATA FROM 'timestamp',
  doubled AS amount * 2
) WITH ('connector' = 'kafka', 'topic' = 'stamped', 'format' = 'json');
"""


def test_a_sink_writes_its_metadata_timestamp_as_the_record_timestamp():
    sql = (
        PAYMENTS
        + SINK_WITH_TIMESTAMP
        + "INSERT INTO stamped SELECT payment_id, amount, ts FROM payments;"
    )
    rows = [
        ("p1", {"payment_id": "p1", "amount": 1.5, "paid_at": T0 + 42}, 5),
        ("p2", {"payment_id": "p2", "amount": 2.5, "paid_at": None}, 6),
    ]
    out = run(sql, "payments", rows, "stamped")
    # the timestamp is the record's, not a field; the computed column is not written
    assert [(r.value, r.timestamp) for r in out] == [
        ({"payment_id": "p1", "amount": 1.5}, T0 + 42),
        ({"payment_id": "p2", "amount": 2.5}, 6),
    ]


def test_an_insert_with_a_column_list_targets_the_physical_and_metadata_columns():
    sql = (
        PAYMENTS
        + SINK_WITH_TIMESTAMP
        + "INSERT INTO stamped (written_at, payment_id) SELECT ts, payment_id FROM payments;"
    )
    out = run(sql, "payments", [("p1", {"payment_id": "p1", "paid_at": T0}, 1)], "stamped")
    assert [(r.value, r.timestamp) for r in out] == [({"payment_id": "p1", "amount": None}, T0)]


def test_reading_a_sink_with_computed_columns_back_evaluates_them():
    sql = (
        PAYMENTS
        + SINK_WITH_TIMESTAMP
        + """
CREATE TABLE out (payment_id STRING, doubled DOUBLE, written_at BIGINT)
  WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
INSERT INTO out SELECT payment_id, doubled, written_at FROM stamped;
"""
    )
    with TopologyTestDriver(compile(sql)) as driver:
        driver.create_input_topic("stamped", **S).pipe_input(
            "k", {"payment_id": "p", "amount": 4.0}, timestamp=T0
        )
        out = driver.create_output_topic("out", **S).read_values_to_list()
    assert out == [{"payment_id": "p", "doubled": 8.0, "written_at": T0}]


def error_of(sql: str) -> SqlError:
    with pytest.raises(SqlError) as info:
        compile(sql)
    return info.value


def at(sql: str, fragment: str) -> tuple[int, int]:
    """The line and column where ``fragment`` first starts in ``sql``."""
    offset = sql.index(fragment)
    return sql.count("\n", 0, offset) + 1, offset - (sql.rfind("\n", 0, offset) + 1) + 1


def test_insert_into_a_computed_column_is_an_error():
    sql = (
        PAYMENTS
        + SINK_WITH_TIMESTAMP
        + ("INSERT INTO stamped (payment_id, doubled) SELECT payment_id, amount FROM payments;")
    )
    error = error_of(sql)
    assert "doubled is a computed column of stamped" in error.message
    assert (error.line, error.column) == at(sql, "doubled) SELECT")


def test_a_query_writes_as_many_columns_as_the_sink_persists():
    sql = (
        PAYMENTS
        + SINK_WITH_TIMESTAMP
        + ("INSERT INTO stamped SELECT payment_id, amount, ts, amount FROM payments;")
    )
    assert "sink stamped has 3" in error_of(sql).message


def test_insert_into_a_virtual_metadata_column_is_an_error():
    sql = CLICKS + ("INSERT INTO clicks (user_id, part) SELECT user_id, part FROM clicks;")
    error = error_of(sql)
    assert "part is a VIRTUAL METADATA column of clicks" in error.message


@pytest.mark.parametrize(
    ("column", "message"),
    [
        (
            "o BIGINT METADATA FROM 'offset'",
            "METADATA FROM 'offset' (o) is read-only: declare it VIRTUAL",
        ),
        ("p INT METADATA FROM 'partition'", "METADATA FROM 'partition' (p) is read-only"),
        (
            "k STRING METADATA FROM 'key' VIRTUAL",
            "invalid metadata key 'key' in column 'k': the kafka connector supports the "
            "following metadata keys for reading: timestamp, partition, offset, topic",
        ),
        ("timestamp_type STRING METADATA VIRTUAL", "invalid metadata key 'timestamp_type'"),
        (
            "tt STRING METADATA FROM 'timestamp-type' VIRTUAL",
            "METADATA FROM 'timestamp-type' (tt) is not supported yet",
        ),
        ("h STRING METADATA FROM 'headers'", "METADATA FROM 'headers' (h) is not supported yet"),
        ("t STRING METADATA FROM 'timestamp'", "METADATA FROM 'timestamp' is TIMESTAMP_LTZ(3)"),
    ],
)
def test_metadata_errors_name_the_column_and_the_key(column: str, message: str):
    sql = f"CREATE TABLE t (id STRING,\n  {column}\n) WITH ('connector' = 'kafka', 'topic' = 't');"
    error = error_of(sql)
    assert message in error.message
    assert (error.line, error.column) == at(sql, "METADATA")


@pytest.mark.parametrize(
    ("ddl", "message", "where"),
    [
        (
            "CREATE TABLE t (a BIGINT, b AS a + 1, c AS b + 1) WITH ('topic' = 't');",
            "a computed column reads the physical and METADATA columns of t: b is computed",
            "b + 1)",
        ),
        (
            "CREATE TABLE t (a BIGINT, b AS nope + 1) WITH ('topic' = 't');",
            "unknown column nope in table t",
            "nope",
        ),
        (
            "CREATE TABLE t (a BIGINT, b AS SUM(a)) WITH ('topic' = 't');",
            "is not allowed in a computed column",
            "SUM",
        ),
        (
            "CREATE TABLE t (a STRING, b AS UPPER(a), PRIMARY KEY (a) NOT ENFORCED) "
            "WITH ('topic' = 't');",
            "computed column b on an upsert table is not supported yet",
            "b AS UPPER",
        ),
        (
            "CREATE TABLE t (a STRING, ts TIMESTAMP(3) METADATA FROM 'timestamp') "
            "WITH ('connector' = 'upsert-kafka', 'topic' = 't', 'key.fields' = 'a');",
            "METADATA column ts on an upsert table is not supported yet",
            "METADATA",
        ),
        (
            "CREATE TABLE t (a STRING, b AS UPPER(a)) WITH ('topic' = 't', 'key.fields' = 'b');",
            "b is a computed column: a key",
            "b AS UPPER",
        ),
        (
            "CREATE TABLE t (a STRING, b AS UPPER(a), WATERMARK FOR b AS b) WITH ('topic' = 't');",
            "WATERMARK column b must be TIMESTAMP(3) or BIGINT",
            "WATERMARK",
        ),
        (
            "CREATE TABLE t (a STRING, ts TIMESTAMP(3) METADATA FROM 'timestamp' EXTRA) "
            "WITH ('topic' = 't');",
            "unexpected EXTRA after METADATA",
            "EXTRA",
        ),
    ],
)
def test_ddl_errors_name_the_construct_where_it_is(ddl: str, message: str, where: str):
    error = error_of(ddl)
    assert message in error.message
    assert (error.line, error.column) == at(ddl, where), str(error)


def test_metadata_in_create_table_as_select_is_an_error():
    sql = PAYMENTS + (
        "CREATE TABLE copy (payment_id STRING, ts TIMESTAMP(3) METADATA FROM 'timestamp') "
        "WITH ('connector' = 'kafka', 'topic' = 'copy') AS SELECT payment_id, ts FROM payments;"
    )
    error = error_of(sql)
    assert "METADATA columns belong to a table over a topic" in error.message


def test_a_column_named_metadata_is_a_plain_column():
    sql = """
CREATE TABLE t (id STRING, metadata STRING) WITH ('connector' = 'kafka', 'topic' = 't');
CREATE TABLE out (id STRING, metadata STRING) WITH ('connector' = 'kafka', 'topic' = 'out');
INSERT INTO out SELECT id, metadata FROM t;
"""
    out = run(sql, "t", [("k", {"id": "k", "metadata": "m"}, 1)], "out")
    assert [r.value for r in out] == [{"id": "k", "metadata": "m"}]


def batch_rows(sql: str, relations: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The DuckDB translation's rows over ``relations`` (table -> rows)."""
    query = to_duckdb(sql)
    con = duckdb.connect()
    try:
        return query.run(con, {name: pd.DataFrame(rows) for name, rows in relations.items()})
    finally:
        con.close()


def on_time(rows: list[tuple[int, str, float]]) -> list[tuple[int, str, float]]:
    """The trace without its late row (which the stream drops and a batch keeps)."""
    return [row for row in rows if row[2] != 64.0]


def test_to_duckdb_evaluates_a_computed_rowtime_as_the_stream_does():
    sql = PAYMENTS + WINDOWED_SINK + WINDOWED.format(table="payments", time="ts")
    stream = [
        r.value
        for r in run(
            sql,
            "payments",
            [
                (f"p{i}", {"payment_id": f"p{i}", "region": r, "amount": a, "paid_at": T0 + d}, 0)
                for i, (d, r, a) in enumerate(TRACE)
            ],
            "out",
        )
    ]
    relation = [
        {"payment_id": f"p{i}", "region": r, "amount": a, "paid_at": T0 + d}
        for i, (d, r, a) in enumerate(on_time(TRACE))
    ]
    batch = batch_rows(sql, {"payments": relation})
    # the batch also holds the windows the stream has not closed yet (the last one)
    closed = {(r["region"], r["w_start"]) for r in stream}
    assert sorted(stream, key=repr) == sorted(
        (r for r in batch if (r["region"], r["w_start"]) in closed), key=repr
    )
    assert len(batch) == len(stream) + 1


def test_to_duckdb_reads_metadata_from_the_lake_record_columns():
    sql = (
        CLICKS
        + """
CREATE TABLE out (user_id STRING, seen TIMESTAMP(3), part INT, o BIGINT, src STRING,
  host STRING) WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
INSERT INTO out SELECT user_id, event_time, part, `offset`, src, UPPER(url) FROM clicks
WHERE event_time > '2023-11-14 22:13:20';
"""
    )
    records = [
        ("u1", {"user_id": "u1", "url": "a"}, T0),
        ("u2", {"user_id": "u2", "url": "b"}, T0 + 7),
    ]
    stream = [r.value for r in run(sql, "clicks", records, "out")]
    relation = [
        {**value, "_timestamp": timestamp, "_partition": 0, "_offset": offset}
        for offset, (_, value, timestamp) in enumerate(records)
    ]
    assert batch_rows(sql, {"clicks": relation}) == stream
    assert stream == [
        {
            "user_id": "u2",
            "seen": format_timestamp(T0 + 7),
            "part": 0,
            "o": 1,
            "src": "clicks",
            "host": "B",
        }
    ]


def test_a_positional_format_reads_and_writes_the_physical_columns_only():
    sql = """
CREATE TABLE lines (a STRING, ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp', n BIGINT,
  d AS n * 2) WITH ('connector' = 'kafka', 'topic' = 'lines', 'format' = 'csv');
CREATE TABLE out (a STRING, twice AS d * 2, d BIGINT, at TIMESTAMP(3) METADATA FROM 'timestamp')
  WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'csv');
INSERT INTO out SELECT a, d, ts FROM lines;
"""
    with TopologyTestDriver(compile(sql)) as driver:
        lines = driver.create_input_topic(
            "lines", key_serde=serdes.String(), value_serde=serdes.String()
        )
        lines.pipe_input("k", "x,5", timestamp=T0)
        out = driver.create_output_topic(
            "out", key_serde=serdes.String(), value_serde=serdes.String()
        )
        assert [(r.value, r.timestamp) for r in out.read_records_to_list()] == [("x,10", T0)]


def test_an_interval_join_bounds_a_computed_rowtime_by_a_metadata_one():
    sql = (
        PAYMENTS
        + CLICKS
        + """
CREATE TABLE out (id STRING, paid TIMESTAMP(3), clicked TIMESTAMP(3))
  WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
INSERT INTO out SELECT p.payment_id, p.ts, c.event_time FROM payments p JOIN clicks c
ON p.payment_id = c.user_id AND c.event_time BETWEEN p.ts - INTERVAL '5' SECOND AND p.ts;
"""
    )
    with TopologyTestDriver(compile(sql)) as driver:
        clicks = driver.create_input_topic("clicks", **S)
        payments = driver.create_input_topic("payments", **S)
        clicks.pipe_input("a", {"user_id": "a"}, timestamp=T0 - 2_000)
        clicks.pipe_input("b", {"user_id": "b"}, timestamp=T0 - 9_000)  # 9 s before: out
        payments.pipe_input("a", {"payment_id": "a", "paid_at": T0}, timestamp=1)
        payments.pipe_input("b", {"payment_id": "b", "paid_at": T0}, timestamp=1)
        out = driver.create_output_topic("out", **S).read_values_to_list()
    assert out == [
        {"id": "a", "paid": format_timestamp(T0), "clicked": format_timestamp(T0 - 2_000)}
    ]
