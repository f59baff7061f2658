"""Regular joins, stream against batch: the sink's final rows of the streaming join (its
upserts and deletes applied) are the rows DuckDB's join of the same inputs gives
(``streaming.sql.batch.to_duckdb``)."""

from __future__ import annotations

import random
from typing import Any

import duckdb
import pandas as pd
import pytest

from streaming import TopologyTestDriver, serdes
from streaming.sql import compile
from streaming.sql.batch import to_duckdb

STREAMS = """
CREATE TABLE l (id INT, k INT, v INT) WITH ('connector' = 'kafka', 'topic' = 'l', 'format' = 'json');
CREATE TABLE r (id INT, k INT, w INT) WITH ('connector' = 'kafka', 'topic' = 'r', 'format' = 'json');
"""


def upsert_sink(columns: str, key: str) -> str:
    return (
        f"CREATE TABLE out ({columns}, PRIMARY KEY ({key}) NOT ENFORCED) WITH ("
        "'connector' = 'upsert-kafka', 'topic' = 'out', 'key.format' = 'json', "
        "'value.format' = 'json');\n"
    )


def stream_rows(sql: str, inputs: list[tuple[str, Any, dict[str, Any] | None]]) -> list[dict]:
    """The sink's final rows by key for ``inputs`` ((topic, key, value) in order)."""
    with TopologyTestDriver(compile(sql)) as driver:
        topics = {t: driver.create_input_topic(t, key_serde=serdes.String()) for t, _, _ in inputs}
        for topic, key, value in inputs:
            topics[topic].pipe_input(key, value)
        out = driver.create_output_topic("out", key_serde=serdes.Json())
        final: dict[str, Any] = {}
        for record in out.read_key_values_to_list():
            final[repr(record.key)] = record.value
        return [row for row in final.values() if row is not None]


def batch_rows(sql: str, relations: dict[str, list[dict[str, Any]]]) -> list[dict]:
    query = to_duckdb(sql)
    con = duckdb.connect()
    try:
        frames = {name: pd.DataFrame(rows) for name, rows in relations.items()}
        rows = query.run(con, frames)
    finally:
        con.close()
    # pandas reads a NULL of an integer column as NaN
    return [
        {k: None if v != v else int(v) if isinstance(v, float) else v for k, v in r.items()}
        for r in rows
    ]


def ordered(rows: list[dict]) -> list[str]:
    return sorted(repr(sorted(row.items())) for row in rows)


def random_sides(seed: int) -> tuple[list[dict], list[dict]]:
    rng = random.Random(seed)

    def key() -> int | None:
        return None if rng.random() < 0.1 else rng.randint(0, 6)

    left = [{"id": i, "k": key(), "v": rng.randint(0, 10)} for i in range(40)]
    right = [{"id": 100 + i, "k": key(), "w": rng.randint(0, 10)} for i in range(40)]
    return left, right


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("kind", ["LEFT", "RIGHT", "FULL"])
def test_outer_joins_with_a_non_equi_condition_agree(seed: int, kind: str) -> None:
    sql = (
        STREAMS
        + upsert_sink("lid INT, rid INT, v INT, w INT", "lid, rid")
        + f"INSERT INTO out SELECT l.id, r.id, v, w FROM l {kind} JOIN r "
        "ON l.k = r.k AND l.v < r.w;"
    )
    left, right = random_sides(seed)
    rng = random.Random(seed)
    inputs = [("l", None, row) for row in left] + [("r", None, row) for row in right]
    rng.shuffle(inputs)  # the two sides interleaved: the final rows do not depend on it
    stream = stream_rows(sql, inputs)
    batch = batch_rows(sql, {"l": left, "r": right})
    assert ordered(stream) == ordered(batch)
    assert any(row["lid"] is None or row["rid"] is None for row in batch)  # padded rows


def test_select_star_inner_join_agrees() -> None:
    sql = (
        STREAMS + "CREATE TABLE out (id INT, k INT, v INT, rid INT, rk INT, w INT) WITH ("
        "'connector' = 'kafka', 'topic' = 'out', 'format' = 'json');\n"
        + "INSERT INTO out SELECT * FROM l JOIN r ON l.k = r.k AND l.v < r.w;"
    )
    left, right = random_sides(4)
    with TopologyTestDriver(compile(sql)) as driver:
        for topic, rows in (("r", right), ("l", left)):
            source = driver.create_input_topic(topic, key_serde=serdes.String())
            for row in rows:
                source.pipe_input(None, row)
        stream = driver.create_output_topic("out").read_values_to_list()
    batch = batch_rows(sql, {"l": left, "r": right})
    assert len(batch) > 10
    assert ordered(stream) == ordered(batch)


