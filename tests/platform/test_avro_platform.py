"""The platform on Avro topics, end to end against the session's real broker, schema
registry and local Spark: the generator writes an hour and a half of events in Avro
(schemas registered), ``windowed-revenue`` reads them through the Avro serde, the lake
lands them typed by their schemas, Spark recomputes the hour's revenue from Kafka with
``from_avro``, and the stream reconciles with both batches with no unexplained row.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines import domain
from pipelines.lake.paths import HOUR_MS, hour_of
from pipelines.schemas import RawFormat, SchemaRegistry, subject

APP = "windowed-revenue"
MINUTE = domain.MINUTE_MS
# a recent hour, as under make run (whose broker deletes records older than its retention)
HOUR_START = (int(time.time() * 1000) // HOUR_MS - 3) * HOUR_MS
HOUR = hour_of(HOUR_START)


def _spark() -> Any:
    from pipelines.batch.session import get_spark, spark_jars

    if not any("spark-avro" in jar for jar in spark_jars()):
        pytest.fail("Spark's Avro package is missing (make setup fetches .jars/spark)")
    return get_spark(kafka=True)


@pytest.fixture(scope="module")
def avro_platform(
    kafka_cluster, schema_registry, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """Raw topics of its own written in Avro by the generator, the live application's
    results on them, and a lake holding both."""
    from pipelines.generator import GeneratorConfig, produce
    from pipelines.lake.sink import sink_topics
    from pipelines.streams import kappa
    from resources.stream_apps import StreamAppsResource
    from streaming.dsl.processors.window_aggregate import (
        EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION as EMIT_INTERVAL,
    )

    boot = kafka_cluster.bootstrap_servers
    tag = f"avro-{uuid.uuid4().hex[:8]}"
    raw = {t: f"{t}-{tag}" for t in domain.RAW_TOPICS}
    for topic in raw.values():
        # one partition: the live application reads the records in the order they were sent
        kafka_cluster.create_topic(topic, partitions=1)
    avro = RawFormat("avro", SchemaRegistry(schema_registry.url))
    config = GeneratorConfig(
        seed=29,
        start_ms=HOUR_START - 15 * MINUTE,
        duration_s=90 * 60,
        orders_per_second=0.5,
        customers=80,
    )
    began = time.monotonic()
    sent = produce(config, boot, topics=raw, raw_format=avro)
    settings = {
        "orders_topic": raw[domain.ORDERS],
        "customers_topic": raw[domain.CUSTOMERS],
        "clicks_topic": raw[domain.CLICKS],
        "revenue_topic": f"{domain.REVENUE_5M}-{tag}",
        "hopping_revenue_topic": f"{domain.REVENUE_HOPPING}-{tag}",
        "late_suffix": f"-late-{tag}",
        "dead_letter_suffix": f"-dlq-{tag}",
    }
    resource = StreamAppsResource(
        state_root=str(tmp_path_factory.mktemp("state")),
        app_settings=settings,
        commit_interval_ms=200,
        # a backlog: emit closed windows on every record, not once a wall-clock second
        streams_config={EMIT_INTERVAL: 0},
    )
    live = resource.runner(
        APP, boot, instance="live", application_id=f"{APP}-{tag}", raw_format=avro
    )
    kappa.run_until_caught_up(live, boot, timeout_s=240, settle_s=2)
    lake = tmp_path_factory.mktemp("lake")
    landed = sink_topics(boot, {kafka: t for t, kafka in raw.items()}, lake, raw_format=avro)
    outputs = {
        settings["revenue_topic"]: domain.REVENUE_5M,
        live.config.late_topic(APP): domain.REVENUE_LATE,
    }
    landed.update(sink_topics(boot, outputs, lake))
    print(f"generated {sent} Avro events, streamed and landed in {time.monotonic() - began:.1f} s")
    yield {
        "boot": boot,
        "raw": raw,
        "avro": avro,
        "lake": lake,
        "landed": landed,
        "dead_letters": kappa.read_all(boot, live.config.dead_letter_topic(APP)),
        "config": config,
    }


def _values(boot: str, topic: str) -> list[bytes]:
    """Every value of one-partition ``topic``, as bytes."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": boot, "group.id": f"read-{topic}"})
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(values) < end and time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=1.0):
                assert message.error() is None, message.error()
                values.append(message.value())
        return values
    finally:
        consumer.close()


def test_the_generator_registered_the_schemas_and_wrote_avro(avro_platform) -> None:
    raw, avro = avro_platform["raw"], avro_platform["avro"]
    ids = {
        avro.registry.client().get_latest_version(subject(kafka)).schema_id
        for kafka in raw.values()
    }
    assert len(ids) == len(raw)
    # every order is Confluent-framed with its subject's schema id but the malformed ones,
    # sent as the bytes they are
    orders = _values(avro_platform["boot"], raw[domain.ORDERS])
    order_id = avro.registry.client().get_latest_version(subject(raw[domain.ORDERS])).schema_id
    framed = [v for v in orders if len(v) > 5 and v[0] == 0]
    assert {int.from_bytes(v[1:5], "big") for v in framed} == {order_id}
    assert 0 < len(orders) - len(framed) < 0.05 * len(orders)


