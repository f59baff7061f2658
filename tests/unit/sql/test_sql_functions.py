"""Python functions in SQL: scalar functions (decorator, ``functions=``, CREATE FUNCTION),
compile errors that point at the call, and a raising function that fails only its record."""

from __future__ import annotations

import pytest

from streaming import TopologyTestDriver, serdes
from streaming.runtime.errors import HEADER_EXCEPTION
from streaming.sql import SqlError, compile, java_functions, udf

EVENTS = """
CREATE TABLE events (id STRING, name STRING, amount BIGINT)
WITH ('connector' = 'kafka', 'topic' = 'events', 'format' = 'json');
CREATE TABLE out (id STRING, label STRING)
WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
"""

ROWS = [
    {"id": "a", "name": "ann", "amount": 5},
    {"id": "b", "name": None, "amount": 50},
    {"id": "c", "name": "cy", "amount": 500},
]


@udf
def tier(amount: int) -> str:
    """'big' from 100 up, else 'small'."""
    return "big" if amount >= 100 else "small"


@udf(name="half", result_type="DOUBLE")
def halve(amount):  # no hints: result_type gives the SQL type
    return amount / 2


def run(sql: str, rows=ROWS, functions=None, config=None) -> list[dict]:
    with TopologyTestDriver(compile(sql, functions=functions), config) as driver:
        source = driver.create_input_topic("events", key_serde=serdes.String())
        for row in rows:
            source.pipe_input(row["id"], row)
        out = driver.create_output_topic("out", key_serde=serdes.String())
        return [r.value for r in out.read_records_to_list()]


def test_decorated_function_in_select_and_where():
    sql = (
        EVENTS + "INSERT INTO out SELECT id, tier(amount) FROM events WHERE tier(amount) = 'small';"
    )
    assert run(sql) == [{"id": "a", "label": "small"}, {"id": "b", "label": "small"}]


def test_result_type_names_the_sql_type():
    sql = EVENTS.replace("label STRING", "label DOUBLE") + (
        "INSERT INTO out SELECT id, HALF(amount) + 1 FROM events;"
    )
    assert [r["label"] for r in run(sql)] == [3.5, 26.0, 251.0]


def test_function_passed_to_compile():
    def initials(name: str | None) -> str:
        return (name or "?")[:1].upper()

    sql = EVENTS + "INSERT INTO out SELECT id, initials(name) || '.' FROM events;"
    assert [r["label"] for r in run(sql, functions={"initials": initials})] == ["A.", "?.", "C."]


def test_create_function_language_python():
    sql = EVENTS + (
        "CREATE TEMPORARY SYSTEM FUNCTION shout AS 'sql_udfs.shout' LANGUAGE PYTHON;\n"
        "INSERT INTO out SELECT id, shout(name) FROM events WHERE shout(name) IS NOT NULL;"
    )
    assert run(sql) == [{"id": "a", "label": "ANN!"}, {"id": "c", "label": "CY!"}]
    for create in ("CREATE FUNCTION", "CREATE TEMPORARY FUNCTION IF NOT EXISTS"):
        again = sql.replace("CREATE TEMPORARY SYSTEM FUNCTION", create)
        assert run(again) == [{"id": "a", "label": "ANN!"}, {"id": "c", "label": "CY!"}]


def test_the_result_type_is_checked_against_the_sink():
    sql = EVENTS.replace("label STRING", "label BIGINT") + (
        "INSERT INTO out SELECT id, tier(amount) FROM events;"
    )
    with pytest.raises(
        SqlError, match=r"(?i)tier\(amount\) is STRING, sink column out.label is BIGINT"
    ):
        compile(sql)


@pytest.mark.parametrize(
    ("create", "message"),
    [
        ("'sql_udfs_missing.shout'", "cannot import module sql_udfs_missing"),
        ("'sql_udfs.nothing'", "module sql_udfs has no attribute nothing"),
        ("'sql_udfs.NOT_A_FUNCTION'", "f is not a function"),
        ("'shout'", "not a module path"),
    ],
)
def test_create_function_errors_point_at_the_path(create, message):
    sql = EVENTS + f"CREATE FUNCTION f AS {create} LANGUAGE PYTHON;"
    with pytest.raises(SqlError, match=message) as error:
        compile(sql)
    assert (error.value.line, error.value.column) == (6, 22)


def test_create_function_of_an_unregistered_java_class_names_it():
    with pytest.raises(SqlError, match=r"the Java class sql_udfs\.shout cannot be loaded") as error:
        compile(EVENTS + "CREATE FUNCTION f AS 'sql_udfs.shout';")
    assert (error.value.line, error.value.column) == (6, 22)
    with pytest.raises(SqlError, match=r"the Java class com\.acme\.F cannot be loaded here"):
        compile(EVENTS + "CREATE FUNCTION f AS 'com.acme.F' LANGUAGE JAVA;")


def test_create_function_of_a_registered_java_class_runs_its_python_stand_in(monkeypatch):
    monkeypatch.setitem(java_functions._REGISTERED, "com.acme.Shout", "sql_udfs.shout")
    sql = EVENTS + (
        "CREATE FUNCTION shout AS 'com.acme.Shout';\n"
        "INSERT INTO out SELECT id, shout(name) FROM events;"
    )
    assert [r["label"] for r in run(sql)] == ["ANN!", None, "CY!"]


