"""Window joins as Flink runs them (``window_join``): two window TVF inputs joined on
their window bounds, each window's joined rows out once, append-only, when stream time
(the smaller of both sides') passes its end plus the WATERMARK delay.

The expected rows are Flink's: the example of its Window JOIN docs page and
``WindowJoinITCase`` (inner, left, right, full outer, IS NOT DISTINCT FROM, the TVF's
rows joined) on ``TestData.windowDataWithTimestamp`` / ``windowData2WithTimestamp``. The
two tables' rows are read in turns, as Flink's parallel sources make progress together,
and each table ends with two rows a day later (``END``): the first closes every window
of the day, the second lets a window aggregation's last window out; their own join
results are left out (``of_the_day``).
"""

from __future__ import annotations

from typing import Any

import duckdb
import pandas as pd
import pytest
from flink_itcases import WINDOW_DATA, engine_rows, flink_rows, rows_of, run, window_table

from streaming.sql import SqlError, compile
from streaming.sql.batch import to_duckdb
from streaming.sql.timestamps import format_timestamp, parse_timestamp

#: ``TestData.windowData2WithTimestamp``: ``windowDataWithTimestamp`` with ``a1`` for ``a``
WINDOW_DATA2: list[tuple[Any, ...]] = [
    (*row[:6], "a1" if row[6] == "a" else row[6]) for row in WINDOW_DATA
]

TABLES = window_table("T1", "t1", "'1' SECOND") + window_table("T2", "t2", "'1' SECOND")

END = ("2020-10-11 00:00:00", "2020-10-11 00:01:00")


def inputs() -> list[tuple[str, dict[str, Any]]]:
    """Both tables' rows in turns, then each table's ``END`` rows."""
    result: list[tuple[str, dict[str, Any]]] = []
    for left, right in zip(rows_of(WINDOW_DATA), rows_of(WINDOW_DATA2), strict=True):
        result += [("t1", left), ("t2", right)]
    for at in END:
        row = {"rowtime": at, "name": "end-of-input", "string": "end-of-input"}
        result += [("t1", row), ("t2", row)]
    return result


