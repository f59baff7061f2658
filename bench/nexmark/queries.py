"""The Nexmark queries written with this engine's DSL, each a function building a ``Topology``.

Every query reads the topics of ``bench.nexmark.model`` (String keys, JSON values, event
time from ``dateTime``) and writes String keys and JSON values to one output topic. The
mapping from Nexmark's (Flink SQL) definitions (``bench.nexmark.sql_queries`` runs them in
SQL, all but q6, as Nexmark's text: docs/sql/nexmark.md):

- **q0** pass-through: ``SELECT auction, bidder, price, dateTime, extra FROM bid``:
  ``map_values``.
- **q1** currency conversion: ``SELECT auction, bidder, 0.908 * price AS price, dateTime,
  extra FROM bid``: ``map_values``.
- **q2** selection: ``SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0``:
  ``filter`` + ``map_values``.
- **q3** local item suggestion: auctions of category 10 joined with their seller if the
  seller lives in OR, ID or CA (``SELECT P.name, P.city, P.state, A.id``). Persons are a
  ``KTable`` keyed by id (filtered by state); the auction stream is re-keyed by seller
  (a repartition topic) and joined with the table. Flink's regular join is symmetric; this
  stream-table join sees a person only if it came first, which the generator guarantees
  (a seller is dated before its auctions). Output key: the auction id (a column of
  Nexmark's result row).
- **q4** average closing price per category: the highest bid of each auction among its
  bids within ``[dateTime, expires]``, averaged per category. Auctions and bids are joined
  as streams on the auction id (``JoinWindows`` from the auction's time to the longest
  auction length, no time before: the join is symmetric, whichever side comes first); the
  joiner keeps bids up to the auction's ``expires``; the max per auction is a ``KTable``,
  re-grouped by category into a sum and count with an adder and a subtractor (an auction's
  old max is subtracted when it rises). Output key: the category; value ``{"id",
  "final"}`` (the average, a double: Flink's AVG of BIGINT would truncate).
- **q5** hot items: bids counted per auction in HOP windows of 10 s sliding by 2 s
  (``TimeWindows.advance_by``, grace = the 4 s watermark delay, emitted once when the
  window closes), then per window (re-keyed by window start) the auctions with the highest
  count, a ``KTable`` aggregation. Output key: the window start (TIMESTAMP text); value
  ``{"starttime", "endtime", "num", "auctions"}`` (Flink writes one row per top auction,
  ``auction, num``, as the SQL version does).
- **q7** highest bid: the bids with the highest price per 10 s tumbling window (all bids
  grouped under one key, as Flink's global MAX), emitted when the window closes, one row
  per top bid: ``{"auction", "price", "bidder", "dateTime", "extra"}``, keyed by auction.
  The window is ``[start, end)``; Flink's ``BETWEEN window_end - 10 s AND window_end`` also
  matches a bid exactly at the end (as the SQL version, Nexmark's text, does).
- **q8** monitor new users: persons who opened an auction in the same 10 s tumbling window.
  A windowed stream-stream join of persons (by id) and auctions (re-keyed by seller) within
  10 s, kept when both fall in the same tumbling window, then de-duplicated per person and
  window by a tumbling-window ``reduce`` emitted on close. Output key: the person id; value
  ``{"id", "name", "stime"}`` (Nexmark's sink columns). It runs with ``max.task.idle.ms`` = 2 s
  (``QUERY_SETTINGS``): the join's task reads the person topic and the auctions'
  repartition topic, which this application fills itself; without waiting for it, the
  persons (already in their topic) run ahead in stream time and every auction arrives too
  late for the join window (Kafka Streams' stream time is the maximum over the task's
  partitions; Flink's watermark is the minimum).
- **q11** user sessions: bids counted per bidder in session windows with a 10 s gap
  (grace 4 s, emitted on close). Output key: the bidder; value ``{"bidder", "bid_count",
  "starttime", "endtime"}`` with Flink's ``SESSION_END`` (last bid + gap). Kafka's sessions
  merge bids up to the gap apart inclusive (Flink: strictly less). The session store has
  the default retention (gap + grace): the engine emits every closed session before the
  store lets it go, though emit-on-close looks at most once per wall-clock second.

- **q6** average selling price by seller: the average winning price of each seller's last
  10 closed auctions (Nexmark/Beam's definition; Flink does not run its SQL, an OVER window
  on an updating input). Auctions and bids are joined as in q4, keeping bids before
  ``expires`` at or above the reserve; a ``Processor`` (``ClosingAuctions``) keeps each
  auction's best bid in a store and, on stream-time punctuation, forwards the winners of
  the auctions closed by then (``expires`` + the 4 s grace at or before stream time) in
  order of ``expires`` (then auction id), keyed by seller; a ``KTable`` aggregation keeps
  the last 10 prices per seller. Output key: the seller; value ``{"seller", "avg"}``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from bench.nexmark.model import (
    AUCTION_TOPIC,
    BID_TOPIC,
    PERSON_TOPIC,
    WATERMARK_DELAY,
    WATERMARK_DELAY_MS,
)
from streaming import (
    EmitStrategy,
    Grouped,
    JoinWindows,
    KStream,
    Materialized,
    SessionWindows,
    StreamsBuilder,
    TimeWindows,
    Topology,
    serdes,
)
from streaming.sql.timestamps import ColumnTimestampExtractor, format_timestamp, parse_timestamp
from streaming.state import Stores
from streaming.topology import Processor, PunctuationType, Record
from streaming.windowed import Windowed

TEN_SECONDS = timedelta(seconds=10)
TEN_SECONDS_MS = 10_000
HOP_SLIDE = timedelta(seconds=2)
Q3_STATES = frozenset({"OR", "ID", "CA"})
Q3_CATEGORY = 10
#: q6: how many of a seller's last closed auctions are averaged, and how often (in stream
#: time) closed auctions are looked for
Q6_LAST_AUCTIONS = 10
Q6_CLOSE_INTERVAL_MS = 1_000


@dataclass(frozen=True)
class QueryContext:
    """What a query needs besides its input topics: its output topic and the longest
    auction (q4's join window)."""

    output: str
    max_auction_length_ms: int


def _source(builder: StreamsBuilder, topic: str) -> KStream:
    """A Nexmark topic as a stream: String keys, JSON rows, event time from ``dateTime``."""
    return builder.stream(
        topic,
        key_serde=serdes.String(),
        value_serde=serdes.Json(),
        timestamp_extractor=ColumnTimestampExtractor("dateTime"),
    )


def _to(stream: KStream, output: str) -> None:
    stream.to(output, key_serde=serdes.String(), value_serde=serdes.Json())


def _millis(text: str) -> int:
    millis = parse_timestamp(text)
    if millis is None:
        raise ValueError(f"unreadable TIMESTAMP {text!r}")
    return millis


# -- stateless -----------------------------------------------------------------------------


def q0(ctx: QueryContext) -> Topology:
    """Pass-through: every bid, with the columns Nexmark's q0 selects."""
    builder = StreamsBuilder()
    passed = _source(builder, BID_TOPIC).map_values(
        lambda b: {
            "auction": b["auction"],
            "bidder": b["bidder"],
            "price": b["price"],
            "dateTime": b["dateTime"],
            "extra": b["extra"],
        }
    )
    _to(passed, ctx.output)
    return builder.build()


def q1(ctx: QueryContext) -> Topology:
    """Currency conversion: the price times 0.908 (dollars to euros)."""
    builder = StreamsBuilder()
    converted = _source(builder, BID_TOPIC).map_values(
        lambda b: {
            "auction": b["auction"],
            "bidder": b["bidder"],
            "price": 0.908 * b["price"],
            "dateTime": b["dateTime"],
            "extra": b["extra"],
        }
    )
    _to(converted, ctx.output)
    return builder.build()


def q2(ctx: QueryContext) -> Topology:
    """Selection: the bids of every 123rd auction."""
    builder = StreamsBuilder()
    selected = (
        _source(builder, BID_TOPIC)
        .filter(lambda _k, b: b["auction"] % 123 == 0)
        .map_values(lambda b: {"auction": b["auction"], "price": b["price"]})
    )
    _to(selected, ctx.output)
    return builder.build()


# -- joins and aggregations ----------------------------------------------------------------


def q3(ctx: QueryContext) -> Topology:
    """Local item suggestion: category-10 auctions of sellers in OR, ID or CA."""
    builder = StreamsBuilder()
    persons = builder.table(
        PERSON_TOPIC,
        key_serde=serdes.String(),
        value_serde=serdes.Json(),
        timestamp_extractor=ColumnTimestampExtractor("dateTime"),
        materialized="q3-persons",
    ).filter(lambda _k, p: p["state"] in Q3_STATES)
    auctions = (
        _source(builder, AUCTION_TOPIC)
        .filter(lambda _k, a: a["category"] == Q3_CATEGORY)
        .select_key(lambda _k, a: str(a["seller"]))
    )
    joined = auctions.join(
        persons,
        lambda a, p: {"name": p["name"], "city": p["city"], "state": p["state"], "id": a["id"]},
    ).select_key(lambda _seller, row: str(row["id"]))
    _to(joined, ctx.output)
    return builder.build()


def _q4_add(_key: str, row: dict[str, int], agg: dict[str, int]) -> dict[str, int]:
    return {"sum": agg["sum"] + row["price"], "count": agg["count"] + 1}


def _q4_subtract(_key: str, row: dict[str, int], agg: dict[str, int]) -> dict[str, int]:
    return {"sum": agg["sum"] - row["price"], "count": agg["count"] - 1}


def q4(ctx: QueryContext) -> Topology:
    """Average closing price per category (see the module docstring)."""
    builder = StreamsBuilder()
    auctions = _source(builder, AUCTION_TOPIC).map_values(
        lambda a: {"category": a["category"], "expires": _millis(a["expires"])}
    )
    bids = _source(builder, BID_TOPIC).map_values(
        lambda b: {"price": b["price"], "at": _millis(b["dateTime"])}
    )
    # a bid may come from the auction's time (before 0) to its longest possible expiry
    window = JoinWindows.of_time_difference_and_grace(
        ctx.max_auction_length_ms, WATERMARK_DELAY
    ).before(0)
    in_time = auctions.join(
        bids,
        lambda a, b: (
            {"category": a["category"], "price": b["price"]} if b["at"] <= a["expires"] else None
        ),
        window,
    ).filter(lambda _k, pair: pair is not None)
    closing = in_time.group_by_key().reduce(
        lambda best, pair: pair if pair["price"] > best["price"] else best, "q4-max-price"
    )
    averages = (
        closing.group_by(
            lambda _auction, row: (str(row["category"]), row),
            Grouped.with_(serdes.String(), serdes.Json(), "q4-by-category"),
        )
        .aggregate(lambda: {"sum": 0, "count": 0}, _q4_add, _q4_subtract, "q4-per-category")
        .map_values(
            lambda category, agg: (
                {"id": int(category), "final": agg["sum"] / agg["count"]} if agg["count"] else None
            ),
            with_key=True,
        )
    )
    _to(averages.to_stream(), ctx.output)
    return builder.build()


def _q5_top(_start: str, row: dict[str, Any], agg: dict[str, Any]) -> dict[str, Any]:
    """The window's top auctions so far, given one auction's final count (``row``)."""
    if row["num"] > agg["num"]:
        return {
            "starttime": row["starttime"],
            "endtime": row["endtime"],
            "num": row["num"],
            "auctions": [row["auction"]],
        }
    if row["num"] == agg["num"]:
        return {**agg, "auctions": sorted([*agg["auctions"], row["auction"]])}
    return agg


def q5(ctx: QueryContext) -> Topology:
    """Hot items: the auctions with the most bids per 10 s window sliding by 2 s."""
    builder = StreamsBuilder()
    counts = (
        _source(builder, BID_TOPIC)
        .group_by_key()
        .windowed_by(
            TimeWindows.of_size_and_grace(TEN_SECONDS, WATERMARK_DELAY).advance_by(HOP_SLIDE)
        )
        .emit_strategy(EmitStrategy.on_window_close())
        .count("q5-bids-per-auction")
    )

    def per_window(wk: Windowed, num: int) -> tuple[str, dict[str, Any]]:
        start = format_timestamp(wk.window.start)
        return start, {
            "starttime": start,
            "endtime": format_timestamp(wk.window.end),
            "num": num,
            "auction": int(wk.key),
        }

    top = (
        counts.to_stream()
        .map(per_window)
        .group_by_key(Grouped.with_(serdes.String(), serdes.Json(), "q5-by-window"))
        .aggregate(lambda: {"num": 0, "auctions": []}, _q5_top, "q5-top-auctions")
    )
    _to(top.to_stream(), ctx.output)
    return builder.build()


class ClosingAuctions(Processor):
    """q6's winning bids: the best valid bid per auction (keyed by auction id), forwarded
    once the auction has closed, keyed by seller: ``{"auction", "price", "expires"}``.

    An auction is closed when stream time reaches its ``expires`` plus the grace (a bid up
    to the watermark delay late may still come before). Closed auctions go out in order of
    ``expires``, then auction id, so every seller sees its auctions in closing order."""

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store(self.store_name)
        context.schedule(Q6_CLOSE_INTERVAL_MS, PunctuationType.STREAM_TIME, self.close_auctions)

    def process(self, record: Record) -> None:
        best = self.store.get(record.key)
        if best is None or record.value["price"] > best["price"]:
            self.store.put(record.key, record.value)

    def close_auctions(self, stream_time: int) -> None:
        closing = sorted(
            (best["expires"], int(auction), best)
            for auction, best in self.store.all()
            if best["expires"] + WATERMARK_DELAY_MS <= stream_time
        )
        for expires, auction, best in closing:
            self.store.delete(str(auction))
            winner = {"auction": auction, "price": best["price"], "expires": expires}
            self.context.forward(Record(str(best["seller"]), winner, expires))


def _q6_last_prices(_seller: str, winner: dict[str, Any], agg: list[int]) -> list[int]:
    return [*agg, winner["price"]][-Q6_LAST_AUCTIONS:]


def q6(ctx: QueryContext) -> Topology:
    """Average selling price by seller over their last 10 closed auctions."""
    builder = StreamsBuilder()
    auctions = _source(builder, AUCTION_TOPIC).map_values(
        lambda a: {"seller": a["seller"], "reserve": a["reserve"], "expires": _millis(a["expires"])}
    )
    bids = _source(builder, BID_TOPIC).map_values(
        lambda b: {"price": b["price"], "at": _millis(b["dateTime"])}
    )
    window = JoinWindows.of_time_difference_and_grace(
        ctx.max_auction_length_ms, WATERMARK_DELAY
    ).before(0)
    valid = auctions.join(
        bids,
        lambda a, b: (
            {"seller": a["seller"], "expires": a["expires"], "price": b["price"]}
            if b["at"] < a["expires"] and b["price"] >= a["reserve"]
            else None
        ),
        window,
    ).filter(lambda _k, pair: pair is not None)
    store = "q6-open-auctions"
    builder.add_state_store(
        Stores.key_value_store_builder(
            Stores.persistent_key_value_store(store), serdes.String(), serdes.Json()
        )
    )
    averages = (
        valid.process(lambda: ClosingAuctions(store), store)
        .group_by_key(Grouped.with_(serdes.String(), serdes.Json(), "q6-by-seller"))
        .aggregate(list, _q6_last_prices, "q6-last-prices")
        .map_values(
            lambda seller, prices: {"seller": int(seller), "avg": sum(prices) / len(prices)},
            with_key=True,
        )
    )
    _to(averages.to_stream(), ctx.output)
    return builder.build()


def _q7_top(_key: str, bid: dict[str, Any], agg: dict[str, Any]) -> dict[str, Any]:
    if bid["price"] > agg["price"]:
        return {"price": bid["price"], "bids": [bid]}
    if bid["price"] == agg["price"]:
        return {"price": agg["price"], "bids": [*agg["bids"], bid]}
    return agg


def q7(ctx: QueryContext) -> Topology:
    """Highest bid: the top-priced bids of each 10 s tumbling window."""
    builder = StreamsBuilder()
    top = (
        _source(builder, BID_TOPIC)
        .map_values(
            lambda b: {
                "auction": b["auction"],
                "price": b["price"],
                "bidder": b["bidder"],
                "dateTime": b["dateTime"],
                "extra": b["extra"],
            }
        )
        .group_by(
            lambda _k, _b: "all", Grouped.with_(serdes.String(), serdes.Json(), "q7-all-bids")
        )
        .windowed_by(TimeWindows.of_size_and_grace(TEN_SECONDS, WATERMARK_DELAY))
        .emit_strategy(EmitStrategy.on_window_close())
        .aggregate(lambda: {"price": -1, "bids": []}, _q7_top, "q7-top-bids")
    )
    rows = top.to_stream().flat_map(
        lambda _wk, agg: [(str(bid["auction"]), bid) for bid in agg["bids"]]
    )
    _to(rows, ctx.output)
    return builder.build()


def _same_window(person: dict[str, Any], auction: dict[str, Any]) -> dict[str, Any] | None:
    if person["at"] // TEN_SECONDS_MS != auction["at"] // TEN_SECONDS_MS:
        return None
    return {"id": person["id"], "name": person["name"]}


def q8(ctx: QueryContext) -> Topology:
    """Monitor new users: persons with an auction in the same 10 s tumbling window."""
    builder = StreamsBuilder()
    persons = _source(builder, PERSON_TOPIC).map_values(
        lambda p: {"id": p["id"], "name": p["name"], "at": _millis(p["dateTime"])}
    )
    auctions = (
        _source(builder, AUCTION_TOPIC)
        .select_key(lambda _k, a: str(a["seller"]))
        .map_values(lambda a: {"at": _millis(a["dateTime"])})
    )
    joined = persons.join(
        auctions,
        _same_window,
        JoinWindows.of_time_difference_and_grace(TEN_SECONDS, WATERMARK_DELAY),
    ).filter(lambda _k, row: row is not None)
    # the join's result has the later of the two timestamps: in the same tumbling window
    once = (
        joined.group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(TEN_SECONDS, WATERMARK_DELAY))
        .emit_strategy(EmitStrategy.on_window_close())
        .reduce(lambda first, _later: first, "q8-sellers-per-window")
    )
    rows = once.to_stream().map(
        lambda wk, row: (
            wk.key,
            {"id": row["id"], "name": row["name"], "stime": format_timestamp(wk.window.start)},
        )
    )
    _to(rows, ctx.output)
    return builder.build()