def test_wrong_arity_points_at_the_call():
    sql = EVENTS + "INSERT INTO out SELECT id,\n  tier(amount, name) FROM events;"
    with pytest.raises(SqlError, match=r"function tier takes \(amount\), not 2 arguments") as error:
        compile(sql)
    assert (error.value.line, error.value.column) == (7, 3)


def test_a_function_without_a_result_type_is_refused():
    def untyped(x):
        return x

    with pytest.raises(SqlError, match="function untyped needs a return type hint"):
        compile(EVENTS, functions={"untyped": untyped})


def test_raising_function_sends_its_record_to_the_dead_letter_topic():
    def ratio(amount: int) -> float:
        return 100 / (amount - 50)

    config = {
        "processing.exception.handler": "log_and_continue",
        "errors.dead.letter.queue.topic.name": "dlq",
    }
    sql = EVENTS.replace("label STRING", "label DOUBLE") + (
        "INSERT INTO out SELECT id, ratio(amount) FROM events;"
    )
    with TopologyTestDriver(compile(sql, functions={"ratio": ratio}), config) as driver:
        source = driver.create_input_topic("events", key_serde=serdes.String())
        for row in ROWS:
            source.pipe_input(row["id"], row)
        out = driver.create_output_topic("out", key_serde=serdes.String())
        assert [r.value["id"] for r in out.read_records_to_list()] == ["a", "c"]
        dlq = driver.create_output_topic("dlq", key_serde=serdes.String())
        (letter,) = dlq.read_records_to_list()
    assert letter.key == "b" and letter.value == ROWS[1]
    reason = dict(letter.headers)[HEADER_EXCEPTION].decode()
    assert "FunctionError" in reason
    assert "function ratio([50],) raised ZeroDivisionError" not in reason
    assert "function ratio(50,) raised ZeroDivisionError: division by zero" in reason


def test_raising_function_fails_without_a_handler():
    def boom(amount: int) -> int:
        raise ValueError("no")

    sql = EVENTS.replace("label STRING", "label BIGINT") + (
        "INSERT INTO out SELECT id, boom(amount) FROM events;"
    )
    with pytest.raises(Exception, match=r"function boom\(5,\) raised ValueError: no"):
        run(sql, functions={"boom": boom})


def test_batch_translation_runs_the_function_in_duckdb():
    import duckdb
    import pandas as pd

    from streaming.sql.batch import to_duckdb

    sql = EVENTS + (
        "CREATE FUNCTION shout AS 'sql_udfs.shout' LANGUAGE PYTHON;\n"
        "INSERT INTO out SELECT id, shout(name) || tier(amount) FROM events "
        "WHERE tier(amount) = 'small' OR shout(name) IS NULL;"
    )
    stream = run(sql)
    assert stream == [{"id": "a", "label": "ANN!small"}, {"id": "b", "label": None}]
    query = to_duckdb(sql)
    con = duckdb.connect()
    try:
        batch = query.run(con, {"events": pd.DataFrame(ROWS)})
    finally:
        con.close()
    assert sorted(batch, key=lambda r: r["id"]) == stream


def test_batch_translation_refuses_what_duckdb_cannot_run():
    from streaming.sql.batch import to_duckdb

    def untyped_args(x) -> str:
        return str(x)

    sql = EVENTS + "INSERT INTO out SELECT id, untyped_args(amount) FROM events;"
    with pytest.raises(SqlError, match="function untyped_args needs type hints") as error:
        to_duckdb(sql, functions={"untyped_args": untyped_args})
    assert (error.value.line, error.value.column) == (6, 28)
    table = EVENTS + (
        "CREATE FUNCTION words AS 'sql_udfs.words' LANGUAGE PYTHON;\n"
        "INSERT INTO out SELECT id, w FROM events, LATERAL TABLE(words(name)) AS T(w, n);"
    )
    # a table function translates (``test_sql_batch_lateral``), registered under its own name
    assert [f.name for f in to_duckdb(table).functions] == ["__lateral_words"]


def test_a_function_may_take_the_name_of_a_function_sqlglot_knows():
    def reverse(text: str | None) -> str | None:
        return None if text is None else text[::-1]

    sql = EVENTS + "INSERT INTO out SELECT id, REVERSE(name) FROM events WHERE name IS NOT NULL;"
    assert run(sql, functions={"reverse": reverse}) == [
        {"id": "a", "label": "nna"},
        {"id": "c", "label": "yc"},
    ]


def test_docs_python_function_example_runs_as_written(capsys):
    from pathlib import Path

    page = (Path(__file__).resolve().parents[3] / "docs" / "sql" / "functions.md").read_text()
    section = page.split("# Python functions in SQL\n", 1)[1]
    block = section.split("```python\n", 1)[1].split("```", 1)[0]
    exec(block, {})
    assert capsys.readouterr().out.splitlines() == ["[{'id': 'p1', 'risk': 'high'}]"]
