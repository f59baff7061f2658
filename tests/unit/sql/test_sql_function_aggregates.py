"""Python aggregate functions in SQL: GROUP BY, a final window, retract over an updating
input, merge in a SESSION window, and the errors that name a missing method."""

from __future__ import annotations

import pytest

from streaming import TopologyTestDriver, serdes
from streaming.sql import SqlError, compile, udaf
from streaming.sql.timestamps import format_timestamp


@udaf(name="weighted_avg")
class WeightedAvg:
    """PyFlink's documentation example: sum(value * weight) / sum(weight)."""

    def create_accumulator(self) -> list:
        return [0, 0]

    def accumulate(self, acc: list, value: int | None, weight: int | None) -> None:
        if value is not None and weight is not None:
            acc[0] += value * weight
            acc[1] += weight

    def retract(self, acc: list, value: int | None, weight: int | None) -> None:
        if value is not None and weight is not None:
            acc[0] -= value * weight
            acc[1] -= weight

    def get_value(self, acc: list) -> float | None:
        return acc[0] / acc[1] if acc[1] else None


WORDS = """
CREATE TABLE words (id STRING, grp STRING, word STRING, n BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '0' SECOND)
WITH ('connector' = 'kafka', 'topic' = 'words', 'format' = 'json');
CREATE FUNCTION longest AS 'sql_udfs.Longest' LANGUAGE PYTHON;
"""

KEYED_SINK = """
CREATE TABLE out (grp STRING, top STRING, avg_n DOUBLE, PRIMARY KEY (grp) NOT ENFORCED)
WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'key.format' = 'json',
      'value.format' = 'json');
"""

WINDOW_SINK = """
CREATE TABLE out (grp STRING, window_start TIMESTAMP(3), window_end TIMESTAMP(3), top STRING)
WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
"""


def word(grp: str, text: str, n: int, seconds: int) -> dict:
    return {"id": text, "grp": grp, "word": text, "n": n, "ts": format_timestamp(seconds * 1000)}


def run(sql: str, rows: list[dict], topic: str = "words", keyed: bool = False) -> list:
    with TopologyTestDriver(compile(sql)) as driver:
        source = driver.create_input_topic(topic, key_serde=serdes.String())
        for row in rows:
            source.pipe_input(row.get("id"), row, timestamp=0)
        out = driver.create_output_topic(
            "out", key_serde=serdes.Json() if keyed else serdes.String()
        )
        return [(r.key, r.value) if keyed else r.value for r in out.read_records_to_list()]


def test_aggregate_functions_in_group_by():
    sql = (
        WORDS
        + KEYED_SINK
        + ("INSERT INTO out SELECT grp, longest(word), weighted_avg(n, 2) FROM words GROUP BY grp;")
    )
    rows = [word("a", "hi", 1, 1), word("a", "hello", 3, 2), word("b", "yo", 5, 3)]
    assert run(sql, rows, keyed=True)[-3:] == [
        ({"grp": "a"}, {"grp": "a", "top": "hi", "avg_n": 1.0}),
        ({"grp": "a"}, {"grp": "a", "top": "hello", "avg_n": 2.0}),
        ({"grp": "b"}, {"grp": "b", "top": "yo", "avg_n": 5.0}),
    ]


def test_aggregate_function_in_a_tumbling_window_is_final():
    sql = (
        WORDS
        + WINDOW_SINK
        + (
            "INSERT INTO out SELECT grp, window_start, window_end, longest(word) FROM "
            "TABLE(TUMBLE(TABLE words, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
            "GROUP BY grp, window_start, window_end;"
        )
    )
    rows = [
        word("a", "hi", 1, 1),
        word("a", "hello", 1, 4),
        word("a", "hey", 1, 12),
        word("a", "x", 1, 25),  # closes [10, 20)
    ]
    assert run(sql, rows) == [
        {
            "grp": "a",
            "window_start": "1970-01-01 00:00:00.000",
            "window_end": "1970-01-01 00:00:10.000",
            "top": "hello",
        },
        {
            "grp": "a",
            "window_start": "1970-01-01 00:00:10.000",
            "window_end": "1970-01-01 00:00:20.000",
            "top": "hey",
        },
    ]


