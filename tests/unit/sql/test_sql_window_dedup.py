"""Window deduplication and window Top-N directly over a window TVF, as Flink runs them:
each window's rows ranked, its top rows written once (append-only) when the watermark
passes the window's end.

Expected rows from Flink's ``WindowDeduplicateITCase`` and ``WindowRankITCase`` on
``TestData.windowDataWithTimestamp`` (``flink_itcases``), without ``window_time`` (not
supported here) and with ``rowtime`` for Flink's ``TO_TIMESTAMP(ts)`` and
``CAST(rowtime AS STRING)``; the inputs end with a row far later, whose watermark closes
every window (Flink's bounded input ends with a watermark at +infinity).
"""

from __future__ import annotations

import pytest
from flink_itcases import (
    WINDOW_DATA,
    end_of_input,
    engine_rows,
    flink_rows,
    rows_of,
    run,
    window_table,
)

from streaming import TopologyTestDriver, serdes
from streaming.sql import compile

T1 = window_table("T1", "t1", "'1' SECOND")

SINK = """
CREATE TABLE out (
  rowtime TIMESTAMP(3), `int` INT, `double` DOUBLE, `float` FLOAT, bigdec DECIMAL(10, 2),
  `string` STRING, `name` STRING, window_start TIMESTAMP(3), window_end TIMESTAMP(3)
) WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
"""

#: rowtime passes through as the input's text (Flink's TO_TIMESTAMP(ts) prints it ISO)
KINDS = "siddmsstt"

INPUT = [("t1", row) for row in rows_of(WINDOW_DATA)] + [
    ("t1", end_of_input("2020-10-10 00:01:00")),
]


def dedup_query(tvf: str, direction: str) -> str:
    return f"""
INSERT INTO out
SELECT rowtime, `int`, `double`, `float`, `bigdec`, `string`, `name`, window_start, window_end
FROM (
  SELECT *,
    ROW_NUMBER() OVER(
      PARTITION BY window_start, window_end, `name` ORDER BY rowtime {direction}) as rownum
  FROM TABLE({tvf})
)
WHERE rownum <= 1
"""


TUMBLE = "TUMBLE(TABLE T1, DESCRIPTOR(rowtime), INTERVAL '5' SECOND)"
HOP = "HOP(TABLE T1, DESCRIPTOR(rowtime), INTERVAL '5' SECOND, INTERVAL '10' SECOND)"
CUMULATE = "CUMULATE(TABLE T1, DESCRIPTOR(rowtime), INTERVAL '5' SECOND, INTERVAL '15' SECOND)"


def flink(lines: list[str]) -> list[tuple]:
    """Flink's expected rows without its duplicated time columns and window_time."""
    kept = []
    for line in lines:
        values = line.split(",")
        # TO_TIMESTAMP(ts), int, double, float, bigdec, string, name, CAST(rowtime), ws, we, wt
        kept.append(",".join([values[0].replace("T", " "), *values[1:7], *values[8:10]]))
    return flink_rows(kept, KINDS)


