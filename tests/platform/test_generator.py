"""The event generator: deterministic by seed, with the injected anomalies it promises."""

from __future__ import annotations

from collections import Counter, defaultdict

from data_fixture import CONFIG, fixture_events

from pipelines import domain
from pipelines.generator import generate_events, iter_events
from pipelines.topics import load_topic_specs


def test_same_seed_same_events_other_seed_other_events() -> None:
    assert generate_events(CONFIG) == generate_events(CONFIG)
    assert generate_events(CONFIG) != generate_events(CONFIG.with_(seed=8))


def test_events_are_in_send_order_and_infinite_mode_streams() -> None:
    events = fixture_events()
    assert [e.emit_ms for e in events] == sorted(e.emit_ms for e in events)
    endless = iter_events(CONFIG.with_(duration_s=None))
    assert len([next(endless) for _ in range(5000)]) == 5000


def test_injected_fraud_patterns_and_anomalies() -> None:
    events = fixture_events()
    orders = [domain.parse_record(e.topic, e.value) for e in events if e.topic == domain.ORDERS]
    valid = [o for o in orders if o is not None]
    profiles = {
        p["customer_id"]: p
        for e in events
        if e.topic == domain.CUSTOMERS
        for p in [domain.parse_record(e.topic, e.value)]
    }
    assert sum(o is None for o in orders) > 5  # malformed records
    raw_order_events = [e for e in events if e.topic == domain.ORDERS]
    assert len({(e.key, e.value) for e in raw_order_events}) < len(raw_order_events)  # dups
    assert any(o["amount"] > domain.HIGH_VALUE_THRESHOLD for o in valid)
    assert all(o["amount"] <= 5001 for o in valid if o["amount"] <= domain.HIGH_VALUE_THRESHOLD)
    unknown_location = [
        o
        for o in valid
        if o["customer_id"] in profiles
        and o["location"] not in profiles[o["customer_id"]]["known_locations"]
    ]
    assert unknown_location
    assert any(o["customer_id"] not in profiles for o in valid)  # unknown customers
    per_window: Counter[tuple[str, int]] = Counter(
        (o["customer_id"], domain.window_start(o["event_time"], domain.BURST_WINDOW_MS))
        for o in valid
    )
    assert max(per_window.values()) > domain.BURST_MAX_ORDERS
    # late events: event time minutes before the send time; out-of-order: seconds before
    lateness = [e.emit_ms - e.timestamp for e in raw_order_events]
    assert any(lag > domain.REVENUE_WINDOW_MS for lag in lateness)
    assert any(0 < lag <= 30_000 for lag in lateness)


def test_every_stream_input_and_output_topic_is_declared() -> None:
    specs = {spec.name: spec for spec in load_topic_specs()}
    for topic in (*domain.RAW_TOPICS, *domain.DERIVED_TOPICS, *domain.DEAD_LETTER_TOPICS):
        assert topic in specs, topic
    assert specs[domain.CUSTOMERS].config["cleanup.policy"] == "compact"
    # co-partitioning of the orders repartition topic and the customers table
    assert specs[domain.ORDERS].partitions == specs[domain.CUSTOMERS].partitions
    partitions = defaultdict(int)
    for spec in specs.values():
        partitions[spec.name] = spec.partitions
    assert all(p >= 1 for p in partitions.values())


def test_make_run_generator_stamps_events_from_now() -> None:
    # `make run` starts `python -m pipelines.generator` with generator_command: the events must
    # be stamped around now, or the topics' 7-day retention deletes them at once
    import time

    from pipelines.generator import config_from_args, parse_args
    from pipelines.run import generator_command

    cmd = generator_command("python", "localhost:1", 5.0)
    assert cmd[:3] == ["python", "-m", "pipelines.generator"]
    now = int(time.time() * 1000)
    config = config_from_args(parse_args(cmd[3:]))
    assert abs(config.start_ms - now) < 60_000
    assert config.duration_s is None and config.orders_per_second == 5.0
    events = iter_events(config)
    first = [next(events) for _ in range(config.customers + 200)]
    retention_ms = 7 * 24 * 3_600_000
    assert all(now - retention_ms < e.timestamp <= now + 3_600_000 for e in first)
    assert config_from_args(parse_args(["--start-ms", "5"])).start_ms == 5


