"""Python table functions in SQL: ``LATERAL TABLE(fn(...))`` as Flink writes it (a comma,
CROSS JOIN, LEFT JOIN ... ON TRUE), 0..n rows per input row, and its errors."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streaming import TopologyTestDriver, serdes
from streaming.sql import SqlError, compile, udtf
from streaming.sql.timestamps import format_timestamp


@udtf(result_types=["STRING"])
def letters(text):
    """Each distinct letter of the text, in order."""
    yield from dict.fromkeys(text or "")


TABLES = """
CREATE TABLE lines (id STRING, line STRING, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '0' SECOND)
WITH ('connector' = 'kafka', 'topic' = 'lines', 'format' = 'json');
CREATE FUNCTION words AS 'sql_udfs.words' LANGUAGE PYTHON;
CREATE TABLE out (id STRING, word STRING, len BIGINT)
WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
"""

LINES = [
    {"id": "1", "line": "to be", "ts": format_timestamp(1_000)},
    {"id": "2", "line": "", "ts": format_timestamp(2_000)},
    {"id": "3", "line": "or", "ts": format_timestamp(3_000)},
]


def run(sql: str, rows=LINES, output="out", functions=None) -> list:
    with TopologyTestDriver(compile(sql, functions=functions)) as driver:
        source = driver.create_input_topic("lines", key_serde=serdes.String())
        for row in rows:
            source.pipe_input(row["id"], row)
        out = driver.create_output_topic(output, key_serde=serdes.Json())
        return [r.value for r in out.read_records_to_list()]


@pytest.mark.parametrize(
    "join",
    [
        ", LATERAL TABLE(words(line)) AS T(word, len)",
        "CROSS JOIN LATERAL TABLE(words(line)) AS T(word, len)",
        "JOIN LATERAL TABLE(words(line)) T(word, len) ON TRUE",
    ],
)
def test_cross_join_lateral_gives_a_row_per_function_row(join):
    sql = TABLES + f"INSERT INTO out SELECT id, T.word, len FROM lines {join};"
    assert run(sql) == [
        {"id": "1", "word": "to", "len": 2},
        {"id": "1", "word": "be", "len": 2},
        {"id": "3", "word": "or", "len": 2},
    ]


def test_left_join_lateral_keeps_rows_without_function_rows():
    sql = TABLES + (
        "INSERT INTO out SELECT l.id, word, len FROM lines AS l\n"
        "LEFT JOIN LATERAL TABLE(words(l.line)) AS T(word, len) ON TRUE WHERE l.id <> '3';"
    )
    assert run(sql) == [
        {"id": "1", "word": "to", "len": 2},
        {"id": "1", "word": "be", "len": 2},
        {"id": "2", "word": None, "len": None},
    ]


def test_default_column_names_and_an_aggregation_over_the_rows():
    sql = TABLES.replace(
        "word STRING, len BIGINT", "word STRING, len BIGINT, PRIMARY KEY (word) NOT ENFORCED"
    ).replace(
        "'connector' = 'kafka', 'topic' = 'out', 'format' = 'json'",
        "'connector' = 'upsert-kafka', 'topic' = 'out', 'key.format' = 'json', 'value.format' = 'json'",
    ) + (
        "INSERT INTO out SELECT MIN(id), f0, COUNT(*) FROM lines, LATERAL TABLE(letters(line)) "
        "GROUP BY f0;"
    )
    rows = [{"id": "1", "line": "aab"}, {"id": "2", "line": "ba"}]
    assert run(sql, rows)[-2:] == [
        {"id": "1", "word": "b", "len": 2},
        {"id": "1", "word": "a", "len": 2},
    ]


def test_windowed_aggregation_over_lateral_rows():
    sql = TABLES.replace("word STRING, len BIGINT", "window_start TIMESTAMP(3), n BIGINT") + (
        "INSERT INTO out SELECT 'all', window_start, COUNT(*) FROM "
        "TABLE(TUMBLE(TABLE lines, DESCRIPTOR(ts), INTERVAL '2' SECOND)), "
        "LATERAL TABLE(words(line)) GROUP BY window_start, window_end;"
    )
    with pytest.raises(
        SqlError, match="LATERAL TABLE after a join or a window TVF is not supported yet"
    ):
        compile(sql)
    grouped = TABLES.replace("word STRING, len BIGINT", "window_start TIMESTAMP(3), n BIGINT") + (
        "INSERT INTO out SELECT 'all', TUMBLE_START(ts, INTERVAL '2' SECOND), COUNT(*) FROM "
        "lines, LATERAL TABLE(words(line)) GROUP BY TUMBLE(ts, INTERVAL '2' SECOND);"
    )
    rows = [*LINES, {"id": "4", "line": "not", "ts": format_timestamp(9_000)}]
    assert run(grouped, rows) == [
        {"id": "all", "window_start": "1970-01-01 00:00:00.000", "n": 2},
        {"id": "all", "window_start": "1970-01-01 00:00:02.000", "n": 1},
    ]


def test_generator_passed_to_compile_is_a_table_function():
    def pairs(text: str) -> Iterator[tuple[str, int]]:
        yield text, 1
        yield text + text, 2

    sql = TABLES + (
        "INSERT INTO out SELECT id, w, n FROM lines, LATERAL TABLE(pairs(id)) AS P(w, n) "
        "WHERE n = 2;"
    )
    assert run(sql, functions={"pairs": pairs}) == [
        {"id": "1", "word": "11", "len": 2},
        {"id": "2", "word": "22", "len": 2},
        {"id": "3", "word": "33", "len": 2},
    ]


@pytest.mark.parametrize(
    ("join", "message"),
    [
        (", LATERAL TABLE(nothing(line)) AS T(a)", "unknown table function nothing"),
        (", LATERAL TABLE(words(line, id)) AS T(a, b)", r"function words takes \(text\), not 2"),
        (", LATERAL TABLE(words(line)) AS T(a)", "T names 1 columns, words gives 2"),
        (", LATERAL TABLE(words(line)) AS T(id, b)", "column id is in lines already"),
        ("LEFT JOIN LATERAL TABLE(words(line)) AS T(a, b)", "needs ON TRUE"),
    ],
)
def test_errors_name_the_problem(join, message):
    sql = TABLES + f"INSERT INTO out SELECT id, a, 1 FROM lines {join};"
    with pytest.raises(SqlError, match=message) as error:
        compile(sql)
    assert error.value.line == TABLES.count("\n") + 1


def test_raising_table_function_sends_the_record_to_the_dead_letter_topic():
    def explode(text: str) -> Iterator[str]:
        yield text
        raise RuntimeError(f"cannot split {text!r}")

    sql = TABLES + (
        "INSERT INTO out SELECT id, w, 0 FROM lines, LATERAL TABLE(explode(line)) AS T(w) "
        "WHERE id <> '3';"
    )
    config = {
        "processing.exception.handler": "log_and_continue",
        "errors.dead.letter.queue.topic.name": "dlq",
    }
    topology = compile(sql, functions={"explode": explode})
    with TopologyTestDriver(topology, config) as driver:
        source = driver.create_input_topic("lines", key_serde=serdes.String())
        for row in LINES:
            source.pipe_input(row["id"], row)
        dlq = driver.create_output_topic("dlq", key_serde=serdes.String())
        letters_ = dlq.read_records_to_list()
        out = driver.create_output_topic("out", key_serde=serdes.Json())
        assert out.read_records_to_list() == []
    assert [r.key for r in letters_] == ["1", "2", "3"]
    assert (
        b"function explode('to be',) raised RuntimeError"
        in dict(letters_[0].headers)["__streams.errors.exception"]
    )


def test_lateral_table_in_a_pull_or_push_query_is_refused():
    from streaming.sql.queries import plan
    from streaming.sql.results import catalog_of

    catalog = catalog_of(compile(TABLES + "INSERT INTO out SELECT id, line, 1 FROM lines;"))
    for emit in ("", " EMIT CHANGES"):
        with pytest.raises(SqlError, match=r"LATERAL TABLE .* pull or push query") as error:
            plan(catalog, f"SELECT id, w FROM lines, LATERAL TABLE(words(line)) AS T(w, n){emit}")
        assert (error.value.line, error.value.column) == (1, 40)


STAR_OUT = """
CREATE TABLE out (id STRING, line STRING, ts TIMESTAMP(3), word STRING, len BIGINT)
WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
"""


def _star_tables(sink: str = STAR_OUT) -> str:
    return TABLES.replace(
        """CREATE TABLE out (id STRING, word STRING, len BIGINT)
WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
""",
        sink,
    )


def _joined(id_: str, word: str | None, length: int | None) -> dict:
    line = next(row for row in LINES if row["id"] == id_)
    return {**line, "word": word, "len": length}


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM lines, LATERAL TABLE(words(line)) AS T(word, len)",
        "SELECT * FROM lines CROSS JOIN LATERAL TABLE(words(line)) AS T(word, len)",
        "SELECT l.*, T.* FROM lines AS l, LATERAL TABLE(words(line)) AS T(word, len)",
    ],
)
def test_select_star_over_a_lateral_join_is_the_tables_columns_then_the_functions(query):
    assert run(_star_tables() + f"INSERT INTO out {query};") == [
        _joined("1", "to", 2),
        _joined("1", "be", 2),
        _joined("3", "or", 2),
    ]


def test_select_star_over_a_left_lateral_join_keeps_rows_with_nulls():
    query = "SELECT * FROM lines LEFT JOIN LATERAL TABLE(words(line)) AS T(word, len) ON TRUE"
    assert run(_star_tables() + f"INSERT INTO out {query};") == [
        _joined("1", "to", 2),
        _joined("1", "be", 2),
        _joined("2", None, None),
        _joined("3", "or", 2),
    ]


def test_a_star_beside_other_items_and_in_a_view_over_a_lateral_join():
    sink = """
CREATE TABLE out (id STRING, line STRING, ts TIMESTAMP(3), f0 STRING, f1 BIGINT, up STRING)
WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
"""
    sql = _star_tables(sink) + (
        "CREATE VIEW joined AS SELECT * FROM lines, LATERAL TABLE(words(line));"
        "INSERT INTO out SELECT *, UPPER(f0) FROM joined;"
    )
    assert run(sql) == [
        {**LINES[0], "f0": "to", "f1": 2, "up": "TO"},
        {**LINES[0], "f0": "be", "f1": 2, "up": "BE"},
        {**LINES[2], "f0": "or", "f1": 2, "up": "OR"},
    ]