@pytest.mark.parametrize(
    ("tvf", "direction", "expected"),
    [
        (
            # WindowDeduplicateITCase.testTumbleWindowKeepLastRow
            TUMBLE,
            "DESC",
            [
                "2020-10-10T00:00:04,5,5.0,5.0,5.55,null,a,2020-10-10 00:00:04.000,"
                "2020-10-10T00:00,2020-10-10T00:00:05,2020-10-10T00:00:04.999",
                "2020-10-10T00:00:08,3,null,3.0,3.33,Comment#2,a,2020-10-10 00:00:08.000,"
                "2020-10-10T00:00:05,2020-10-10T00:00:10,2020-10-10T00:00:09.999",
                "2020-10-10T00:00:07,3,3.0,3.0,null,Hello,b,2020-10-10 00:00:07.000,"
                "2020-10-10T00:00:05,2020-10-10T00:00:10,2020-10-10T00:00:09.999",
                "2020-10-10T00:00:16,4,4.0,4.0,4.44,Hi,b,2020-10-10 00:00:16.000,"
                "2020-10-10T00:00:15,2020-10-10T00:00:20,2020-10-10T00:00:19.999",
                "2020-10-10T00:00:32,7,7.0,7.0,7.77,null,null,2020-10-10 00:00:32.000,"
                "2020-10-10T00:00:30,2020-10-10T00:00:35,2020-10-10T00:00:34.999",
                "2020-10-10T00:00:34,1,3.0,3.0,3.33,Comment#3,b,2020-10-10 00:00:34.000,"
                "2020-10-10T00:00:30,2020-10-10T00:00:35,2020-10-10T00:00:34.999",
            ],
        ),
        (
            # WindowDeduplicateITCase.testTumbleWindowKeepFirstRow
            TUMBLE,
            "",
            [
                "2020-10-10T00:00:01,1,1.0,1.0,1.11,Hi,a,2020-10-10 00:00:01.000,"
                "2020-10-10T00:00,2020-10-10T00:00:05,2020-10-10T00:00:04.999",
                "2020-10-10T00:00:08,3,null,3.0,3.33,Comment#2,a,2020-10-10 00:00:08.000,"
                "2020-10-10T00:00:05,2020-10-10T00:00:10,2020-10-10T00:00:09.999",
                "2020-10-10T00:00:06,6,6.0,6.0,6.66,Hi,b,2020-10-10 00:00:06.000,"
                "2020-10-10T00:00:05,2020-10-10T00:00:10,2020-10-10T00:00:09.999",
                "2020-10-10T00:00:16,4,4.0,4.0,4.44,Hi,b,2020-10-10 00:00:16.000,"
                "2020-10-10T00:00:15,2020-10-10T00:00:20,2020-10-10T00:00:19.999",
                "2020-10-10T00:00:32,7,7.0,7.0,7.77,null,null,2020-10-10 00:00:32.000,"
                "2020-10-10T00:00:30,2020-10-10T00:00:35,2020-10-10T00:00:34.999",
                "2020-10-10T00:00:34,1,3.0,3.0,3.33,Comment#3,b,2020-10-10 00:00:34.000,"
                "2020-10-10T00:00:30,2020-10-10T00:00:35,2020-10-10T00:00:34.999",
            ],
        ),
        (
            # WindowDeduplicateITCase.testCumulateWindowKeepLastRow
            CUMULATE,
            "DESC",
            [
                "2020-10-10T00:00:04,5,5.0,5.0,5.55,null,a,2020-10-10 00:00:04.000,"
                "2020-10-10T00:00,2020-10-10T00:00:05,2020-10-10T00:00:04.999",
                "2020-10-10T00:00:08,3,null,3.0,3.33,Comment#2,a,2020-10-10 00:00:08.000,"
                "2020-10-10T00:00,2020-10-10T00:00:10,2020-10-10T00:00:09.999",
                "2020-10-10T00:00:08,3,null,3.0,3.33,Comment#2,a,2020-10-10 00:00:08.000,"
                "2020-10-10T00:00,2020-10-10T00:00:15,2020-10-10T00:00:14.999",
                "2020-10-10T00:00:07,3,3.0,3.0,null,Hello,b,2020-10-10 00:00:07.000,"
                "2020-10-10T00:00,2020-10-10T00:00:10,2020-10-10T00:00:09.999",
                "2020-10-10T00:00:07,3,3.0,3.0,null,Hello,b,2020-10-10 00:00:07.000,"
                "2020-10-10T00:00,2020-10-10T00:00:15,2020-10-10T00:00:14.999",
                "2020-10-10T00:00:16,4,4.0,4.0,4.44,Hi,b,2020-10-10 00:00:16.000,"
                "2020-10-10T00:00:15,2020-10-10T00:00:20,2020-10-10T00:00:19.999",
                "2020-10-10T00:00:16,4,4.0,4.0,4.44,Hi,b,2020-10-10 00:00:16.000,"
                "2020-10-10T00:00:15,2020-10-10T00:00:25,2020-10-10T00:00:24.999",
                "2020-10-10T00:00:16,4,4.0,4.0,4.44,Hi,b,2020-10-10 00:00:16.000,"
                "2020-10-10T00:00:15,2020-10-10T00:00:30,2020-10-10T00:00:29.999",
                "2020-10-10T00:00:32,7,7.0,7.0,7.77,null,null,2020-10-10 00:00:32.000,"
                "2020-10-10T00:00:30,2020-10-10T00:00:35,2020-10-10T00:00:34.999",
                "2020-10-10T00:00:32,7,7.0,7.0,7.77,null,null,2020-10-10 00:00:32.000,"
                "2020-10-10T00:00:30,2020-10-10T00:00:40,2020-10-10T00:00:39.999",
                "2020-10-10T00:00:32,7,7.0,7.0,7.77,null,null,2020-10-10 00:00:32.000,"
                "2020-10-10T00:00:30,2020-10-10T00:00:45,2020-10-10T00:00:44.999",
                "2020-10-10T00:00:34,1,3.0,3.0,3.33,Comment#3,b,2020-10-10 00:00:34.000,"
                "2020-10-10T00:00:30,2020-10-10T00:00:35,2020-10-10T00:00:34.999",
                "2020-10-10T00:00:34,1,3.0,3.0,3.33,Comment#3,b,2020-10-10 00:00:34.000,"
                "2020-10-10T00:00:30,2020-10-10T00:00:40,2020-10-10T00:00:39.999",
                "2020-10-10T00:00:34,1,3.0,3.0,3.33,Comment#3,b,2020-10-10 00:00:34.000,"
                "2020-10-10T00:00:30,2020-10-10T00:00:45,2020-10-10T00:00:44.999",
            ],
        ),
    ],
)
def test_window_deduplicate_itcase(tvf, direction, expected):
    rows = run(T1 + SINK + dedup_query(tvf, direction), INPUT)
    assert engine_rows(rows, KINDS) == flink(expected)


