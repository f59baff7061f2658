"""Regular (unbounded) joins as Flink runs them: expected rows from Flink's stream
``JoinITCase`` (``flink-table-planner``), run through the test driver.

Flink's ``TestingAppendSink`` results are the rows of an append-only sink; its
``TestingRetractSink`` results are what remains of the join's changelog once its
retractions are applied: here the changes the join sends to its sink's upsert
materializer (``retract_results``), and the sink's final rows by key (``final_rows``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from flink_itcases import engine_rows, flink_rows

from streaming import TopologyTestDriver, serdes
from streaming.sql import SqlError, compile

#: ``TestData.smallTupleData3``
SMALL_TUPLE_DATA3 = [(1, 1, "Hi"), (2, 2, "Hello"), (3, 2, "Hello world")]

#: ``TestData.tupleData3``
TUPLE_DATA3 = [
    *SMALL_TUPLE_DATA3,
    (4, 3, "Hello world, how are you?"),
    (5, 3, "I am fine."),
    (6, 3, "Luke Skywalker"),
    *[(7 + i, 4, f"Comment#{1 + i}") for i in range(4)],
    *[(11 + i, 5, f"Comment#{5 + i}") for i in range(5)],
    *[(16 + i, 6, f"Comment#{10 + i}") for i in range(6)],
]

#: ``TestData.tupleData5``
TUPLE_DATA5 = [
    (1, 1, 0, "Hallo", 1),
    (2, 2, 1, "Hallo Welt", 2),
    (2, 3, 2, "Hallo Welt wie", 1),
    (3, 4, 3, "Hallo Welt wie gehts?", 2),
    (3, 5, 4, "ABC", 2),
    (3, 6, 5, "BCD", 3),
    (4, 7, 6, "CDE", 2),
    (4, 8, 7, "DEF", 1),
    (4, 9, 8, "EFG", 1),
    (4, 10, 9, "FGH", 2),
    (5, 11, 10, "GHI", 1),
    (5, 12, 11, "HIJ", 3),
    (5, 13, 12, "IJK", 3),
    (5, 14, 13, "JKL", 2),
    (5, 15, 14, "KLM", 2),
]

#: ``JoinITCase.smallTuple5Data`` and ``dataCannotBeJoin``
SMALL_TUPLE5_DATA = TUPLE_DATA5[:6]
DATA_CANNOT_BE_JOIN = TUPLE_DATA5[2:6]


def stream(name: str, columns: str) -> str:
    """An append-only Kafka table ``name`` over the topic of the same name."""
    return (
        f"CREATE TABLE {name} ({columns}) "
        f"WITH ('connector' = 'kafka', 'topic' = '{name}', 'format' = 'json');\n"
    )


def sink(columns: str, key: str | None = None, key_format: str = "json") -> str:
    """The sink ``out``: append-only, or an upsert table with PRIMARY KEY ``key``."""
    if key is None:
        return stream("out", columns)
    return (
        f"CREATE TABLE out ({columns}, PRIMARY KEY ({key}) NOT ENFORCED) WITH ("
        f"'connector' = 'upsert-kafka', 'topic' = 'out', 'key.format' = '{key_format}', "
        "'value.format' = 'json');\n"
    )


#: Flink's views A and B of ``JoinITCase``
A = stream("A", "a1 INT, a2 BIGINT, a3 STRING")
B = stream("B", "b1 INT, b2 BIGINT, b3 INT, b4 STRING, b5 BIGINT")
A_ROWS = [("A", dict(zip(("a1", "a2", "a3"), r, strict=True))) for r in SMALL_TUPLE_DATA3]
B_ROWS = [("B", dict(zip(("b1", "b2", "b3", "b4", "b5"), r, strict=True))) for r in TUPLE_DATA5]


def rows_of(topic: str, columns: tuple[str, ...], data: list[tuple[Any, ...]]) -> list:
    return [(topic, dict(zip(columns, row, strict=True))) for row in data]


class Result:
    """What one run wrote: the sink's records and the changes into its materializer."""

    def __init__(self, records: list[tuple[Any, Any]], changes: list[dict[str, Any]]) -> None:
        self.records = records
        self.changes = changes

    def appended(self) -> list[dict[str, Any]]:
        assert all(value is not None for _, value in self.records)
        return [value for _, value in self.records]

    def retract_results(self) -> list[dict[str, Any]]:
        """The rows the changelog leaves (Flink's ``TestingRetractSink``)."""
        kept: Counter[str] = Counter()
        rows: dict[str, dict[str, Any]] = {}
        for change in self.changes:
            text = repr(sorted(change["row"].items()))
            rows[text] = change["row"]
            if change["op"] == "+":
                kept[text] += 1
            else:
                assert kept[text] > 0, f"retracts a row never emitted: {change}"
                kept[text] -= 1
        return [rows[text] for text, n in kept.items() for _ in range(n)]

    def final_rows(self) -> list[dict[str, Any]]:
        """The sink's rows by key once every upsert and delete is applied."""
        table: dict[str, Any] = {}
        for key, value in self.records:
            table[repr(key)] = value
        return [value for value in table.values() if value is not None]


