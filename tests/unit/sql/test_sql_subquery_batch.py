"""Subqueries in FROM and JOIN, stream against batch (``streaming.sql.batch_subqueries``):
the sink's rows from the ``TopologyTestDriver`` (an upsert sink's final row per key) are
the rows of ``to_duckdb``'s translation over the same inputs."""

from __future__ import annotations

import random
from typing import Any

import duckdb
import pandas as pd
import pytest

from streaming import TopologyTestDriver, serdes
from streaming.sql import SqlError, compile
from streaming.sql.batch import to_duckdb
from streaming.sql.timestamps import format_timestamp

T0 = 1_704_103_200_000  # 2024-01-01 10:00:00Z
SECOND = 1_000

TABLES = """
CREATE TABLE item (id BIGINT, category BIGINT, ts TIMESTAMP(3), expires TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'item', 'format' = 'json');
CREATE TABLE bid (item BIGINT, bidder BIGINT, price BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'bid', 'format' = 'json');
"""

#: (topic, value, event time in ms)
Event = tuple[str, dict[str, Any], int]


def upsert_sink(columns: str, key: str) -> str:
    return (
        f"CREATE TABLE out ({columns}, PRIMARY KEY ({key}) NOT ENFORCED) WITH ("
        "'connector' = 'upsert-kafka', 'topic' = 'out', 'key.format' = 'json', "
        "'value.format' = 'json');\n"
    )


def auction_events(seed: int, items: int = 12, bids: int = 150) -> list[Event]:
    """Items, each open for 20 to 60 s, and bids on them (some before an item opens or
    after it expires, some for no item), in time order: each item before its bids. Prices
    repeat (ties); each bid's time is its own."""
    rng = random.Random(seed)
    events: list[Event] = []
    for i in range(items):
        opens = T0 + i * 3 * SECOND
        expires = opens + rng.randint(20, 60) * SECOND
        value = {
            "id": i,
            "category": rng.randint(1, 3),
            "ts": format_timestamp(opens),
            "expires": format_timestamp(expires),
        }
        events.append(("item", value, opens))
    times = rng.sample(range(T0 - 5 * SECOND, T0 + 100 * SECOND, 7), bids)
    for n, ms in enumerate(sorted(times)):
        value = {
            "item": rng.randint(-1, items),
            "bidder": n,
            "price": rng.choice([10, 20, 30, 40, 50]),
            "ts": format_timestamp(ms),
        }
        events.append(("bid", value, ms))
    events.sort(key=lambda e: (e[2], e[0] != "item"))
    return events


def stream_rows(sql: str, events: list[Event], *, upsert: bool) -> list[dict[str, Any]]:
    """The sink's rows for ``events`` piped in order: every row, or (``upsert``) the final
    row of each key."""
    with TopologyTestDriver(compile(sql)) as driver:
        topics = {t: driver.create_input_topic(t, key_serde=serdes.String()) for t, _, _ in events}
        for topic, value, ms in events:
            topics[topic].pipe_input(None, value, timestamp=ms)
        out = driver.create_output_topic("out", key_serde=serdes.Json())
        records = out.read_key_values_to_list()
    if not upsert:
        return [r.value for r in records]
    final: dict[str, Any] = {}
    for record in records:
        final[repr(record.key)] = record.value
    return [row for row in final.values() if row is not None]


def batch_rows(sql: str, events: list[Event]) -> list[dict[str, Any]]:
    """The translated query's rows in DuckDB over the events' tables."""
    query = to_duckdb(sql)
    frames = {
        table.name: pd.DataFrame([value for topic, value, _ in events if topic == table.name])
        for table in query.tables
    }
    con = duckdb.connect()
    try:
        return query.run(con, frames)
    finally:
        con.close()