def test_a_new_platform_catches_up_the_last_hour_first() -> None:
    # `make run` on a new broker: the generator starts at the last complete hour, which is
    # the first hourly partition, so there is an hour to reconcile within minutes
    import time

    import pytest

    from pipelines.generator import config_from_args, parse_args
    from pipelines.run import generator_command, previous_hour_start

    now = 1_767_261_000_000  # 2026-01-01T09:50:00Z
    start = previous_hour_start(now)
    assert start == now - 50 * 60_000 - 3_600_000
    cmd = generator_command("python", "localhost:1", 5.0, start)
    assert cmd[-2:] == ["--catch-up-from", str(start)]
    args = parse_args(cmd[3:])
    assert config_from_args(args).start_ms == start and args.catch_up_from == start
    with pytest.raises(SystemExit):
        parse_args(["--catch-up-from", "5", "--fast", "--duration", "1"])
    assert int(time.time() * 1000) - previous_hour_start() <= 2 * 3_600_000


def test_a_backlog_goes_out_in_slices_its_readers_keep_up_with(kafka_cluster) -> None:
    """``produce`` with a start in the past sends the backlog at once, but in 30-second
    slices of emit time: after each, every event of the slice is delivered and ``keep_up``
    waits for the readers; the rest goes in real time."""
    import time
    import uuid

    from confluent_kafka import Consumer, TopicPartition

    from pipelines.generator import CATCH_UP_SLICE_MS, GeneratorConfig, produce

    suffix = uuid.uuid4().hex[:8]
    topics = {t: f"{t}-catch-up-{suffix}" for t in domain.RAW_TOPICS}
    for topic in topics.values():
        kafka_cluster.create_topic(topic, partitions=2)
    now = int(time.time() * 1000)
    config = GeneratorConfig(
        seed=3, start_ms=now - 3_600_000, duration_s=120, orders_per_second=2.0, customers=20
    )
    events = list(iter_events(config))
    assert events[-1].emit_ms < now  # all a backlog (clicks and payments trail the orders)
    consumer = Consumer(
        {"bootstrap.servers": kafka_cluster.bootstrap_servers, "group.id": f"count-{suffix}"}
    )
    delivered: list[int] = []

    def keep_up() -> None:
        delivered.append(
            sum(
                consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for topic in topics.values()
                for p in (0, 1)
            )
        )

    try:
        sent = produce(
            config, kafka_cluster.bootstrap_servers, realtime=True, topics=topics, keep_up=keep_up
        )
    finally:
        consumer.close()
    assert sent == len(events)
    # a call after each 30 s slice of the backlog that had events, with exactly the events
    # before the slice's end delivered
    slice_ends = range(config.start_ms, events[-1].emit_ms + CATCH_UP_SLICE_MS, CATCH_UP_SLICE_MS)
    prefixes = [sum(1 for e in events if e.emit_ms < end) for end in slice_ends]
    assert len(delivered) >= 4 and delivered == sorted(set(delivered)), delivered
    assert delivered[0] == prefixes[1]  # the first 30 s
    assert set(delivered) <= set(prefixes), (delivered, prefixes)


def test_keyed_records_land_on_the_java_default_partition(kafka_cluster) -> None:
    # the stream applications (like Kafka Streams) partition by murmur2: the generator's
    # records must land where they compute, or customers and rekeyed orders are not
    # co-partitioned
    import time
    import uuid

    from confluent_kafka import Consumer, TopicPartition

    from pipelines.generator import GeneratorConfig, produce
    from streaming.runtime.partitioner import default_partition

    suffix = uuid.uuid4().hex[:8]
    topics = {t: f"{t}-part-{suffix}" for t in domain.RAW_TOPICS}
    partitions = 5
    for topic in topics.values():
        kafka_cluster.create_topic(topic, partitions=partitions)
    config = GeneratorConfig(
        seed=11,
        start_ms=int(time.time() * 1000) - 60_000,
        duration_s=20,
        orders_per_second=5,
        customers=60,
    )
    sent = produce(config, kafka_cluster.bootstrap_servers, topics=topics)
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_cluster.bootstrap_servers,
            "group.id": f"part-{suffix}",
            "enable.auto.commit": False,
        }
    )
    seen = 0
    try:
        for topic in topics.values():
            for p in range(partitions):
                _, end = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                if end == 0:
                    continue
                consumer.assign([TopicPartition(topic, p, 0)])
                got = 0
                while got < end:
                    # consume() waits for all the messages asked for (or the timeout)
                    for msg in consumer.consume(min(500, end - got), timeout=10):
                        assert msg.error() is None
                        got += 1
                        seen += 1
                        key = msg.key()
                        assert key is not None
                        assert default_partition(key, partitions) == p, (topic, key, p)
    finally:
        consumer.close()
    assert seen == sent
    # every partition got records: a spread, not a single partition by accident
    assert seen > 200