def q11(ctx: QueryContext) -> Topology:
    """User sessions: bids per bidder in sessions with a 10 s gap."""
    builder = StreamsBuilder()
    sessions = (
        _source(builder, BID_TOPIC)
        .group_by(
            lambda _k, b: str(b["bidder"]),
            Grouped.with_(serdes.String(), serdes.Json(), "q11-by-bidder"),
        )
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(TEN_SECONDS, WATERMARK_DELAY))
        .emit_strategy(EmitStrategy.on_window_close())
        .count(Materialized.as_("q11-bids-per-session"))
    )
    rows = sessions.to_stream().map(
        lambda wk, count: (
            wk.key,
            {
                "bidder": int(wk.key),
                "bid_count": count,
                "starttime": format_timestamp(wk.window.start),
                "endtime": format_timestamp(wk.window.end + TEN_SECONDS_MS),
            },
        )
    )
    _to(rows, ctx.output)
    return builder.build()


#: settings a query needs besides the defaults (see q8)
QUERY_SETTINGS: dict[str, dict[str, Any]] = {"q8": {"max.task.idle.ms": 2_000}}

#: the SQL versions' own settings (over ``QUERY_SETTINGS``). q5 and q7 join the bids with a
#: window result of the bids, which reaches the join's task through one or two more
#: repartition hops than the bids do: on a backlog the bids side's stream time runs past
#: the join's grace before the window results come, unless the task waits for its empty
#: window side (Flink's watermark, the minimum over the inputs, waits by itself). q5's
#: results take two hops (counts, then their maximum per window), so it waits longer.
SQL_QUERY_SETTINGS: dict[str, dict[str, Any]] = {
    "q5": {"max.task.idle.ms": 10_000},
    "q7": {"max.task.idle.ms": 3_000},
}

#: query name -> (topology builder, the input topics it reads)
QUERIES: dict[str, tuple[Callable[[QueryContext], Topology], tuple[str, ...]]] = {
    "q0": (q0, (BID_TOPIC,)),
    "q1": (q1, (BID_TOPIC,)),
    "q2": (q2, (BID_TOPIC,)),
    "q3": (q3, (PERSON_TOPIC, AUCTION_TOPIC)),
    "q4": (q4, (AUCTION_TOPIC, BID_TOPIC)),
    "q5": (q5, (BID_TOPIC,)),
    "q6": (q6, (AUCTION_TOPIC, BID_TOPIC)),
    "q7": (q7, (BID_TOPIC,)),
    "q8": (q8, (PERSON_TOPIC, AUCTION_TOPIC)),
    "q11": (q11, (BID_TOPIC,)),
}