def run(sql: str, inputs: list[tuple[str, dict[str, Any]]], *, wall: list | None = None) -> Result:
    """``sql`` over ``inputs`` ((topic, value) in order); ``wall``: (index, ms) pairs
    advancing the wall clock before the input of that index."""
    advances = dict(wall or [])
    with TopologyTestDriver(compile(sql), initial_wall_clock_time_ms=0) as driver:
        topics = {topic for topic, _ in inputs}
        sources = {t: driver.create_input_topic(t, key_serde=serdes.String()) for t in topics}
        for i, (topic, value) in enumerate(inputs):
            if i in advances:
                driver.advance_wall_clock_time(advances[i])
            sources[topic].pipe_input(None, value)
        out = driver.create_output_topic("out", key_serde=serdes.Json())
        records = [(kv.key, kv.value) for kv in out.read_key_values_to_list()]
        upserts = driver.create_output_topic(
            f"{driver.application_id}-out-upsert-repartition", key_serde=serdes.Json()
        )
        changes = [kv.value for kv in upserts.read_key_values_to_list()]
        return Result(records, changes)


# -- inner joins of two streams: append-only ---------------------------------------------


def test_join() -> None:
    """``testJoin``: a comma join, its equality in WHERE."""
    sql = (
        A
        + B
        + sink("a3 STRING, b4 STRING")
        + "INSERT INTO out SELECT a3, b4 FROM A, B WHERE a2 = b2"
    )
    result = run(sql, A_ROWS + B_ROWS)
    expected = ["Hi,Hallo", "Hello,Hallo Welt", "Hello world,Hallo Welt"]
    assert engine_rows(result.appended(), "ss") == flink_rows(expected, "ss")


def test_inner_join2() -> None:
    """``testInnerJoin2``: each row of A meets every row of B with its key."""
    sql = A + B + sink("a1 INT, b1 INT") + "INSERT INTO out SELECT a1, b1 FROM A JOIN B ON a1 = b1"
    result = run(sql, B_ROWS + A_ROWS)
    expected = ["3,3", "1,1", "3,3", "2,2", "3,3", "2,2"]
    assert engine_rows(result.appended(), "ii") == flink_rows(expected, "ii")


def test_join_with_filter() -> None:
    """``testJoinWithFilter``."""
    sql = (
        A
        + B
        + sink("a3 STRING, b4 STRING")
        + "INSERT INTO out SELECT a3, b4 FROM A, B WHERE a2 = b2 AND a2 < 2"
    )
    assert engine_rows(run(sql, A_ROWS + B_ROWS).appended(), "ss") == [("Hi", "Hallo")]


def test_inner_join_with_duplicate_key() -> None:
    """``testInnerJoinWithDuplicateKey``: two equalities on one column of A."""
    sql = (
        A
        + B
        + sink("a1 INT, b1 INT, b3 INT")
        + "INSERT INTO out SELECT a1, b1, b3 FROM A JOIN B ON a1 = b1 AND a1 = b3"
    )
    result = run(sql, A_ROWS + B_ROWS)
    assert engine_rows(result.appended(), "iii") == flink_rows(["2,2,2", "3,3,3"], "iii")


TABLE3 = stream("Table3", "a INT, b BIGINT, c STRING")
TABLE5 = stream("Table5", "d INT, e BIGINT, f INT, g STRING, h BIGINT")
TABLE3_ROWS = rows_of("Table3", ("a", "b", "c"), TUPLE_DATA3)
TABLE5_ROWS = rows_of("Table5", ("d", "e", "f", "g", "h"), TUPLE_DATA5)


def test_inner_join_with_non_equi_join_predicate() -> None:
    """``testInnerJoinWithNonEquiJoinPredicate``."""
    sql = (
        TABLE3
        + TABLE5
        + sink("c STRING, g STRING")
        + "INSERT INTO out SELECT c, g FROM Table3, Table5 WHERE b = e AND a < 6 AND h < b"
    )
    result = run(sql, TABLE3_ROWS + TABLE5_ROWS)
    expected = ["Hello world, how are you?,Hallo Welt wie", "I am fine.,Hallo Welt wie"]
    assert sorted(result.appended(), key=repr) == sorted(
        [dict(zip(("c", "g"), line.rsplit(",", 1), strict=True)) for line in expected], key=repr
    )


def test_join_with_multiple_keys() -> None:
    """``testJoinWithMultipleKeys``: the join key is both equalities."""
    sql = (
        TABLE3
        + TABLE5
        + sink("c STRING, g STRING")
        + "INSERT INTO out SELECT c, g FROM Table3, Table5 WHERE a = d AND b = h"
    )
    result = run(sql, TABLE5_ROWS + TABLE3_ROWS)
    expected = [
        "Hi,Hallo",
        "Hello,Hallo Welt",
        "Hello world,Hallo Welt wie gehts?",
        "Hello world,ABC",
        "I am fine.,HIJ",
        "I am fine.,IJK",
    ]
    assert engine_rows(result.appended(), "ss") == flink_rows(expected, "ss")


