"""Kafka security end to end: a broker with a SASL_SSL listener (TLS from a CA made at test
time, SASL PLAIN and SCRAM users); an exactly-once application counts through it, restores
its state through it after a restart on empty state, and a wrong password or an untrusted
certificate fails ``start()`` within seconds with a message that says what to fix."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer

from streaming import StreamsBuilder, serdes
from streaming.app import KafkaStreams, State
from streaming.errors import ConfigException
from streaming.testing import LocalKafkaCluster

S = serdes.String()
USER, PASSWORD = "stream-app", "s3cret-password"


@pytest.fixture(scope="module")
def secure_cluster():
    with LocalKafkaCluster(sasl_users={USER: PASSWORD, "writer": "writer-pw"}) as cluster:
        for topic in ("clicks", "clicks-per-user"):
            cluster.create_topic(topic, partitions=2)
        yield cluster


def _counts() -> StreamsBuilder:
    b = StreamsBuilder()
    (
        b.stream("clicks", key_serde=S, value_serde=S)
        .group_by_key()
        .count(materialized="clicks-per-user-store")
        .to_stream()
        .to("clicks-per-user", key_serde=S, value_serde=serdes.Long())
    )
    return b


def _produce(cluster: LocalKafkaCluster, users: list[str]) -> None:
    producer = Producer(cluster.sasl_ssl_client_config("writer", "writer-pw", mechanism="PLAIN"))
    for user in users:
        producer.produce("clicks", key=user.encode(), value=b"click")
    assert producer.flush(30) == 0


def _final_counts(cluster: LocalKafkaCluster, expected: dict[str, int]) -> dict[str, int]:
    consumer = Consumer(
        {
            **cluster.sasl_ssl_client_config(USER, PASSWORD),
            "group.id": f"reader-{time.monotonic_ns()}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe(["clicks-per-user"])
    counts: dict[str, int] = {}
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and counts != expected:
            for msg in consumer.consume(100, timeout=0.5):
                if msg.error() is None:
                    counts[msg.key().decode()] = int.from_bytes(msg.value(), "big")
    finally:
        consumer.close()
    return counts


def _config(cluster: LocalKafkaCluster, state_dir, **security) -> dict:
    client = cluster.sasl_ssl_client_config(USER, PASSWORD)
    client.update(security)
    return {
        "application.id": "secure-counts",
        "processing.guarantee": "exactly_once_v2",
        "state.dir": str(state_dir),
        "commit.interval.ms": 100,
        "bootstrap.timeout.ms": 10_000,
        **client,
    }


def test_application_counts_and_restores_through_sasl_ssl(secure_cluster, tmp_path):
    _produce(secure_cluster, ["ann", "bob", "ann"])
    app = KafkaStreams(_counts(), _config(secure_cluster, tmp_path / "a"))
    app.start()
    try:
        assert app.wait_until(State.RUNNING, 60)
        assert _final_counts(secure_cluster, {"ann": 2, "bob": 1}) == {"ann": 2, "bob": 1}
    finally:
        app.close(timeout=30)
    # a new instance on empty state (PLAIN this time) restores the counts from the changelog
    _produce(secure_cluster, ["ann", "cid"])
    restored: list[int] = []

    class Listener:
        def on_restore_end(self, tp, store, total):
            restored.append(total)

    app = KafkaStreams(
        _counts(), _config(secure_cluster, tmp_path / "b", **{"sasl.mechanism": "PLAIN"})
    )
    app.set_global_state_restore_listener(Listener())
    app.start()
    try:
        assert app.wait_until(State.RUNNING, 60)
        expected = {"ann": 3, "bob": 1, "cid": 1}
        assert _final_counts(secure_cluster, expected) == expected
        # the first run's changelog (2 or 3 records: the cache may have merged ann's two)
        assert sum(restored) in (2, 3)
    finally:
        app.close(timeout=30)


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"sasl.password": "wrong"}, "Authentication failed"),
        ({"ssl.ca.location": "/etc/ssl/certs/ca-certificates.crt"}, "certificate verify failed"),
    ],
    ids=["wrong-password", "untrusted-certificate"],
)
def test_refused_login_fails_start_fast_with_what_to_fix(secure_cluster, tmp_path, settings, says):
    app = KafkaStreams(_counts(), _config(secure_cluster, tmp_path, **settings))
    began = time.monotonic()
    with pytest.raises(ConfigException) as failure:
        app.start()
    assert time.monotonic() - began < 8  # not the 10 s bootstrap timeout
    message = str(failure.value)
    assert says in message
    assert "sasl.*" in message and "ssl.*" in message
    app.close(timeout=10)