def test_a_table_left_joined_with_a_stream_agrees_with_its_current_rows() -> None:
    """The regular join follows the table's changes: its final rows are the join of the
    table's current rows (the relation DuckDB reads) with the stream."""
    sql = (
        "CREATE TABLE c (id INT, tier STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ("
        "'connector' = 'upsert-kafka', 'topic' = 'c', 'key.format' = 'raw', "
        "'value.format' = 'json');\n"
        + STREAMS
        + upsert_sink("cid INT, tier STRING, lid INT", "cid, lid")
        + "INSERT INTO out SELECT c.id, c.tier, l.id FROM c LEFT JOIN l ON c.id = l.k;"
    )
    rng = random.Random(7)
    left, _ = random_sides(7)
    inputs: list[tuple[str, Any, dict[str, Any] | None]] = [("l", None, row) for row in left]
    current: dict[int, dict[str, Any]] = {}
    for _ in range(30):
        cid = rng.randint(0, 8)
        if rng.random() < 0.2:
            inputs.append(("c", str(cid), None))
            current.pop(cid, None)
        else:
            row = {"id": cid, "tier": rng.choice(["gold", "silver", "bronze"])}
            inputs.append(("c", str(cid), row))
            current[cid] = row
    ordering = inputs[:]
    rng.shuffle(ordering)
    # the table's changes keep their order (a key's final row is its last one)
    by_customer = [step for step in inputs if step[0] == "c"]
    merged = []
    for step in ordering:
        merged.append(by_customer.pop(0) if step[0] == "c" else step)
    stream = stream_rows(sql, merged)
    batch = batch_rows(sql, {"c": list(current.values()), "l": left})
    assert ordered(stream) == ordered(batch)
    assert any(row["lid"] is None for row in batch) and any(row["lid"] is not None for row in batch)


@pytest.mark.parametrize("seed", [1, 2])
def test_an_aggregation_over_a_left_join_agrees(seed: int) -> None:
    """COUNT over a LEFT join (an updating view of the join's rows): 0 for a key
    without a match, as DuckDB counts."""
    sql = (
        STREAMS
        + upsert_sink("lid INT, matches BIGINT, best INT", "lid")
        + "INSERT INTO out SELECT l.id, COUNT(r.id), MAX(r.w) FROM l LEFT JOIN r "
        "ON l.k = r.k AND l.v < r.w GROUP BY l.id;"
    )
    left, right = random_sides(seed)
    rng = random.Random(seed)
    inputs = [("l", None, row) for row in left] + [("r", None, row) for row in right]
    rng.shuffle(inputs)
    stream = stream_rows(sql, inputs)
    batch = batch_rows(sql, {"l": left, "r": right})
    assert ordered(stream) == ordered(batch)
    assert any(row["matches"] == 0 for row in batch) and any(row["matches"] > 1 for row in batch)


def test_a_chain_of_regular_joins_agrees() -> None:
    sql = (
        STREAMS
        + "CREATE TABLE m (id INT, k INT, x INT) WITH ('connector' = 'kafka', 'topic' = 'm', "
        "'format' = 'json');\n"
        + upsert_sink("lid INT, rid INT, mid INT", "lid, rid, mid")
        + "INSERT INTO out SELECT l.id, r.id, m.id FROM l LEFT JOIN r ON l.k = r.k "
        "FULL JOIN m ON r.w = m.x AND l.k = m.k;"
    )
    left, right = random_sides(5)
    rng = random.Random(5)
    middle = [{"id": 200 + i, "k": rng.randint(0, 6), "x": rng.randint(0, 10)} for i in range(30)]
    inputs = (
        [("l", None, row) for row in left]
        + [("r", None, row) for row in right]
        + [("m", None, row) for row in middle]
    )
    rng.shuffle(inputs)
    stream = stream_rows(sql, inputs)
    batch = batch_rows(sql, {"l": left, "r": right, "m": middle})
    assert ordered(stream) == ordered(batch)
    assert any(row["lid"] is None for row in batch) and any(row["mid"] is None for row in batch)


TABLES = """
CREATE TABLE tl (id INT, k INT, v INT, PRIMARY KEY (id) NOT ENFORCED) WITH (
  'connector' = 'upsert-kafka', 'topic' = 'tl', 'key.format' = 'raw', 'value.format' = 'json');
CREATE TABLE tr (id INT, k INT, w INT, PRIMARY KEY (id) NOT ENFORCED) WITH (
  'connector' = 'upsert-kafka', 'topic' = 'tr', 'key.format' = 'raw', 'value.format' = 'json');
"""


@pytest.mark.parametrize("seed", [11, 12, 13, 14])
@pytest.mark.parametrize("kind", ["INNER", "LEFT", "FULL"])
def test_a_join_of_two_changing_tables_agrees_with_their_final_rows(seed: int, kind: str) -> None:
    """Two upsert tables whose rows move between join keys, change and are deleted: the
    join's final rows are the join of the tables' final rows (every retraction, padded
    row and match count right)."""
    sql = (
        TABLES
        + upsert_sink("lid INT, rid INT, v INT, w INT", "lid, rid")
        + f"INSERT INTO out SELECT tl.id, tr.id, v, w FROM tl {kind} JOIN tr "
        "ON tl.k = tr.k AND tl.v <= tr.w;"
    )
    rng = random.Random(seed)
    current: dict[str, dict[int, dict[str, Any]]] = {"tl": {}, "tr": {}}
    inputs: list[tuple[str, Any, dict[str, Any] | None]] = []
    for _ in range(150):
        topic = rng.choice(["tl", "tr"])
        rid = rng.randint(0, 9)
        if current[topic].get(rid) is not None and rng.random() < 0.25:
            inputs.append((topic, str(rid), None))
            current[topic].pop(rid)
            continue
        value = "v" if topic == "tl" else "w"
        row = {"id": rid, "k": rng.choice([0, 1, 2, None]), value: rng.randint(0, 5)}
        inputs.append((topic, str(rid), row))
        current[topic][rid] = row
    stream = stream_rows(sql, inputs)
    relations = {
        "tl": list(current["tl"].values()) or [{"id": None, "k": None, "v": None}],
        "tr": list(current["tr"].values()) or [{"id": None, "k": None, "w": None}],
    }
    batch = [r for r in batch_rows(sql, relations) if r["lid"] is not None or r["rid"] is not None]
    assert ordered(stream) == ordered(batch)