def test_stream_join_with_same_record() -> None:
    """``testStreamJoinWithSameRecord``: a row that comes twice joins twice."""
    data1 = [(k, k) for k in (1, 1, 2, 2, 3, 3, 4, 4, 5, 5)]
    data2 = [(k, k) for k in range(1, 11)]
    sql = (
        stream("ds1", "pk INT, a INT")
        + stream("ds2", "pk INT, a INT")
        + sink("leftPk INT, leftA INT, rightPk INT, rightA INT")
        + """INSERT INTO out SELECT ds1.pk as leftPk, ds1.a as leftA, ds2.pk as rightPk,
               ds2.a as rightA FROM ds1 JOIN ds2 ON ds1.pk = ds2.pk"""
    )
    result = run(sql, rows_of("ds1", ("pk", "a"), data1) + rows_of("ds2", ("pk", "a"), data2))
    expected = [f"{k},{k},{k},{k}" for k in (1, 1, 2, 2, 3, 3, 4, 4, 5, 5)]
    assert engine_rows(result.appended(), "iiii") == flink_rows(expected, "iiii")


def test_non_window_inner_join_over_subqueries() -> None:
    """``testNonWindowInnerJoin``: subqueries on both sides, a NULL key joins nothing,
    and a non-equi condition."""
    data1 = [
        (1, 1, "Hi1"), (1, 2, "Hi2"), (1, 2, "Hi2"), (1, 5, "Hi3"),
        (2, 7, "Hi5"), (1, 9, "Hi6"), (1, 8, "Hi8"), (3, 8, "Hi9"),
    ]  # fmt: skip
    data2 = [(1, 1, "HiHi"), (2, 2, "HeHe"), (3, 2, "HeHe")]
    sql = (
        stream("T1", "a INT, b BIGINT, c STRING")
        + stream("T2", "a INT, b BIGINT, c STRING")
        + sink("a INT, c2 STRING, c1 STRING")
        + """INSERT INTO out SELECT t2.a, t2.c, t1.c
FROM (
 SELECT if(a = 3, cast(null as int), a) as a, b, c FROM T1
) as t1
JOIN (
 SELECT if(a = 3, cast(null as int), a) as a, b, c FROM T2
) as t2
ON t1.a = t2.a AND t1.b > t2.b"""
    )
    result = run(sql, rows_of("T1", ("a", "b", "c"), data1) + rows_of("T2", ("a", "b", "c"), data2))
    expected = ["1,HiHi,Hi2", "1,HiHi,Hi2", "1,HiHi,Hi3", "1,HiHi,Hi6", "1,HiHi,Hi8", "2,HeHe,Hi5"]
    assert engine_rows(result.appended(), "iss") == flink_rows(expected, "iss")


# -- outer joins: updating, into a sink with a PRIMARY KEY -------------------------------

DS1_ROWS = rows_of("ds1", ("a", "b", "c"), SMALL_TUPLE_DATA3)
DS1 = stream("ds1", "a INT, b BIGINT, c STRING")
DS2 = stream("ds2", "d INT, e BIGINT, f INT, g STRING, h BIGINT")
BCEG = "SELECT b, c, e, g FROM ds1 LEFT OUTER JOIN ds2 ON b = e"
BCEG_SINK = sink("b BIGINT, c STRING, e BIGINT, g STRING", key="c, g")


def test_left_outer_join() -> None:
    """``testLeftOuterJoin``: no row of ds2 matches, so every row of ds1 stays padded."""
    sql = DS1 + DS2 + BCEG_SINK + "INSERT INTO out " + BCEG
    result = run(sql, DS1_ROWS + rows_of("ds2", ("d", "e", "f", "g", "h"), DATA_CANNOT_BE_JOIN))
    expected = ["1,Hi,null,null", "2,Hello world,null,null", "2,Hello,null,null"]
    assert engine_rows(result.retract_results(), "isis") == flink_rows(expected, "isis")
    assert engine_rows(result.final_rows(), "isis") == flink_rows(expected, "isis")


def test_left_outer_join_with_retraction() -> None:
    """``testLeftOuterJoinWithRetraction``: each padded row is retracted when its match
    comes; the sink keeps the joined rows."""
    sql = DS1 + DS2 + BCEG_SINK + "INSERT INTO out " + BCEG
    result = run(sql, DS1_ROWS + rows_of("ds2", ("d", "e", "f", "g", "h"), SMALL_TUPLE5_DATA))
    expected = ["1,Hi,1,Hallo", "2,Hello world,2,Hallo Welt", "2,Hello,2,Hallo Welt"]
    assert engine_rows(result.retract_results(), "isis") == flink_rows(expected, "isis")
    assert engine_rows(result.final_rows(), "isis") == flink_rows(expected, "isis")
    # the padded row came out first, then was deleted from the sink
    first = result.records[0]
    assert first[1] == {"b": 1, "c": "Hi", "e": None, "g": None}
    assert ({"c": "Hi", "g": None}, None) in result.records