def ordered(rows: list[dict[str, Any]]) -> list[str]:
    def value(v: Any) -> Any:
        return round(v, 9) if isinstance(v, float) else v

    return sorted(repr(sorted((k, value(v)) for k, v in row.items())) for row in rows)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_an_aggregation_of_an_aggregating_subquery_over_a_join_agrees(seed: int) -> None:
    # Nexmark q4's shape: each category's average (of BIGINTs: a DOUBLE) of its items'
    # highest bid within the item's time, which grows as bids come (an updating result)
    sql = (
        TABLES
        + upsert_sink("category BIGINT, average DOUBLE, best BIGINT, items BIGINT", "category")
        + """
        INSERT INTO out
        SELECT Q.category, AVG(Q.final), MAX(Q.final), COUNT(*)
        FROM (
          SELECT MAX(B.price) AS final, I.category
          FROM item I, bid B
          WHERE I.id = B.item AND B.ts BETWEEN I.ts AND I.expires
          GROUP BY I.id, I.category
        ) Q
        GROUP BY Q.category;"""
    )
    events = auction_events(seed)
    stream = stream_rows(sql, events, upsert=True)
    batch = batch_rows(sql, events)
    assert len(batch) >= 2
    assert any(row["average"] != int(row["average"]) for row in batch)  # not truncated
    assert ordered(stream) == ordered(batch)


def test_a_grouped_subquery_of_one_table_aggregated_again_agrees() -> None:
    # an item moves from one count's group to the next as its bids come: the stream takes
    # it out of the old group (deleting a group left empty) and adds it to the new one
    sql = (
        TABLES
        + upsert_sink("n BIGINT, bidders BIGINT, total BIGINT", "n")
        + """
        INSERT INTO out
        SELECT bids, COUNT(*), SUM(spent) FROM (
          SELECT item, COUNT(*) AS bids, SUM(price) AS spent
          FROM bid WHERE price > 10 GROUP BY item
        ) GROUP BY bids;"""
    )
    events = [e for e in auction_events(4) if e[0] == "bid"]
    stream = stream_rows(sql, events, upsert=True)
    batch = batch_rows(sql, events)
    assert len(batch) >= 2
    assert ordered(stream) == ordered(batch)


@pytest.mark.parametrize("seed", [1, 2])
def test_a_stream_joined_with_a_window_aggregation_subquery_agrees(seed: int) -> None:
    # Nexmark q7's shape: the bids at their 10 s window's highest price; a bid at the
    # window's end (in the next window) meets it too: BETWEEN includes both bounds
    sql = (
        TABLES + "CREATE TABLE out (item BIGINT, bidder BIGINT, price BIGINT, ts TIMESTAMP(3), "
        "wend TIMESTAMP(3)) WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json');\n"
        + """
        INSERT INTO out
        SELECT B.item, B.bidder, B.price, B.ts, W.wend
        FROM bid B
        JOIN (
          SELECT MAX(price) AS top, window_end AS wend
          FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECOND))
          GROUP BY window_start, window_end
        ) W
        ON B.price = W.top
        WHERE B.ts BETWEEN W.wend - INTERVAL '10' SECOND AND W.wend;"""
    )
    events = [e for e in auction_events(seed, bids=120) if e[0] == "bid"]
    last = max(ms for _, _, ms in events)
    # a bid exactly at a window's end, with that window's highest price
    on_end = T0 + 30 * SECOND
    in_window = [v["price"] for _, v, ms in events if on_end - 10 * SECOND <= ms < on_end]
    edge = {"item": 99, "bidder": 999, "price": max(in_window), "ts": format_timestamp(on_end)}
    events = sorted([*events, ("bid", edge, on_end)], key=lambda e: e[2])
    stream = stream_rows(sql, events, upsert=False)
    batch = batch_rows(sql, events)
    # the stream emits a window once it closed: its end + the 1 s delay passed by the end
    closed = [row for row in batch if _ms(row["wend"]) + SECOND <= last]
    assert len(closed) < len(batch)  # the last window never closes
    assert any(row["bidder"] == 999 and _ms(row["wend"]) == on_end for row in closed)
    assert ordered(stream) == ordered(closed)


