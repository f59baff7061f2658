"""Pattern-subscribed sources in ``KafkaStreams``: topics matching at start are consumed, a
topic created later is picked up after ``metadata.max.age.ms``, and a restart resumes every
matched topic from its committed offsets (exactly-once counts, nothing twice)."""

from __future__ import annotations

import re

from test_app_support import (
    T0,
    last_value_per_key,
    long_value,
    produce,
    read_all,
    settle,
    unique,
)

from streaming import StreamsBuilder, serdes
from streaming.app import KafkaStreams, State


def _count_per_key(prefix: str, totals: str):
    builder = StreamsBuilder()
    (
        builder.stream(
            re.compile(re.escape(prefix) + r"-\d+"),
            key_serde=serdes.String(),
            value_serde=serdes.String(),
        )
        .group_by_key()
        .count(materialized="per-key")
        .to_stream()
        .to(totals, key_serde=serdes.String(), value_serde=serdes.Long())
    )
    return builder.build()


def _records(keys: list[str], n: int, offset: int = 0):
    return ((k.encode(), b"x", T0 + offset + i) for i in range(n) for k in keys)


def test_pattern_source_picks_up_new_topics_and_resumes(kafka_cluster, tmp_path):
    bootstrap = kafka_cluster.bootstrap_servers
    prefix, totals = unique("clicks"), unique("totals")
    for i in (1, 2):
        kafka_cluster.create_topic(f"{prefix}-{i}", partitions=2)
    # same prefix, but not a full match of the pattern: never read
    kafka_cluster.create_topic(f"{prefix}-x", partitions=2)
    kafka_cluster.create_topic(totals, partitions=2)
    produce(bootstrap, f"{prefix}-1", _records(["a", "b"], 10))
    produce(bootstrap, f"{prefix}-2", _records(["a", "c"], 5))
    produce(bootstrap, f"{prefix}-x", _records(["a", "z"], 7))
    app_id = unique("pattern")
    config = {
        "application.id": app_id,
        "bootstrap.servers": bootstrap,
        "processing.guarantee": "exactly_once_v2",
        "state.dir": str(tmp_path),
        "metadata.max.age.ms": 1000,
        "commit.interval.ms": 100,
    }

    def counts_reach(expected: dict[str, int]):
        def done(msgs):
            last = last_value_per_key(msgs, totals)
            return {k.decode(): long_value(v) for k, v in last.items()} == expected

        return done

    app = KafkaStreams(_count_per_key(prefix, totals), config)
    app.start()
    try:
        assert app.wait_until(State.RUNNING, 60)
        expected = {"a": 15, "b": 10, "c": 5}
        msgs = read_all(bootstrap, [totals], until=counts_reach(expected), timeout=60)
        assert counts_reach(expected)(msgs)

        # a topic created while the application runs is found and consumed from its start
        kafka_cluster.create_topic(f"{prefix}-3", partitions=2)
        produce(bootstrap, f"{prefix}-3", _records(["a", "d"], 4))
        expected = {"a": 19, "b": 10, "c": 5, "d": 4}
        msgs = read_all(bootstrap, [totals], until=counts_reach(expected), timeout=60)
        assert counts_reach(expected)(msgs), "the topic created while running was not read"
    finally:
        app.close(timeout=30)

    # restart: every matched topic resumes where it was committed
    produce(bootstrap, f"{prefix}-1", _records(["b"], 2, offset=100))
    produce(bootstrap, f"{prefix}-3", _records(["d"], 3, offset=100))
    app = KafkaStreams(_count_per_key(prefix, totals), config)
    app.start()
    try:
        assert app.wait_until(State.RUNNING, 60)
        expected = {"a": 19, "b": 12, "c": 5, "d": 7}
        read_all(bootstrap, [totals], until=counts_reach(expected), timeout=60)
        # everything committed so far: a record counted twice would push a count past it
        msgs = settle(bootstrap, [totals])
        rows = [(k.decode(), long_value(v)) for t, _p, _o, k, v, _h in msgs if t == totals]
        assert {k: v for k, v in rows} == expected
        assert all(v <= expected[k] for k, v in rows)
    finally:
        app.close(timeout=30)
