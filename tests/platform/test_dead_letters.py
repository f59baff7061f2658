"""The stream applications' dead-letter path: records they cannot use (malformed, or with an
event time too far ahead of the wall clock) go to ``<app>-dlq`` right after the source, with
KIP-1034 headers, before any repartition or window; good records before and after still
come out.

The topology tests use the TopologyTestDriver with a fixed wall clock; the last test runs
``enriched-orders`` (orders rekeyed through a repartition topic) against the session broker,
which refuses records stamped more than an hour ahead (Kafka 4's
``message.timestamp.after.max.ms``).
"""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from committed_reads import read_committed
from confluent_kafka import KafkaError, Producer

from pipelines.streams.apps import STREAM_APPS
from pipelines.streams.common import (
    HEADER_EXCEPTION,
    HEADER_MESSAGE,
    HEADER_OFFSET,
    HEADER_PARTITION,
    HEADER_REASON,
    HEADER_TOPIC,
)
from pipelines.streams.config import StreamAppConfig
from pipelines.streams.supervisor import RunnerSettings, StreamAppRunner
from streaming import TopologyTestDriver, serdes

M = 60_000
H = 60 * M
NOW = 1_767_225_600_000  # the drivers' wall clock: 2026-01-01T00:00:00Z
S = serdes.String()
J = serdes.Json()


def order(order_id: str, t: int, customer: str = "c1", **extra: Any) -> dict[str, Any]:
    return {
        "order_id": order_id,
        "customer_id": customer,
        "amount": extra.pop("amount", 10.0),
        "region": extra.pop("region", "EU"),
        "location": extra.pop("location", "Berlin"),
        "event_time": t,
        **extra,
    }


def click(user: str, t: int) -> dict[str, Any]:
    return {"user_id": user, "page": "/", "event_time": t}


def headers(record: Any) -> dict[str, str]:
    return {k: (v or b"").decode() for k, v in record.headers}


def driver(app: str, **settings: Any) -> TopologyTestDriver:
    topology = STREAM_APPS[app].factory(StreamAppConfig.of(settings))
    return TopologyTestDriver(topology, {"application.id": app}, initial_wall_clock_time_ms=NOW)


@pytest.mark.parametrize("app", sorted(STREAM_APPS))
def test_far_future_record_is_dead_lettered_with_the_reason(app: str) -> None:
    source = "clicks" if app == "click-sessions" else "orders"
    future = click("u1", NOW + 2 * H) if source == "clicks" else order("o-future", NOW + 2 * H)
    with driver(app) as d:
        src = d.create_input_topic(source, key_serde=S, value_serde=J)
        dlq = d.create_output_topic(f"{app}-dlq", key_serde=S, value_serde=J)
        # stamped when produced (now): only the event time in the value is in the future
        src.pipe_input("k-future", future, timestamp=NOW)
        # nothing of it reached a repartition topic, a store or an output
        assert {topic for topic, *_ in d.producer_history()} == {f"{app}-dlq"}
        (dead,) = dlq.read_records_to_list()
        assert (dead.key, dead.value) == ("k-future", future)
        assert dead.timestamp == NOW  # the wall clock: the broker would refuse NOW + 2 h
        h = headers(dead)
        assert h[HEADER_REASON] == "event-time-ahead"
        assert h[HEADER_EXCEPTION].startswith("pipelines.streams.common.EventTimeTooFarAhead: ")
        assert f"{2 * H} ms ahead" in h[HEADER_MESSAGE]
        assert (h[HEADER_TOPIC], h[HEADER_PARTITION], h[HEADER_OFFSET]) == (source, "0", "0")


def test_the_bound_is_configured_and_inclusive() -> None:
    limit = 15 * M
    assert StreamAppConfig().max_event_time_ahead_ms == limit
    with driver("orders-dedup") as d:
        src = d.create_input_topic("orders", key_serde=S, value_serde=J)
        out = d.create_output_topic("orders-deduped", key_serde=S, value_serde=J)
        dlq = d.create_output_topic("orders-dedup-dlq", key_serde=S, value_serde=J)
        src.pipe_input("o1", order("o1", NOW + limit), timestamp=NOW)  # at the bound: kept
        src.pipe_input("o2", order("o2", NOW + limit + 1), timestamp=NOW)  # 1 ms over
        assert [r.key for r in out.read_records_to_list()] == ["o1"]
        assert [r.key for r in dlq.read_records_to_list()] == ["o2"]
    # a wider bound from the apps' settings lets a 2-hour-ahead order through
    with driver("orders-dedup", max_event_time_ahead_ms=3 * H) as d:
        src = d.create_input_topic("orders", key_serde=S, value_serde=J)
        out = d.create_output_topic("orders-deduped", key_serde=S, value_serde=J)
        src.pipe_input("o3", order("o3", NOW + 2 * H), timestamp=NOW)
        assert [r.key for r in out.read_records_to_list()] == ["o3"]