#: ``testFullOuterJoin``, ``testRightOuterJoin`` and ``testLeftOuterJoin2`` expect these
PADDED_B = [
    "Hi,Hallo",
    "Hello,Hallo Welt",
    "Hello world,Hallo Welt",
    *[
        f"null,{g}"
        for g in (
            "Hallo Welt wie", "Hallo Welt wie gehts?", "ABC", "BCD", "CDE", "DEF", "EFG",
            "FGH", "GHI", "HIJ", "IJK", "JKL", "KLM",
        )
    ],
]  # fmt: skip


@pytest.mark.parametrize("kind", ["FULL OUTER", "RIGHT OUTER"])
def test_full_and_right_outer_join(kind: str) -> None:
    """``testFullOuterJoin`` and ``testRightOuterJoin`` (every row of A matches)."""
    sql = (
        A
        + B
        + sink("a3 STRING, b4 STRING", key="a3, b4")
        + f"INSERT INTO out SELECT a3, b4 FROM A {kind} JOIN B ON a2 = b2"
    )
    for inputs in (A_ROWS + B_ROWS, B_ROWS + A_ROWS):
        result = run(sql, inputs)
        assert engine_rows(result.retract_results(), "ss") == flink_rows(PADDED_B, "ss")
        assert engine_rows(result.final_rows(), "ss") == flink_rows(PADDED_B, "ss")


def test_left_outer_join2() -> None:
    """``testLeftOuterJoin2``: the preserved side first in FROM."""
    sql = (
        stream("Table3", "a INT, b BIGINT, c STRING")
        + TABLE5
        + sink("c STRING, g STRING", key="g")
        + "INSERT INTO out SELECT c, g FROM Table5 LEFT OUTER JOIN Table3 ON b = e"
    )
    inputs = rows_of("Table3", ("a", "b", "c"), SMALL_TUPLE_DATA3) + TABLE5_ROWS
    result = run(sql, inputs)
    assert engine_rows(result.retract_results(), "ss") == flink_rows(PADDED_B, "ss")


def test_left_join() -> None:
    """``testLeftJoin``: duplicates of a joined row stay (the retract results)."""
    sql = (
        A
        + B
        + sink("a1 INT, b1 INT, b2 BIGINT", key="b2")
        + "INSERT INTO out SELECT a1, b1, b2 FROM A LEFT JOIN B ON a1 = b1"
    )
    result = run(sql, A_ROWS + B_ROWS)
    expected = ["1,1", "2,2", "3,3", "2,2", "3,3", "3,3"]
    pairs = [{"a1": r["a1"], "b1": r["b1"]} for r in result.retract_results()]
    assert engine_rows(pairs, "ii") == flink_rows(expected, "ii")


def test_left_join_non_equi() -> None:
    """``testLeftJoinNonEqui``: a row of B with the key but failing ``a2 > b2`` is no
    match, so every row of A stays padded."""
    sql = (
        A
        + B
        + sink("a1 INT, b1 INT", key="a1")
        + "INSERT INTO out SELECT a1, b1 FROM A LEFT JOIN B ON a1 = b1 AND a2 > b2"
    )
    for inputs in (A_ROWS + B_ROWS, B_ROWS + A_ROWS):
        result = run(sql, inputs)
        expected = ["3,null", "1,null", "2,null"]
        assert engine_rows(result.retract_results(), "ii") == flink_rows(expected, "ii")
        assert engine_rows(result.final_rows(), "ii") == flink_rows(expected, "ii")


#: Flink's aggregated subqueries of A and B, updating views keyed by a1 / b1
SUM_A = "(SELECT SUM(a2) AS a2, a1 FROM A group by a1)"
SUM_B = "(SELECT SUM(b2) AS b2, b1 FROM B group by b1)"


@pytest.mark.parametrize(
    ("case", "query", "columns", "key", "expected"),
    [
        (
            "testInnerJoinWithPk",
            f"SELECT a1, a2, b1, b2 FROM {SUM_A} JOIN {SUM_B} ON a2 = b2",
            "a1 INT, a2 BIGINT, b1 INT, b2 BIGINT",
            "a1, b1",
            ["1,1,1,1"],
        ),
        (
            "testLeftJoinWithPk",
            f"SELECT a1, a2, b1, b2 FROM {SUM_A} LEFT JOIN {SUM_B} ON a2 = b2",
            "a1 INT, a2 BIGINT, b1 INT, b2 BIGINT",
            "a1, b1",
            ["1,1,1,1", "3,2,null,null", "2,2,null,null"],
        ),
        (
            "testLeftJoinWithEqualPkNonEqui",
            f"SELECT a1, b1 FROM {SUM_A} LEFT JOIN {SUM_B} ON a1 = b1 AND a2 > b2",
            "a1 INT, b1 INT",
            "a1",
            ["1,null", "3,null", "2,null"],
        ),
        (
            "testLeftJoinWithRightNotPkNonEqui",
            f"SELECT a1, b1 FROM {SUM_A} LEFT JOIN B ON a1 = b1 AND a2 > b2",
            "a1 INT, b1 INT",
            "a1",
            ["1,null", "3,null", "2,null"],
        ),
        (
            "testLeftJoinWithPkNonEqui",
            f"SELECT a1, a2, b1, b2 FROM {SUM_A} LEFT JOIN {SUM_B} ON a2 = b2 AND a1 > b1",
            "a1 INT, a2 BIGINT, b1 INT, b2 BIGINT",
            "a1, b1",
            ["1,1,null,null", "3,2,null,null", "2,2,null,null"],
        ),
    ],
)
def test_joins_of_updating_subqueries(
    case: str, query: str, columns: str, key: str, expected: list[str]
) -> None:
    """Flink's joins of aggregated subqueries (updating: each new sum retracts the old
    one), not on the key of both, as regular joins."""
    sql = A + B + sink(columns, key=key) + "INSERT INTO out " + query
    kinds = "i" * len(expected[0].split(","))
    for inputs in (A_ROWS + B_ROWS, B_ROWS + A_ROWS):
        result = run(sql, inputs)
        assert engine_rows(result.retract_results(), kinds) == flink_rows(expected, kinds), case
        assert engine_rows(result.final_rows(), kinds) == flink_rows(expected, kinds), case


