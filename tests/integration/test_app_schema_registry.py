"""A KafkaStreams application on Avro topics with a real schema registry and broker: it
built against v1 of a schema reads records a producer wrote with v2; records it cannot
decode (an unknown schema id, a wrong magic byte, a payload that does not match its schema)
go to the dead-letter topic with the reason in headers; a registry outage stalls it (nothing
dead-lettered, nothing lost) until the registry answers again; a state store written with v1
values is read after the application moves to v2."""

from __future__ import annotations

import json
import logging
import struct
import time

from confluent_kafka import Consumer, TopicPartition
from test_app_support import T0, produce, read_all, unique
from test_schema_serdes import ORDER_V1, ORDER_V2, order_schema

from streaming import Materialized, StreamsBuilder, serdes
from streaming.app import KafkaStreams, State
from streaming.serdes import AvroSerde


def _topology(source: str, sink: str, registry: dict) -> object:
    builder = StreamsBuilder()
    (
        builder.stream(
            source,
            key_serde=serdes.String(),
            value_serde=AvroSerde(registry, reader_schema=ORDER_V1),
        )
        .map_values(lambda order: {**order, "cents": order["amount"] * 100})
        .to(sink, value_serde=serdes.Json())
    )
    return builder.build()


def _config(kafka_cluster, tmp_path, dlq: str) -> dict:
    return {
        "application.id": unique("avro-app"),
        "bootstrap.servers": kafka_cluster.bootstrap_servers,
        "state.dir": str(tmp_path),
        "commit.interval.ms": 100,
        "deserialization.exception.handler": "log_and_continue",
        "errors.dead.letter.queue.topic.name": dlq,
    }


def _end_offset(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("watermarks")})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        consumer.close()


def test_undecodable_records_are_dead_lettered_and_a_newer_schema_is_read_as_v1(
    kafka_cluster, schema_registry, tmp_path
):
    bootstrap = kafka_cluster.bootstrap_servers
    src, out, dlq = unique("orders"), unique("priced"), unique("dlq")
    for topic in (src, out, dlq):
        kafka_cluster.create_topic(topic)
    registry = schema_registry.client_config()
    v1 = AvroSerde(registry, ORDER_V1).serialize(src, {"id": "o1", "amount": 3, "note": "x"})
    v2 = AvroSerde(registry, ORDER_V2).serialize(src, {"id": "o5", "amount": 7, "currency": "USD"})
    assert v1 is not None and v2 is not None
    records = [
        (b"o1", v1),
        (b"unknown-id", b"\x00" + struct.pack(">i", 987_654) + v1[5:]),
        (b"bad-magic", b"\x07" + v1[1:]),
        (b"bad-payload", v1[:5] + b"\x80\x80\x80"),  # a varint that never ends
        (b"o5", v2),
    ]
    produce(bootstrap, src, [(k, v, T0 + i) for i, (k, v) in enumerate(records)])
    app = KafkaStreams(_topology(src, out, registry), _config(kafka_cluster, tmp_path, dlq))
    app.start()
    try:
        msgs = read_all(
            bootstrap,
            [out, dlq],
            until=lambda m: sum(x[0] == out for x in m) >= 2 and sum(x[0] == dlq for x in m) >= 3,
        )
        assert app.state is State.RUNNING
    finally:
        app.close()
    assert [(m[3], json.loads(m[4])) for m in msgs if m[0] == out] == [
        (b"o1", {"id": "o1", "amount": 3, "note": "x", "cents": 300}),
        (b"o5", {"id": "o5", "amount": 7, "note": "", "cents": 700}),  # v2 read as v1
    ]
    dead = {m[3]: (m[4], {name: raw.decode() for name, raw in m[5]}) for m in msgs if m[0] == dlq}
    assert sorted(dead) == [b"bad-magic", b"bad-payload", b"unknown-id"]
    for key, (value, headers) in dead.items():
        assert value == dict(records)[key]  # the original bytes
        assert headers["__streams.errors.topic"] == src
        assert headers["__streams.errors.exception"].startswith(
            f"streaming.errors.SerializationError: Avro deserializer for the value of topic {src}"
        )
    assert dead[b"unknown-id"][1]["__streams.errors.offset"] == "1"
    assert "does not know" in dead[b"unknown-id"][1]["__streams.errors.message"]
    assert "magic byte" in dead[b"bad-magic"][1]["__streams.errors.message"].lower()


