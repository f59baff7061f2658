"""Flink's ITCase inputs and expected rows (``flink-table-planner``'s ``TestData`` and the
ITCases that use it), and helpers to run SQL on them through the test driver.

Flink's tables compute ``rowtime AS TO_TIMESTAMP(ts)`` from a STRING column; the tables
here declare ``rowtime TIMESTAMP(3)`` and carry the same text in it. Flink's bounded
sources end with a watermark at +infinity, which fires every window; here windows close
on stream time, so ``end_of_input`` is a row far later that closes them (its own window
stays open and never comes out).
"""

from __future__ import annotations

from typing import Any

from streaming import TopologyTestDriver, serdes
from streaming.sql import compile
from streaming.sql.timestamps import format_timestamp, parse_timestamp

#: ``TestData.windowDataWithTimestamp``: ts, int, double, float, bigdec, string, name
WINDOW_DATA: list[tuple[Any, ...]] = [
    ("2020-10-10 00:00:01", 1, 1.0, 1.0, 1.11, "Hi", "a"),
    ("2020-10-10 00:00:02", 2, 2.0, 2.0, 2.22, "Comment#1", "a"),
    ("2020-10-10 00:00:03", 2, 2.0, 2.0, 2.22, "Comment#1", "a"),
    ("2020-10-10 00:00:04", 5, 5.0, 5.0, 5.55, None, "a"),
    ("2020-10-10 00:00:07", 3, 3.0, 3.0, None, "Hello", "b"),
    ("2020-10-10 00:00:06", 6, 6.0, 6.0, 6.66, "Hi", "b"),  # out of order
    ("2020-10-10 00:00:08", 3, None, 3.0, 3.33, "Comment#2", "a"),
    ("2020-10-10 00:00:04", 5, 5.0, None, 5.55, "Hi", "a"),  # late event
    ("2020-10-10 00:00:16", 4, 4.0, 4.0, 4.44, "Hi", "b"),
    ("2020-10-10 00:00:32", 7, 7.0, 7.0, 7.77, None, None),
    ("2020-10-10 00:00:34", 1, 3.0, 3.0, 3.33, "Comment#3", "b"),
]

#: ``TestData.timestampData`` (GroupWindowITCase): ts, int, double, float, bigdec, string,
#: name
TIMESTAMP_DATA: list[tuple[Any, ...]] = [
    ("1970-01-01 00:00:00.001", 1, 1.0, 1.0, 1, "Hi", "a"),
    ("1970-01-01 00:00:00.002", 2, 2.0, 2.0, 2, "Hallo", "a"),
    ("1970-01-01 00:00:00.003", 2, 2.0, 2.0, 2, "Hello", "a"),
    ("1970-01-01 00:00:00.004", 5, 5.0, 5.0, 5, "Hello", "a"),
    ("1970-01-01 00:00:00.007", 3, 3.0, 3.0, 3, "Hello", "b"),
    ("1970-01-01 00:00:00.006", 5, 5.0, 5.0, 5, "Hello", "a"),
    ("1970-01-01 00:00:00.008", 3, 3.0, 3.0, 3, "Hello world", "a"),
    ("1970-01-01 00:00:00.016", 4, 4.0, 4.0, 4, "Hello world", "b"),
    ("1970-01-01 00:00:00.032", 4, 4.0, 4.0, 4, None, None),
]

WINDOW_COLUMNS = ("rowtime", "int", "double", "float", "bigdec", "string", "name")


def window_table(name: str, topic: str, delay: str) -> str:
    """The DDL of Flink's window test table over ``topic``, with backtick names as
    Flink's ITCases write them and a WATERMARK ``delay`` (an INTERVAL's text)."""
    return f"""
CREATE TABLE {name} (
 `rowtime` TIMESTAMP(3),
 `int` INT,
 `double` DOUBLE,
 `float` FLOAT,
 `bigdec` DECIMAL(10, 2),
 `string` STRING,
 `name` STRING,
 WATERMARK for `rowtime` AS `rowtime` - INTERVAL {delay}
) WITH ('connector' = 'kafka', 'topic' = '{topic}', 'format' = 'json');
"""


def rows_of(data: list[tuple[Any, ...]], columns: tuple[str, ...] = WINDOW_COLUMNS) -> list[dict]:
    """Flink's rows as the JSON values of a topic."""
    return [dict(zip(columns, row, strict=True)) for row in data]


def end_of_input(at: str) -> dict[str, Any]:
    """A row at TIMESTAMP ``at`` (later than every window's end plus the delay): it
    closes the windows as the end of Flink's bounded input does."""
    return {"rowtime": at, "name": "end-of-input", "string": "end-of-input"}


def run(
    sql: str,
    inputs: list[tuple[str, dict[str, Any]]],
    output: str = "out",
    *,
    wall_clock_ms: int | None = None,
) -> list[dict[str, Any]]:
    """The rows ``sql`` writes to ``output`` for ``inputs`` ((topic, value) in order,
    keyless)."""
    with TopologyTestDriver(compile(sql), initial_wall_clock_time_ms=wall_clock_ms) as driver:
        topics = {topic for topic, _ in inputs}
        sources = {t: driver.create_input_topic(t, key_serde=serdes.String()) for t in topics}
        for topic, value in inputs:
            sources[topic].pipe_input(None, value)
        out = driver.create_output_topic(output, key_serde=serdes.String())
        return [r.value for r in out.read_records_to_list()]


def flink_rows(lines: list[str], kinds: str) -> list[tuple[Any, ...]]:
    """Flink's expected rows (``Row.toString`` joined by commas) as tuples, read by
    ``kinds``, one letter per column: ``s`` string (``null`` is None), ``t`` timestamp
    (``2020-10-10T00:00:05`` -> this engine's TIMESTAMP text), ``i`` integer, ``d``
    double (``null`` is None), ``m`` decimal (rounded to 2 places), ``-`` left out (a
    column of a function not ported, such as Flink's test UDAF ``concat_distinct_agg``)."""
    rows = []
    for line in lines:
        row: list[Any] = []
        for text, kind in zip(line.split(","), kinds, strict=True):
            if kind == "-":
                continue
            row.append(None if text == "null" else _read(text, kind))
        rows.append(tuple(row))
    return sorted(rows, key=repr)


def _read(text: str, kind: str) -> Any:
    if kind == "t":
        millis = parse_timestamp(text)
        assert millis is not None, text
        return format_timestamp(millis)
    if kind == "i":
        return int(text)
    if kind == "d":
        return float(text)
    if kind == "m":
        return round(float(text), 2)
    return text


def engine_rows(rows: list[dict[str, Any]], kinds: str) -> list[tuple[Any, ...]]:
    """Output rows as tuples comparable with ``flink_rows`` (decimals rounded)."""
    kept = [kind for kind in kinds if kind != "-"]
    result = []
    for row in rows:
        values = list(row.values())
        assert len(values) == len(kept), row
        result.append(
            tuple(
                round(v, 2) if kind == "m" and v is not None else v
                for v, kind in zip(values, kept, strict=True)
            )
        )
    return sorted(result, key=repr)