def test_left_join_with_right_not_pk() -> None:
    """``testLeftJoinWithRightNotPk``: an updating subquery LEFT JOIN a stream; every
    row of B with the key joins (b2 added to the sink key, so that rows stay apart)."""
    sql = (
        A
        + B
        + sink("a1 INT, b1 INT, b2 BIGINT", key="a1, b2")
        + f"INSERT INTO out SELECT a1, b1, b2 FROM {SUM_A} LEFT JOIN B ON a1 = b1"
    )
    result = run(sql, A_ROWS + B_ROWS)
    expected = ["3,3", "3,3", "3,3", "2,2", "2,2", "1,1"]
    pairs = [{"a1": r["a1"], "b1": r["b1"]} for r in result.retract_results()]
    assert engine_rows(pairs, "ii") == flink_rows(expected, "ii")


def test_outer_join_into_an_append_only_sink_is_refused() -> None:
    """As Flink: an append-only sink does not take the retractions of an outer join."""
    sql = (
        A
        + B
        + sink("a1 INT, b1 INT")
        + "INSERT INTO out SELECT a1, b1 FROM A LEFT JOIN B ON a1 = b1"
    )
    with pytest.raises(SqlError, match=r"append-only.*LEFT join emits a row padded with NULLs"):
        compile(sql)


# -- SELECT * and NULL keys ---------------------------------------------------------------


def test_select_star_in_a_join() -> None:
    """``SELECT *`` of a join: every column of the FROM table, then the joined one's."""
    sql = (
        A
        + B
        + sink("a1 INT, a2 BIGINT, a3 STRING, b1 INT, b2 BIGINT, b3 INT, b4 STRING, b5 BIGINT")
        + "INSERT INTO out SELECT * FROM A JOIN B ON a2 = b2 AND a1 = b1"
    )
    result = run(sql, A_ROWS + B_ROWS)
    assert result.appended() == [
        {"a1": 1, "a2": 1, "a3": "Hi", "b1": 1, "b2": 1, "b3": 0, "b4": "Hallo", "b5": 1},
        {"a1": 2, "a2": 2, "a3": "Hello", "b1": 2, "b2": 2, "b3": 1, "b4": "Hallo Welt", "b5": 2},
    ]


def test_null_keys_join_nothing_but_outer_rows_stay() -> None:
    """A NULL join column equals nothing (not even NULL); a FULL join keeps such rows of
    both sides, padded."""
    sql = (
        stream("l", "k INT, v STRING")
        + stream("r", "k INT, w STRING")
        + sink("v STRING, w STRING", key="v, w")
        + "INSERT INTO out SELECT v, w FROM l FULL JOIN r ON l.k = r.k"
    )
    inputs = [
        ("l", {"k": None, "v": "l-null"}),
        ("r", {"k": None, "w": "r-null"}),
        ("l", {"k": 1, "v": "l-1"}),
        ("r", {"k": 1, "w": "r-1"}),
    ]
    rows = run(sql, inputs).final_rows()
    assert sorted(rows, key=repr) == sorted(
        [
            {"v": "l-null", "w": None},
            {"v": None, "w": "r-null"},
            {"v": "l-1", "w": "r-1"},
        ],
        key=repr,
    )


# -- streams with tables -----------------------------------------------------------------

ORDERS = stream("orders", "order_id INT, customer_id INT, amount INT")
CUSTOMERS = (
    "CREATE TABLE customers (id INT, name STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ("
    "'connector' = 'upsert-kafka', 'topic' = 'customers', 'key.format' = 'raw', "
    "'value.format' = 'json');\n"
)


def run_with_table(sql: str, steps: list[tuple[str, Any, Any]]) -> Result:
    """Like ``run``, with keyed records ((topic, key, value); customers are keyed)."""
    with TopologyTestDriver(compile(sql), initial_wall_clock_time_ms=0) as driver:
        inputs = {
            topic: driver.create_input_topic(topic, key_serde=serdes.String())
            for topic in {t for t, _, _ in steps}
        }
        for topic, key, value in steps:
            inputs[topic].pipe_input(key, value)
        out = driver.create_output_topic("out", key_serde=serdes.Json())
        return Result([(kv.key, kv.value) for kv in out.read_key_values_to_list()], [])


