"""Top-N as Flink writes it (``ROW_NUMBER()`` in a subquery, filtered on ``<= N``): an
updating result, upserts keyed by (partition, row number). Expected rows from Flink's
``RankITCase`` (its retract and upsert sinks' final rows: here the last value per key)."""

from __future__ import annotations

from typing import Any

import pytest

from streaming import TopologyTestDriver, serdes
from streaming.sql import SqlError, compile

#: ``RankITCase.testTopN``: category, shopId, num
DATA = [
    ("book", 1, 12),
    ("book", 2, 19),
    ("book", 4, 11),
    ("fruit", 4, 33),
    ("fruit", 3, 44),
    ("fruit", 5, 22),
]

TABLES = """
CREATE TABLE T (category STRING, shopId INT, num INT)
  WITH ('connector' = 'kafka', 'topic' = 't', 'format' = 'json');
CREATE TABLE out (category STRING, shopId INT, num INT, rank_num BIGINT,
  PRIMARY KEY (category, rank_num) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'key.format' = 'json',
  'value.format' = 'json');
"""


def top(order: str, condition: str) -> str:
    return f"""{TABLES}
INSERT INTO out
SELECT *
FROM (
  SELECT category, shopId, num,
      ROW_NUMBER() OVER (PARTITION BY category ORDER BY {order}) as rank_num
  FROM T)
WHERE {condition}
"""


def changelog(sql: str, data: list[tuple[str, int, int]] = DATA) -> list[tuple[Any, Any]]:
    """The (key, value) records ``sql`` writes to ``out`` for ``data``."""
    with TopologyTestDriver(compile(sql)) as driver:
        source = driver.create_input_topic("t", key_serde=serdes.String())
        for category, shop, num in data:
            source.pipe_input(None, {"category": category, "shopId": shop, "num": num})
        out = driver.create_output_topic("out", key_serde=serdes.Json())
        return [(r.key, r.value) for r in out.read_records_to_list()]


def final(records: list[tuple[Any, Any]]) -> list[str]:
    """The last row per key, as Flink's rows print (``book,2,19,1``)."""
    last: dict[str, Any] = {}
    for key, value in records:
        last[repr(sorted(key.items()))] = value
    return sorted(",".join(str(v) for v in row.values()) for row in last.values() if row)


def test_top_n():
    # RankITCase.testTopN
    records = changelog(top("num DESC", "rank_num <= 2"))
    assert final(records) == sorted(["book,2,19,1", "book,1,12,2", "fruit,3,44,1", "fruit,4,33,2"])


def test_top_1():
    # RankITCase.testTop1: ROW_NUMBER() = 1 ordered by a column that is no time attribute
    records = changelog(top("num DESC", "rank_num = 1"))
    assert final(records) == sorted(["book,2,19,1", "fruit,3,44,1"])


def test_top_n_ascending():
    # RankITCase.testTopNWithUpsertSink
    records = changelog(top("num ASC", "rank_num < 3"))
    assert final(records) == sorted(["book,4,11,1", "book,1,12,2", "fruit,5,22,1", "fruit,4,33,2"])


def test_a_new_leader_moves_the_others_down():
    # every place whose row changed is written again, with its new row number
    records = changelog(top("num DESC", "rank_num <= 2"), DATA[:3])
    key = lambda n: {"category": "book", "rank_num": n}  # noqa: E731
    row = lambda shop, num, n: {"category": "book", "shopId": shop, "num": num, "rank_num": n}  # noqa: E731
    assert records == [
        (key(1), row(1, 12, 1)),
        (key(1), row(2, 19, 1)),
        (key(2), row(1, 12, 2)),
        # (book, 4, 11) is third: out of the top 2, nothing written
    ]


def test_ties_keep_the_order_read_and_other_conditions_stay():
    # without PARTITION BY the key is the row number alone
    sql = """
CREATE TABLE T (category STRING, shopId INT, num INT)
  WITH ('connector' = 'kafka', 'topic' = 't', 'format' = 'json');
CREATE TABLE out (category STRING, shopId INT, num INT, rank_num BIGINT,
  PRIMARY KEY (rank_num) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'key.format' = 'json',
  'value.format' = 'json');
INSERT INTO out
SELECT category, shopId, num, rank_num FROM (
  SELECT *, ROW_NUMBER() OVER (ORDER BY num DESC) AS rank_num FROM T)
WHERE rank_num <= 3 AND category <> 'b'
"""
    data = [("a", 2, 5), ("b", 1, 5), ("c", 3, 5), ("d", 1, 9), ("e", 0, 1)]
    # a and b tie on num: a, read first, stays before b; b (third) is filtered out, a delete
    records = changelog(sql, data)
    assert records[-1] == ({"rank_num": 3}, None)
    assert final(records) == ["a,2,5,2", "d,1,9,1"]


def test_top_n_needs_an_upsert_sink_and_rank_is_refused():
    append = top("num DESC", "rank_num <= 2").replace(
        "PRIMARY KEY (category, rank_num) NOT ENFORCED\n) WITH ('connector' = 'upsert-kafka', "
        "'topic' = 'out', 'key.format' = 'json',\n  'value.format' = 'json');",
        "x INT) WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');",
    )
    with pytest.raises(SqlError, match="append-only"):
        compile(append.replace("SELECT *\n", "SELECT category, shopId, num, rank_num, 0\n"))
    sql = top("num DESC", "rank_num <= 2").replace("ROW_NUMBER()", "RANK()")
    with pytest.raises(SqlError, match=r"Top-N or deduplication \(RANK\(\) OVER") as caught:
        compile(sql)
    offset = sql.index("RANK()")
    assert caught.value.line == sql.count("\n", 0, offset) + 1


def test_top_n_without_its_row_number_or_of_the_nth_row_is_an_error():
    sql = top("num DESC", "rank_num <= 2").replace("SELECT *\n", "SELECT category, shopId, num\n")
    sql = sql.replace("rank_num BIGINT,", "").replace("(category, rank_num)", "(category, shopId)")
    with pytest.raises(SqlError, match=r"keep its key \(category, rank_num"):
        compile(sql)
    with pytest.raises(SqlError, match=r"Top-N or deduplication \(ROW_NUMBER\(\) OVER"):
        compile(top("num DESC", "rank_num = 2"))