def _orders(config, limit: int = 600) -> list:
    """The first ``limit`` order events of ``config`` (malformed ones included)."""
    from itertools import islice

    return list(islice((e for e in iter_events(config) if e.topic == domain.ORDERS), limit))


def test_order_ids_never_collide_across_generators_bursts_and_restarts() -> None:
    # The incident: `make run`'s generator and the generator asset's bursts both defaulted
    # to seed 42 and sent different orders under the same ids. Here every way of starting a
    # generator, started at the same instant (the worst case), must yield disjoint ids.
    from assets.streams import GeneratorRunConfig, burst_config
    from pipelines.generator import config_from_args, parse_args, run_id
    from pipelines.run import generator_command

    t0 = CONFIG.start_ms
    cli = generator_command("python", "localhost:1", 5.0)[3:]
    at_t0 = ["--start-ms", str(t0)]
    configs = {
        "make run": config_from_args(parse_args([*cli, *at_t0])),
        "make run, a second instance": config_from_args(parse_args([*cli, *at_t0])),
        "make run, restarted": config_from_args(parse_args([*cli, "--start-ms", str(t0 + 1)])),
        "burst": burst_config(GeneratorRunConfig(), now_ms=t0 + 60_000),
        "burst again": burst_config(GeneratorRunConfig(), now_ms=t0 + 60_000),
        # the old defaults, now explicit: another customer count or start, another run id
        "make run --seed 42": config_from_args(parse_args([*cli, *at_t0, "--seed", "42"])),
        "burst seed 42": burst_config(GeneratorRunConfig(seed=42), now_ms=t0 + 60_000),
        "make run --seed 42, restarted": config_from_args(
            parse_args([*cli, "--seed", "42", "--start-ms", str(t0 + 5_000)])
        ),
    }
    assert configs["burst"].start_ms == t0
    assert len({run_id(c) for c in configs.values()}) == len(configs)
    owner: dict[str, str] = {}
    payloads: dict[str, set[bytes]] = defaultdict(set)
    for name, config in configs.items():
        ids = set()
        for event in _orders(config):
            assert event.key is not None and event.key.startswith(f"o-{run_id(config)}-")
            ids.add(event.key)
            if domain.parse_record(domain.ORDERS, event.value) is not None:
                payloads[event.key].add(event.value)
        assert len(ids) > 250, name
        for order_id in ids:
            assert owner.setdefault(order_id, name) == name, (order_id, owner[order_id], name)
    # one payload per id: a repeated id is a re-send of the same order
    assert all(len(values) == 1 for values in payloads.values())


def test_ids_are_deterministic_under_an_explicit_seed() -> None:
    import dataclasses
    import os
    import subprocess
    import sys

    from pipelines.generator import GeneratorConfig, run_id

    again = GeneratorConfig(**dataclasses.asdict(CONFIG))
    assert again is not CONFIG and run_id(again) == run_id(CONFIG)
    assert [e.key for e in _orders(again)] == [e.key for e in _orders(CONFIG)]
    # and across processes (the run id is a content hash, not Python's salted hash())
    code = (
        "import sys; sys.path.insert(0, 'tests/platform'); from data_fixture import CONFIG; "
        "from pipelines.generator import run_id; print(run_id(CONFIG))"
    )
    other = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    )
    assert other.stdout.strip() == run_id(CONFIG)
    # any other setting is another run
    assert run_id(CONFIG.with_(start_ms=CONFIG.start_ms + 1)) != run_id(CONFIG)
    assert run_id(CONFIG.with_(customers=CONFIG.customers + 1)) != run_id(CONFIG)
    # without a seed, each config draws its own
    assert GeneratorConfig().seed != GeneratorConfig().seed