def test_table_left_join_stream_updates_when_either_side_changes() -> None:
    """A table first, joined with a stream (Flink's regular join; the stream-first
    lookup join has no such form): each customer with its orders, padded while it has
    none, and a customer's new name updates its joined rows."""
    sql = (
        ORDERS
        + CUSTOMERS
        + sink("id INT, name STRING, order_id INT", key="id, order_id")
        + "INSERT INTO out SELECT c.id, c.name, o.order_id "
        "FROM customers c LEFT JOIN orders o ON c.id = o.customer_id"
    )
    result = run_with_table(
        sql,
        [
            ("customers", "1", {"id": 1, "name": "Ann"}),
            ("orders", None, {"order_id": 10, "customer_id": 1, "amount": 5}),
            ("customers", "1", {"id": 1, "name": "Anna"}),
            ("customers", "2", {"id": 2, "name": "Bob"}),
            ("customers", "2", None),
        ],
    )
    assert result.final_rows() == [{"id": 1, "name": "Anna", "order_id": 10}]
    assert result.records[:3] == [
        ({"id": 1, "order_id": None}, {"id": 1, "name": "Ann", "order_id": None}),
        ({"id": 1, "order_id": None}, None),
        ({"id": 1, "order_id": 10}, {"id": 1, "name": "Ann", "order_id": 10}),
    ]


def test_stream_full_join_table_on_a_non_key_column() -> None:
    """A FULL join of a stream with a table on a column that is not the table's key."""
    sql = (
        ORDERS
        + CUSTOMERS
        + sink("order_id INT, name STRING", key="order_id, name")
        + "INSERT INTO out SELECT o.order_id, c.name "
        "FROM orders o FULL JOIN customers c ON o.amount = c.id"
    )
    result = run_with_table(
        sql,
        [
            ("orders", None, {"order_id": 10, "customer_id": 1, "amount": 2}),
            ("customers", "1", {"id": 1, "name": "Ann"}),
            ("customers", "2", {"id": 2, "name": "Bob"}),
        ],
    )
    assert sorted(result.final_rows(), key=repr) == sorted(
        [{"order_id": None, "name": "Ann"}, {"order_id": 10, "name": "Bob"}], key=repr
    )


# -- bounded state: 'table.exec.state.ttl' -----------------------------------------------


def test_state_ttl_drops_rows_idle_longer_than_it() -> None:
    """``SET 'table.exec.state.ttl'``: a row kept longer than the TTL (processing time,
    since it was last written) no longer joins."""
    query = "INSERT INTO out SELECT a3, b4 FROM A JOIN B ON a1 = b1"
    sql = A + B + sink("a3 STRING, b4 STRING") + "SET 'table.exec.state.ttl' = '10 s';\n" + query
    a_hi = ("A", {"a1": 1, "a2": 1, "a3": "Hi"})
    b_rows = [("B", {"b1": 1, "b2": 1, "b3": 0, "b4": f"b{i}", "b5": 1}) for i in range(3)]
    # b0 within the TTL of Hi; b1 9 s later; b2 11 s after that, past Hi's last write
    result = run(sql, [a_hi, *b_rows], wall=[(1, 1_000), (2, 9_000), (3, 11_000)])
    assert result.appended() == [{"a3": "Hi", "b4": "b0"}, {"a3": "Hi", "b4": "b1"}]
    # without a TTL every row stays
    result = run(A + B + sink("a3 STRING, b4 STRING") + query, [a_hi, *b_rows], wall=[(3, 60_000)])
    assert len(result.appended()) == 3


def test_state_ttl_purges_the_stores() -> None:
    """The wall-clock punctuator drops expired rows from the stores, so state stays
    bounded even for keys never read again."""
    sql = (
        A
        + B
        + sink("a3 STRING, b4 STRING")
        + "SET 'table.exec.state.ttl' = '1 min';\n"
        + "INSERT INTO out SELECT a3, b4 FROM A JOIN B ON a1 = b1"
    )
    with TopologyTestDriver(compile(sql), initial_wall_clock_time_ms=0) as driver:
        a = driver.create_input_topic("A", key_serde=serdes.String())
        for row in SMALL_TUPLE_DATA3:
            a.pipe_input(None, dict(zip(("a1", "a2", "a3"), row, strict=True)))
        store = driver.get_key_value_store("A-B-join-left")
        assert len(list(store.all())) == 3
        driver.advance_wall_clock_time(61_000)
        assert list(store.all()) == []


def test_set_statement_errors() -> None:
    base = A + B + sink("a3 STRING, b4 STRING")
    with pytest.raises(SqlError, match=r"'table\.exec\.state\.ttl' = 'soon'"):
        compile(base + "SET 'table.exec.state.ttl' = 'soon';")
    with pytest.raises(SqlError, match=r"SET 'pipeline\.name' is not supported"):
        compile(base + "SET 'pipeline.name' = 'x';")
    # the SQL client's own options change nothing and are accepted
    compile(base + "SET 'sql-client.execution.result-mode' = 'tableau';")