def top_query(tvf: str) -> str:
    return f"""
INSERT INTO out
SELECT rowtime, `int`, `double`, `float`, `bigdec`, `string`, `name`, window_start, window_end
FROM (
  SELECT *,
    ROW_NUMBER() OVER(
      PARTITION BY window_start, window_end, `name` ORDER BY `int` DESC) as rownum
  FROM TABLE({tvf})
)
WHERE rownum <= 2
"""


def test_window_rank_itcase_tumble_window_tvf():
    # WindowRankITCase.testTumbleWindowTVF: the late row (00:00:04 after 00:00:08) is
    # dropped; of a's two 2s, the one read first ranks first
    expected = [
        "2020-10-10T00:00:04,5,5.0,5.0,5.55,null,a,2020-10-10 00:00:04.000,"
        "2020-10-10T00:00,2020-10-10T00:00:05,2020-10-10T00:00:04.999",
        "2020-10-10T00:00:02,2,2.0,2.0,2.22,Comment#1,a,2020-10-10 00:00:02.000,"
        "2020-10-10T00:00,2020-10-10T00:00:05,2020-10-10T00:00:04.999",
        "2020-10-10T00:00:08,3,null,3.0,3.33,Comment#2,a,2020-10-10 00:00:08.000,"
        "2020-10-10T00:00:05,2020-10-10T00:00:10,2020-10-10T00:00:09.999",
        "2020-10-10T00:00:06,6,6.0,6.0,6.66,Hi,b,2020-10-10 00:00:06.000,"
        "2020-10-10T00:00:05,2020-10-10T00:00:10,2020-10-10T00:00:09.999",
        "2020-10-10T00:00:07,3,3.0,3.0,null,Hello,b,2020-10-10 00:00:07.000,"
        "2020-10-10T00:00:05,2020-10-10T00:00:10,2020-10-10T00:00:09.999",
        "2020-10-10T00:00:16,4,4.0,4.0,4.44,Hi,b,2020-10-10 00:00:16.000,"
        "2020-10-10T00:00:15,2020-10-10T00:00:20,2020-10-10T00:00:19.999",
        "2020-10-10T00:00:32,7,7.0,7.0,7.77,null,null,2020-10-10 00:00:32.000,"
        "2020-10-10T00:00:30,2020-10-10T00:00:35,2020-10-10T00:00:34.999",
        "2020-10-10T00:00:34,1,3.0,3.0,3.33,Comment#3,b,2020-10-10 00:00:34.000,"
        "2020-10-10T00:00:30,2020-10-10T00:00:35,2020-10-10T00:00:34.999",
    ]
    rows = run(T1 + SINK + top_query(TUMBLE), INPUT)
    assert engine_rows(rows, KINDS) == flink(expected)


CALC_SINK = """
CREATE TABLE out (`int` INT, `string` STRING, `name` STRING, window_start TIMESTAMP(3),
  window_end TIMESTAMP(3))
  WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');
"""


def calc_query(tvf: str) -> str:
    return f"""
INSERT INTO out
SELECT `int`, `string`, `name`, window_start, window_end
FROM (
  SELECT *,
    ROW_NUMBER() OVER(
      PARTITION BY window_start, window_end, `name` ORDER BY `int` DESC) as rownum
  FROM TABLE({tvf})
)
WHERE rownum <= 2
"""