def test_far_future_order_does_not_close_the_open_windows() -> None:
    # without the gate the 2-hour-ahead order would move stream time past every open window
    # and the orders after it would be dropped as late
    with driver("windowed-revenue") as d:
        src = d.create_input_topic("orders", key_serde=S, value_serde=J)
        base = NOW - 20 * M
        src.pipe_input("o1", order("o1", base, amount=1.0), timestamp=NOW)
        src.pipe_input("bad", order("bad", NOW + 2 * H, amount=1000.0), timestamp=NOW)
        src.pipe_input("o2", order("o2", base + M, amount=2.0), timestamp=NOW)
        store = d.get_window_store("revenue-5m-store")
        assert store.fetch("EU", base - base % (5 * M)) == {"revenue_cents": 300, "order_count": 2}


def test_malformed_records_carry_the_reason_too() -> None:
    with driver("windowed-revenue") as d:
        src = d.create_input_topic("orders", key_serde=S, value_serde=J)
        dlq = d.create_output_topic("windowed-revenue-dlq", key_serde=S, value_serde=J)
        src.pipe_input("bad", {"order_id": "bad", "region": "EU"}, timestamp=NOW - M)
        (dead,) = dlq.read_records_to_list()
        assert (dead.value, dead.timestamp) == ({"order_id": "bad", "region": "EU"}, NOW - M)
        h = headers(dead)
        assert h[HEADER_REASON] == "invalid"
        assert h[HEADER_MESSAGE] == "missing or mistyped fields: customer_id, amount, event_time"
        assert h[HEADER_EXCEPTION].startswith("pipelines.streams.common.InvalidRecord: ")


# -- against a real broker --------------------------------------------------------------------


def _read_all(bootstrap: str, topic: str, expected: int, timeout: float = 60.0) -> list[Any]:
    """Committed records of ``topic`` until ``expected`` arrived or ``timeout`` passed."""
    return read_committed(bootstrap, topic, lambda ms: len(ms) >= expected, timeout)


def test_unreadable_records_are_told_once_a_minute_not_one_by_one(caplog) -> None:
    """The platform's handler skips (the runtime dead-letters) and tells the first bad
    record at once, then one INFO line per minute with the counts per topic and reason."""
    import logging

    from pipelines.streams.bad_records import DeadLetterSummary
    from streaming.runtime.errors import ErrorHandlerContext, Response

    now = [0.0]
    handler = DeadLetterSummary(clock=lambda: now[0])

    def bad(topic: str, exc: Exception) -> Response:
        ctx = ErrorHandlerContext(topic, 0, 1, NOW, None, "KSTREAM-SOURCE-0000000000", "0_0")
        return handler.handle(ctx, None, exc)

    with caplog.at_level(logging.INFO, logger="pipelines.streams.bad_records"):
        assert (
            bad("orders", ValueError("invalid JSON: unexpected end of data")) is Response.CONTINUE
        )
        for i in range(5):
            now[0] += 10
            bad("orders" if i % 2 else "clicks", ValueError("invalid JSON: unexpected end of data"))
        now[0] += 15  # 65 s after the first line
        bad("orders", TypeError("str is not valid UTF-8"))
    lines = [r.getMessage() for r in caplog.records if r.name == "pipelines.streams.bad_records"]
    assert {r.levelname for r in caplog.records} == {"INFO"}
    assert lines == [
        "1 unreadable record skipped to the dead-letter topic (orders 1): ValueError: "
        "invalid JSON: unexpected end of data (1)",
        "6 unreadable records in the last 65 s skipped to the dead-letter topic (clicks 3, "
        "orders 3): ValueError: invalid JSON: unexpected end of data (5); TypeError: str is "
        "not valid UTF-8 (1)",
    ]


