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


def test_top_n_needs_an_upsert_sink():
    append = top("num DESC", "rank_num <= 2").replace(
        "PRIMARY KEY (category, rank_num) NOT ENFORCED\n) WITH ('connector' = 'upsert-kafka', "
        "'topic' = 'out', 'key.format' = 'json',\n  'value.format' = 'json');",
        "x INT) WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');",
    )
    with pytest.raises(SqlError) as caught:
        compile(append.replace("SELECT *\n", "SELECT category, shopId, num, rank_num, 0\n"))
    assert "the sink out is append-only" in caught.value.message
    assert "Top-N (ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...)) updates its rows" in (
        caught.value.message
    )


def test_top_2():
    # RankITCase.testTop2: the 2nd row alone (rank_num = 2)
    records = changelog(top("num DESC", "rank_num = 2"))
    assert final(records) == sorted(["book,1,12,2", "fruit,4,33,2"])


def test_top_n_without_the_row_number():
    # RankITCase.testTopNWithoutRowNumber: over an append-only input a row is its own
    # key; Flink's changelog exactly (a row leaving the top is deleted)
    sql = """
CREATE TABLE T (category STRING, shopId INT, num INT)
  WITH ('connector' = 'kafka', 'topic' = 't', 'format' = 'json');
CREATE TABLE out (category STRING, num INT, shopId INT,
  PRIMARY KEY (category, shopId, num) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'key.format' = 'json',
  'value.format' = 'json');
INSERT INTO out
SELECT category, num, shopId
FROM (
  SELECT category, shopId, num,
      ROW_NUMBER() OVER (PARTITION BY category ORDER BY num DESC) as rank_num
  FROM T)
WHERE rank_num <= 2
"""
    data = [
        ("book", 1, 12),
        ("book", 2, 19),
        ("book", 4, 11),
        ("book", 5, 20),
        ("fruit", 4, 33),
        ("fruit", 3, 44),
        ("fruit", 5, 22),
        ("fruit", 1, 40),
    ]
    raw = []
    for key, value in changelog(sql, data):
        row = value or {"category": key["category"], "num": key["num"], "shopId": key["shopId"]}
        raw.append(
            ("-D" if value is None else "+I") + f"({row['category']},{row['num']},{row['shopId']})"
        )
    assert raw == [
        "+I(book,12,1)",
        "+I(book,19,2)",
        "-D(book,12,1)",
        "+I(book,20,5)",
        "+I(fruit,33,4)",
        "+I(fruit,44,3)",
        "-D(fruit,33,4)",
        "+I(fruit,40,1)",
    ]


def test_top_n_without_the_row_number_keeps_the_rows_key():
    sql = top("num DESC", "rank_num <= 2").replace("SELECT *\n", "SELECT category, shopId, num\n")
    sql = sql.replace("rank_num BIGINT,", "").replace("(category, rank_num)", "(category, shopId)")
    with pytest.raises(SqlError, match=r"keep its key \(category, shopId, num"):
        compile(sql)


GROUPED = """
CREATE TABLE T (category STRING, shopId INT, num INT)
  WITH ('connector' = 'kafka', 'topic' = 't', 'format' = 'json');
CREATE TABLE out ({columns},
  PRIMARY KEY ({key}) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'key.format' = 'json',
  'value.format' = 'json');
INSERT INTO out
SELECT {select}
FROM (
  SELECT {inner},
      ROW_NUMBER() OVER (PARTITION BY category ORDER BY {order}) as rank_num
  FROM (
     SELECT category, shopId, {aggregates}
     FROM T
     GROUP BY category, shopId
  ))
WHERE {condition}
"""

GROUP_DATA = [
    ("book", 1, 11),
    ("book", 2, 19),
    ("book", 4, 13),
    ("book", 1, 11),
    ("fruit", 4, 33),
    ("fruit", 5, 12),
    ("fruit", 3, 44),
    ("fruit", 5, 22),
]

