"""``'window.close.quiet'``: a source table's option that closes the windows of every windowed
aggregation over it on the wall clock once the table was quiet that long (the DSL's
``close_when_quiet``). Driven by the test driver's mocked wall clock: the final window of a
quiet input comes out after the quiet time; without the option it waits for a record; a bad
value is a ``SqlError`` at the value."""

from __future__ import annotations

from typing import Any

import pytest

from streaming import TopologyTestDriver, serdes
from streaming.sql import SqlError, compile
from streaming.sql.compiler import Compiler

#: the mocked wall clock at the start: event time and wall clock agree, as on a live input
W0 = 1_800_000_000_000
#: (key, region, ms after W0): quiet from 3.5 s on
ORDERS = [("o1", "EU", 1_000), ("o2", "EU", 2_000), ("o3", "US", 3_500)]


def source(option: str | None) -> str:
    """The orders table (event time ``ts``, 1 s of watermark delay), with ``option`` as its
    ``'window.close.quiet'``."""
    quiet = "" if option is None else f", 'window.close.quiet' = '{option}'"
    return f"""
CREATE TABLE orders (id STRING, region STRING, ts BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'orders'{quiet});
CREATE TABLE out (region STRING, window_start BIGINT, window_end BIGINT, n BIGINT)
  WITH ('connector' = 'kafka', 'topic' = 'out');
CREATE TABLE counts (region STRING, window_start BIGINT, n BIGINT,
  PRIMARY KEY (region, window_start) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = 'counts', 'key.format' = 'json');
"""


#: windowed aggregations of ``orders`` into ``out``, one per form the compiler has
QUERIES = {
    "tumble-tvf": """INSERT INTO out SELECT region, window_start, window_end, COUNT(*)
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY window_start, window_end, region EMIT FINAL;""",
    "tumble-group-window": """INSERT INTO out
SELECT region, TUMBLE_START(ts, INTERVAL '10' SECOND), TUMBLE_END(ts, INTERVAL '10' SECOND),
  COUNT(*)
FROM orders GROUP BY region, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL;""",
    "hop-tvf": """INSERT INTO out SELECT region, window_start, window_end, COUNT(*)
FROM TABLE(HOP(TABLE orders, DESCRIPTOR(ts), INTERVAL '10' SECOND, INTERVAL '20' SECOND))
GROUP BY window_start, window_end, region EMIT FINAL;""",
    "session-tvf": """INSERT INTO out SELECT region, window_start, window_end, COUNT(*)
FROM TABLE(SESSION(TABLE orders PARTITION BY region, DESCRIPTOR(ts), INTERVAL '2' SECOND))
GROUP BY window_start, window_end, region EMIT FINAL;""",
    "session-group-window": """INSERT INTO out
SELECT region, SESSION_START(ts, INTERVAL '2' SECOND), SESSION_END(ts, INTERVAL '2' SECOND),
  COUNT(*)
FROM orders GROUP BY region, SESSION(ts, INTERVAL '2' SECOND) EMIT FINAL;""",
    # a subquery is a view: it takes its table's quiet close
    "over-a-subquery": """INSERT INTO out
SELECT region, TUMBLE_START(ts, INTERVAL '10' SECOND), TUMBLE_END(ts, INTERVAL '10' SECOND),
  COUNT(*)
FROM (SELECT region, ts FROM orders WHERE region <> 'none') AS q
GROUP BY region, TUMBLE(ts, INTERVAL '10' SECOND) EMIT FINAL;""",
}

#: the final rows (region, window start and end in s after W0, count) and the wall clock
#: (ms after W0) they come out at with '3 s' of quiet time
EXPECTED = {
    # [0, 10 s) closes when the clock passes its end plus the 1 s of grace
    "tumble-tvf": [(("EU", 0, 10, 2), 11_000), (("US", 0, 10, 1), 11_000)],
    # the hopping windows [-10 s, 10 s) close then too, and [0, 20 s) at 21 s
    "hop-tvf": [
        (("EU", -10, 10, 2), 11_000),
        (("US", -10, 10, 1), 11_000),
        (("EU", 0, 20, 2), 21_000),
        (("US", 0, 20, 1), 21_000),
    ],
    # the sessions' ends (last row + gap + grace: 5 s and 6.5 s) passed when the table had
    # been quiet for 3 s (counted from the first check after its last row, at 4 s)
    "session-tvf": [(("EU", 1, 4, 2), 7_000), (("US", 3.5, 5.5, 1), 7_000)],
}
EXPECTED["tumble-group-window"] = EXPECTED["over-a-subquery"] = EXPECTED["tumble-tvf"]
EXPECTED["session-group-window"] = EXPECTED["session-tvf"]