# -- chains of regular joins --------------------------------------------------------------


def test_three_way_join_without_pk() -> None:
    """``testThreeWayMultiJoinWithoutPk``: aggregated subqueries joined on their keys,
    then on a non-key column of the third."""
    data1 = [(1, 1), (1, 2), (1, 2), (1, 5), (2, 7), (1, 9), (1, 8), (3, 8)]
    data2 = [(1, 1), (2, 2), (3, 2), (1, 4)]
    data3 = [(1, 1), (2, 2), (3, 2), (2, 1)]
    sql = (
        stream("Atable", "a1 INT, a2 BIGINT")
        + stream("Btable", "b1 INT, b2 BIGINT")
        + stream("Ctable", "c1 INT, c2 BIGINT")
        + sink("a1 INT, b1 INT, c1 INT", key="a1, c1")
        + """INSERT INTO out SELECT a1, b1, c1
FROM (SELECT SUM(a2) AS a2, a1 FROM Atable group by a1)
JOIN (SELECT SUM(b2) AS b2, b1 FROM Btable group by b1) ON a1 = b1
JOIN (SELECT SUM(c2) AS c2, c1 FROM Ctable group by c1) ON c2 = b2"""
    )
    inputs = (
        rows_of("Atable", ("a1", "a2"), data1)
        + rows_of("Btable", ("b1", "b2"), data2)
        + rows_of("Ctable", ("c1", "c2"), data3)
    )
    result = run(sql, inputs)
    expected = ["2,2,3", "3,3,3"]
    assert engine_rows(result.retract_results(), "iii") == flink_rows(expected, "iii")
    assert engine_rows(result.final_rows(), "iii") == flink_rows(expected, "iii")


def test_chain_of_stream_joins_with_a_table() -> None:
    """Two streams and a table: a LEFT join of the streams, then an INNER join with the
    table on a column of the first stream; the table's change updates the rows."""
    sql = (
        ORDERS
        + CUSTOMERS
        + stream("payments", "order_id INT, paid INT")
        + sink("order_id INT, name STRING, paid INT", key="order_id")
        + "INSERT INTO out SELECT o.order_id, c.name, p.paid FROM orders o "
        "LEFT JOIN payments p ON o.order_id = p.order_id "
        "JOIN customers c ON o.customer_id = c.id"
    )
    result = run_with_table(
        sql,
        [
            ("orders", None, {"order_id": 10, "customer_id": 1, "amount": 5}),
            ("orders", None, {"order_id": 11, "customer_id": 2, "amount": 7}),
            ("customers", "1", {"id": 1, "name": "Ann"}),
            ("payments", None, {"order_id": 10, "paid": 5}),
            ("customers", "2", {"id": 2, "name": "Bob"}),
            ("customers", "1", {"id": 1, "name": "Anna"}),
        ],
    )
    assert sorted(result.final_rows(), key=repr) == sorted(
        [
            {"order_id": 10, "name": "Anna", "paid": 5},
            {"order_id": 11, "name": "Bob", "paid": None},
        ],
        key=repr,
    )


# -- aggregations over regular joins ------------------------------------------------------


def test_data_stream_join_with_aggregation() -> None:
    """``testDataStreamJoinWithAggregation``: a global aggregation over a comma join."""
    sql = (
        A + B + "CREATE TABLE out (c1 BIGINT, c2 BIGINT) WITH ('connector' = 'upsert-kafka', "
        "'topic' = 'out', 'value.format' = 'json');\n"
        + "INSERT INTO out SELECT COUNT(b4), COUNT(a2) FROM A, B WHERE a1 = b1"
    )
    result = run(sql, A_ROWS + B_ROWS)
    assert result.records[-1][1] == {"c1": 6, "c2": 6}


def test_aggregation_over_a_left_join_counts_rows_without_a_match() -> None:
    """An outer join's changes feed an aggregation as an updating view: a padded row
    counts until its match retracts it, and duplicates of a joined row count apart."""
    sql = (
        A
        + B
        + sink("a1 INT, n BIGINT, total BIGINT", key="a1")
        + "INSERT INTO out SELECT a1, COUNT(b4), COUNT(*) "
        "FROM A LEFT JOIN B ON a1 = b1 AND b2 > 2 GROUP BY a1"
    )
    for inputs in (A_ROWS + B_ROWS, B_ROWS + A_ROWS):
        rows = run(sql, inputs).final_rows()
        assert sorted(rows, key=repr) == [
            {"a1": 1, "n": 0, "total": 1},  # padded: B's row of key 1 has b2 = 1
            {"a1": 2, "n": 1, "total": 1},
            {"a1": 3, "n": 3, "total": 3},
        ]