def test_far_future_order_goes_to_the_dead_letter_topic_on_a_real_broker(
    kafka_cluster, tmp_path: Path, caplog
) -> None:
    boot = kafka_cluster.bootstrap_servers
    suffix = uuid.uuid4().hex[:8]
    orders_topic, customers_topic = f"orders-dl-{suffix}", f"customers-dl-{suffix}"
    for topic in (orders_topic, customers_topic):
        kafka_cluster.create_topic(topic, partitions=2)
    config = StreamAppConfig(
        orders_topic=orders_topic,
        customers_topic=customers_topic,
        enriched_topic=f"enriched-dl-{suffix}",
        dead_letter_suffix=f"-dlq-{suffix}",
    )
    app = STREAM_APPS["enriched-orders"]
    dlq_topic = config.dead_letter_topic(app.name)

    producer = Producer({"bootstrap.servers": boot, "partitioner": "murmur2_random"})
    # the control: this broker refuses a record stamped two hours ahead
    refused: list[Any] = []
    producer.produce(
        orders_topic,
        key=b"probe",
        value=b"{}",
        timestamp=int(time.time() * 1000) + 2 * H,
        on_delivery=lambda err, msg: refused.append(err),
    )
    producer.flush(30)
    assert refused and refused[0] is not None
    assert refused[0].code() == KafkaError.INVALID_TIMESTAMP, refused[0]

    def send(orders: list[dict[str, Any]]) -> None:
        for o in orders:
            # stamped now, like the user's producer: the event time is in the value
            producer.produce(orders_topic, key=o["order_id"].encode(), value=orjson.dumps(o))
        assert producer.flush(30) == 0

    now = int(time.time() * 1000)
    before = [order(f"a{i}", now - 10 * M + i, customer=f"c{i % 7}") for i in range(225)]
    future = order("far-future", now + 2 * H, customer="c1")
    after = [order(f"b{i}", now - 5 * M + i, customer=f"c{i % 7}") for i in range(225)]

    runner = StreamAppRunner(
        app,
        RunnerSettings(boot, state_root=tmp_path / "state", instance="dl", commit_interval_ms=200),
        config,
        application_id=f"enriched-dl-{suffix}",
    )
    runner.start()
    try:
        with caplog.at_level(logging.INFO):
            send(before)
            send([future])
            # undecodable values, as the generator injects them
            for i, value in enumerate((b'{"order_id": "x', b"\xff\xfe", b"not json")):
                producer.produce(orders_topic, key=f"bad{i}".encode(), value=value)
            send(after)
            enriched = _read_all(boot, config.enriched_topic, expected=450)
            dead = _read_all(boot, dlq_topic, expected=4)
            assert runner.state == "RUNNING"
    finally:
        assert runner.close(60)
    # the bad records are told in one INFO summary, not a WARNING each
    told = [r for r in caplog.records if r.name == "pipelines.streams.bad_records"]
    assert len(told) == 1 and told[0].levelname == "INFO", [r.getMessage() for r in told]
    assert "skipped to the dead-letter topic" in told[0].getMessage()
    per_record = [
        r.getMessage()
        for r in caplog.records
        if r.name in ("streaming.runtime.errors", "streaming.runtime.task")
        and r.levelno >= logging.WARNING
    ]
    assert not per_record, per_record
    unreadable = [m for m in dead if m.key().startswith(b"bad")]
    assert sorted(m.key() for m in unreadable) == [b"bad0", b"bad1", b"bad2"]
    assert all(HEADER_EXCEPTION in dict(m.headers()) for m in unreadable)
    dead = [m for m in dead if not m.key().startswith(b"bad")]

    ids = sorted(orjson.loads(m.value())["order_id"] for m in enriched)
    assert len(ids) == 450, f"{len(ids)} of 450 good orders came out"
    assert ids == sorted(o["order_id"] for o in before + after)
    assert len(dead) == 1
    (msg,) = dead
    assert orjson.loads(msg.value()) == future
    assert msg.key() == b"far-future"
    h = {k: (v or b"").decode() for k, v in msg.headers()}
    assert h[HEADER_REASON] == "event-time-ahead"
    assert h[HEADER_EXCEPTION].startswith("pipelines.streams.common.EventTimeTooFarAhead")
    assert "ahead of the wall clock" in h[HEADER_MESSAGE]
    assert h[HEADER_TOPIC] == orders_topic
    assert int(h[HEADER_PARTITION]) in (0, 1) and int(h[HEADER_OFFSET]) >= 0
    assert msg.timestamp()[1] <= int(time.time() * 1000)