def run(sql: str, wait_ms: int = 30_000, **config: Any) -> list[tuple[tuple, int]]:
    """Pipe ``ORDERS`` at their event times on the wall clock, then let ``wait_ms`` of
    wall-clock time pass in half-second steps; the rows of ``out`` (bounds in s after W0)
    with the wall clock they came out at."""
    rows: list[tuple[tuple, int]] = []
    settings = {"application.id": "sql-quiet", **config}
    with TopologyTestDriver(compile(sql), settings, initial_wall_clock_time_ms=W0) as driver:
        orders = driver.create_input_topic("orders", serdes.String(), serdes.Json())
        out = driver.create_output_topic("out", serdes.String(), serdes.Json())

        def collect() -> None:
            now = driver.wall_clock_time_ms - W0
            for r in out.read_values_to_list():
                start, end = ((r[k] - W0) / 1000 for k in ("window_start", "window_end"))
                rows.append(((r["region"], _whole(start), _whole(end), r["n"]), now))

        for key, region, offset in ORDERS:
            driver.advance_wall_clock_time(W0 + offset - driver.wall_clock_time_ms)
            orders.pipe_input(key, {"id": key, "region": region, "ts": W0 + offset})
            collect()
        for _ in range(wait_ms // 500):
            driver.advance_wall_clock_time(500)
            collect()
    return sorted(rows, key=lambda row: (row[1], row[0]))


def _whole(seconds: float) -> float:
    return int(seconds) if seconds == int(seconds) else seconds


@pytest.mark.parametrize("form", sorted(QUERIES))
def test_the_option_closes_the_final_window_of_a_quiet_table(form: str) -> None:
    assert run(source("3 s") + QUERIES[form]) == EXPECTED[form]


@pytest.mark.parametrize("form", sorted(QUERIES))
def test_without_the_option_the_final_window_waits_for_a_record(form: str) -> None:
    stopped = ORDERS[-1][2]
    assert [row for row in run(source(None) + QUERIES[form]) if row[1] > stopped] == []


def test_the_option_wins_over_the_applications_setting() -> None:
    sql = source("8 s") + QUERIES["session-tvf"]
    # quiet for 8 s from the check at 4 s: the sessions come out at 12 s, not 7 s
    assert run(sql, **{"window.close.quiet.ms": 3_000}) == [
        (row, 12_000) for row, _ in EXPECTED["session-tvf"]
    ]
    # without the option, the application's setting applies
    assert (
        run(source(None) + QUERIES["session-tvf"], **{"window.close.quiet.ms": 3_000})
        == (EXPECTED["session-tvf"])
    )


def test_under_emit_changes_the_quiet_close_makes_later_rows_late() -> None:
    sql = source("3 s") + (
        "INSERT INTO counts SELECT region, window_start, COUNT(*) "
        "FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
        "GROUP BY window_start, window_end, region;"
    )
    with TopologyTestDriver(
        compile(sql), {"application.id": "sql-quiet"}, initial_wall_clock_time_ms=W0
    ) as driver:
        orders = driver.create_input_topic("orders", serdes.String(), serdes.Json())
        orders.pipe_input("o1", {"id": "o1", "region": "EU", "ts": W0 + 1_000})
        for _ in range(40):  # 20 s: the window [0, 10 s) closed on the wall clock
            driver.advance_wall_clock_time(500)
        orders.pipe_input("o2", {"id": "o2", "region": "EU", "ts": W0 + 2_000})
        assert driver.metrics()["late-records-dropped-total"] == 1


@pytest.mark.parametrize(
    ("value", "ms"),
    [("5 s", 5_000), ("5s", 5_000), ("1 min", 60_000), ("2 MINUTES", 120_000), ("750", 750)],
)
def test_the_option_takes_flink_durations(value: str, ms: int) -> None:
    compiler = Compiler(source(value))
    compiler.compile_all()
    assert compiler.tables["orders"].window_close_quiet_ms == ms
    assert compiler.tables["out"].window_close_quiet_ms is None


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("soon", "not a whole number with a unit"),
        ("-1 s", "not a whole number with a unit"),
        ("1.5 s", "not a whole number with a unit"),
        ("5 us", "unknown time unit 'us'"),
        ("0 s", "0 would close every window the moment the input pauses"),
    ],
)
def test_a_bad_value_is_an_error_at_the_value(value: str, problem: str) -> None:
    sql = source(value)
    with pytest.raises(SqlError) as info:
        compile(sql + QUERIES["tumble-tvf"])
    error = info.value
    assert error.message == (
        f"'window.close.quiet' = {value!r}: {problem}; give how long the table stays quiet "
        "(wall-clock time without records) before its windows close, as a positive whole "
        "number and a unit (ms, s, min, h, d), e.g. '5 s'"
    )
    line = sql.splitlines()[error.line - 1]
    assert line[error.column - 1 :].startswith(f"'{value}'")
