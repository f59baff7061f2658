"""A seeded, deterministic generator of Nexmark events, after Flink's Nexmark generator.

Like ``NexmarkGenerator`` / ``GeneratorConfig`` (nexmark/nexmark, from Apache Beam):

- events come in epochs of 50: event 0 of an epoch is a person, 1-3 are auctions, 4-49
  are bids; ids are dense from 1000 (``FIRST_PERSON_ID``, ``FIRST_AUCTION_ID``);
- event ``i`` happens at ``base_time_ms + i * 1000 / events_per_second`` (event time; the
  generator produces as fast as it can);
- an auction's seller is a hot seller (the first person of the last batch of 100) with
  probability 1 - 1/``hot_sellers_ratio``, else one of the last ``num_active_people``
  persons; its category is one of 5 (10-14), its prices ``round(10 ** (6 u) * 100)``, its
  length random with a mean of the time until ``num_in_flight_auctions`` more auctions exist;
- a bid's auction is hot (the first of the last batch of 100 auctions) with probability
  1 - 1/``hot_auction_ratio``, else one of the last ``num_in_flight_auctions`` auctions or up
  to 10 auctions ahead (``AUCTION_ID_LEAD``: such a bid precedes its auction); its bidder is
  hot (the second person of the last batch of 100) with probability 1 - 1/
  ``hot_bidders_ratio``, else an active person or up to 10 ahead; half the bids come from
  one of 4 hot channels;
- ``extra`` pads persons and auctions to about Nexmark's average sizes (200 and 500 bytes;
  Nexmark's 100 for a bid is less than a bid's JSON here, so its ``extra`` stays empty).

Simplifications, on purpose:

- Strings are random lowercase letters (Nexmark's are too, with other lengths).
- An auction's seller is always a person of an *earlier* epoch (Nexmark may pick the
  current epoch's person or one up to 10 ahead), so the seller exists in event time at
  least 1 ms before the auction (``events_per_second`` is at most 50,000: an epoch spans
  1 ms or more). A stream-table join (q3) then has the same result however an engine
  interleaves the person and auction topics, as long as it follows event time. For this
  the first epoch holds its person only.
- Out-of-order events: instead of Nexmark's shuffled groups, a fraction
  ``out_of_order_fraction`` of the *bids* is dated back by up to ``max_out_of_order_ms``
  (2 s, half the 4 s watermark delay, so no bid is late for a windowed query). Persons and
  auctions stay in order (see the seller rule).
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass
from typing import Any

from bench.nexmark.model import AUCTION_TOPIC, BID_TOPIC, PERSON_TOPIC, Event
from streaming.sql.timestamps import format_timestamp

FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10
NUM_CATEGORIES = 5
PERSON_PROPORTION = 1
AUCTION_PROPORTION = 3
BID_PROPORTION = 46
PROPORTION_DENOMINATOR = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION
HOT_SELLER_RATIO = 100  # batch sizes of the hot seller / auction / bidder rules
HOT_AUCTION_RATIO = 100
HOT_BIDDER_RATIO = 100
AUCTION_ID_LEAD = 10
PERSON_ID_LEAD = 10

FIRST_NAMES = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah")
LAST_NAMES = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones")
US_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
US_CITIES = (
    "Phoenix",
    "Los Angeles",
    "San Francisco",
    "Boise",
    "Portland",
    "Bend",
    "Redmond",
    "Seattle",
    "Kent",
    "Cheyenne",
)
HOT_CHANNELS = ("Google", "Facebook", "Baidu", "Apple")
HOT_URLS = tuple(f"https://www.nexmark.com/{c.lower()}/item.htm?query=1" for c in HOT_CHANNELS)
NUM_CHANNELS = 10_000

#: 2024-01-01 00:00:00 UTC, on a 10 s boundary: the default start of event time
DEFAULT_BASE_TIME_MS = 1_704_067_200_000
#: the closing events come this long after the last event: past the end + grace of every
#: window (10 s + 4 s) and session (last bid + 10 s gap + 4 s) of the events before them
CLOSING_GAP_MS = 15_000
#: the closing bids: how many, and how far apart (the first after the last event; see
#: ``closing_events``)
CLOSING_BIDS = 3
CLOSING_BID_GAP_MS = 12_000


@dataclass(frozen=True)
class GeneratorConfig:
    """What ``generate`` produces; the defaults are Nexmark's, with 10,000 events/s."""

    seed: int = 42
    events_per_second: int = 10_000
    base_time_ms: int = DEFAULT_BASE_TIME_MS
    out_of_order_fraction: float = 0.01
    max_out_of_order_ms: int = 2_000
    num_active_people: int = 1_000
    num_in_flight_auctions: int = 100
    hot_auction_ratio: int = 2
    hot_sellers_ratio: int = 4
    hot_bidders_ratio: int = 4
    avg_person_bytes: int = 200
    avg_auction_bytes: int = 500
    avg_bid_bytes: int = 100

    def __post_init__(self) -> None:
        if not 0 < self.events_per_second <= 50_000:
            raise ValueError(
                "events_per_second must be in (0, 50000]: an epoch of 50 events spans 1 ms "
                "or more, so a seller is dated before its auctions"
            )

    def timestamp(self, event_id: int) -> int:
        """Event time of event ``event_id`` (epoch ms), before any out-of-order shift."""
        return self.base_time_ms + event_id * 1000 // self.events_per_second

    @property
    def max_auction_length_ms(self) -> int:
        """The longest an auction runs (``expires - dateTime``): twice the mean length."""
        return 2 * self._auction_horizon_ms

    @property
    def _auction_horizon_ms(self) -> int:
        """Nexmark's mean auction length: the time until ``num_in_flight_auctions`` more
        auctions are generated."""
        events = self.num_in_flight_auctions * PROPORTION_DENOMINATOR // AUCTION_PROPORTION
        return max(events * 1000 // self.events_per_second, 1)


def last_base0_person_id(event_id: int) -> int:
    """The 0-based id of the last person generated at or before ``event_id``."""
    epoch, offset = divmod(event_id, PROPORTION_DENOMINATOR)
    return epoch * PERSON_PROPORTION + min(offset, PERSON_PROPORTION - 1)


def last_base0_auction_id(event_id: int) -> int:
    """The 0-based id of the last auction generated at or before ``event_id`` (-1: none)."""
    epoch, offset = divmod(event_id, PROPORTION_DENOMINATOR)
    if offset < PERSON_PROPORTION:
        epoch -= 1
        offset = AUCTION_PROPORTION - 1
    elif offset >= PERSON_PROPORTION + AUCTION_PROPORTION:
        offset = AUCTION_PROPORTION - 1
    else:
        offset -= PERSON_PROPORTION
    return epoch * AUCTION_PROPORTION + offset


class _Generator:
    """The per-kind rules over one seeded ``random.Random``."""

    def __init__(self, config: GeneratorConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)

    # -- small random values ---------------------------------------------------------------

    def _string(self, length: int) -> str:
        return "".join(self.rng.choices(string.ascii_lowercase, k=length))

    def _extra(self, current_size: int, average_size: int) -> str:
        """Padding to bring an event to about ``average_size`` bytes (Nexmark's nextExtra)."""
        if current_size > average_size:
            return ""
        wanted = average_size - current_size
        delta = round(wanted * 0.2)
        size = wanted - delta + (self.rng.randrange(2 * delta) if delta > 0 else 0)
        return self._string(size)

    def _price(self) -> int:
        return round(10.0 ** (self.rng.random() * 6.0) * 100.0)

    def _recent_person(self, last_person: int, lead: int) -> int:
        """One of the ``num_active_people`` persons up to ``last_person``, or up to ``lead``
        ahead of it (0-based)."""
        people = last_person + 1
        active = min(people, self.config.num_active_people)
        return people - active + self.rng.randrange(active + lead)

    # -- events ----------------------------------------------------------------------------

    def person(self, event_id: int, ts: int) -> dict[str, Any]:
        rng = self.rng
        row: dict[str, Any] = {
            "id": last_base0_person_id(event_id) + FIRST_PERSON_ID,
            "name": f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}",
            "emailAddress": f"{self._string(7)}@{self._string(5)}.com",
            "creditCard": " ".join(f"{rng.randrange(10_000):04d}" for _ in range(4)),
            "city": rng.choice(US_CITIES),
            "state": rng.choice(US_STATES),
            "dateTime": format_timestamp(ts),
        }
        row["extra"] = self._extra(100, self.config.avg_person_bytes)
        return row

    def auction(self, event_id: int, ts: int) -> dict[str, Any]:
        rng, config = self.rng, self.config
        earlier_person = last_base0_person_id(event_id) - 1  # the last of an earlier epoch
        if rng.randrange(config.hot_sellers_ratio) > 0:
            seller = (earlier_person // HOT_SELLER_RATIO) * HOT_SELLER_RATIO
        else:
            seller = self._recent_person(earlier_person, 0)
        initial_bid = self._price()
        length = 1 + rng.randrange(max(config.max_auction_length_ms, 1))
        row: dict[str, Any] = {
            "id": last_base0_auction_id(event_id) + FIRST_AUCTION_ID,
            "itemName": self._string(rng.randint(3, 20)),
            "description": self._string(rng.randint(3, 100)),
            "initialBid": initial_bid,
            "reserve": initial_bid + self._price(),
            "dateTime": format_timestamp(ts),
            "expires": format_timestamp(ts + length),
            "seller": seller + FIRST_PERSON_ID,
            "category": FIRST_CATEGORY_ID + rng.randrange(NUM_CATEGORIES),
        }
        row["extra"] = self._extra(300, config.avg_auction_bytes)
        return row

    def bid(self, event_id: int, ts: int) -> tuple[dict[str, Any], int]:
        """A bid and its event time (``ts``, or earlier for an out-of-order bid)."""
        rng, config = self.rng, self.config
        last_auction = last_base0_auction_id(event_id)
        if rng.randrange(config.hot_auction_ratio) > 0:
            auction = (last_auction // HOT_AUCTION_RATIO) * HOT_AUCTION_RATIO
        else:
            low = max(last_auction - config.num_in_flight_auctions, 0)
            auction = low + rng.randrange(last_auction - low + 1 + AUCTION_ID_LEAD)
        last_person = last_base0_person_id(event_id)
        if rng.randrange(config.hot_bidders_ratio) > 0:
            bidder = (last_person // HOT_BIDDER_RATIO) * HOT_BIDDER_RATIO + 1
        else:
            bidder = self._recent_person(last_person, PERSON_ID_LEAD)
        if rng.randrange(2) > 0:
            hot = rng.randrange(len(HOT_CHANNELS))
            channel, url = HOT_CHANNELS[hot], HOT_URLS[hot]
        else:
            number = rng.randrange(NUM_CHANNELS)
            channel = f"channel-{number}"
            url = f"https://www.nexmark.com/{self._string(5)}/item.htm?query=1&channel_id={number}"
        if rng.random() < config.out_of_order_fraction:
            ts -= rng.randint(1, config.max_out_of_order_ms)
        row: dict[str, Any] = {
            "auction": auction + FIRST_AUCTION_ID,
            "bidder": bidder + FIRST_PERSON_ID,
            "price": self._price(),
            "channel": channel,
            "url": url,
            "dateTime": format_timestamp(ts),
        }
        row["extra"] = self._extra(150, config.avg_bid_bytes)
        return row, ts


def generate(n: int, config: GeneratorConfig | None = None) -> list[Event]:
    """``n`` events in generation order, the same for the same ``config``."""
    config = config or GeneratorConfig()
    gen = _Generator(config)
    events: list[Event] = []
    event_id = 0
    while len(events) < n:
        offset = event_id % PROPORTION_DENOMINATOR
        ts = config.timestamp(event_id)
        if offset < PERSON_PROPORTION:
            value = gen.person(event_id, ts)
            events.append(Event(len(events), PERSON_TOPIC, str(value["id"]), value, ts))
        elif event_id >= PROPORTION_DENOMINATOR:  # the first epoch holds its person only
            if offset < PERSON_PROPORTION + AUCTION_PROPORTION:
                value = gen.auction(event_id, ts)
                events.append(Event(len(events), AUCTION_TOPIC, str(value["id"]), value, ts))
            else:
                value, bid_ts = gen.bid(event_id, ts)
                events.append(Event(len(events), BID_TOPIC, str(value["auction"]), value, bid_ts))
        event_id += 1
    return events


def closing_events(events: list[Event]) -> list[Event]:
    """Events after the last one that move every query's stream time past the end + grace
    of every window (and session) of ``events``, in time order:

    - ``CLOSING_BIDS`` (3) bids ``CLOSING_BID_GAP_MS`` (12 s) apart, the first 12 s after
      the last event: in no 10 s window with a generated bid;
    - a person and an auction ``CLOSING_GAP_MS`` (15 s) after the last event (their
      windows: 10 s + the 4 s grace).

    The bids are a staircase for the SQL q5: its maximum per window comes out only once the
    count of a window 14 s later does (the counts, re-stamped at their window start, close
    the maximum's 1 ms windows by their own stream time), so the windows of the last
    generated bids wait for the counts of a closing bid's windows, which the next closing
    bid closes. Steps of 12 s (under 14 s) keep each window's maximum within the 28 s grace
    of q5's join with the counts, which by then has seen the counts of the step before.
    Each closing bid's session (10 s gap + 4 s grace) closes two steps later, never on
    the boundary, where Kafka's session windows and the SQL's emit-final differ.

    Their ids are 0 (no generated entity has it): the auction is the person's, category 0
    (no generated category), and the bids are for auction -1 (no auction), so they change
    no result of a window of the generated events."""
    last = max(e.timestamp for e in events)
    ts = last + CLOSING_GAP_MS
    stamp = format_timestamp(ts)
    person = {
        "id": 0,
        "name": "closing",
        "emailAddress": "",
        "creditCard": "",
        "city": "",
        "state": "",
        "dateTime": stamp,
        "extra": "",
    }
    auction = {
        "id": 0,
        "itemName": "",
        "description": "",
        "initialBid": 0,
        "reserve": 0,
        "dateTime": stamp,
        "expires": stamp,
        "seller": 0,
        "category": 0,
        "extra": "",
    }
    seq = len(events)
    bids = [last + CLOSING_BID_GAP_MS * step for step in range(1, CLOSING_BIDS + 1)]
    closing = [
        (bids[0], BID_TOPIC),
        (ts, PERSON_TOPIC),
        (ts, AUCTION_TOPIC),
        *((bid_ts, BID_TOPIC) for bid_ts in bids[1:]),
    ]
    rows = {PERSON_TOPIC: person, AUCTION_TOPIC: auction}
    return [
        Event(seq + i, topic, "0", rows[topic], at) if topic in rows else _closing_bid(seq + i, at)
        for i, (at, topic) in enumerate(closing)
    ]


def flush_bid(events: list[Event]) -> Event:
    """Another closing bid, at the time of the last event (after ``closing_events``).

    It moves no stream time; it only makes a session-windowed query (q11) emit again:
    emit-on-close of session windows runs at most once per wall-clock second (Kafka's
    throttle), so the sessions the closing bid closed may still wait for a later record."""
    return _closing_bid(len(events), max(e.timestamp for e in events))


def _closing_bid(seq: int, ts: int) -> Event:
    bid = {
        "auction": -1,
        "bidder": 0,
        "price": 0,
        "channel": "",
        "url": "",
        "dateTime": format_timestamp(ts),
        "extra": "",
    }
    return Event(seq, BID_TOPIC, "-1", bid, ts)
