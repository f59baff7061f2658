"""The expected results of Nexmark's verbatim queries (``bench.nexmark.flink_queries``):
hand-written DuckDB SQL over the generated events, and a check of an engine's output.

The tables are ``reference``'s (``person``, ``auction``, ``bid`` with ``seq``, ``ts``;
``$close`` is the event time at the end of the input). Each query's SQL returns the rows
of Nexmark's sink, its columns in the sink's order (Flink's INSERT maps them by
position: q7's sink gets the price in its ``bidder`` column and the bidder in ``price``).
``check`` compares multisets of rows (doubles to 6 decimals): of all the rows of an
append-only sink, of the final row of each primary key of an upsert one (q4, q15-q19).
Windows follow the engine's semantics (``reference``); q17's ``avg_price`` is a DOUBLE, as
AVG returns here (Flink's AVG of a BIGINT truncates), and so is q4's ``final``. Ties: q18 keeps the last row of
its latest ``dateTime``, q19 ranks equal prices in input order. q12's windows are on
processing time: its check sums each bidder's counts over the windows (all bids, once
every window closed: none lost or counted twice) and checks that the windows are 10 s
tumbling ones, each bidder's once.

q4, q5, q7, q8, q9, q10, q11, q13, q14, q18, q19, q21 and q22 (``TRANSLATED``) are checked against
``streaming.sql.batch.to_duckdb``'s translation of Nexmark's own text, the way the
platform reconciles a SQL application with its batch run: q5's and q8's joins of window
aggregations (q5's maximum an aggregation of the counts), q11's sessions merged as the
stream merges them, q18's and q19's ties broken by the order the stream reads the bids
(each table's rows in the order of the events), q10's SELECT into its
'filesystem' sink's columns (partition columns included; the engine's rows are those in
its sink's files, partition columns from their directories), q13's lookup join with its
side input read from Nexmark's file by DuckDB's ``read_csv`` (the file as it is when the
check runs: it does not change), q14's ``count_char`` the Python stand-in registered in
DuckDB, q21's REGEXP_EXTRACT and q22's SPLIT_INDEX the stream's own functions, q4's,
q7's and q9's subqueries translated each on its own (``streaming.sql.batch_subqueries``).
Their hand-written SQL in ``SQL`` stays as an independent cross-check of the translation
(tests/unit/nexmark): q13's side input read by ``read_csv``, q14's ``count_char``
DuckDB's count of ``'c'`` in ``extra``, q21's and q22's DuckDB's regex and string functions,
q11's sessions by ``LAG``, q18's and q19's ties by ``seq``.

The batch translation has every window, the stream only those the end of the input
closed: the check leaves out the rows of the closing events (``CLOSING_ROWS``): q5's of
the closing bids' auction (-1; its sink has no window columns), the closing person's
window (q8) and the closing bidder's sessions (q11). The hand-written SQL counts only
q5's windows that start at or before the last generated bid (``reference.compared_keys``:
the last windows of the closing bids stay open) and q7's, q8's and q11's windows
(sessions) closed by ``$close``. q7's translation counts every window, so its check
leaves out the closing bids' rows too (``CLOSING_ROWS``).
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import orjson

from bench.nexmark import udf
from bench.nexmark.flink_queries import (
    PROCESSING_TIME,
    SINK_KEYS,
    TOPICS,
    query_text,
    write_side_input,
)
from bench.nexmark.model import AUCTION_TOPIC, BID_TOPIC, PERSON_TOPIC, SQL_DDL, Event
from bench.nexmark.queries import TEN_SECONDS_MS
from bench.nexmark.reference import (
    CLOSING_AUCTION,
    GRACE,
    HOP_SLIDE_MS,
    event_table,
    row_key,
)
from streaming.sql.batch import to_duckdb
from streaming.sql.timestamps import parse_timestamp

_STRFTIME = "'%Y-%m-%d %H:%M:%S.%g'"
_CHANNEL_ID = "'(&|^)channel_id=([^&]*)'"
_TS = "make_timestamp(ts * 1000)"
_DAY = f"strftime({_TS}, '%Y-%m-%d')"
#: q15's and q16's counts of bids, bidders and auctions, in all and per price rank
_RANKED_COUNTS = ", ".join(
    f"count({arg}) FILTER (WHERE {cond}) AS {rank}_{what}"
    if cond
    else f"count({arg}) AS {rank}_{what}"
    for what, arg in (
        ("bids", "*"),
        ("bidders", "DISTINCT bidder"),
        ("auctions", "DISTINCT auction"),
    )
    for rank, cond in (
        ("total", ""),
        ("rank1", "price < 10000"),
        ("rank2", "price >= 10000 AND price < 1000000"),
        ("rank3", "price >= 1000000"),
    )
)

#: the queries whose expected rows are ``to_duckdb``'s translation of Nexmark's text
TRANSLATED: tuple[str, ...] = (
    "q4",
    "q5",
    "q7",
    "q8",
    "q9",
    "q10",
    "q11",
    "q13",
    "q14",
    "q18",
    "q19",
    "q21",
    "q22",
)
#: the event tables the batch queries read, by name
TABLES = (("person", PERSON_TOPIC), ("auction", AUCTION_TOPIC), ("bid", BID_TOPIC))

#: the batch SQL of each verbatim query, the sink's columns in order
SQL: dict[str, str] = {
    "q0": "SELECT auction, bidder, price, dateTime, extra FROM bid",
    "q1": "SELECT auction, bidder, (0.908 * price)::DOUBLE AS price, dateTime, extra FROM bid",
    "q2": "SELECT auction, price FROM bid WHERE auction % 123 = 0",
    "q3": """
        SELECT P.name, P.city, P.state, A.id
        FROM auction A JOIN person P ON A.seller = P.id
        WHERE A.category = 10 AND P.state IN ('OR', 'ID', 'CA')""",
    "q4": """
        WITH closing AS (
            SELECT A.id, A.category, MAX(B.price) AS final
            FROM auction A JOIN bid B
              ON A.id = B.auction AND B.ts BETWEEN A.ts AND A.expires_ms
            GROUP BY A.id, A.category)
        SELECT category AS id, AVG(final)::DOUBLE AS final
        FROM closing GROUP BY category""",
    "q5": f"""
        WITH hops AS (
            SELECT auction, UNNEST(RANGE(
                ts - ts % {HOP_SLIDE_MS} - {TEN_SECONDS_MS - HOP_SLIDE_MS},
                ts - ts % {HOP_SLIDE_MS} + 1, {HOP_SLIDE_MS})) AS ws
            FROM bid),
        counts AS (SELECT ws, auction, COUNT(*) AS num FROM hops GROUP BY ws, auction),
        top AS (SELECT ws, MAX(num) AS num FROM counts GROUP BY ws)
        SELECT counts.auction, counts.num
        FROM top JOIN counts USING (ws, num)
        WHERE ws + {TEN_SECONDS_MS + GRACE} <= $close AND ws <= $last_bid""",
    "q7": f"""
        WITH windowed AS (SELECT *, ts - ts % {TEN_SECONDS_MS} AS ws FROM bid),
        top AS (SELECT ws, MAX(price) AS price FROM windowed GROUP BY ws)
        SELECT B.auction, B.price AS bidder, B.bidder AS price, B.dateTime, B.extra
        FROM bid B JOIN top T ON B.price = T.price
          AND B.ts BETWEEN T.ws AND T.ws + {TEN_SECONDS_MS}
        WHERE T.ws + {TEN_SECONDS_MS + GRACE} <= $close""",
    "q8": f"""
        SELECT DISTINCT P.id, P.name,
               strftime(make_timestamp((P.ts - P.ts % {TEN_SECONDS_MS}) * 1000), {_STRFTIME})
                 AS stime
        FROM person P JOIN auction A
          ON P.id = A.seller AND P.ts // {TEN_SECONDS_MS} = A.ts // {TEN_SECONDS_MS}
        WHERE P.ts - P.ts % {TEN_SECONDS_MS} + {TEN_SECONDS_MS + GRACE} <= $close""",
    "q9": """
        SELECT A.id, A.itemName, A.description, A.initialBid, A.reserve, A.dateTime,
               A.expires, A.seller, A.category, A.extra, B.auction, B.bidder, B.price,
               B.dateTime AS bid_dateTime, B.extra AS bid_extra
        FROM auction A JOIN bid B
          ON A.id = B.auction AND B.ts BETWEEN A.ts AND A.expires_ms
        QUALIFY ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.price DESC, B.ts, B.seq) = 1""",
    # the rows q10 writes to its partitioned files (``flink_queries.file_records``)
    "q10": f"""
        SELECT auction, bidder, price, dateTime, extra, {_DAY} AS dt,
               strftime(make_timestamp(ts * 1000), '%H:%M') AS hm
        FROM bid""",
    "q11": f"""
        WITH gaps AS (
            SELECT bidder, ts, CASE WHEN ts - LAG(ts) OVER (PARTITION BY bidder ORDER BY ts, seq)
                                         <= {TEN_SECONDS_MS} THEN 0 ELSE 1 END AS starts
            FROM bid),
        numbered AS (
            SELECT bidder, ts, SUM(starts) OVER (PARTITION BY bidder ORDER BY ts
                                                 ROWS UNBOUNDED PRECEDING) AS session
            FROM gaps)
        SELECT bidder, COUNT(*) AS bid_count,
               strftime(make_timestamp(MIN(ts) * 1000), {_STRFTIME}) AS starttime,
               strftime(make_timestamp((MAX(ts) + {TEN_SECONDS_MS}) * 1000), {_STRFTIME})
                 AS endtime
        FROM numbered GROUP BY bidder, session
        HAVING MAX(ts) + {TEN_SECONDS_MS + GRACE} <= $close""",
    "q12": "SELECT bidder, count(*) AS bid_count FROM bid GROUP BY bidder",
    # the side input read by DuckDB from Nexmark's file (``side_input``); % truncates, as
    # Flink's MOD of a negative auction (the closing bids' -1) does
    "q13": """
        SELECT B.auction, B.bidder, B.price, B.dateTime, S.value
        FROM bid B JOIN side_input S ON B.auction % 10000 = S.key""",
    # count_char by DuckDB's string functions, not the Python stand-in the engine runs
    "q14": f"""
        SELECT auction, bidder, (0.908 * price)::DOUBLE AS price,
               CASE
                   WHEN hour({_TS}) >= 8 AND hour({_TS}) <= 18 THEN 'dayTime'
                   WHEN hour({_TS}) <= 6 OR hour({_TS}) >= 20 THEN 'nightTime'
                   ELSE 'otherTime'
               END AS bidTimeType,
               dateTime, extra, length(extra) - length(replace(extra, 'c', '')) AS c_counts
        FROM bid
        WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000""",
    "q15": f"""
        SELECT {_DAY} AS day, {_RANKED_COUNTS}
        FROM bid GROUP BY day""",
    "q16": f"""
        SELECT channel, {_DAY} AS day,
               max(strftime(make_timestamp(ts * 1000), '%H:%M')) AS minute, {_RANKED_COUNTS}
        FROM bid GROUP BY channel, day""",
    "q17": f"""
        SELECT auction, {_DAY} AS day, count(*) AS total_bids,
               count(*) FILTER (WHERE price < 10000) AS rank1_bids,
               count(*) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bids,
               count(*) FILTER (WHERE price >= 1000000) AS rank3_bids,
               min(price) AS min_price, max(price) AS max_price,
               avg(price)::DOUBLE AS avg_price, sum(price)::BIGINT AS sum_price
        FROM bid GROUP BY auction, day""",
    "q18": """
        SELECT auction, bidder, price, channel, url, dateTime, extra
        FROM bid
        QUALIFY ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY ts DESC, seq DESC) = 1""",
    "q19": """
        SELECT * FROM (
            SELECT auction, bidder, price, channel, url, dateTime, extra,
                   ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC, seq)
                     AS rank_number
            FROM bid)
        WHERE rank_number <= 10""",
    "q20": """
        SELECT B.auction, B.bidder, B.price, B.channel, B.url, B.dateTime AS bid_dateTime,
               B.extra AS bid_extra, A.itemName, A.description, A.initialBid, A.reserve,
               A.dateTime AS auction_dateTime, A.expires, A.seller, A.category,
               A.extra AS auction_extra
        FROM bid B JOIN auction A ON B.auction = A.id
        WHERE A.category = 10""",
    "q21": f"""
        SELECT auction, bidder, price, channel,
               CASE lower(channel)
                   WHEN 'apple' THEN '0' WHEN 'google' THEN '1'
                   WHEN 'facebook' THEN '2' WHEN 'baidu' THEN '3'
                   ELSE CASE WHEN regexp_matches(url, {_CHANNEL_ID})
                             THEN regexp_extract(url, {_CHANNEL_ID}, 2) END
               END AS channel_id
        FROM bid
        WHERE regexp_matches(url, {_CHANNEL_ID})
           OR lower(channel) IN ('apple', 'google', 'facebook', 'baidu')""",
    "q22": """
        SELECT auction, bidder, price, channel, string_split(url, '/')[4] AS dir1,
               string_split(url, '/')[5] AS dir2, string_split(url, '/')[6] AS dir3
        FROM bid""",
}


def expected_results(
    query: str, events: list[Event], *, translated: bool = True
) -> list[dict[str, Any]]:
    """The rows of ``query``'s sink for ``events``, from DuckDB: for a query of
    ``TRANSLATED``, ``to_duckdb``'s translation of Nexmark's text unless ``translated`` is
    False; otherwise its hand-written SQL."""
    if translated and query in TRANSLATED:
        return translated_results(query, events)
    topics = TOPICS[query]
    con = duckdb.connect()
    side = tempfile.TemporaryDirectory(prefix="nexmark-side-input-")
    try:
        for name, topic in TABLES:
            con.register(name, event_table(events, topic))
        if query == "q13":
            side_input = str(write_side_input(Path(side.name))).replace("'", "''")
            con.execute(
                "CREATE VIEW side_input AS SELECT * FROM read_csv("
                f"'{side_input}', header = false, "
                "columns = {'key': 'BIGINT', 'value': 'VARCHAR'})"
            )
        params: dict[str, int] = {}
        sql = SQL[query]
        if "$close" in sql:
            params["close"] = max(e.timestamp for e in events if e.topic in topics)
        if "$last_bid" in sql:
            params["last_bid"] = max(
                e.timestamp
                for e in events
                if e.topic == BID_TOPIC and e.value["auction"] != CLOSING_AUCTION
            )
        result = con.execute(sql, params) if params else con.execute(sql)
        columns = [d[0] for d in result.description]
        rows = result.fetchall()
    finally:
        con.close()
        side.cleanup()
    return [dict(zip(columns, row, strict=True)) for row in rows]


def translated_results(query: str, events: list[Event]) -> list[dict[str, Any]]:
    """The rows of ``streaming.sql.batch.to_duckdb``'s translation of Nexmark's ``query``
    (its sink's columns) over ``events``; q13's side input written as Nexmark's file and
    read from it, q14's ``count_char`` the Python stand-in."""
    udf.register()
    with tempfile.TemporaryDirectory(prefix="nexmark-batch-") as nexmark_dir:
        if query == "q13":
            write_side_input(Path(nexmark_dir))
        batch = to_duckdb(SQL_DDL + query_text(query, "expected", Path(nexmark_dir)))
        relations = {name: event_table(events, topic) for name, topic in TABLES}
        con = duckdb.connect()
        try:
            return batch.run(
                con, {t.name: relations[t.name] for t in batch.tables if not t.is_file}
            )
        finally:
            con.close()


#: the id of the closing person, the seller of the closing auction and the bidder of the
#: closing bids (``closing_events``: no generated entity has it)
CLOSING_ID = 0
#: the column and value of the rows of the closing events (``closing_events``) that are
#: not compared, by query: the windows (sessions) that the end of the input leaves open,
#: which the batch translation has: q5's and q7's of the closing bids' auction (q7: the
#: translation joins the last closing bid with its own window, which the stream never
#: closes), the closing person's (q8) and the closing bidder's (q11)
CLOSING_ROWS = {
    "q5": ("auction", CLOSING_AUCTION),
    "q7": ("auction", CLOSING_AUCTION),
    "q8": ("id", CLOSING_ID),
    "q11": ("bidder", CLOSING_ID),
}


def compared(query: str, row: dict[str, Any] | None) -> bool:
    """Whether ``row`` is compared: not a row of the closing events (``CLOSING_ROWS``)."""
    if row is None or query not in CLOSING_ROWS:
        return True
    column, value = CLOSING_ROWS[query]
    return bool(row.get(column) != value)


def final_table(
    keys: tuple[str, ...], records: list[tuple[str | None, dict[str, Any] | None]]
) -> dict[tuple[Any, ...], dict[str, Any]]:
    """An upsert sink's rows by primary key, the last value of each key (a tombstone
    deletes it); the key is read from the row (the JSON key of a tombstone)."""
    final: dict[tuple[Any, ...], dict[str, Any]] = {}
    for key, row in records:
        if row is None:
            fields = orjson.loads(key or "null") or {}
            final.pop(tuple(fields.get(k) for k in keys), None)
        else:
            final[tuple(row.get(k) for k in keys)] = row
    return final


def check(
    query: str, events: list[Event], records: list[tuple[str | None, dict[str, Any] | None]]
) -> list[str]:
    """The differences between an engine's output ``records`` of verbatim query ``query``
    and DuckDB's rows (empty: correct): the rows as a multiset for an append-only sink,
    the final row of each primary key for an upsert sink (``SINK_KEYS``)."""
    want = [row for row in expected_results(query, events) if compared(query, row)]
    if not want:
        return [f"{query}: the expected result is empty: the input is too small to test it"]
    problems: list[str] = []
    if query in PROCESSING_TIME:
        records, problems = _bidder_totals(records)
    keys = SINK_KEYS.get(query)
    if keys is not None:
        records = [(None, row) for row in final_table(keys, records).values()]
    expected = Counter(row_key(None, row) for row in want)
    got = Counter(row_key(None, row) for _key, row in records if compared(query, row))
    problems += [f"missing {row.decode()} x{n}" for row, n in (expected - got).items()]
    problems += [f"unexpected {row.decode()} x{n}" for row, n in (got - expected).items()]
    return problems


def _bidder_totals(
    records: list[tuple[str | None, dict[str, Any] | None]],
) -> tuple[list[tuple[str | None, dict[str, Any] | None]], list[str]]:
    """q12's rows summed per bidder (each bid counted in one processing-time window: the
    sums equal the bids of each bidder when none was lost or counted twice), and the rows
    whose window is not a 10 s window aligned to 10 s or comes a second time."""
    totals: Counter[Any] = Counter()
    problems = []
    windows: set[tuple[Any, Any]] = set()
    for _key, row in records:
        if row is None:
            problems.append("a delete in an append-only result")
            continue
        start, end = parse_timestamp(row["starttime"]), parse_timestamp(row["endtime"])
        if start is None or end is None or start % TEN_SECONDS_MS or end - start != TEN_SECONDS_MS:
            problems.append(f"not a 10 s tumbling window: {row}")
        if (row["bidder"], start) in windows:
            problems.append(f"a second row of a bidder's window: {row}")
        windows.add((row["bidder"], start))
        totals[row["bidder"]] += row["bid_count"]
    rows = [{"bidder": bidder, "bid_count": n} for bidder, n in totals.items()]
    return [(None, row) for row in rows], problems
