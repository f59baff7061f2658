"""Synthetic event generator: orders, customers, payments and clicks, deterministic by seed.

``iter_events(config)`` is a pure function of the config: it yields :class:`Event` s in the
order they are sent (``emit_ms``, a simulated clock). ``produce(config, kafka)`` writes
them to Kafka (optionally paced in real time). From the command line::

    python -m pipelines.generator --bootstrap localhost:9092 --rate 20 --duration 600 --seed 7

What it injects (shares of orders, see :class:`GeneratorConfig`): out-of-order events
(event time up to ``out_of_order_max_ms`` before sending, within the stream grace), late
events (event time minutes before sending, beyond the grace), duplicates (the same record
sent again seconds later), malformed records (undecodable bytes), unknown customers, and the
three fraud patterns: amounts over 10,000, bursts of more than three orders per customer
within five minutes, and a location the customer's profile does not know.

Order ids are ``o-<run id>-<sequence>`` (payments ``p-<run id>-<sequence>``). The run id
(:func:`run_id`) is a hash of the whole config, seed and start time included, so a config
always produces the same ids while two generators never share one: without an explicit
``seed`` every config draws a fresh random seed (two default generators, or a restarted
one, get different run ids), and even with the same seed a different start time, rate or
customer count gives another run id. Only an exact replay (same seed *and* same config)
repeats ids, and then with the same orders. A duplicate is therefore always the same order
sent again, never a different order under an existing id.

Customer profiles depend on ``customer_seed`` only (not on ``seed``), so every generator
agrees on who ``c-00042`` is; each run re-sends the profiles it uses (the compacted
``customers`` topic then holds updates of the same profiles with a new ``event_time``).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import heapq
import itertools
import os
import random
import secrets
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from pipelines import domain
from pipelines.connection import Kafka, KafkaConnection
from pipelines.schemas import JSON, RawFormat, raw_format_from_env


@dataclass(frozen=True, slots=True)
class Event:
    """One record to send: topic, key, JSON value bytes, record timestamp, send time, and
    the record the value encodes (None for a malformed value: its bytes are sent as they
    are, whatever the topics' format)."""

    topic: str
    key: str | None
    value: bytes
    timestamp: int
    emit_ms: int
    record: dict[str, Any] | None = None


def fresh_seed() -> int:
    """A random seed (the default of :class:`GeneratorConfig`: every config its own data)."""
    return secrets.randbits(63)


@dataclass(frozen=True)
class GeneratorConfig:
    """What to generate; every share is a probability per order.

    ``seed`` drives the orders, payments and clicks; when not given, each config draws a
    fresh random one (kept in the config, so ``iter_events`` stays a function of it).
    ``customer_seed`` drives the customer profiles, shared by every generator.
    """

    seed: int = field(default_factory=fresh_seed)
    customer_seed: int = 42
    start_ms: int = 1_735_689_600_000  # 2025-01-01T00:00:00Z
    duration_s: float | None = 600.0
    orders_per_second: float = 5.0
    customers: int = 5000
    max_clicks_per_order: int = 4
    payment_share: float = 0.9
    out_of_order_share: float = 0.05
    out_of_order_max_ms: int = 30_000
    late_share: float = 0.01
    late_min_ms: int = 3 * domain.MINUTE_MS
    late_max_ms: int = 12 * domain.MINUTE_MS
    duplicate_share: float = 0.02
    malformed_share: float = 0.01
    unknown_customer_share: float = 0.01
    high_value_share: float = 0.005
    burst_share: float = 0.004
    new_location_share: float = 0.01
    #: no event is sent later than this (epoch ms): the clicks, payments and re-sends that
    #: an order schedules after it are left out (a burst ending now writes nothing stamped
    #: in the future, which would move the applications' stream time ahead of the wall clock)
    until_ms: int | None = None

    def with_(self, **changes: Any) -> GeneratorConfig:
        """A copy with ``changes``."""
        return replace(self, **changes)


def _dumps(value: dict[str, Any]) -> bytes:
    return orjson.dumps(value)


def _event(topic: str, key: str, record: dict[str, Any], timestamp: int, emit_ms: int) -> Event:
    return Event(topic, key, _dumps(record), timestamp, emit_ms, record)


RUN_ID_HEX_DIGITS = 12


def run_id(config: GeneratorConfig) -> str:
    """The id namespace of ``config``'s orders and payments: 12 hex digits of a hash of
    every field (a random seed makes it random; equal configs share it)."""
    fields = repr(dataclasses.astuple(config)).encode()
    digest = hashlib.blake2b(fields, digest_size=RUN_ID_HEX_DIGITS // 2, person=b"orders")
    return digest.hexdigest()


def build_customers(config: GeneratorConfig) -> list[dict[str, Any]]:
    """The customer profiles of ``config`` (deterministic)."""
    rng = random.Random(f"{config.customer_seed}-customers")
    profiles = []
    for n in range(config.customers):
        region = rng.choice(domain.REGIONS)
        known = rng.sample(domain.LOCATIONS[region], k=rng.randint(1, 3))
        profiles.append(
            {
                "customer_id": f"c-{n:05d}",
                "name": f"Customer {n}",
                "tier": rng.choice(domain.TIERS),
                "home_region": region,
                "known_locations": sorted(known),
                "credit_limit": float(rng.choice((1_000, 2_500, 5_000, 10_000, 25_000))),
                "event_time": config.start_ms - domain.MINUTE_MS,
            }
        )
    return profiles


def iter_events(config: GeneratorConfig) -> Iterator[Event]:
    """Every event of ``config`` in send order (infinite when ``duration_s`` is None)."""
    rng = random.Random(config.seed)
    namespace = run_id(config)
    customers = build_customers(config)
    pending: list[tuple[int, int, Event]] = []
    seq = itertools.count()

    def schedule(event: Event) -> None:
        heapq.heappush(pending, (event.emit_ms, next(seq), event))

    for profile in customers:
        yield _event(
            domain.CUSTOMERS,
            profile["customer_id"],
            profile,
            profile["event_time"],
            profile["event_time"],
        )
    interval_ms = 1000.0 / config.orders_per_second
    end_ms = None if config.duration_s is None else config.start_ms + int(config.duration_s * 1000)
    order_no = 0
    burst_left = 0
    burst_customer: dict[str, Any] | None = None
    for i in itertools.count():
        now = config.start_ms + int(i * interval_ms)
        if end_ms is not None and now >= end_ms:
            break
        while pending and pending[0][0] <= now:
            yield heapq.heappop(pending)[2]
        order_no += 1
        order_id = f"o-{namespace}-{order_no:08d}"
        # Malformed records replace an order now and then.
        if rng.random() < config.malformed_share:
            topic = rng.choice((domain.ORDERS, domain.ORDERS, domain.PAYMENTS, domain.CLICKS))
            garbage = rng.choice(
                (b'{"order_id": "' + order_id.encode() + b'", "amount": ', b"\x00\xff\xfe", b"[1,2")
            )
            yield Event(topic, order_id, garbage, now, now)
            continue
        if burst_left > 0 and burst_customer is not None:
            customer = burst_customer
            burst_left -= 1
        else:
            customer = rng.choice(customers)
            if rng.random() < config.burst_share:
                burst_customer = customer
                burst_left = rng.randint(4, 6) - 1
        customer_id = customer["customer_id"]
        if rng.random() < config.unknown_customer_share:
            customer_id = f"c-x{rng.randint(0, 99_999):05d}"
        region = customer["home_region"]
        location = rng.choice(customer["known_locations"])
        if rng.random() < config.new_location_share:
            other = rng.choice([r for r in domain.REGIONS if r != region])
            location = rng.choice(domain.LOCATIONS[other])
        amount = round(min(rng.lognormvariate(4.0, 1.0), 5_000.0) + 1.0, 2)
        if rng.random() < config.high_value_share:
            amount = round(rng.uniform(10_000.01, 50_000.0), 2)
        event_time = now
        roll = rng.random()
        if roll < config.late_share:
            event_time = now - rng.randint(config.late_min_ms, config.late_max_ms)
        elif roll < config.late_share + config.out_of_order_share:
            event_time = now - rng.randint(1, config.out_of_order_max_ms)
        order = {
            "order_id": order_id,
            "customer_id": customer_id,
            "amount": amount,
            "region": region,
            "location": location,
            "event_time": event_time,
        }
        order_event = _event(domain.ORDERS, order_id, order, event_time, now)
        yield order_event
        if rng.random() < config.duplicate_share:
            schedule(replace(order_event, emit_ms=now + rng.randint(500, 20_000)))
        if rng.random() < config.payment_share:
            paid = now + rng.randint(2_000, 60_000)
            payment = {
                "payment_id": f"p-{order_id[2:]}",
                "order_id": order_id,
                "customer_id": customer_id,
                "amount": amount,
                "method": rng.choice(domain.PAYMENT_METHODS),
                "status": "failed" if rng.random() < 0.05 else "captured",
                "event_time": paid,
            }
            schedule(_event(domain.PAYMENTS, payment["payment_id"], payment, paid, paid))
        clicked = now
        for _ in range(rng.randint(0, config.max_clicks_per_order)):
            clicked += rng.randint(5_000, 180_000)
            click = {
                "user_id": customer_id,
                "page": rng.choice(domain.PAGES),
                "event_time": clicked,
            }
            schedule(_event(domain.CLICKS, customer_id, click, clicked, clicked))
    while pending:
        event = heapq.heappop(pending)[2]
        if config.until_ms is not None and event.emit_ms > config.until_ms:
            break  # the rest is later still
        yield event


def generate_events(config: GeneratorConfig) -> list[Event]:
    """Every event of a finite ``config``, in send order."""
    if config.duration_s is None:
        raise ValueError("generate_events needs a finite duration_s")
    return list(iter_events(config))


#: how much emit time of a backlog is sent before ``produce`` waits for its readers
CATCH_UP_SLICE_MS = 30_000


def produce(
    config: GeneratorConfig,
    kafka: Kafka,
    *,
    realtime: bool = False,
    producer_config: dict[str, Any] | None = None,
    topics: dict[str, str] | None = None,
    keep_up: Callable[[], None] | None = None,
    raw_format: RawFormat = JSON,
) -> int:
    """Send the events of ``config`` to Kafka; ``topics`` renames topics (platform name ->
    topic written).

    ``raw_format``: the values as JSON (the default) or, for ``avro``, each record in Avro
    with its topic's ``.avsc`` (``pipelines.schemas``), registered first under the subject
    ``<topic written>-value``; malformed values are sent as the bytes they are either way.

    ``realtime``: each event goes at its ``emit_ms`` by the wall clock, so the events of a
    ``start_ms`` in the past (a backlog) go at once, then the rest in real time. ``keep_up``
    is called after every ``CATCH_UP_SLICE_MS`` of a backlog's emit time (its events
    delivered) to wait for its readers, e.g. the stream applications: read in slices, a
    backlog arrives in about the order of its event time, as it would have live."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            **KafkaConnection.of(kafka).client_config(),
            "linger.ms": 20,
            "enable.idempotence": True,
            # Java's default partitioner (what Kafka Streams and the stream apps use), so
            # keyed topics are co-partitioned with what the applications write
            "partitioner": "murmur2_random",
            **(producer_config or {}),
        }
    )
    rename = topics or {}
    raw_format.register({t: rename.get(t, t) for t in domain.RAW_TOPICS})
    writers = {t: raw_format.writer_serde(t) for t in domain.RAW_TOPICS if raw_format.is_avro(t)}
    sent = 0
    slice_end = config.start_ms + CATCH_UP_SLICE_MS
    try:
        for event in iter_events(config):
            if keep_up is not None and event.emit_ms >= slice_end:
                if slice_end <= time.time() * 1000:  # a slice of the backlog is out
                    if producer.flush(30):
                        raise RuntimeError("the backlog's events were not delivered")
                    keep_up()
                while slice_end <= event.emit_ms:
                    slice_end += CATCH_UP_SLICE_MS
            if realtime:
                delay = event.emit_ms / 1000.0 - time.time()
                if delay > 0:
                    producer.poll(0)
                    time.sleep(delay)
            topic = rename.get(event.topic, event.topic)
            writer = writers.get(event.topic)
            value = (
                event.value
                if writer is None or event.record is None
                else writer.serialize(topic, event.record)
            )
            while True:
                try:
                    producer.produce(
                        topic,
                        key=None if event.key is None else event.key.encode(),
                        value=value,
                        timestamp=event.timestamp,
                    )
                    break
                except BufferError:
                    producer.poll(0.1)
            sent += 1
            if sent % 1000 == 0:
                producer.poll(0)
    finally:
        remaining = producer.flush(30)
    if remaining:
        raise RuntimeError(f"{remaining} events were not delivered")
    return sent


def stream_apps_keep_up(kafka: Kafka, timeout: float = 60.0) -> Callable[[], None]:
    """A ``produce(keep_up=...)`` that waits (at most ``timeout`` seconds a slice) until the
    platform's stream applications have consumed what was sent."""
    from pipelines.streams.apps import consumer_groups
    from pipelines.streams.monitor import BrokerProbe, wait_for_no_lag

    groups = consumer_groups()
    probe = BrokerProbe(kafka, timeout=10.0)

    def keep_up() -> None:
        lag = wait_for_no_lag(probe, groups, timeout)
        if lag != 0:
            print(f"the stream applications lag {lag} records; sending on", file=sys.stderr)

    return keep_up


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line options of ``python -m pipelines.generator``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "localhost:9092")
    )
    parser.add_argument("--rate", type=float, default=5.0, help="orders per second")
    parser.add_argument(
        "--duration", type=float, default=None, help="seconds of events (default: forever)"
    )
    parser.add_argument(
        "--seed", type=int, default=None, help="reproduce a run (default: a fresh random seed)"
    )
    parser.add_argument("--customers", type=int, default=5000)
    parser.add_argument("--start-ms", type=int, default=None, help="first event time (now)")
    parser.add_argument(
        "--catch-up-from",
        type=int,
        default=None,
        metavar="MS",
        help="start at this event time in the past: send the events up to now at the pace "
        "the stream applications consume them (30 s of event time at a time), then go on "
        "in real time",
    )
    parser.add_argument("--fast", action="store_true", help="send as fast as possible")
    parser.add_argument("--create-topics", action="store_true", help="create the topics first")
    parser.add_argument(
        "--format",
        choices=("json", "avro"),
        default=os.environ.get("PLATFORM_VALUE_FORMAT") or "json",
        help="the raw topics' value format (avro: with the schema registry of SCHEMA_REGISTRY_URL)",
    )
    args = parser.parse_args(argv)
    if args.format == "avro" and not os.environ.get("SCHEMA_REGISTRY_URL"):
        parser.error("--format avro needs a schema registry: set SCHEMA_REGISTRY_URL")
    if args.duration is None and args.fast:
        parser.error("--fast needs --duration")
    if args.catch_up_from is not None and (args.start_ms is not None or args.fast):
        parser.error("--catch-up-from sets the start and the pace: not with --start-ms or --fast")
    return args


