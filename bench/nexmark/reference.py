"""The expected final results of each query: hand-written DuckDB SQL over the generated events.

``expected_results(query, events)`` loads the events into in-memory DuckDB tables (``person``,
``auction``, ``bid``: the JSON rows plus ``seq``, the position in the generated sequence,
and ``ts``, the event time in epoch ms; ``auction`` also has ``expires_ms``) and runs the
batch version of the query. ``check(query, events, records)`` compares an engine's output
records (String key, JSON value) with it and returns the differences (empty: correct):

- q0, q1, q2, q3 are appends: the same rows, as a multiset (doubles to 6 decimals);
- q4, q5, q6 are updating tables: the last value per key (doubles within 1e-9 relative);
  q6 counts the auctions closed (``expires`` + the 4 s grace) by the end of the input; q5
  compares the windows of the generated bids (starting at or before the last of them), not
  those holding only closing bids (the SQL version closes a window's maximum only once a
  count of a window 14 s later comes out, so the last closing bid's windows stay open);
- q7, q8, q11 emit a row per closed window: every window (session) closed by the end of the
  input (its end + the 4 s grace at or before the last event time of the query's input
  topics) must be there, nothing else. ``closing_events`` at the end of the input close them
  all.

Window semantics follow the engine's (Kafka Streams'): windows are ``[start, end)``; a
session takes bids up to 10 s apart, inclusive.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import duckdb
import orjson
import pyarrow as pa

from bench.nexmark.model import (
    AUCTION_TOPIC,
    BID_TOPIC,
    PERSON_TOPIC,
    WATERMARK_DELAY_MS,
    Event,
)
from bench.nexmark.queries import QUERIES, TEN_SECONDS_MS
from streaming.sql.timestamps import parse_timestamp

GRACE = WATERMARK_DELAY_MS
#: the auction id of the closing bids (``generator.closing_events``)
CLOSING_AUCTION = -1
HOP_SLIDE_MS = 2_000

#: the batch SQL of each query; ``:close`` is the event time that closes windows
SQL: dict[str, str] = {
    "q0": """
        SELECT auction::VARCHAR AS key, auction, bidder, price, dateTime, extra FROM bid""",
    "q1": """
        SELECT auction::VARCHAR AS key, auction, bidder, 0.908::DOUBLE * price AS price, dateTime, extra
        FROM bid""",
    "q2": """
        SELECT auction::VARCHAR AS key, auction, price FROM bid WHERE auction % 123 = 0""",
    "q3": """
        SELECT A.id::VARCHAR AS key, P.name, P.city, P.state, A.id
        FROM auction A JOIN person P ON A.seller = P.id
        WHERE A.category = 10 AND P.state IN ('OR', 'ID', 'CA')""",
    "q4": """
        WITH closing AS (
            SELECT A.id, A.category, MAX(B.price) AS final
            FROM auction A JOIN bid B
              ON A.id = B.auction AND B.ts BETWEEN A.ts AND A.expires_ms
            GROUP BY A.id, A.category)
        SELECT category::VARCHAR AS key, category AS id, AVG(final) AS final
        FROM closing GROUP BY category""",
    "q5": f"""
        WITH hops AS (
            SELECT auction, UNNEST(RANGE(
                ts - ts % {HOP_SLIDE_MS} - {TEN_SECONDS_MS - HOP_SLIDE_MS},
                ts - ts % {HOP_SLIDE_MS} + 1, {HOP_SLIDE_MS})) AS ws
            FROM bid),
        counts AS (SELECT ws, auction, COUNT(*) AS num FROM hops GROUP BY ws, auction),
        top AS (SELECT ws, MAX(num) AS num FROM counts GROUP BY ws)
        SELECT strftime(make_timestamp(ws * 1000), '%Y-%m-%d %H:%M:%S.%g') AS key,
               strftime(make_timestamp(ws * 1000), '%Y-%m-%d %H:%M:%S.%g') AS starttime,
               strftime(make_timestamp((ws + {TEN_SECONDS_MS}) * 1000),
                        '%Y-%m-%d %H:%M:%S.%g') AS endtime,
               top.num, list(counts.auction ORDER BY counts.auction) AS auctions
        FROM top JOIN counts USING (ws, num)
        WHERE ws + {TEN_SECONDS_MS + GRACE} <= $close
        GROUP BY ws, top.num""",
    "q6": f"""
        WITH winners AS (
            SELECT A.id, A.seller, A.expires_ms, MAX(B.price) AS price
            FROM auction A JOIN bid B
              ON A.id = B.auction AND B.ts >= A.ts AND B.ts < A.expires_ms
                 AND B.price >= A.reserve
            WHERE A.expires_ms + {GRACE} <= $close
            GROUP BY A.id, A.seller, A.expires_ms),
        ranked AS (
            SELECT seller, price, ROW_NUMBER() OVER (
                PARTITION BY seller ORDER BY expires_ms DESC, id DESC) AS recent
            FROM winners)
        SELECT seller::VARCHAR AS key, seller, AVG(price) AS avg
        FROM ranked WHERE recent <= 10 GROUP BY seller""",
    "q7": f"""
        WITH windowed AS (SELECT *, ts - ts % {TEN_SECONDS_MS} AS ws FROM bid),
        top AS (SELECT ws, MAX(price) AS price FROM windowed GROUP BY ws)
        SELECT auction::VARCHAR AS key, auction, price, bidder, dateTime, extra
        FROM windowed JOIN top USING (ws, price)
        WHERE ws + {TEN_SECONDS_MS + GRACE} <= $close""",
    "q8": f"""
        SELECT DISTINCT P.id::VARCHAR AS key, P.id, P.name,
               strftime(make_timestamp((P.ts - P.ts % {TEN_SECONDS_MS}) * 1000),
                        '%Y-%m-%d %H:%M:%S.%g') AS stime
        FROM person P JOIN auction A
          ON P.id = A.seller AND P.ts // {TEN_SECONDS_MS} = A.ts // {TEN_SECONDS_MS}
        WHERE P.ts - P.ts % {TEN_SECONDS_MS} + {TEN_SECONDS_MS + GRACE} <= $close""",
    "q11": f"""
        WITH gaps AS (
            SELECT bidder, ts, CASE WHEN ts - LAG(ts) OVER (PARTITION BY bidder ORDER BY ts, seq)
                                         <= {TEN_SECONDS_MS} THEN 0 ELSE 1 END AS starts
            FROM bid),
        numbered AS (
            SELECT bidder, ts, SUM(starts) OVER (PARTITION BY bidder ORDER BY ts
                                                 ROWS UNBOUNDED PRECEDING) AS session
            FROM gaps)
        SELECT bidder::VARCHAR AS key, bidder, COUNT(*) AS bid_count,
               strftime(make_timestamp(MIN(ts) * 1000), '%Y-%m-%d %H:%M:%S.%g') AS starttime,
               strftime(make_timestamp((MAX(ts) + {TEN_SECONDS_MS}) * 1000),
                        '%Y-%m-%d %H:%M:%S.%g') AS endtime
        FROM numbered GROUP BY bidder, session
        HAVING MAX(ts) + {TEN_SECONDS_MS + GRACE} <= $close""",
}

APPENDS = frozenset({"q0", "q1", "q2", "q3", "q7", "q8", "q11"})
TABLES = frozenset({"q4", "q5", "q6"})


def event_table(events: Iterable[Event], topic: str) -> pa.Table:
    """The events of ``topic`` as a table: their JSON rows plus ``seq`` and ``ts`` (and
    ``expires_ms`` for auctions)."""
    rows = []
    for e in events:
        if e.topic == topic:
            row = {**e.value, "seq": e.seq, "ts": e.timestamp}
            if topic == AUCTION_TOPIC:
                row["expires_ms"] = parse_timestamp(row["expires"])
            rows.append(row)
    return pa.Table.from_pylist(rows)


def close_time(query: str, events: list[Event]) -> int:
    """The stream time at the end of the input: the last event time of the query's topics."""
    topics = QUERIES[query][1]
    return max(e.timestamp for e in events if e.topic in topics)