#: ``RankITCase.testTopNWithGroupByCount``: category, shopId, sellId
COUNT_DATA = [
    ("book", 1, 1001),
    ("book", 2, 1002),
    ("book", 4, 1003),
    ("book", 1, 1004),
    ("book", 1, 1005),
    ("book", 3, 1006),
    ("book", 2, 1007),
    ("book", 4, 1008),
    ("book", 1, 1009),
    ("book", 4, 1010),
    ("book", 4, 1012),
    ("book", 4, 1012),
    ("fruit", 4, 1013),
    ("fruit", 5, 1014),
    ("fruit", 3, 1015),
    ("fruit", 4, 1017),
    ("fruit", 5, 1018),
    ("fruit", 5, 1016),
]


def grouped(**parts: str) -> str:
    defaults = {
        "columns": "category STRING, shopId INT, num INT, rank_num BIGINT",
        "key": "category, rank_num",
        "select": "*",
        "inner": "category, shopId, num",
        "order": "num DESC",
        "aggregates": "sum(num) as num",
        "condition": "rank_num <= 2",
    }
    return GROUPED.format(**{**defaults, **parts})


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        # RankITCase.testTopNWithGroupBy
        ({}, ["book,1,22,1", "book,2,19,2", "fruit,3,44,1", "fruit,5,34,2"]),
        # RankITCase.testTopNthWithGroupBy
        ({"condition": "rank_num = 2"}, ["book,2,19,2", "fruit,5,34,2"]),
        # RankITCase.testTopNWithGroupByAndRetract
        (
            {
                "columns": "category STRING, shopId INT, num INT, cnt BIGINT, rank_num BIGINT",
                "inner": "category, shopId, num, cnt",
                "order": "num DESC, cnt ASC",
                "aggregates": "sum(num) as num, count(num) as cnt",
            },
            ["book,1,22,2,1", "book,2,19,1,2", "fruit,3,44,1,1", "fruit,5,34,2,2"],
        ),
    ],
)
def test_top_n_over_a_group_by(parts, expected):
    # Flink's retract rank: the input's rows update (a shop's sum grows) and move places
    assert final(changelog(grouped(**parts), GROUP_DATA)) == sorted(expected)


COUNT_PARTS = {
    "columns": "category STRING, rank_num BIGINT, sells BIGINT, shopId INT",
    "select": "category, rank_num, sells, shopId",
    "inner": "category, shopId, sells",
    "order": "sells DESC",
    "aggregates": "count(num) as sells",
}


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        # RankITCase.testTopNWithGroupByCount
        (
            "rank_num <= 4",
            [
                "book,1,5,4",
                "book,2,4,1",
                "book,3,2,2",
                "book,4,1,3",
                "fruit,1,3,5",
                "fruit,2,2,4",
                "fruit,3,1,3",
            ],
        ),
        # RankITCase.testTop1WithGroupByCount, testTop3WithGroupByCount
        ("rank_num = 1", ["book,1,5,4", "fruit,1,3,5"]),
        ("rank_num = 3", ["book,3,2,2", "fruit,3,1,3"]),
    ],
)
def test_top_n_over_a_group_by_count(condition, expected):
    sql = grouped(**COUNT_PARTS, condition=condition)
    assert final(changelog(sql, COUNT_DATA)) == sorted(expected)


def test_top_n_over_a_group_by_count_without_the_row_number():
    # RankITCase.testTopNWithGroupByCountWithoutRowNumber: keyed by the input's key
    sql = grouped(
        columns="category STRING, shopId INT, sells BIGINT",
        key="category, shopId",
        select="category, shopId, sells",
        inner="category, shopId, sells",
        order="sells DESC",
        aggregates="count(num) as sells",
        condition="rank_num <= 3",
    )
    data = [
        ("book", 1, 1001),
        ("book", 3, 1006),
        ("book", 4, 1003),
        ("book", 1, 1004),
        ("book", 1, 1005),
        ("book", 2, 1002),
        ("book", 2, 1007),
        ("book", 4, 1008),
        ("book", 1, 1009),
        ("book", 4, 1010),
        ("book", 4, 1012),
        ("book", 4, 1012),
        ("fruit", 4, 1013),
        ("fruit", 5, 1014),
        ("fruit", 3, 1015),
        ("fruit", 4, 1017),
        ("fruit", 5, 1018),
        ("fruit", 5, 1016),
    ]
    records = changelog(sql, data)
    expected = ["book,4,5", "book,1,4", "book,2,2", "fruit,5,3", "fruit,4,2", "fruit,3,1"]
    assert final(records) == sorted(expected)
    # book 3 (one sale) entered the top 3 and left it: deleted
    assert ({"category": "book", "shopId": 3}, None) in records


