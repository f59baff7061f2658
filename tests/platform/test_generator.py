"""The event generator: deterministic by seed, with the injected anomalies it promises."""

from __future__ import annotations

from collections import Counter, defaultdict

from data_fixture import CONFIG, fixture_events

from assets import domain
from assets.generator import generate_events, iter_events
from assets.topics import load_topic_specs


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
    # `make run` starts `python -m assets.generator` with generator_command: the events must
    # be stamped around now, or the topics' 7-day retention deletes them at once
    import time

    from assets.generator import config_from_args, parse_args
    from assets.run import generator_command

    cmd = generator_command("python", "localhost:1", 5.0)
    assert cmd[:3] == ["python", "-m", "assets.generator"]
    now = int(time.time() * 1000)
    config = config_from_args(parse_args(cmd[3:]))
    assert abs(config.start_ms - now) < 60_000
    assert config.duration_s is None and config.orders_per_second == 5.0
    events = iter_events(config)
    first = [next(events) for _ in range(config.customers + 200)]
    retention_ms = 7 * 24 * 3_600_000
    assert all(now - retention_ms < e.timestamp <= now + 3_600_000 for e in first)
    assert config_from_args(parse_args(["--start-ms", "5"])).start_ms == 5


def test_keyed_records_land_on_the_java_default_partition(kafka_cluster) -> None:
    # the stream applications (like Kafka Streams) partition by murmur2: the generator's
    # records must land where they compute, or customers and rekeyed orders are not
    # co-partitioned
    import time
    import uuid

    from confluent_kafka import Consumer, TopicPartition

    from assets.generator import GeneratorConfig, produce
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
                    for msg in consumer.consume(500, timeout=5):
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