class _Warnings(logging.Handler):
    """The warnings of the serdes' registry retries, as they are logged."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_a_registry_outage_stalls_the_application_and_loses_nothing(
    kafka_cluster, schema_registry, tmp_path
):
    bootstrap = kafka_cluster.bootstrap_servers
    src, out, dlq = unique("orders"), unique("priced"), unique("dlq")
    for topic in (src, out, dlq):
        kafka_cluster.create_topic(topic)
    writer = AvroSerde(schema_registry.client_config(), ORDER_V1)
    orders = [{"id": f"o{i}", "amount": i, "note": ""} for i in range(20)]
    produce(bootstrap, src, [(o["id"].encode(), writer.serialize(src, o), T0) for o in orders])
    # the application's own client (nothing cached) gives up on a request after 1 s
    registry = schema_registry.client_config(timeout=1, **{"max.retries": 0})
    warnings = _Warnings()
    logger = logging.getLogger("streaming.serdes.registry")
    logger.addHandler(warnings)
    app = KafkaStreams(_topology(src, out, registry), _config(kafka_cluster, tmp_path, dlq))
    schema_registry.suspend()
    try:
        app.start()
        deadline = time.monotonic() + 60
        while not any("unavailable" in m for m in warnings.messages):
            assert time.monotonic() < deadline, "the application never reached the registry"
            assert app.state is not State.ERROR
            time.sleep(0.05)
        assert app.state is not State.ERROR
    finally:
        schema_registry.resume()
    try:
        msgs = read_all(bootstrap, [out], until=lambda m: len(m) >= len(orders))
        assert app.state is State.RUNNING
    finally:
        app.close()
        logger.removeHandler(warnings)
    assert [(m[3], json.loads(m[4])["cents"]) for m in msgs] == [
        (o["id"].encode(), o["amount"] * 100) for o in orders
    ]
    assert _end_offset(bootstrap, dlq) == 0


def _totals(source: str, sink: str, registry: dict, schema: str) -> object:
    """Each key's running total, kept in a store whose values are Avro of ``schema``."""
    builder = StreamsBuilder()
    (
        builder.stream(
            source, key_serde=serdes.String(), value_serde=AvroSerde(registry, reader_schema=schema)
        )
        .group_by_key()
        .reduce(
            lambda total, order: {**total, "amount": total["amount"] + order["amount"]},
            Materialized(
                store_name="totals",
                key_serde=serdes.String(),
                value_serde=AvroSerde(registry, schema, reader_schema=schema),
            ),
        )
        .to_stream()
        .to(sink, value_serde=serdes.Json())
    )
    return builder.build()


def test_a_state_store_written_with_v1_is_read_after_the_application_moves_to_v2(
    kafka_cluster, schema_registry, tmp_path
):
    bootstrap = kafka_cluster.bootstrap_servers
    src, out, dlq = unique("orders"), unique("totals"), unique("dlq")
    for topic in (src, out, dlq):
        kafka_cluster.create_topic(topic)
    namespace = src.replace("-", "_")
    v1, v2 = order_schema(1, namespace), order_schema(2, namespace)
    registry = schema_registry.client_config()
    config = {**_config(kafka_cluster, tmp_path, dlq), "cache.max.bytes.buffering": 0}
    writer_v1, writer_v2 = AvroSerde(registry, v1), AvroSerde(registry, v2)
    produce(
        bootstrap,
        src,
        [
            (b"k1", writer_v1.serialize(src, {"id": "k1", "amount": 1, "note": "a"}), T0),
            (b"k1", writer_v1.serialize(src, {"id": "k1", "amount": 2, "note": "b"}), T0 + 1),
        ],
    )
    app = KafkaStreams(_totals(src, out, registry, v1), config)
    app.start()
    try:
        first = read_all(bootstrap, [out], until=lambda m: len(m) >= 2)
    finally:
        app.close()
    assert [json.loads(m[4]) for m in first] == [
        {"id": "k1", "amount": 1, "note": "a"},
        {"id": "k1", "amount": 3, "note": "a"},
    ]
    # the application moves to v2 on the same state directory: its store holds v1 records
    produce(
        bootstrap,
        src,
        [(b"k1", writer_v2.serialize(src, {"id": "k1", "amount": 10, "currency": "USD"}), T0 + 2)],
    )
    app = KafkaStreams(_totals(src, out, registry, v2), config)
    app.start()
    try:
        after = read_all(bootstrap, [out], until=lambda m: len(m) >= 3)
        assert app.state is State.RUNNING
    finally:
        app.close()
    # the stored v1 total read as v2: "note" dropped, "currency" its default
    assert json.loads(after[2][4]) == {"id": "k1", "amount": 13, "currency": "EUR"}
    assert len(after) == 3
    assert _end_offset(bootstrap, dlq) == 0


def test_worker_processes_get_the_avro_serdes_rebuilt_from_their_settings(
    kafka_cluster, schema_registry, tmp_path
):
    bootstrap = kafka_cluster.bootstrap_servers
    src, out, dlq = unique("orders"), unique("priced"), unique("dlq")
    kafka_cluster.create_topic(src, partitions=2)
    kafka_cluster.create_topic(out, partitions=2)
    kafka_cluster.create_topic(dlq)
    registry = schema_registry.client_config()
    writer = AvroSerde(registry, ORDER_V1)
    orders = [{"id": f"o{i}", "amount": i, "note": ""} for i in range(12)]
    produce(bootstrap, src, [(o["id"].encode(), writer.serialize(src, o), T0) for o in orders])
    config = {**_config(kafka_cluster, tmp_path, dlq), "num.stream.threads": 2}
    app = KafkaStreams(_topology(src, out, registry), config)
    app.start()
    try:
        msgs = read_all(bootstrap, [out], until=lambda m: len(m) >= len(orders))
        assert app.state is not State.ERROR  # the second worker's join may still rebalance
    finally:
        app.close()
    assert sorted((m[3], json.loads(m[4])["cents"]) for m in msgs) == sorted(
        (o["id"].encode(), o["amount"] * 100) for o in orders
    )
