"""Records a topic refuses (KIP-1065 / KIP-1034): a write that would be rejected with
INVALID_TIMESTAMP goes to the production exception handler. With ``log_and_continue`` it is
dead-lettered with the reason and skipped, under exactly-once too, so every good record comes
out exactly once. The record is refused before it is sent (the sink's
``message.timestamp.after.max.ms`` is read from the broker), so no transaction has to be
aborted for it. With the default handler the client fails with a message naming the topic,
the record and the broker setting."""

from __future__ import annotations

import threading
import time

import pytest
from test_app_support import produce, read_all, settle, unique

from streaming import StreamsBuilder, serdes
from streaming.app import KafkaStreams, State

#: the sink accepts timestamps at most one minute ahead of the broker's clock
SINK_CONFIG = {"message.timestamp.after.max.ms": 60_000}
#: the source accepts any timestamp (as a topic written by another system may)
SOURCE_CONFIG = {"message.timestamp.after.max.ms": 9_223_372_036_854_775_807}
GOOD = 60
FUTURE_AT = 25


def _copy(source: str, sink: str):
    builder = StreamsBuilder()
    builder.stream(source, key_serde=serdes.String(), value_serde=serdes.String()).to(sink)
    return builder.build()


def _input(now_ms: int) -> list[tuple[bytes, bytes, int]]:
    records = [(f"k{i % 5}".encode(), f"v{i}".encode(), now_ms + i) for i in range(GOOD)]
    # two hours ahead: the source takes it, the sink refuses it
    records.insert(FUTURE_AT, (b"k-future", b"from-the-future", now_ms + 2 * 3600 * 1000))
    return records


def _topics(kafka_cluster):
    src, out, dlq = unique("in"), unique("out"), unique("dlq")
    kafka_cluster.create_topic(src, partitions=1, config=SOURCE_CONFIG)
    kafka_cluster.create_topic(out, partitions=1, config=SINK_CONFIG)
    kafka_cluster.create_topic(dlq, partitions=1)
    return src, out, dlq


@pytest.mark.parametrize("guarantee", ["exactly_once_v2", "at_least_once"])
def test_refused_record_is_dead_lettered_and_good_records_flow(kafka_cluster, tmp_path, guarantee):
    bootstrap = kafka_cluster.bootstrap_servers
    src, out, dlq = _topics(kafka_cluster)
    produce(bootstrap, src, _input(int(time.time() * 1000)))
    app = KafkaStreams(
        _copy(src, out),
        {
            "application.id": unique("refused"),
            "bootstrap.servers": bootstrap,
            "processing.guarantee": guarantee,
            "state.dir": str(tmp_path),
            "commit.interval.ms": 100,
            "production.exception.handler": "log_and_continue",
            "errors.dead.letter.queue.topic.name": dlq,
        },
    )
    app.start()
    try:
        msgs = read_all(
            bootstrap,
            [out, dlq],
            until=lambda m: sum(1 for x in m if x[0] == out) >= GOOD
            and any(x[0] == dlq for x in m),
            timeout=60,
        )
        # nothing more may come: read again until the topics stay quiet, so a record
        # written twice shows
        msgs = settle(bootstrap, [out, dlq])
        assert app.state in (State.RUNNING, State.REBALANCING)
        metrics = app.metrics()
    finally:
        app.close(30)
    values = [m[4].decode() for m in msgs if m[0] == out]
    assert sorted(values, key=lambda v: int(v[1:])) == [f"v{i}" for i in range(GOOD)]
    assert len(values) == len(set(values)), "a good record was written twice"
    dead = [m for m in msgs if m[0] == dlq]
    assert len(dead) == 1
    _t, _p, _o, key, value, headers = dead[0]
    assert (key, value) == (b"k-future", b"from-the-future")
    h = {name: raw.decode() for name, raw in headers}
    assert "INVALID_TIMESTAMP" in h["__streams.errors.exception"]
    # the source record's coordinates, so it can be found and replayed
    assert h["__streams.errors.topic"] == src
    assert h["__streams.errors.offset"] == str(FUTURE_AT)
    # refused before it was sent: no transaction had to be rolled back for it
    assert metrics["aborted-transactions-total"] == 0


def test_refused_record_with_the_default_handler_names_topic_and_setting(kafka_cluster, tmp_path):
    bootstrap = kafka_cluster.bootstrap_servers
    src, out, _dlq = _topics(kafka_cluster)
    produce(bootstrap, src, _input(int(time.time() * 1000)))
    app = KafkaStreams(
        _copy(src, out),
        {
            "application.id": unique("refused-fail"),
            "bootstrap.servers": bootstrap,
            "processing.guarantee": "exactly_once_v2",
            "state.dir": str(tmp_path),
            "commit.interval.ms": 100,
        },
    )
    failures: list[BaseException] = []
    failed = threading.Event()

    def handler(exc: BaseException) -> str:
        failures.append(exc)
        failed.set()
        return "shutdown_client"

    app.set_uncaught_exception_handler(handler)
    app.start()
    try:
        assert failed.wait(60), "the refused record did not fail the thread"
        assert app.wait_until(State.ERROR, timeout=60)
    finally:
        app.close(30)
    message = str(failures[0])
    assert out in message
    assert "message.timestamp.after.max.ms" in message
    assert f"{src}-0 offset {FUTURE_AT}" in message
    assert "production.exception.handler" in message