@pytest.mark.parametrize(
    ("tvf", "expected"),
    [
        (
            # WindowRankITCase.testTumbleWindowTVFWithCalc
            TUMBLE,
            [
                "5,null,a,2020-10-10T00:00,2020-10-10T00:00:05,2020-10-10T00:00:04.999",
                "2,Comment#1,a,2020-10-10T00:00,2020-10-10T00:00:05,2020-10-10T00:00:04.999",
                "3,Comment#2,a,2020-10-10T00:00:05,2020-10-10T00:00:10,2020-10-10T00:00:09.999",
                "6,Hi,b,2020-10-10T00:00:05,2020-10-10T00:00:10,2020-10-10T00:00:09.999",
                "3,Hello,b,2020-10-10T00:00:05,2020-10-10T00:00:10,2020-10-10T00:00:09.999",
                "4,Hi,b,2020-10-10T00:00:15,2020-10-10T00:00:20,2020-10-10T00:00:19.999",
                "7,null,null,2020-10-10T00:00:30,2020-10-10T00:00:35,2020-10-10T00:00:34.999",
                "1,Comment#3,b,2020-10-10T00:00:30,2020-10-10T00:00:35,2020-10-10T00:00:34.999",
            ],
        ),
        (
            # WindowRankITCase.testHopWindowTVFWithCalc: the late row (00:00:04) is
            # dropped from [23:59:55, 00:00:05), closed, and counts in [00:00, 00:00:10)
            HOP,
            [
                "5,null,a,2020-10-09T23:59:55,2020-10-10T00:00:05,2020-10-10T00:00:04.999",
                "2,Comment#1,a,2020-10-09T23:59:55,2020-10-10T00:00:05,2020-10-10T00:00:04.999",
                "5,null,a,2020-10-10T00:00,2020-10-10T00:00:10,2020-10-10T00:00:09.999",
                "5,Hi,a,2020-10-10T00:00,2020-10-10T00:00:10,2020-10-10T00:00:09.999",
                "6,Hi,b,2020-10-10T00:00,2020-10-10T00:00:10,2020-10-10T00:00:09.999",
                "6,Hi,b,2020-10-10T00:00:05,2020-10-10T00:00:15,2020-10-10T00:00:14.999",
                "3,Hello,b,2020-10-10T00:00,2020-10-10T00:00:10,2020-10-10T00:00:09.999",
                "3,Comment#2,a,2020-10-10T00:00:05,2020-10-10T00:00:15,2020-10-10T00:00:14.999",
                "3,Hello,b,2020-10-10T00:00:05,2020-10-10T00:00:15,2020-10-10T00:00:14.999",
                "4,Hi,b,2020-10-10T00:00:10,2020-10-10T00:00:20,2020-10-10T00:00:19.999",
                "4,Hi,b,2020-10-10T00:00:15,2020-10-10T00:00:25,2020-10-10T00:00:24.999",
                "7,null,null,2020-10-10T00:00:25,2020-10-10T00:00:35,2020-10-10T00:00:34.999",
                "7,null,null,2020-10-10T00:00:30,2020-10-10T00:00:40,2020-10-10T00:00:39.999",
                "1,Comment#3,b,2020-10-10T00:00:25,2020-10-10T00:00:35,2020-10-10T00:00:34.999",
                "1,Comment#3,b,2020-10-10T00:00:30,2020-10-10T00:00:40,2020-10-10T00:00:39.999",
            ],
        ),
        (
            # WindowRankITCase.testCumulateWindowTVFWithCalc: the late row (00:00:04)
            # still counts in the windows [00:00, 00:10) and [00:00, 00:15), not closed
            CUMULATE,
            [
                "5,null,a,2020-10-10T00:00,2020-10-10T00:00:05,2020-10-10T00:00:04.999",
                "2,Comment#1,a,2020-10-10T00:00,2020-10-10T00:00:05,2020-10-10T00:00:04.999",
                "5,null,a,2020-10-10T00:00,2020-10-10T00:00:10,2020-10-10T00:00:09.999",
                "5,Hi,a,2020-10-10T00:00,2020-10-10T00:00:10,2020-10-10T00:00:09.999",
                "5,null,a,2020-10-10T00:00,2020-10-10T00:00:15,2020-10-10T00:00:14.999",
                "5,Hi,a,2020-10-10T00:00,2020-10-10T00:00:15,2020-10-10T00:00:14.999",
                "6,Hi,b,2020-10-10T00:00,2020-10-10T00:00:10,2020-10-10T00:00:09.999",
                "6,Hi,b,2020-10-10T00:00,2020-10-10T00:00:15,2020-10-10T00:00:14.999",
                "3,Hello,b,2020-10-10T00:00,2020-10-10T00:00:10,2020-10-10T00:00:09.999",
                "3,Hello,b,2020-10-10T00:00,2020-10-10T00:00:15,2020-10-10T00:00:14.999",
                "4,Hi,b,2020-10-10T00:00:15,2020-10-10T00:00:20,2020-10-10T00:00:19.999",
                "4,Hi,b,2020-10-10T00:00:15,2020-10-10T00:00:25,2020-10-10T00:00:24.999",
                "4,Hi,b,2020-10-10T00:00:15,2020-10-10T00:00:30,2020-10-10T00:00:29.999",
                "7,null,null,2020-10-10T00:00:30,2020-10-10T00:00:35,2020-10-10T00:00:34.999",
                "7,null,null,2020-10-10T00:00:30,2020-10-10T00:00:40,2020-10-10T00:00:39.999",
                "7,null,null,2020-10-10T00:00:30,2020-10-10T00:00:45,2020-10-10T00:00:44.999",
                "1,Comment#3,b,2020-10-10T00:00:30,2020-10-10T00:00:35,2020-10-10T00:00:34.999",
                "1,Comment#3,b,2020-10-10T00:00:30,2020-10-10T00:00:40,2020-10-10T00:00:39.999",
                "1,Comment#3,b,2020-10-10T00:00:30,2020-10-10T00:00:45,2020-10-10T00:00:44.999",
            ],
        ),
    ],
)
def test_window_rank_itcase_window_tvf_with_calc(tvf, expected):
    rows = run(T1 + CALC_SINK + calc_query(tvf), INPUT)
    kinds = "isstt"
    assert engine_rows(rows, kinds) == flink_rows(
        [line.rsplit(",", 1)[0] for line in expected], kinds
    )