def config_from_args(args: argparse.Namespace) -> GeneratorConfig:
    """The generator config of parsed options; events start now unless ``--start-ms``."""
    start_ms = next(
        (ms for ms in (args.catch_up_from, args.start_ms) if ms is not None),
        int(time.time() * 1000),
    )
    seed = {} if args.seed is None else {"seed": args.seed}
    return GeneratorConfig(
        **seed,
        start_ms=start_ms,
        duration_s=args.duration,
        orders_per_second=args.rate,
        customers=args.customers,
    )


def main(argv: list[str] | None = None) -> int:
    """Command line entry point: ``python -m pipelines.generator``."""
    args = parse_args(argv)
    config = config_from_args(args)
    # TLS and SASL settings (and the password) from the environment, as the platform has them
    kafka = dataclasses.replace(
        KafkaConnection.from_env(os.environ), bootstrap_servers=args.bootstrap
    )
    if args.create_topics:
        from pipelines.topics import create_topics

        create_topics(kafka)
    print(f"generator run {run_id(config)} (seed {config.seed})", file=sys.stderr)
    keep_up = None
    if args.catch_up_from is not None:
        keep_up = stream_apps_keep_up(kafka)
        behind = (time.time() * 1000 - args.catch_up_from) / 60_000
        print(f"catching up {behind:.0f} minutes of events first", file=sys.stderr)
    raw_format = raw_format_from_env(os.environ, args.format)
    sent = produce(config, kafka, realtime=not args.fast, keep_up=keep_up, raw_format=raw_format)
    print(f"sent {sent} events", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