def _ms(text: str) -> int:
    from streaming.sql.timestamps import parse_timestamp

    ms = parse_timestamp(text)
    assert ms is not None
    return ms


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_row_number_over_a_join_in_an_unaliased_subquery_agrees(seed: int) -> None:
    # Nexmark q9's shape: each item's winning bid within its time; bids of the same price
    # tie, and the stream keeps the first the join emitted (the earlier bid)
    sql = (
        TABLES
        + upsert_sink(
            "id BIGINT, category BIGINT, ts TIMESTAMP(3), expires TIMESTAMP(3), "
            "bidder BIGINT, price BIGINT, bid_ts TIMESTAMP(3)",
            # the row's own key (Top-N without its number over an append-only join):
            # a row pushed out of first place is deleted
            "id, category, ts, expires, bidder, price, bid_ts",
        )
        + """
        INSERT INTO out
        SELECT id, category, ts, expires, bidder, price, bid_ts
        FROM (
          SELECT I.*, B.bidder, B.price, B.ts AS bid_ts,
            ROW_NUMBER() OVER (PARTITION BY I.id ORDER BY B.price DESC) AS rownum
          FROM item I, bid B
          WHERE I.id = B.item AND B.ts BETWEEN I.ts AND I.expires
        )
        WHERE rownum <= 1;"""
    )
    events = auction_events(seed)
    stream = stream_rows(sql, events, upsert=True)
    batch = batch_rows(sql, events)
    assert len(batch) >= 5
    assert ordered(stream) == ordered(batch)


@pytest.mark.parametrize(
    ("columns", "selected"),
    [
        # the item's ts (I.*) selected, the bid's as bid_ts: B.ts is the bid's
        (
            "id, category, ts, expires, bidder, price, bid_ts",
            "I.*, B.bidder, B.price, B.ts AS bid_ts",
        ),
        # the bid's ts not selected: a hidden column of the subquery, not ambiguous
        ("id, bidder, price", "I.id, B.bidder, B.price"),
    ],
)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_row_number_over_a_join_orders_by_qualified_columns(
    seed: int, columns: str, selected: str
) -> None:
    # both tables have ts: ORDER BY B.ts is the bid's time, the latest of a price first
    kinds = {"id": "BIGINT", "category": "BIGINT", "bidder": "BIGINT", "price": "BIGINT"}
    sql = (
        TABLES
        + upsert_sink(
            ", ".join(f"{c} {kinds.get(c, 'TIMESTAMP(3)')}" for c in columns.split(", ")),
            columns,
        )
        + f"""
        INSERT INTO out
        SELECT {columns} FROM (
          SELECT {selected},
            ROW_NUMBER() OVER (PARTITION BY I.id ORDER BY B.price DESC, B.ts DESC) AS rownum
          FROM item I, bid B
          WHERE I.id = B.item AND B.ts BETWEEN I.ts AND I.expires
        )
        WHERE rownum <= 1;"""
    )
    events = auction_events(seed)
    stream = stream_rows(sql, events, upsert=True)
    batch = batch_rows(sql, events)
    assert len(batch) >= 5
    assert ordered(stream) == ordered(batch)


@pytest.mark.parametrize("seed", [1, 2])
def test_star_over_a_ranking_of_a_join_names_a_repeated_column_as_flink(seed: int) -> None:
    # both tables have ts: the subquery's second ts is ts0 (Flink's unique names), and
    # ORDER BY B.ts is the bid's
    sql = (
        TABLES
        + upsert_sink(
            "id BIGINT, category BIGINT, ts TIMESTAMP(3), expires TIMESTAMP(3), "
            "bidder BIGINT, price BIGINT, ts0 TIMESTAMP(3), rownum BIGINT",
            "id, rownum",
        )
        + """
        INSERT INTO out
        SELECT * FROM (
          SELECT I.*, B.bidder, B.price, B.ts,
            ROW_NUMBER() OVER (PARTITION BY I.id ORDER BY B.price DESC, B.ts DESC) AS rownum
          FROM item I, bid B
          WHERE I.id = B.item AND B.ts BETWEEN I.ts AND I.expires
        )
        WHERE rownum <= 1;"""
    )
    events = auction_events(seed)
    stream = stream_rows(sql, events, upsert=True)
    batch = batch_rows(sql, events)
    assert len(batch) >= 5
    assert all(row["ts0"] >= row["ts"] for row in batch)  # the bid's time, in the item's
    assert ordered(stream) == ordered(batch)


def test_a_window_in_the_query_over_a_subquery_is_not_translated() -> None:
    sql = (
        TABLES + "CREATE TABLE out (ws TIMESTAMP(3), n BIGINT) WITH ('connector' = 'kafka', "
        "'topic' = 'out', 'format' = 'json');\n"
        + """
        INSERT INTO out
        SELECT TUMBLE_START(ts, INTERVAL '10' SECOND), COUNT(*)
        FROM (
          SELECT B.ts, B.price FROM bid B JOIN item I
          ON B.item = I.id AND B.ts BETWEEN I.ts AND I.ts + INTERVAL '5' SECOND
        )
        GROUP BY TUMBLE(ts, INTERVAL '10' SECOND);"""
    )
    compile(sql)  # the stream runs it
    with pytest.raises(SqlError, match="a group window over a subquery is not translated"):
        to_duckdb(sql)