def test_a_window_comes_out_once_the_watermark_passes_its_end():
    with TopologyTestDriver(compile(T1 + CALC_SINK + calc_query(TUMBLE))) as driver:
        t1 = driver.create_input_topic("t1", key_serde=serdes.String())
        out = driver.create_output_topic("out", key_serde=serdes.String())

        def row(at: str, value: int) -> dict:
            return {"rowtime": f"2020-10-10 00:00:{at}", "int": value, "name": "a"}

        t1.pipe_input(None, row("01", 1))
        t1.pipe_input(None, row("04", 2))
        t1.pipe_input(None, row("05", 3))  # watermark 00:00:04: [00:00, 00:05) still open
        assert out.read_records_to_list() == []
        t1.pipe_input(None, row("03", 9))  # in time: the watermark is not past its window
        t1.pipe_input(None, row("06", 4))  # watermark 00:00:05: the window closes
        assert [r.value["int"] for r in out.read_records_to_list()] == [9, 2]
        t1.pipe_input(None, row("02", 8))  # late for the closed window: dropped
        t1.pipe_input(None, row("20", 0))
        assert [r.value["int"] for r in out.read_records_to_list()] == [4, 3]


@pytest.mark.parametrize(("direction", "kept"), [(" DESC", "second"), ("", "first")])
def test_window_deduplication_of_rows_at_one_time(direction, kept):
    # Flink's window deduplication: keeping the last row, a later row of the same time
    # replaces it; keeping the first, it does not
    sql = (
        T1
        + CALC_SINK.replace("`int` INT", "`int` INT")
        + dedup_query(TUMBLE, direction).replace(
            "SELECT rowtime, `int`, `double`, `float`, `bigdec`, `string`, `name`, window_start, "
            "window_end",
            "SELECT `int`, `string`, `name`, window_start, window_end",
        )
    )
    rows = [
        ("t1", {"rowtime": "2020-10-10 00:00:01", "int": 1, "string": "first", "name": "a"}),
        ("t1", {"rowtime": "2020-10-10 00:00:01", "int": 2, "string": "second", "name": "a"}),
        ("t1", end_of_input("2020-10-10 00:01:00")),
    ]
    assert [row["string"] for row in run(sql, rows)] == [kept]