def test_a_view_of_a_full_join_aggregated() -> None:
    """CREATE VIEW of a FULL join, then a GROUP BY of it: the view keeps each copy of a
    row apart (two equal padded rows count twice)."""
    sql = (
        stream("l", "k INT, v STRING")
        + stream("r", "k INT, w STRING")
        + sink("w STRING, n BIGINT", key="w")
        + "CREATE VIEW j AS SELECT l.k AS lk, v, w FROM l FULL JOIN r ON l.k = r.k;\n"
        + "INSERT INTO out SELECT w, COUNT(*) FROM j GROUP BY w"
    )
    inputs = [
        ("r", {"k": 1, "w": "x"}),
        ("r", {"k": 1, "w": "x"}),  # two equal rows of r, padded twice
        ("r", {"k": 2, "w": "y"}),
        ("l", {"k": 2, "v": "a"}),  # y's padded row retracted, joined once
        ("l", {"k": 3, "v": "b"}),  # padded with w NULL
    ]
    rows = run(sql, inputs).final_rows()
    assert sorted(rows, key=repr) == sorted(
        [{"w": "x", "n": 2}, {"w": "y", "n": 1}, {"w": None, "n": 1}], key=repr
    )


def test_state_ttl_hint_bounds_one_input() -> None:
    """Flink's ``STATE_TTL`` hint: A's rows expire after 10 s, B's (not named, no
    ``'table.exec.state.ttl'``) are kept."""
    sql = (
        A
        + B
        + sink("a3 STRING, b4 STRING")
        + "INSERT INTO out SELECT /*+ STATE_TTL('A' = '10 s') */ a3, b4 "
        "FROM A JOIN B ON a1 = b1"
    )
    b_row = {"b1": 1, "b2": 1, "b3": 0, "b5": 1}
    inputs = [
        ("A", {"a1": 1, "a2": 1, "a3": "Hi"}),
        ("B", {**b_row, "b4": "b0"}),
        ("B", {**b_row, "b4": "b1"}),  # 20 s later: Hi has expired
        ("A", {"a1": 1, "a2": 1, "a3": "Hi again"}),  # meets both rows of B
    ]
    result = run(sql, inputs, wall=[(1, 1_000), (2, 20_000)])
    assert result.appended() == [
        {"a3": "Hi", "b4": "b0"},
        {"a3": "Hi again", "b4": "b0"},
        {"a3": "Hi again", "b4": "b1"},
    ]


def test_state_ttl_hint_errors() -> None:
    base = A + B + sink("a3 STRING, b4 STRING")
    with pytest.raises(SqlError, match=r"STATE_TTL names C, which is no input of the join"):
        compile(
            base + "INSERT INTO out SELECT /*+ STATE_TTL('C' = '1 h') */ a3, b4 "
            "FROM A JOIN B ON a1 = b1"
        )
    # a lookup join keeps no state a TTL bounds
    with pytest.raises(SqlError, match=r"STATE_TTL applies to regular joins here"):
        compile(
            ORDERS
            + CUSTOMERS
            + sink("order_id INT, name STRING")
            + "INSERT INTO out SELECT /*+ STATE_TTL('o' = '1 h') */ o.order_id, c.name "
            "FROM orders o JOIN customers c ON o.customer_id = c.id"
        )
    with pytest.raises(SqlError, match=r"a hint \(/\*\+ \.\.\. \*/\) is not supported yet"):
        compile(base + "INSERT INTO out SELECT /*+ BROADCAST(B) */ a3, b4 FROM A JOIN B ON a1 = b1")


def test_a_filter_over_a_subquery_of_a_left_join() -> None:
    """SELECT ... FROM (a LEFT join) WHERE ...: the subquery's changelog is filtered and
    projected, its retractions too, into the sink."""
    sql = (
        A
        + B
        + sink("a1 INT, b4 STRING", key="a1, b4")
        + "INSERT INTO out SELECT a1, b4 FROM (SELECT a1, b4 FROM A LEFT JOIN B "
        "ON a1 = b1 AND b2 > 4) WHERE b4 IS NULL OR a1 > 2"
    )
    for inputs in (A_ROWS + B_ROWS, B_ROWS + A_ROWS):
        result = run(sql, inputs)
        expected = ["1,null", "2,null", "3,ABC", "3,BCD"]
        assert engine_rows(result.final_rows(), "is") == flink_rows(expected, "is")
    # rows of A first: a1 = 3's padded row came out, then was deleted
    assert ({"a1": 3, "b4": None}, None) in run(sql, A_ROWS + B_ROWS).records


def test_a_regular_join_keeps_no_time_attribute() -> None:
    """As in Flink, a window over a regular join's rows is an error: its rows carry no
    time attribute (the join has no watermark to close windows on)."""
    sql = (
        stream(
            "ta",
            "id INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND",
        )
        + stream("tb", "id INT, y STRING")
        + sink("ws TIMESTAMP(3), n BIGINT")
        + "CREATE VIEW j AS SELECT ta.id, ta.ts, tb.y FROM ta JOIN tb ON ta.id = tb.id;\n"
        + "INSERT INTO out SELECT window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE j, "
        "DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end"
    )
    with pytest.raises(SqlError, match="ts is not a time attribute of j"):
        compile(sql)