def of_the_day(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of the data's windows (not those of the ``END`` rows)."""
    return [r for r in rows if not any(str(v).startswith("2020-10-11") for v in r.values())]


def aggregated(side: str, table: str, uv: str) -> str:
    return f"""(
SELECT
  `name`,
  window_start,
  window_end,
  COUNT(DISTINCT `string`) as {uv}
FROM TABLE(
   TUMBLE(TABLE {table}, DESCRIPTOR(rowtime), INTERVAL '5' SECOND))
GROUP BY `name`, window_start, window_end
) {side}"""


def uv_join(kind: str, columns: str, on: str) -> str:
    return (
        f"SELECT {columns}\nFROM {aggregated('L', 'T1', 'uv1')}\n{kind} "
        f"{aggregated('R', 'T2', 'uv2')}\nON {on}"
    )


ON = "L.window_start = R.window_start AND L.window_end = R.window_end AND L.`name` = R.`name`"
ON_NOT_DISTINCT = (
    "L.window_start = R.window_start AND L.window_end = R.window_end AND\n"
    "   L.`name` IS NOT DISTINCT from R.`name`"
)
UV_SINK = """CREATE TABLE out (name STRING, window_start TIMESTAMP(3), window_end TIMESTAMP(3),
  uv1 BIGINT, uv2 BIGINT) WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
"""
FULL_SINK = """CREATE TABLE out (l_name STRING, l_start TIMESTAMP(3), l_end TIMESTAMP(3),
  r_name STRING, r_start TIMESTAMP(3), r_end TIMESTAMP(3), uv1 BIGINT, uv2 BIGINT)
  WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
"""

CASES = {
    "testInnerJoin": (
        UV_SINK,
        uv_join("JOIN", "L.`name`, L.window_start, L.window_end, uv1, uv2", ON),
        [
            "b,2020-10-10T00:00:05,2020-10-10T00:00:10,2,2",
            "b,2020-10-10T00:00:15,2020-10-10T00:00:20,1,1",
            "b,2020-10-10T00:00:30,2020-10-10T00:00:35,1,1",
        ],
        "sttii",
    ),
    "testInnerJoinWithIsNotDistinctFrom": (
        UV_SINK,
        uv_join("JOIN", "L.`name`, L.window_start, L.window_end, uv1, uv2", ON_NOT_DISTINCT),
        [
            "b,2020-10-10T00:00:05,2020-10-10T00:00:10,2,2",
            "b,2020-10-10T00:00:15,2020-10-10T00:00:20,1,1",
            "b,2020-10-10T00:00:30,2020-10-10T00:00:35,1,1",
            "null,2020-10-10T00:00:30,2020-10-10T00:00:35,0,0",
        ],
        "sttii",
    ),
    "testLeftJoin": (
        UV_SINK,
        uv_join("LEFT JOIN", "L.`name`, L.window_start, L.window_end, uv1, uv2", ON),
        [
            "a,2020-10-10T00:00,2020-10-10T00:00:05,2,null",
            "a,2020-10-10T00:00:05,2020-10-10T00:00:10,1,null",
            "b,2020-10-10T00:00:05,2020-10-10T00:00:10,2,2",
            "b,2020-10-10T00:00:15,2020-10-10T00:00:20,1,1",
            "b,2020-10-10T00:00:30,2020-10-10T00:00:35,1,1",
            "null,2020-10-10T00:00:30,2020-10-10T00:00:35,0,null",
        ],
        "sttii",
    ),
    "testRightJoin": (
        UV_SINK,
        uv_join("RIGHT JOIN", "L.`name`, R.window_start, R.window_end, uv1, uv2", ON),
        [
            "null,2020-10-10T00:00,2020-10-10T00:00:05,null,2",
            "null,2020-10-10T00:00:05,2020-10-10T00:00:10,null,1",
            "b,2020-10-10T00:00:05,2020-10-10T00:00:10,2,2",
            "b,2020-10-10T00:00:15,2020-10-10T00:00:20,1,1",
            "b,2020-10-10T00:00:30,2020-10-10T00:00:35,1,1",
            "null,2020-10-10T00:00:30,2020-10-10T00:00:35,null,0",
        ],
        "sttii",
    ),
    "testOuterJoin": (
        FULL_SINK,
        uv_join(
            "FULL OUTER JOIN",
            "L.`name`, L.window_start, L.window_end, R.`name`, R.window_start, R.window_end,\n"
            "uv1, uv2",
            ON,
        ),
        [
            "a,2020-10-10T00:00,2020-10-10T00:00:05,null,null,null,2,null",
            "a,2020-10-10T00:00:05,2020-10-10T00:00:10,null,null,null,1,null",
            "b,2020-10-10T00:00:05,2020-10-10T00:00:10,b,2020-10-10T00:00:05,"
            "2020-10-10T00:00:10,2,2",
            "b,2020-10-10T00:00:15,2020-10-10T00:00:20,b,2020-10-10T00:00:15,"
            "2020-10-10T00:00:20,1,1",
            "b,2020-10-10T00:00:30,2020-10-10T00:00:35,b,2020-10-10T00:00:30,"
            "2020-10-10T00:00:35,1,1",
            "null,2020-10-10T00:00:30,2020-10-10T00:00:35,null,null,null,0,null",
            "null,null,null,a1,2020-10-10T00:00,2020-10-10T00:00:05,null,2",
            "null,null,null,a1,2020-10-10T00:00:05,2020-10-10T00:00:10,null,1",
            "null,null,null,null,2020-10-10T00:00:30,2020-10-10T00:00:35,null,0",
        ],
        "sttsttii",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_window_join_itcase(name):
    sink, query, expected, kinds = CASES[name]
    rows = of_the_day(run(TABLES + sink + "INSERT INTO out\n" + query + ";", inputs()))
    assert engine_rows(rows, kinds) == flink_rows(expected, kinds)


WTF_SINK = """CREATE TABLE out (ts TIMESTAMP(3), `int` INT, `double` DOUBLE, `float` DOUBLE,
  bigdec DECIMAL(10, 2), `string` STRING, name STRING, window_start TIMESTAMP(3),
  window_end TIMESTAMP(3), window_time TIMESTAMP(3), r_int INT, r_string STRING,
  r_name STRING) WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
"""

#: ``testInnerJoinOnWTF`` without its ``CAST(L.rowtime AS STRING)`` column (the time
#: itself is its first)
WTF_QUERY = """
INSERT INTO out
SELECT
  L.`rowtime`,
  L.`int`,
  L.`double`,
  L.`float`,
  L.`bigdec`,
  L.`string`,
  L.`name`,
  L.window_start,
  L.window_end,
  L.window_time,
  R.`int`,
  R.`string`,
  R.`name`
FROM (
SELECT *
FROM TABLE(
   TUMBLE(TABLE T1, DESCRIPTOR(rowtime), INTERVAL '5' SECOND))
) L
JOIN (
SELECT *
FROM TABLE(
   TUMBLE(TABLE T2, DESCRIPTOR(rowtime), INTERVAL '5' SECOND))
)R
ON L.window_start = R.window_start AND L.window_end = R.window_end AND
L.`name` = R.`name`;
"""


def test_window_join_of_the_tvf_rows_itcase():
    rows = of_the_day(run(TABLES + WTF_SINK + WTF_QUERY, inputs()))
    # the row time as read (its text), as Flink prints it
    rows = [{**row, "ts": format_timestamp(parse_timestamp(row["ts"]))} for row in rows]
    kinds = "tiddmss-tttiss"
    expected = [
        "2020-10-10T00:00:06,6,6.0,6.0,6.66,Hi,b,2020-10-10 00:00:06.000,"
        "2020-10-10T00:00:05,2020-10-10T00:00:10,2020-10-10T00:00:09.999,3,Hello,b",
        "2020-10-10T00:00:06,6,6.0,6.0,6.66,Hi,b,2020-10-10 00:00:06.000,"
        "2020-10-10T00:00:05,2020-10-10T00:00:10,2020-10-10T00:00:09.999,6,Hi,b",
        "2020-10-10T00:00:07,3,3.0,3.0,null,Hello,b,2020-10-10 00:00:07.000,"
        "2020-10-10T00:00:05,2020-10-10T00:00:10,2020-10-10T00:00:09.999,3,Hello,b",
        "2020-10-10T00:00:07,3,3.0,3.0,null,Hello,b,2020-10-10 00:00:07.000,"
        "2020-10-10T00:00:05,2020-10-10T00:00:10,2020-10-10T00:00:09.999,6,Hi,b",
        "2020-10-10T00:00:16,4,4.0,4.0,4.44,Hi,b,2020-10-10 00:00:16.000,"
        "2020-10-10T00:00:15,2020-10-10T00:00:20,2020-10-10T00:00:19.999,4,Hi,b",
        "2020-10-10T00:00:34,1,3.0,3.0,3.33,Comment#3,b,2020-10-10 00:00:34.000,"
        "2020-10-10T00:00:30,2020-10-10T00:00:35,2020-10-10T00:00:34.999,1,Comment#3,b",
    ]
    assert engine_rows(rows, kinds) == flink_rows(expected, kinds)


DOCS_TABLES = """
CREATE TABLE LeftTable (row_time TIMESTAMP(3), num INT, id STRING,
  WATERMARK FOR row_time AS row_time - INTERVAL '1' SECOND)
  WITH ('connector' = 'kafka', 'topic' = 'left', 'format' = 'json');
CREATE TABLE RightTable (row_time TIMESTAMP(3), num INT, id STRING,
  WATERMARK FOR row_time AS row_time - INTERVAL '1' SECOND)
  WITH ('connector' = 'kafka', 'topic' = 'right', 'format' = 'json');
CREATE TABLE out (L_Num INT, L_Id STRING, R_Num INT, R_Id STRING,
  window_start TIMESTAMP(3), window_end TIMESTAMP(3))
  WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
"""

#: the FULL JOIN of Flink's Window JOIN docs page, verbatim
DOCS_QUERY = """
INSERT INTO out
SELECT L.num as L_Num, L.id as L_Id, R.num as R_Num, R.id as R_Id, COALESCE(L.window_start, R.window_start) as window_start, COALESCE(L.window_end, R.window_end) as window_end
FROM (SELECT * FROM TABLE(TUMBLE(TABLE LeftTable, DESCRIPTOR(row_time), INTERVAL '5' MINUTES))) L
FULL JOIN (SELECT * FROM TABLE(TUMBLE(TABLE RightTable, DESCRIPTOR(row_time), INTERVAL '5' MINUTES))) R
ON L.num = R.num AND L.window_start = R.window_start AND L.window_end = R.window_end;
"""

#: the docs' LeftTable and RightTable: row_time, num, id
DOCS_LEFT = [
    ("2020-04-15 12:02", 1, "L1"),
    ("2020-04-15 12:06", 2, "L2"),
    ("2020-04-15 12:03", 3, "L3"),
]
DOCS_RIGHT = [
    ("2020-04-15 12:01", 2, "R2"),
    ("2020-04-15 12:04", 3, "R3"),
    ("2020-04-15 12:05", 4, "R4"),
]


def docs_row(row: tuple[Any, ...]) -> dict[str, Any]:
    return dict(zip(("row_time", "num", "id"), row, strict=True))


def docs_inputs(*later: tuple[str, tuple[Any, ...]]) -> list[tuple[str, dict[str, Any]]]:
    """The docs' rows in turns, then ``later`` ones, then a row on each side an hour
    later that closes every window before it."""
    result: list[tuple[str, dict[str, Any]]] = []
    for left, right in zip(DOCS_LEFT, DOCS_RIGHT, strict=True):
        result += [("left", docs_row(left)), ("right", docs_row(right))]
    result += [(topic, docs_row(row)) for topic, row in later]
    end = ("2020-04-15 13:00", 99, "end")
    return [*result, ("left", docs_row(end)), ("right", docs_row(end))]


def joined(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((tuple(r.values()) for r in rows), key=repr)


DOCS_EXPECTED = [
    (1, "L1", None, None, "2020-04-15 12:00:00.000", "2020-04-15 12:05:00.000"),
    (None, None, 2, "R2", "2020-04-15 12:00:00.000", "2020-04-15 12:05:00.000"),
    (3, "L3", 3, "R3", "2020-04-15 12:00:00.000", "2020-04-15 12:05:00.000"),
    (2, "L2", None, None, "2020-04-15 12:05:00.000", "2020-04-15 12:10:00.000"),
    (None, None, 4, "R4", "2020-04-15 12:05:00.000", "2020-04-15 12:10:00.000"),
]


def test_the_docs_full_window_join():
    rows = run(DOCS_TABLES + DOCS_QUERY, docs_inputs())
    assert joined(rows) == sorted(DOCS_EXPECTED, key=repr)


def test_a_window_comes_out_once_its_end_passes_and_a_late_row_is_dropped():
    later = [
        ("left", ("2020-04-15 12:20", 9, "L9")),
        ("right", ("2020-04-15 12:20", 9, "R9")),
        # its window [12:05, 12:10) came out when both sides passed 12:10:01: late
        ("left", ("2020-04-15 12:07", 4, "late")),
    ]
    with_later = DOCS_TABLES + DOCS_QUERY
    rows = run(with_later, docs_inputs(*later))
    nine = (9, "L9", 9, "R9", "2020-04-15 12:20:00.000", "2020-04-15 12:25:00.000")
    assert joined(rows) == sorted([*DOCS_EXPECTED, nine], key=repr)
    # the first two windows came out before the 12:20 window's row
    assert [r["L_Id"] or r["R_Id"] for r in rows][-1] == "L9"


def test_a_window_waits_for_the_slower_side():
    # only the left side passes the windows' ends: nothing comes out yet
    inputs = [("left", docs_row(row)) for row in DOCS_LEFT]
    inputs += [("left", docs_row(("2020-04-15 13:00", 0, "end")))]
    inputs += [("right", docs_row(row)) for row in DOCS_RIGHT]
    assert run(DOCS_TABLES + DOCS_QUERY, inputs) == []


def window_query(kind: str, window: str) -> str:
    return f"""
INSERT INTO out
SELECT L.num, L.id, R.num, R.id, L.window_start, L.window_end
FROM (SELECT row_time, num, id, window_start, window_end
      FROM TABLE({kind}(TABLE LeftTable, DESCRIPTOR(row_time), {window}))) L
JOIN (SELECT * FROM TABLE({kind}(TABLE RightTable, DESCRIPTOR(row_time), {window}))) R
ON L.num = R.num AND L.window_start = R.window_start AND L.window_end = R.window_end;
"""


@pytest.mark.parametrize(
    ("kind", "window", "expected"),
    [
        (
            "HOP",
            "INTERVAL '5' MINUTES, INTERVAL '10' MINUTES",
            [
                (2, "L2", 2, "R2", "12:00", "12:10"),
                (3, "L3", 3, "R3", "11:55", "12:05"),
                (3, "L3", 3, "R3", "12:00", "12:10"),
            ],
        ),
        (
            "CUMULATE",
            "INTERVAL '5' MINUTES, INTERVAL '10' MINUTES",
            [
                (2, "L2", 2, "R2", "12:00", "12:10"),
                (3, "L3", 3, "R3", "12:00", "12:05"),
                (3, "L3", 3, "R3", "12:00", "12:10"),
            ],
        ),
    ],
)
def test_hop_and_cumulate_window_joins(kind, window, expected):
    rows = run(DOCS_TABLES + window_query(kind, window), docs_inputs())
    at = lambda hm: f"2020-04-15 {hm}:00.000"  # noqa: E731
    assert joined(rows) == sorted(((*r[:4], at(r[4]), at(r[5])) for r in expected), key=repr)


def test_a_window_join_needs_both_window_bounds_equal():
    query = DOCS_QUERY.replace("AND L.window_end = R.window_end", "")
    with pytest.raises(SqlError, match=r"window_end = R\.window_end"):
        compile(DOCS_TABLES + query)


def test_a_window_join_needs_the_same_window_on_both_sides():
    query = DOCS_QUERY.replace(
        "TUMBLE(TABLE RightTable, DESCRIPTOR(row_time), INTERVAL '5' MINUTES)",
        "TUMBLE(TABLE RightTable, DESCRIPTOR(row_time), INTERVAL '10' MINUTES)",
    )
    with pytest.raises(SqlError, match="the same window"):
        compile(DOCS_TABLES + query)


def batch_rows(sql: str, inputs: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The rows of the DuckDB translation of ``sql`` over ``inputs``."""
    con = duckdb.connect()
    try:
        return to_duckdb(sql).run(
            con,
            {
                name: pd.DataFrame([row for t, row in inputs if t == topic])
                for name, topic in (("LeftTable", "left"), ("RightTable", "right"))
            },
        )
    finally:
        con.close()


@pytest.mark.parametrize(
    "query",
    [
        DOCS_QUERY,
        window_query("HOP", "INTERVAL '5' MINUTES, INTERVAL '10' MINUTES"),
        window_query("CUMULATE", "INTERVAL '5' MINUTES, INTERVAL '10' MINUTES"),
    ],
)
def test_window_joins_agree_with_their_duckdb_translation(query):
    later = (("left", ("2020-04-15 12:20", 9, "L9")), ("right", ("2020-04-15 12:20", 9, "R9")))
    inputs = docs_inputs(*later)
    stream = run(DOCS_TABLES + query, inputs)
    # the end-of-input rows' own windows never close in the stream: not in the batch
    batch = batch_rows(DOCS_TABLES + query, inputs[:-2])
    assert joined(stream) == joined(batch)
    assert any(row["L_Id"] == "L9" for row in batch)


def test_window_time_and_a_filter_in_the_batch_translation():
    query = """
INSERT INTO out
SELECT L.num, L.id, R.num, R.id, L.window_start, L.window_time
FROM (SELECT * FROM TABLE(TUMBLE(TABLE LeftTable, DESCRIPTOR(row_time), INTERVAL '5' MINUTES))
      WHERE num > 1) L
LEFT JOIN (SELECT * FROM TABLE(TUMBLE(TABLE RightTable, DESCRIPTOR(row_time), INTERVAL '5' MINUTES))) R
ON L.num = R.num AND L.window_start = R.window_start AND L.window_end = R.window_end;
"""
    inputs = docs_inputs()
    stream = run(DOCS_TABLES + query, inputs)
    assert joined(stream) == joined(batch_rows(DOCS_TABLES + query, inputs[:-2]))
    assert joined(stream) == [
        (2, "L2", None, None, "2020-04-15 12:05:00.000", "2020-04-15 12:09:59.999"),
        (3, "L3", 3, "R3", "2020-04-15 12:00:00.000", "2020-04-15 12:04:59.999"),
    ]


def itcase_batch_rows(sql: str, inputs: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The rows of the DuckDB translation of ``sql`` over the ITCase tables' ``inputs``."""
    con = duckdb.connect()
    try:
        return to_duckdb(sql).run(
            con,
            {
                name: pd.DataFrame([row for t, row in inputs if t == topic])
                for name, topic in (("T1", "t1"), ("T2", "t2"))
            },
        )
    finally:
        con.close()


@pytest.mark.parametrize("name", list(CASES))
def test_window_joins_of_window_aggregations_agree_with_their_duckdb_translation(name):
    sink, query, expected, kinds = CASES[name]
    sql = TABLES + sink + "INSERT INTO out\n" + query + ";"
    batch = of_the_day(itcase_batch_rows(sql, inputs()))
    assert engine_rows(batch, kinds) == flink_rows(expected, kinds)
    assert engine_rows(of_the_day(run(sql, inputs())), kinds) == engine_rows(batch, kinds)


HOP_COUNTS = """(
  SELECT {key}COUNT(*) AS cnt, window_start AS starttime, window_end AS endtime
  FROM TABLE(HOP(TABLE T1, DESCRIPTOR(rowtime), INTERVAL '5' SECOND, INTERVAL '10' SECOND))
  GROUP BY `name`, window_start, window_end
)"""

#: Nexmark q5's shape: each window's counts per name joined with their maximum (an
#: aggregation of the window aggregation), the bounds renamed (a join of window results)
HOT_NAMES = f"""
CREATE TABLE out (name STRING, cnt BIGINT, starttime TIMESTAMP(3))
  WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
INSERT INTO out
SELECT L.`name`, L.cnt, L.starttime
FROM {HOP_COUNTS.format(key="`name`, ")} L
JOIN (
  SELECT max(C.cnt) AS maxn, C.starttime, C.endtime
  FROM {HOP_COUNTS.format(key="")} C
  GROUP BY C.starttime, C.endtime
) M
ON L.starttime = M.starttime AND L.endtime = M.endtime AND L.cnt >= M.maxn;
"""

#: Nexmark q8's shape: names of both tables in the same window, the bounds renamed
NAMES_IN_BOTH = """
CREATE TABLE out (name STRING, starttime TIMESTAMP(3), ints BIGINT)
  WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
INSERT INTO out
SELECT P.`name`, P.starttime, P.ints + A.ints
FROM (
  SELECT `name`, SUM(`int`) AS ints, window_start AS starttime, window_end AS endtime
  FROM TABLE(TUMBLE(TABLE T1, DESCRIPTOR(rowtime), INTERVAL '5' SECOND))
  GROUP BY `name`, window_start, window_end
) P
JOIN (
  SELECT `name`, SUM(`int`) AS ints, window_start AS starttime, window_end AS endtime
  FROM TABLE(TUMBLE(TABLE T2, DESCRIPTOR(rowtime), INTERVAL '5' SECOND))
  WHERE `int` > 1
  GROUP BY `name`, window_start, window_end
) A
ON P.`name` = A.`name` AND P.starttime = A.starttime AND P.endtime = A.endtime;
"""


def test_a_join_of_a_window_aggregation_with_its_aggregation_agrees_with_duckdb():
    """Nexmark q5's shape, a window join as Flink plans it (the bounds renamed, one side
    an aggregation of a window aggregation): each window's counts join its maximum once
    both are out, however much later the maximum comes (it closes after its input's
    windows: one more row, a minute on, closes the day's). The rows are the batch's but
    in the window of the late row at 00:00:04, which the stream drops as Flink does."""
    later = {"rowtime": "2020-10-11 00:02:00", "name": "end-of-input", "string": "end"}
    read = [(topic, row) for topic, row in inputs() if topic == "t1"] + [("t1", later)]

    def of_the_day(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return sorted(
            (tuple(r.values()) for r in rows if r["starttime"] < "2020-10-10 01"), key=repr
        )

    stream = of_the_day(run(TABLES + HOT_NAMES, read))
    batch = of_the_day(itcase_batch_rows(TABLES + HOT_NAMES, read))
    late_window = "2020-10-09 23:59:55.000"
    assert [r for r in stream if r[2] != late_window] == [r for r in batch if r[2] != late_window]
    assert [r for r in stream if r[2] == late_window] == [("a", 4, late_window)]
    assert batch == sorted(
        [
            ("a", 5, late_window),
            ("a", 6, "2020-10-10 00:00:00.000"),
            ("b", 2, "2020-10-10 00:00:05.000"),
            ("b", 1, "2020-10-10 00:00:10.000"),
            ("b", 1, "2020-10-10 00:00:15.000"),
            ("b", 1, "2020-10-10 00:00:25.000"),
            (None, 1, "2020-10-10 00:00:25.000"),
            ("b", 1, "2020-10-10 00:00:30.000"),
            (None, 1, "2020-10-10 00:00:30.000"),
        ],
        key=repr,
    )


def test_a_join_of_renamed_window_results_agrees_with_its_duckdb_translation():
    """Nexmark q8's shape: the stream joins the window results whose bounds are renamed
    (an interval join on the equal bounds); its rows are the batch join's."""
    sql = TABLES + NAMES_IN_BOTH
    stream = sorted(of_the_day(run(sql, inputs())), key=lambda r: r["starttime"])
    # (the frame's `int` column is DOUBLE: the end-of-input rows have none)
    batch = sorted(of_the_day(itcase_batch_rows(sql, inputs())), key=lambda r: r["starttime"])
    assert stream == batch
    assert batch == [
        {"name": "b", "starttime": "2020-10-10 00:00:05.000", "ints": 18},
        {"name": "b", "starttime": "2020-10-10 00:00:15.000", "ints": 8},
    ]


def uv_semi(negated: bool) -> str:
    return f"""
SELECT * FROM (
  SELECT
    `name`,
    window_start,
    window_end,
    COUNT(DISTINCT `string`) as uv1
    FROM TABLE(
    TUMBLE(TABLE T1, DESCRIPTOR(rowtime), INTERVAL '5' SECOND))
  GROUP BY `name`, window_start, window_end
) L WHERE {"NOT " if negated else ""}EXISTS (
SELECT * FROM(
  SELECT
    `name`,
    window_start,
    window_end,
    COUNT(DISTINCT `string`) as uv2
    FROM TABLE(
      TUMBLE(TABLE T2, DESCRIPTOR(rowtime), INTERVAL '5' SECOND))
    GROUP BY `name`, window_start, window_end
) R
  WHERE L.window_start = R.window_start AND L.window_end = R.window_end
        AND L.`name` = R.`name`)
"""


SEMI_SINK = """CREATE TABLE out (name STRING, window_start TIMESTAMP(3), window_end TIMESTAMP(3),
  uv1 BIGINT) WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
"""


@pytest.mark.parametrize(
    ("negated", "expected"),
    [
        (  # testSemiJoinExists
            False,
            [
                "b,2020-10-10T00:00:05,2020-10-10T00:00:10,2",
                "b,2020-10-10T00:00:15,2020-10-10T00:00:20,1",
                "b,2020-10-10T00:00:30,2020-10-10T00:00:35,1",
            ],
        ),
        (  # testAntiJoinNotExists
            True,
            [
                "a,2020-10-10T00:00,2020-10-10T00:00:05,2",
                "a,2020-10-10T00:00:05,2020-10-10T00:00:10,1",
                "null,2020-10-10T00:00:30,2020-10-10T00:00:35,0",
            ],
        ),
    ],
)
def test_window_semi_and_anti_join_itcases(negated, expected):
    sql = TABLES + SEMI_SINK + "INSERT INTO out\n" + uv_semi(negated) + ";"
    rows = of_the_day(run(sql, inputs()))
    assert engine_rows(rows, "stti") == flink_rows(expected, "stti")


def test_window_semi_join_with_in_itcase():
    # testSemiJoinIN
    query = (
        uv_semi(False)
        .replace("WHERE EXISTS (\nSELECT * FROM(", "WHERE L.`name` IN (\nSELECT `name` FROM(")
        .replace("\n        AND L.`name` = R.`name`)", ")")
    )
    assert "IN (" in query and "L.`name` = R.`name`" not in query
    rows = of_the_day(run(TABLES + SEMI_SINK + "INSERT INTO out\n" + query + ";", inputs()))
    expected = [
        "b,2020-10-10T00:00:05,2020-10-10T00:00:10,2",
        "b,2020-10-10T00:00:15,2020-10-10T00:00:20,1",
        "b,2020-10-10T00:00:30,2020-10-10T00:00:35,1",
    ]
    assert engine_rows(rows, "stti") == flink_rows(expected, "stti")


def test_exists_without_window_tvfs_stays_unsupported():
    query = uv_semi(False).replace(
        "FROM TABLE(\n      TUMBLE(TABLE T2, DESCRIPTOR(rowtime), INTERVAL '5' SECOND))", "FROM T2"
    )
    assert "TUMBLE(TABLE T2" not in query
    with pytest.raises(SqlError, match="a subquery in an expression"):
        compile(TABLES + SEMI_SINK + "INSERT INTO out\n" + query + ";")