def test_the_lake_lands_the_avro_topics_typed_by_their_schemas(avro_platform) -> None:
    from pipelines.lake.duck import read_topic
    from pipelines.lake.records import arrow_schema

    lake, landed, raw = avro_platform["lake"], avro_platform["landed"], avro_platform["raw"]
    orders = read_topic(domain.ORDERS, lake, valid_only=False)
    assert landed[raw[domain.ORDERS]].records == len(orders) > 2000
    invalid = orders[~orders["_valid"]]
    assert 0 < len(invalid) < 0.05 * len(orders) and invalid["_raw"].notna().all()
    # every file holds the columns and types of the topic's Avro schema
    for topic in domain.RAW_TOPICS:
        files = sorted((lake / topic).rglob("part-*.parquet"))
        assert files, topic
        for path in files:
            assert pq.read_schema(path).remove_metadata() == arrow_schema(
                topic, avro_platform["avro"]
            ), path
    customers = read_topic(domain.CUSTOMERS, lake)
    assert len(customers) == avro_platform["config"].customers
    assert all(len(locations) >= 1 for locations in customers["known_locations"])
    schema = arrow_schema(domain.ORDERS, avro_platform["avro"])
    assert schema.field("amount").type == pa.float64()
    assert schema.field("event_time").type == pa.int64()
    # the live application dead-lettered the undecodable orders, and only those
    malformed_orders = len(invalid)
    assert len(avro_platform["dead_letters"]) == malformed_orders


def test_spark_recomputes_from_avro_and_the_stream_reconciles(avro_platform) -> None:
    from pipelines.batch.kafka_source import KafkaSource
    from pipelines.batch.recompute import recompute
    from pipelines.reconcile.reconcile import reconcile_revenue

    spark = _spark()
    lake = avro_platform["lake"]
    from_lake = recompute("revenue_5m", HOUR, lake, spark)
    source = KafkaSource(
        avro_platform["boot"], avro_platform["raw"], raw_format=avro_platform["avro"]
    )
    from_kafka = recompute("revenue_5m", HOUR, lake, spark, source=source)
    assert from_kafka.source == "kafka" and len(from_lake.frame) >= 12 * 2  # windows x regions
    columns = list(from_lake.frame.columns)
    pd.testing.assert_frame_equal(
        from_kafka.frame.sort_values(columns, kind="stable").reset_index(drop=True),
        from_lake.frame.sort_values(columns, kind="stable").reset_index(drop=True),
        check_exact=True,
    )
    for batch in ("kafka", "lake"):
        report = reconcile_revenue(HOUR, lake, source=batch)
        assert report.passed and report.stats["unexplained"] == 0, (batch, report.summary())
        assert report.stats["matched"] >= 12 * 2, (batch, report.summary())


def test_spark_reads_each_record_with_the_version_it_was_written_with(
    kafka_cluster, avro_platform
) -> None:
    """Records written with two versions of the schema (the second adds a field) all read
    as the ``.avsc``'s columns; a value framed with an id the subject does not have, and one
    without the header, are invalid and dropped."""
    import json

    from confluent_kafka import Producer

    from pipelines.batch.kafka_source import KafkaSource
    from pipelines.schemas import avro_schema
    from streaming.serdes import AvroSerde

    avro = avro_platform["avro"]
    topic = f"orders-versions-{uuid.uuid4().hex[:8]}"
    kafka_cluster.create_topic(topic, partitions=1)
    evolved = avro_schema(domain.ORDERS)
    evolved["fields"].append({"name": "channel", "type": "string", "default": "web"})
    v1 = avro.writer_serde(domain.ORDERS)
    v2 = AvroSerde(avro.registry.client_config(), json.dumps(evolved))

    def order(n: int, **extra: Any) -> dict[str, Any]:
        return {
            "order_id": f"o-{n}",
            "customer_id": "c-1",
            "amount": 1.5 * n,
            "region": "EU",
            "location": None if n == 2 else "Paris",
            "event_time": 1_000 * n,
            **extra,
        }

    first = v1.serialize(topic, order(1))
    values = [
        first,
        v1.serialize(topic, order(2)),
        v2.serialize(topic, order(3, channel="app")),
        v2.serialize(topic, order(4)),
        b"\x00" + (2**31 - 1).to_bytes(4, "big") + first[5:],  # an id nobody registered
        first[5:],  # no header
    ]
    assert values[2][1:5] != first[1:5]  # two schema ids
    producer = Producer({"bootstrap.servers": avro_platform["boot"]})
    for n, value in enumerate(values, start=1):
        producer.produce(topic, key=f"o-{n}".encode(), value=value, timestamp=1_000 * n)
    assert producer.flush(30) == 0

    source = KafkaSource(avro_platform["boot"], {domain.ORDERS: topic}, raw_format=avro)
    rows = source.read_all(_spark(), domain.ORDERS).toPandas().sort_values("order_id")
    assert list(rows["order_id"]) == ["o-1", "o-2", "o-3", "o-4"]
    assert list(rows.columns[: len(domain.SCHEMAS[domain.ORDERS])]) == list(
        domain.SCHEMAS[domain.ORDERS]
    )
    assert list(rows["amount"]) == [1.5, 3.0, 4.5, 6.0]
    assert rows["location"].isna().tolist() == [False, True, False, False]