def test_row_number_over_a_join_breaks_ties_in_the_order_the_join_emits() -> None:
    # the items come after their bids: each item joins its bids at once, in the order the
    # bids came, so the earliest bid of the highest price wins
    sql = (
        TABLES
        + upsert_sink("id BIGINT, bidder BIGINT, price BIGINT", "id, bidder, price")
        + """
        INSERT INTO out
        SELECT id, bidder, price FROM (
          SELECT I.id, B.bidder, B.price,
            ROW_NUMBER() OVER (PARTITION BY I.id ORDER BY B.price DESC) AS rownum
          FROM item I JOIN bid B ON I.id = B.item
        )
        WHERE rownum = 1;"""
    )
    events = auction_events(7)
    bids = [e for e in events if e[0] == "bid"]
    items = [(topic, value, bids[-1][2] + SECOND) for topic, value, _ in events if topic == "item"]
    stream = stream_rows(sql, bids + items, upsert=True)
    batch = batch_rows(sql, bids + items)
    assert len(batch) >= 5
    assert ordered(stream) == ordered(batch)


def test_star_over_a_ranking_of_a_join_agrees() -> None:
    sql = (
        TABLES
        + upsert_sink("id BIGINT, price BIGINT, bidder BIGINT, rownum BIGINT", "id, rownum")
        + """
        INSERT INTO out
        SELECT * FROM (
          SELECT I.id, B.price, B.bidder,
            ROW_NUMBER() OVER (PARTITION BY I.id ORDER BY B.price DESC, B.bidder DESC) AS rownum
          FROM item I JOIN bid B ON I.id = B.item
        ) WHERE rownum <= 2;"""
    )
    events = auction_events(6)
    stream = stream_rows(sql, events, upsert=True)
    batch = batch_rows(sql, events)
    assert len(batch) >= 10
    assert ordered(stream) == ordered(batch)


def test_a_temporal_join_at_a_subquerys_time_is_not_translated() -> None:
    sql = (
        TABLES
        + "CREATE TABLE rate (item BIGINT, r BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts, "
        "PRIMARY KEY (item) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', "
        "'topic' = 'rate', 'key.format' = 'json', 'value.format' = 'json');\n"
        "CREATE TABLE out (item BIGINT, top BIGINT, r BIGINT) WITH ('connector' = 'kafka', "
        "'topic' = 'out', 'format' = 'json');\n"
        + """
        INSERT INTO out
        SELECT W.item, W.top, R.r
        FROM (
          SELECT item, MAX(price) AS top, window_end AS ts
          FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECOND))
          GROUP BY item, window_start, window_end
        ) W
        JOIN rate FOR SYSTEM_TIME AS OF W.ts AS R ON W.item = R.item;"""
    )
    compile(sql)  # the stream runs it
    with pytest.raises(SqlError, match="AS OF the time of a subquery's rows is not translated"):
        to_duckdb(sql)


@pytest.mark.parametrize("seed", [1, 2])
def test_a_stream_joined_with_an_updating_aggregation_subquery_agrees(seed: int) -> None:
    # the bids at their item's highest price: a regular join (the updating view first),
    # which retracts its rows as an item's highest price and count change
    sql = (
        TABLES
        + upsert_sink("item BIGINT, bidder BIGINT, price BIGINT, bids BIGINT", "item, bidder")
        + """
        INSERT INTO out
        SELECT B.item, B.bidder, B.price, M.bids
        FROM (SELECT item, MAX(price) AS top, COUNT(*) AS bids FROM bid GROUP BY item) M
        JOIN bid B
        ON B.item = M.item AND B.price = M.top;"""
    )
    events = [e for e in auction_events(seed) if e[0] == "bid"]
    stream = stream_rows(sql, events, upsert=True)
    batch = batch_rows(sql, events)
    assert len(batch) >= 5
    assert ordered(stream) == ordered(batch)
