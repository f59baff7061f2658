"""SQL value semantics that Python does differently: TIMESTAMP comparisons, ``%``, CASE
and COUNT(DISTINCT) equality, NULL join keys, unreadable event times."""

from __future__ import annotations

import pytest

from streaming import TopologyTestDriver, serdes
from streaming.sql import compile
from streaming.sql import expressions as expressions_module
from streaming.sql.timestamps import ColumnTimestampExtractor, parse_timestamp

ORDERS = """
CREATE TABLE orders (
  id STRING, region STRING, amount DOUBLE, qty BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts
) WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json');
"""


def run(sql: str, records: list[tuple[str, dict, int]]) -> list[tuple]:
    with TopologyTestDriver(compile(sql)) as driver:
        src = driver.create_input_topic(
            "orders", key_serde=serdes.String(), value_serde=serdes.Json()
        )
        for key, value, ts in records:
            src.pipe_input(key, value, timestamp=ts)
        out = driver.create_output_topic(
            "out", key_serde=serdes.String(), value_serde=serdes.Json()
        )
        return [(r.key, r.value) for r in out.read_records_to_list()]


def order(i: int, ts, **values) -> tuple[str, dict, int]:
    return (f"o{i}", {"id": f"o{i}", "region": "EU", "ts": ts, **values}, 0)


def test_having_compares_a_window_bound_with_timestamp_text():
    # window bounds are epoch ms; the literal is text: compared as instants (this raised
    # TypeError int vs str in the stream thread)
    sql = (
        ORDERS
        + """
    CREATE TABLE out (region STRING, ws TIMESTAMP(3), n BIGINT) WITH ('topic' = 'out');
    INSERT INTO out SELECT region, TUMBLE_START(ts, INTERVAL '1' MINUTE), COUNT(*)
    FROM orders GROUP BY region, TUMBLE(ts, INTERVAL '1' MINUTE)
    HAVING TUMBLE_START(ts, INTERVAL '1' MINUTE) >= '1970-01-01 00:01:00' EMIT FINAL;
    """
    )
    records = [
        order(1, "1970-01-01 00:00:10"),
        order(2, "1970-01-01T00:01:10Z"),
        order(3, "1970-01-01 00:05:00"),
    ]
    assert run(sql, records) == [(None, {"region": "EU", "ws": "1970-01-01 00:01:00.000", "n": 1})]


def test_where_compares_timestamp_columns_as_instants(monkeypatch):
    sql = (
        ORDERS
        + """
    CREATE TABLE out (id STRING) WITH ('topic' = 'out');
    INSERT INTO out SELECT id FROM orders WHERE ts >= '1970-01-01T00:00:30Z';
    """
    )
    records = [
        order(1, "1970-01-01 00:00:10"),
        order(2, "1970-01-01 00:01:00"),  # after: kept (as text, ' ' < 'T' dropped it)
        order(3, 45_000),  # epoch ms: after
        order(4, "1970-01-01T00:00:29.999Z"),
        order(5, "not a time"),  # unreadable: NULL, dropped
        order(6, None),
    ]
    calls = []
    real = expressions_module.parse_timestamp
    monkeypatch.setattr(expressions_module, "parse_timestamp", lambda v: calls.append(v) or real(v))
    compiled = run(sql, records)
    assert [v["id"] for _, v in compiled] == ["o2", "o3"]
    # the literal is read once, at compile time; per record only the column
    assert calls == ["1970-01-01T00:00:30Z", *(v["ts"] for _, v, _ in records)]


def test_min_max_of_a_timestamp_compare_instants_and_keep_the_value():
    sql = (
        ORDERS
        + """
    CREATE TABLE out (region STRING, first_ts TIMESTAMP(3), last_ts TIMESTAMP(3),
      PRIMARY KEY (region) NOT ENFORCED) WITH ('topic' = 'out');
    INSERT INTO out SELECT region, MIN(ts), MAX(ts) FROM orders GROUP BY region;
    """
    )
    records = [
        order(1, "1970-01-01 00:00:09"),
        order(2, "1970-01-01T00:00:05Z"),  # lexically the largest, really not
        order(3, 1_000),  # epoch ms: the earliest
        order(4, "garbage"),  # unreadable: skipped, as NULL
    ]
    *_, (key, last) = run(sql, records)
    assert key == "EU"
    assert last == {
        "region": "EU",
        "first_ts": "1970-01-01 00:00:01.000",  # an int is written as TIMESTAMP text
        "last_ts": "1970-01-01 00:00:09",  # the row's value as it came
    }


def test_remainder_truncates_as_in_flink():
    sql = (
        ORDERS
        + """
    CREATE TABLE out (id STRING, a BIGINT, b BIGINT, c DOUBLE, d BIGINT) WITH ('topic' = 'out');
    INSERT INTO out SELECT id, qty % 3, qty % -3, amount % 2, qty % 0 FROM orders;
    """
    )
    records = [order(1, 0, qty=-7, amount=-7.5), order(2, 0, qty=7, amount=7.5)]
    assert [v for _, v in run(sql, records)] == [
        {"id": "o1", "a": -1, "b": -1, "c": -1.5, "d": None},
        {"id": "o2", "a": 1, "b": 1, "c": 1.5, "d": None},
    ]


def test_simple_case_does_not_match_true_with_1():
    sql = (
        ORDERS
        + """
    CREATE TABLE out (id STRING, label STRING) WITH ('topic' = 'out');
    INSERT INTO out SELECT id,
      CASE qty WHEN TRUE THEN 'bool' WHEN 1 THEN 'one' ELSE 'other' END FROM orders;
    """
    )
    records = [order(1, 0, qty=1), order(2, 0, qty=True), order(3, 0, qty=1.0)]
    assert [v["label"] for _, v in run(sql, records)] == ["one", "bool", "one"]


def test_count_distinct_tells_true_from_1():
    sql = (
        ORDERS
        + """
    CREATE TABLE out (region STRING, n BIGINT, PRIMARY KEY (region) NOT ENFORCED)
      WITH ('topic' = 'out');
    INSERT INTO out SELECT region, COUNT(DISTINCT qty) FROM orders GROUP BY region;
    """
    )
    records = [order(1, 0, qty=1), order(2, 0, qty=1.0), order(3, 0, qty=True)]
    assert run(sql, records)[-1] == ("EU", {"region": "EU", "n": 2})


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_non_finite_event_time_is_unreadable(value):
    assert parse_timestamp(value) is None

    class Record:
        timestamp = 1234

        def __init__(self, value):
            self.value = value

    extractor = ColumnTimestampExtractor("ts")
    assert extractor.extract(Record({"ts": value}), 0) == 1234  # type: ignore[arg-type]