def test_duplicates_are_re_sends_of_the_same_order() -> None:
    events = fixture_events()
    values: dict[str, set[bytes]] = defaultdict(set)
    sends: Counter[str] = Counter()
    for e in events:
        if e.topic == domain.ORDERS and domain.parse_record(e.topic, e.value) is not None:
            values[e.key].add(e.value)
            sends[e.key] += 1
    assert sum(n > 1 for n in sends.values()) > 20  # the injected duplicates are still there
    assert all(len(v) == 1 for v in values.values())
    payments = [e.key for e in events if e.topic == domain.PAYMENTS]
    assert len(payments) == len(set(payments))
    # customer profiles are shared by every generator: the same ids, the same people
    from pipelines.generator import build_customers

    other = CONFIG.with_(seed=CONFIG.seed + 1, customers=CONFIG.customers * 2)
    first = {p["customer_id"]: p for p in build_customers(CONFIG)}
    for profile in build_customers(other)[: CONFIG.customers]:
        assert profile == first[profile["customer_id"]]


def test_dedup_keeps_every_order_of_concurrent_generators() -> None:
    # `make run`'s generator and a burst write into the same orders topic: the dedup
    # application must drop the re-sends and nothing else
    import orjson

    from assets.streams import GeneratorRunConfig, burst_config
    from pipelines.generator import config_from_args, parse_args
    from pipelines.run import generator_command
    from pipelines.streams import build_orders_dedup
    from streaming import TopologyTestDriver, serdes

    t0 = CONFIG.start_ms
    cli = generator_command("python", "localhost:1", 5.0)[3:]
    always_on = config_from_args(parse_args([*cli, "--start-ms", str(t0)]))
    burst = burst_config(GeneratorRunConfig(duration_s=120.0), now_ms=t0 + 120_000)
    merged = sorted(
        [*_orders(always_on, 600), *_orders(burst, 600)], key=lambda e: (e.emit_ms, e.key)
    )
    distinct: dict[str, dict] = {}
    with TopologyTestDriver(build_orders_dedup(), {"application.id": "dedup-ids"}) as driver:
        source = driver.create_input_topic(
            domain.ORDERS, key_serde=serdes.String(), value_serde=serdes.Json()
        )
        for e in merged:
            row = domain.parse_record(domain.ORDERS, e.value)
            if row is None:
                continue  # undecodable: the runtime dead-letters those before the app
            distinct.setdefault(e.key, orjson.loads(e.value))
            source.pipe_input(e.key, orjson.loads(e.value), timestamp=e.timestamp)
        out = driver.create_output_topic(
            domain.ORDERS_DEDUPED, key_serde=serdes.String(), value_serde=serdes.Json()
        )
        deduped = out.read_records_to_list()
    assert len(merged) - len(distinct) > 10  # re-sends and malformed records were there
    assert [r.key for r in deduped] == list(dict.fromkeys(r.key for r in deduped))
    assert {r.key: r.value for r in deduped} == distinct


def test_a_burst_writes_no_event_stamped_after_now() -> None:
    # the clicks an order schedules come up to 12 minutes later: written at once by a burst
    # they moved the applications' stream time minutes ahead of the wall clock, and the
    # click sessions closed before the live clicks that extend them arrived
    from assets.streams import GeneratorRunConfig, burst_config

    now = CONFIG.start_ms + 60_000
    burst = burst_config(GeneratorRunConfig(seed=3), now_ms=now)
    events = list(iter_events(burst))
    assert max(e.timestamp for e in events) <= now
    assert max(e.emit_ms for e in events) <= now
    assert sum(e.topic == domain.CLICKS for e in events) > 20
    unbounded = list(iter_events(burst.with_(until_ms=None)))
    assert max(e.timestamp for e in unbounded) > now + 5 * 60_000  # what it wrote before