def expected_results(query: str, events: list[Event]) -> list[tuple[str, dict[str, Any]]]:
    """The batch result of ``query`` over ``events``: (key, JSON row) pairs."""
    con = duckdb.connect()
    try:
        for name, topic in (
            ("person", PERSON_TOPIC),
            ("auction", AUCTION_TOPIC),
            ("bid", BID_TOPIC),
        ):
            con.register(name, event_table(events, topic))
        sql = SQL[query]
        params = {"close": close_time(query, events)} if "$close" in sql else None
        result = con.execute(sql, params) if params else con.execute(sql)
        columns = [d[0] for d in result.description]
        rows = result.fetchall()
    finally:
        con.close()
    return [(row[0], dict(zip(columns[1:], row[1:], strict=True))) for row in rows]


def _canonical(value: Any) -> Any:
    """Doubles rounded to 6 decimals, so a multiset compares rows exactly otherwise."""
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def row_key(key: str | None, value: dict[str, Any] | None) -> bytes:
    return orjson.dumps([key, _canonical(value)], option=orjson.OPT_SORT_KEYS)


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return (
            isinstance(a, int | float)
            and isinstance(b, int | float)
            and math.isclose(a, b, rel_tol=1e-9)
        )
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    return bool(a == b)


def compared_keys(query: str, events: list[Event]) -> Callable[[str], bool]:
    """Which keys of an updating query's result are compared: for q5 the windows that
    start at or before the last generated bid (the closing bids are for auction -1)."""
    if query != "q5":
        return lambda _key: True
    last = max(
        e.timestamp
        for e in events
        if e.topic == BID_TOPIC and e.value["auction"] != CLOSING_AUCTION
    )
    return lambda key: (parse_timestamp(key) or 0) <= last


def check(
    query: str, events: list[Event], records: list[tuple[str | None, dict[str, Any] | None]]
) -> list[str]:
    """The differences between an engine's output ``records`` and the expected results."""
    compared = compared_keys(query, events)
    want = [(k, v) for k, v in expected_results(query, events) if compared(k)]
    if not want:
        return [f"{query}: the expected result is empty: the input is too small to test it"]
    problems: list[str] = []
    if query in APPENDS:
        expected = Counter(row_key(k, v) for k, v in want)
        got = Counter(row_key(k, v) for k, v in records)
        problems += [f"missing {row.decode()} x{n}" for row, n in (expected - got).items()]
        problems += [f"unexpected {row.decode()} x{n}" for row, n in (got - expected).items()]
    else:
        final: dict[str, dict[str, Any]] = {}
        for key, value in records:
            if key is None:
                problems.append(f"a record without a key: {value}")
            elif not compared(key):
                continue
            elif value is None:
                final.pop(key, None)
            else:
                final[key] = value
        expected_table = dict(want)
        for key, value in sorted(expected_table.items()):
            have = final.get(key)
            if have is None:
                problems.append(f"missing key {key}: {value}")
            elif not _close(have, value):
                problems.append(f"key {key}: {have} != {value}")
        problems += [
            f"unexpected key {key}: {final[key]}"
            for key in sorted(set(final) - set(expected_table))
        ]
    return problems
