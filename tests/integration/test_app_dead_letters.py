"""Poison pills: undeserializable records and records whose processing fails go to the
dead-letter topic (original bytes + KIP-1034 headers) while good records keep flowing and
the offsets move past them; with log_and_fail the client stops in ERROR."""

from __future__ import annotations

import json
import time

from confluent_kafka import Consumer, TopicPartition
from test_app_support import T0, produce, read_all, unique

from streaming import StreamsBuilder, serdes
from streaming.app import KafkaStreams, State
from streaming.runtime.errors import StreamThreadExceptionResponse


def _topology(source, sink):
    builder = StreamsBuilder()
    (
        builder.stream(source, key_serde=serdes.String(), value_serde=serdes.Json())
        .map_values(lambda v: {"ratio": 100 // v["d"]})
        .to(sink)
    )
    return builder.build()


def test_poison_pills_go_to_the_dead_letter_topic(kafka_cluster, tmp_path):
    bootstrap = kafka_cluster.bootstrap_servers
    src, out, dlq = unique("in"), unique("out"), unique("dlq")
    kafka_cluster.create_topic(src, partitions=1)
    kafka_cluster.create_topic(out, partitions=1)
    kafka_cluster.create_topic(dlq, partitions=1)
    records = []
    for i in range(30):
        if i % 10 == 3:
            records.append((b"bad", b"{not json", T0 + i))  # deserialization error
        elif i % 10 == 7:
            records.append((b"zero", b'{ "d" :  0 }', T0 + i))  # processing (odd spacing)
        else:
            records.append((f"k{i}".encode(), json.dumps({"d": 4}).encode(), T0 + i))
    records.append((b"last", b"\xff\xfe", T0 + 100))  # a poison pill at the end of the partition
    produce(bootstrap, src, records)
    app_id = unique("dlq")
    config = {
        "application.id": app_id,
        "bootstrap.servers": bootstrap,
        "state.dir": str(tmp_path),
        "commit.interval.ms": 100,
        "deserialization.exception.handler": "log_and_continue",
        "processing.exception.handler": "log_and_continue",
        "errors.dead.letter.queue.topic.name": dlq,
    }
    app = KafkaStreams(_topology(src, out), config)
    app.start()
    try:
        msgs = read_all(
            bootstrap,
            [out, dlq],
            until=lambda m: sum(1 for x in m if x[0] == out) >= 24
            and sum(1 for x in m if x[0] == dlq) >= 7,
            timeout=60,
        )
        good = [m for m in msgs if m[0] == out]
        assert [(m[3], json.loads(m[4])) for m in good] == [
            (f"k{i}".encode(), {"ratio": 25}) for i in range(30) if i % 10 not in (3, 7)
        ]
        dead = [m for m in msgs if m[0] == dlq]
        assert len(dead) == 7
        by_offset = {}
        for _t, _p, _o, key, value, headers in dead:
            h = {name: raw.decode() for name, raw in headers}
            assert h["__streams.errors.topic"] == src
            assert h["__streams.errors.partition"] == "0"
            by_offset[int(h["__streams.errors.offset"])] = (key, value, h)
        assert sorted(by_offset) == [3, 7, 13, 17, 23, 27, 30]
        key, value, h = by_offset[3]
        assert (key, value) == (b"bad", b"{not json")  # the original bytes
        assert h["__streams.errors.exception"].startswith(("orjson.", "streaming."))
        key, value, h = by_offset[7]
        # the bytes as consumed, not the value serialised again (KIP-1034's sourceRawValue)
        assert (key, value) == (b"zero", b'{ "d" :  0 }')
        assert "ZeroDivisionError" in h["__streams.errors.exception"]
        assert "division" in h["__streams.errors.message"]
        assert "Traceback" in h["__streams.errors.stacktrace"]
        assert by_offset[30][:2] == (b"last", b"\xff\xfe")
        assert app.metrics()["dropped-records-total"] == 7

        # the poison pill at the end does not hold the committed offset back
        def committed():
            c = Consumer({"bootstrap.servers": bootstrap, "group.id": app_id})
            try:
                return c.committed([TopicPartition(src, 0)], timeout=10)[0].offset
            finally:
                c.close()

        deadline = time.monotonic() + 30
        while committed() != 31 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert committed() == 31
    finally:
        assert app.close(60)


def test_log_and_fail_stops_the_client(kafka_cluster, tmp_path):
    bootstrap = kafka_cluster.bootstrap_servers
    src, out = unique("in"), unique("out")
    kafka_cluster.create_topic(src, partitions=1)
    kafka_cluster.create_topic(out, partitions=1)
    produce(bootstrap, src, [(b"a", b"{not json", T0)])
    seen = []

    def handler(exc):
        seen.append(exc)
        return StreamThreadExceptionResponse.SHUTDOWN_CLIENT

    app = KafkaStreams(
        _topology(src, out),
        {
            "application.id": unique("fail"),
            "bootstrap.servers": bootstrap,
            "state.dir": str(tmp_path),
        },
    )
    app.set_uncaught_exception_handler(handler)
    app.start()
    assert app.wait_until(State.ERROR, 60)
    assert len(seen) == 1 and "Deserialization exception handler is set to fail" in str(seen[0])
    assert app.close(10)
    assert app.state is State.ERROR
