"""The Nexmark generator: deterministic, Nexmark's proportions, schema and time rules."""

from __future__ import annotations

from collections import Counter

from bench.nexmark.generator import (
    CLOSING_BID_GAP_MS,
    CLOSING_BIDS,
    CLOSING_GAP_MS,
    GeneratorConfig,
    closing_events,
    flush_bid,
    generate,
)
from bench.nexmark.model import AUCTION_TOPIC, BID_TOPIC, PERSON_TOPIC, WATERMARK_DELAY_MS
from streaming.sql.timestamps import parse_timestamp

PERSON_FIELDS = ["id", "name", "emailAddress", "creditCard", "city", "state", "dateTime", "extra"]
AUCTION_FIELDS = [
    "id",
    "itemName",
    "description",
    "initialBid",
    "reserve",
    "dateTime",
    "expires",
    "seller",
    "category",
    "extra",
]
BID_FIELDS = ["auction", "bidder", "price", "channel", "url", "dateTime", "extra"]


def test_same_seed_same_events_other_seed_other_events() -> None:
    config = GeneratorConfig(seed=3)
    assert generate(3_000, config) == generate(3_000, config)
    assert generate(3_000, config) != generate(3_000, GeneratorConfig(seed=4))


def test_proportions_schema_and_keys() -> None:
    events = generate(10_000)
    counts = Counter(e.topic for e in events)
    assert 0.90 < counts[BID_TOPIC] / len(events) < 0.93
    assert 0.055 < counts[AUCTION_TOPIC] / len(events) < 0.065
    assert 0.019 < counts[PERSON_TOPIC] / len(events) < 0.022
    fields = {PERSON_TOPIC: PERSON_FIELDS, AUCTION_TOPIC: AUCTION_FIELDS, BID_TOPIC: BID_FIELDS}
    for e in events:
        assert list(e.value) == fields[e.topic]
        assert parse_timestamp(e.value["dateTime"]) == e.timestamp
        key_field = "auction" if e.topic == BID_TOPIC else "id"
        assert e.key == str(e.value[key_field])
        ints = ("auction", "bidder", "price", "id", "seller", "category", "initialBid", "reserve")
        assert all(isinstance(e.value[f], int) for f in ints if f in e.value)


def test_event_time_rate_and_out_of_order_within_the_watermark_delay() -> None:
    config = GeneratorConfig(events_per_second=10_000)
    events = generate(20_000, config)
    span = events[-1].timestamp - events[0].timestamp
    assert 1_900 <= span <= 2_100  # ~20,000 events at 10,000 events/s (plus the first epoch)
    newest = events[0].timestamp
    late = 0
    for e in events:
        if e.timestamp < newest:
            late += 1
            assert e.topic == BID_TOPIC
            assert newest - e.timestamp < WATERMARK_DELAY_MS
        newest = max(newest, e.timestamp)
    assert 50 < late < 500  # about 1 % of the bids


def test_sellers_exist_before_their_auctions() -> None:
    events = generate(20_000)
    born = {e.value["id"]: e.timestamp for e in events if e.topic == PERSON_TOPIC}
    for e in events:
        if e.topic == AUCTION_TOPIC:
            assert born[e.value["seller"]] < e.timestamp
            assert (
                e.timestamp
                < parse_timestamp(e.value["expires"])
                <= (e.timestamp + GeneratorConfig().max_auction_length_ms)
            )


def test_closing_events_come_after_every_window_end_and_grace() -> None:
    events = generate(1_000)
    closing = closing_events(events)
    assert {e.topic for e in closing} == {PERSON_TOPIC, AUCTION_TOPIC, BID_TOPIC}
    last = max(e.timestamp for e in events)
    # a 10 s window (or a session's 10 s gap) after the last event, plus the 4 s grace
    # a 10 s window (or a session's 10 s gap) after the last event, plus the 4 s grace; the
    # second closing bid closes the windows of the first
    assert [(e.seq, e.topic, e.timestamp - last) for e in closing] == [
        (1_000, BID_TOPIC, 12_000),
        (1_001, PERSON_TOPIC, CLOSING_GAP_MS),
        (1_002, AUCTION_TOPIC, CLOSING_GAP_MS),
        (1_003, BID_TOPIC, 24_000),
        (1_004, BID_TOPIC, 36_000),
    ]
    assert CLOSING_BIDS == 3 and CLOSING_BID_GAP_MS == 12_000 and CLOSING_GAP_MS > 14_000
    flush = flush_bid(events + closing)
    assert (flush.topic, flush.seq, flush.timestamp) == (
        BID_TOPIC,
        1_005,
        last + 36_000,
    )
