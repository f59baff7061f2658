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