def test_two_top_ns_over_one_aggregating_view():
    # RankITCase.testMultipleUnaryTopNAfterAgg
    sql = """
CREATE TABLE T (category STRING, shopId INT, num INT)
  WITH ('connector' = 'kafka', 'topic' = 't', 'format' = 'json');
CREATE VIEW MyView AS
SELECT category, shopId, SUM(num) as sum_num, MAX(num) as max_num
FROM T
GROUP BY category, shopId;
CREATE TABLE out (category STRING, shopId INT, sum_num INT, rank_num BIGINT,
  PRIMARY KEY (category, rank_num) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'key.format' = 'json',
  'value.format' = 'json');
CREATE TABLE out2 (category STRING, shopId INT, max_num INT, rank_num BIGINT,
  PRIMARY KEY (category, rank_num) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = 'out2', 'key.format' = 'json',
  'value.format' = 'json');
INSERT INTO out
SELECT *
FROM (
  SELECT category, shopId, sum_num,
      ROW_NUMBER() OVER (PARTITION BY category ORDER BY sum_num DESC) as rank_num
  FROM MyView)
WHERE rank_num <= 2;
INSERT INTO out2
SELECT *
FROM (
  SELECT category, shopId, max_num,
      ROW_NUMBER() OVER (PARTITION BY category ORDER BY max_num DESC) as rank_num
  FROM MyView)
WHERE rank_num <= 2;
"""
    data = [
        ("book", 1, 12),
        ("book", 1, 13),
        ("book", 2, 19),
        ("book", 4, 11),
        ("fruit", 4, 33),
        ("fruit", 3, 44),
        ("fruit", 5, 22),
    ]
    with TopologyTestDriver(compile(sql)) as driver:
        source = driver.create_input_topic("t", key_serde=serdes.String())
        for category, shop, num in data:
            source.pipe_input(None, {"category": category, "shopId": shop, "num": num})
        outputs = [
            [
                (r.key, r.value)
                for r in driver.create_output_topic(
                    topic, key_serde=serdes.Json()
                ).read_records_to_list()
            ]
            for topic in ("out", "out2")
        ]
    assert final(outputs[0]) == sorted(
        ["book,1,25,1", "book,2,19,2", "fruit,3,44,1", "fruit,4,33,2"]
    )
    assert final(outputs[1]) == sorted(
        ["book,2,19,1", "book,1,13,2", "fruit,3,44,1", "fruit,4,33,2"]
    )


#: rows that tie: (category, shopId, num)
TIES = [
    ("book", 1, 10),
    ("book", 2, 30),
    ("book", 3, 20),
    ("book", 4, 30),
    ("book", 5, 10),
    ("book", 6, 5),
]


@pytest.mark.parametrize(
    ("function", "expected"),
    [
        # two 30s share 1, then 20 is 3rd (RANK skips) or 2nd (DENSE_RANK)
        ("RANK", ["book,2,30,1", "book,3,20,3", "book,4,30,1"]),
        ("DENSE_RANK", ["book,1,10,3", "book,2,30,1", "book,3,20,2", "book,4,30,1", "book,5,10,3"]),
    ],
)
def test_rank_and_dense_rank_number_ties_alike(function, expected):
    # Flink's batch ranks (its streaming rank runs ROW_NUMBER() only); keyed by the row's
    # key, as the numbers are not unique
    sql = f"""
CREATE TABLE T (category STRING, shopId INT, num INT)
  WITH ('connector' = 'kafka', 'topic' = 't', 'format' = 'json');
CREATE TABLE out (category STRING, shopId INT, num INT, rank_num BIGINT,
  PRIMARY KEY (category, shopId, num) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'key.format' = 'json',
  'value.format' = 'json');
INSERT INTO out
SELECT * FROM (
  SELECT category, shopId, num,
      {function}() OVER (PARTITION BY category ORDER BY num DESC) as rank_num
  FROM T)
WHERE rank_num <= 3
"""
    records = changelog(sql, TIES)
    assert final(records) == sorted(expected)