def test_aggregate_function_retracts_over_an_updating_table():
    sql = (
        """
CREATE TABLE latest (id STRING, grp STRING, word STRING, n BIGINT, PRIMARY KEY (id) NOT ENFORCED)
WITH ('connector' = 'upsert-kafka', 'topic' = 'latest', 'key.format' = 'raw',
      'value.format' = 'json');
CREATE FUNCTION longest AS 'sql_udfs.Longest' LANGUAGE PYTHON;
"""
        + KEYED_SINK
        + "INSERT INTO out SELECT grp, longest(word), weighted_avg(n, 1) FROM latest GROUP BY grp;"
    )
    rows = [
        {"id": "1", "grp": "a", "word": "hello", "n": 2},
        {"id": "2", "grp": "a", "word": "hi", "n": 4},
        {"id": "1", "grp": "a", "word": "yo", "n": 6},  # replaces 'hello': retracted
    ]
    assert run(sql, rows, topic="latest", keyed=True)[-1] == (
        {"grp": "a"},
        {"grp": "a", "top": "yo", "avg_n": 5.0},  # 'hello' is gone
    )


def test_aggregate_function_merges_sessions():
    words = WORDS.replace("INTERVAL '0' SECOND", "INTERVAL '10' SECOND")
    sql = (
        words
        + WINDOW_SINK
        + (
            "INSERT INTO out SELECT grp, SESSION_START(ts, INTERVAL '10' SECOND), "
            "SESSION_END(ts, INTERVAL '10' SECOND), longest(word) FROM words "
            "GROUP BY grp, SESSION(ts, INTERVAL '10' SECOND);"
        )
    )
    rows = [
        word("a", "hello", 1, 0),
        word("a", "hi", 1, 16),  # a second session
        word("a", "yo", 1, 8),  # bridges the two: their accumulators merge
        word("a", "x", 1, 60),  # closes it (after the 10 s delay)
    ]
    assert run(sql, rows) == [
        {
            "grp": "a",
            "window_start": "1970-01-01 00:00:00.000",
            "window_end": "1970-01-01 00:00:26.000",
            "top": "hello",
        }
    ]


def test_session_needs_merge_and_an_updating_input_needs_retract():
    class NoMerge:
        def create_accumulator(self) -> list:
            return []

        def accumulate(self, acc: list, value: str) -> None:
            acc.append(value)

        def get_value(self, acc: list) -> int:
            return len(acc)

    sql = (
        WORDS
        + WINDOW_SINK.replace("top STRING", "top BIGINT")
        + (
            "INSERT INTO out SELECT grp, SESSION_START(ts, INTERVAL '10' SECOND), "
            "SESSION_END(ts, INTERVAL '10' SECOND), nomerge(word) FROM words "
            "GROUP BY grp, SESSION(ts, INTERVAL '10' SECOND);"
        )
    )
    with pytest.raises(SqlError, match="aggregate function nomerge has no merge"):
        compile(sql, functions={"nomerge": NoMerge})
    updating = (
        "CREATE TABLE latest (id STRING, word STRING, PRIMARY KEY (id) NOT ENFORCED) "
        "WITH ('connector' = 'upsert-kafka', 'topic' = 'latest', 'key.format' = 'raw', "
        "'value.format' = 'json');\n"
        "CREATE TABLE counts (id STRING, n BIGINT, PRIMARY KEY (id) NOT ENFORCED) "
        "WITH ('connector' = 'upsert-kafka', 'topic' = 'counts', 'key.format' = 'raw', "
        "'value.format' = 'json');\n"
        "INSERT INTO counts SELECT id, nomerge(word) FROM latest GROUP BY id;"
    )
    with pytest.raises(SqlError, match="nomerge has no retract") as error:
        compile(updating, functions={"nomerge": NoMerge})
    assert (error.value.line, error.value.column) == (3, 31)


def test_aggregate_arity_is_checked():
    sql = (
        WORDS
        + KEYED_SINK
        + ("INSERT INTO out SELECT grp, longest(word, n), 1.0 FROM words GROUP BY grp;")
    )
    with pytest.raises(SqlError, match=r"longest.accumulate takes \(value\), not 2 arguments"):
        compile(sql)
