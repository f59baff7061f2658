"""The raw topics in Avro (``pipelines.schemas``): the ``.avsc`` files agree with the lake's
columns and with what the generator writes, the generator's records round-trip through the
registry (the session's real ``schema_registry``), and the deployment's settings choose the
format and the registry."""

from __future__ import annotations

import io
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import fastavro
import pyarrow.parquet as pq
import pytest
from dagster import EnvVar
from data_fixture import CONFIG, fixture_events

from pipelines import domain
from pipelines.generator import generate_events
from pipelines.generator import main as generator_main
from pipelines.lake.manifest import locked
from pipelines.lake.records import KafkaRecord, arrow_schema, value_decoder
from pipelines.lake.writer import land_partition
from pipelines.schemas import (
    AVRO_TOPICS,
    JSON,
    RawFormat,
    SchemaRegistry,
    avro_schema,
    raw_format_from_env,
    subject,
)
from pipelines.streams.apps import STREAM_APPS
from pipelines.streams.config import StreamAppConfig
from resources import platform_resources
from streaming import TopologyTestDriver, serdes
from streaming.testing import LocalSchemaRegistry

#: Avro type -> the lake's column kind (``domain.SCHEMAS``)
_KINDS = {"string": "str", "double": "float", "long": "int", "boolean": "bool"}


def _kind(avro_type: Any) -> str:
    if isinstance(avro_type, list):  # a nullable union
        (inner,) = [t for t in avro_type if t != "null"]
        return _kind(inner)
    if isinstance(avro_type, dict):
        assert avro_type["type"] == "array" and avro_type["items"] == "string"
        return "list"
    return _KINDS[avro_type]


def test_each_raw_topic_has_a_schema_with_the_lakes_columns_and_types() -> None:
    assert set(AVRO_TOPICS) == set(domain.RAW_TOPICS)
    for topic in AVRO_TOPICS:
        fields = {f["name"]: _kind(f["type"]) for f in avro_schema(topic)["fields"]}
        assert fields == domain.SCHEMAS[topic], topic
        required = {
            f["name"] for f in avro_schema(topic)["fields"] if not isinstance(f["type"], list)
        }
        # a column the lake requires is never optional in the schema
        assert set(domain.REQUIRED[topic]) <= required, topic


def test_every_generated_record_is_valid_under_its_schema() -> None:
    parsed = {t: fastavro.parse_schema(avro_schema(t)) for t in AVRO_TOPICS}
    events = fixture_events()
    records = [e for e in events if e.record is not None]
    malformed = [e for e in events if e.record is None]
    assert len(records) > 1000 and malformed
    for event in records:
        assert fastavro.validate(event.record, parsed[event.topic], raise_errors=True)
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, parsed[event.topic], event.record)
        buffer.seek(0)
        assert fastavro.schemaless_reader(buffer, parsed[event.topic]) == event.record
    # the JSON value carries the same record; a malformed one decodes as nothing
    assert all(domain.parse_record(e.topic, e.value) is not None for e in records)
    assert all(domain.parse_record(e.topic, e.value) is None for e in malformed)


def test_a_format_is_json_or_avro_and_avro_needs_a_registry() -> None:
    assert not JSON.avro and not JSON.is_avro(domain.ORDERS)
    with pytest.raises(ValueError, match="needs a schema registry"):
        RawFormat("avro")
    with pytest.raises(ValueError, match="not one of json, avro"):
        RawFormat("protobuf")
    avro = RawFormat("avro", SchemaRegistry("http://registry:8081"))
    assert avro.is_avro(domain.ORDERS) and not avro.is_avro(domain.REVENUE_5M)


def test_the_registry_settings_in_each_clients_names() -> None:
    registry = SchemaRegistry("https://r:8081", "app", "s3cret", ssl_ca_location="/ca.pem")
    assert registry.client_config() == {
        "schema.registry.url": "https://r:8081",
        "basic.auth.user.info": "app:s3cret",
        "basic.auth.credentials.source": "USER_INFO",
        "schema.registry.ssl.ca.location": "/ca.pem",
    }
    assert registry.sql_options() == {
        "format": "avro-confluent",
        "avro-confluent.url": "https://r:8081",
        "avro-confluent.basic-auth.user-info": "app:s3cret",
        "avro-confluent.basic-auth.credentials-source": "USER_INFO",
        "avro-confluent.ssl.truststore.location": "/ca.pem",
    }
    assert "s3cret" not in repr(registry)


def test_generated_records_round_trip_through_the_registry(schema_registry) -> None:
    """Registered under ``<kafka topic>-value``, framed with the schema id, read back as
    the record written; registering again keeps the ids."""
    raw = RawFormat("avro", SchemaRegistry(schema_registry.url))
    topics = {t: f"avro-{uuid.uuid4().hex[:8]}-{t}" for t in domain.RAW_TOPICS}
    ids = raw.register(topics)
    assert set(ids) == {subject(k) for k in topics.values()}
    assert raw.register(topics) == ids
    seen: set[str] = set()
    for event in fixture_events():
        if event.record is None or event.topic in seen:
            continue
        seen.add(event.topic)
        kafka_topic = topics[event.topic]
        data = raw.writer_serde(event.topic).serialize(kafka_topic, event.record)
        assert data[0] == 0 and int.from_bytes(data[1:5], "big") == ids[subject(kafka_topic)]
        assert raw.reader_serde(event.topic).deserialize(kafka_topic, data) == event.record
        # the JSON format's serde reads the JSON value
        assert JSON.reader_serde(event.topic).deserialize(kafka_topic, event.value) == event.record
    assert seen == set(domain.RAW_TOPICS)


def test_the_deployment_chooses_the_format_and_the_registry() -> None:
    kafka = platform_resources({})["kafka"]
    assert kafka.raw_format == JSON  # the embedded default
    env = {"PLATFORM_VALUE_FORMAT": "avro", "SCHEMA_REGISTRY_URL": "http://127.0.0.1:8081"}
    kafka = platform_resources(env)["kafka"]
    assert kafka.raw_format == RawFormat("avro", SchemaRegistry("http://127.0.0.1:8081"))
    with pytest.raises(ValueError, match="needs a schema registry"):
        platform_resources({"PLATFORM_VALUE_FORMAT": "avro"})
    # the password is a secret: from the environment at run time, never from the file
    secured = platform_resources({**env, "SCHEMA_REGISTRY_USERNAME": "app"})["kafka"]
    assert secured.schema_registry_password == EnvVar("SCHEMA_REGISTRY_PASSWORD")


def test_the_generator_command_line_takes_the_registry_from_the_environment(
    capsys, monkeypatch
) -> None:
    monkeypatch.delenv("SCHEMA_REGISTRY_URL", raising=False)
    with pytest.raises(SystemExit):
        generator_main(["--format", "avro", "--duration", "1", "--fast"])
    assert "needs a schema registry: set SCHEMA_REGISTRY_URL" in capsys.readouterr().err
    env = {"SCHEMA_REGISTRY_URL": "https://r", "SCHEMA_REGISTRY_USERNAME": "u"}
    env["SCHEMA_REGISTRY_PASSWORD"] = "p"
    assert raw_format_from_env(env, "avro") == RawFormat(
        "avro", SchemaRegistry("https://r", "u", "p")
    )
    assert raw_format_from_env(env) == JSON
    assert raw_format_from_env({**env, "PLATFORM_VALUE_FORMAT": "avro"}).avro


def _app_outputs(
    app: Any, cfg: StreamAppConfig, events: list[Any], writers: dict[str, Any]
) -> dict[str, list[tuple[Any, Any, int]]]:
    """What ``app`` writes to each output topic when ``events`` arrive on its inputs, the
    raw values written by ``writers`` (platform topic -> serde)."""
    inputs = {getattr(cfg, f"{t}_topic"): t for t in domain.RAW_TOPICS if t != domain.PAYMENTS}
    driver = TopologyTestDriver(app.factory(cfg), {"application.id": f"avro-{app.name}"})
    try:
        topics = {
            kafka_topic: driver.create_input_topic(
                kafka_topic, key_serde=serdes.String(), value_serde=writers[topic]
            )
            for kafka_topic, topic in inputs.items()
            if kafka_topic in app.input_topics(cfg)
        }
        for event in events:
            kafka_topic = getattr(cfg, f"{event.topic}_topic", None)
            if kafka_topic in topics and event.record is not None:
                topics[kafka_topic].pipe_input(event.key, event.record, timestamp=event.timestamp)
        return {
            out: [
                (r.key, r.value, r.timestamp)
                for r in driver.create_output_topic(
                    out, key_serde=serdes.String(), value_serde=serdes.Json()
                ).read_records_to_list()
            ]
            for out in app.output_topics(cfg)
        }
    finally:
        driver.close()


def test_every_stream_application_reads_avro_as_it_reads_json(schema_registry) -> None:
    """The same events, once as JSON and once in Avro through the registry: every
    application (DSL and SQL) writes the same results."""
    events = generate_events(CONFIG.with_(duration_s=2400, orders_per_second=0.2, customers=40))
    tag = uuid.uuid4().hex[:8]
    renamed = {f"{t}_topic": f"{t}-{tag}" for t in domain.RAW_TOPICS if t != domain.PAYMENTS}
    avro = RawFormat("avro", SchemaRegistry(schema_registry.url))
    as_json = StreamAppConfig.of(renamed)
    as_avro = replace(as_json, raw_format=avro)
    json_writers = {t: serdes.Json() for t in domain.RAW_TOPICS}
    avro_writers = {t: avro.writer_serde(t) for t in domain.RAW_TOPICS}
    for app in STREAM_APPS.values():
        expected = _app_outputs(app, as_json, events, json_writers)
        assert any(expected.values()), app.name
        assert _app_outputs(app, as_avro, events, avro_writers) == expected, app.name
    # the generator's Avro values are in the registry under the renamed topics' subjects
    subjects = set(avro.registry.client().get_subjects())
    assert {subject(t) for t in renamed.values()} <= subjects


def _land(lake: Path, topic: str, records: list[KafkaRecord], raw: RawFormat, source: str) -> Any:
    with locked(lake, topic) as manifest:
        decode = value_decoder(topic, raw, source)
        land_partition(lake, manifest, 0, records, len(records), raw, decode)
    # the hive partition column aside: the columns the files were written with
    return pq.read_table(lake / topic).drop_columns(["event_hour"]).sort_by("_offset")


def test_the_lake_lands_avro_as_it_lands_json(schema_registry, tmp_path: Path) -> None:
    """The same records once as JSON and once in Avro: the same Parquet rows with the same
    column types (the Avro topic's types from its schema), malformed values kept as raw
    text either way; a registry that cannot be reached fails the landing."""
    events = generate_events(CONFIG.with_(duration_s=600, customers=40))
    avro = RawFormat("avro", SchemaRegistry(schema_registry.url))
    tag = uuid.uuid4().hex[:8]
    for topic in domain.RAW_TOPICS:
        source = f"{topic}-lake-{tag}"
        mine = [e for e in events if e.topic == topic]
        writer = avro.writer_serde(topic)

        def record(offset: int, event: Any, value: bytes) -> KafkaRecord:
            key = None if event.key is None else event.key.encode()
            return KafkaRecord(0, offset, event.timestamp, key, value)

        as_json = [record(i, e, e.value) for i, e in enumerate(mine)]
        as_avro = [
            record(i, e, e.value if e.record is None else writer.serialize(source, e.record))
            for i, e in enumerate(mine)
        ]
        landed_json = _land(tmp_path / "json", topic, as_json, JSON, source)
        landed_avro = _land(tmp_path / "avro", topic, as_avro, avro, source)
        assert landed_avro.schema == arrow_schema(topic, avro)
        assert landed_avro.schema.equals(landed_json.schema), topic
        assert landed_avro.to_pylist() == landed_json.to_pylist(), topic
        valid = landed_avro.column("_valid").to_pylist()
        assert sum(valid) == sum(e.record is not None for e in mine) > 0
        if topic == domain.ORDERS:
            assert not all(valid)  # the malformed orders land as invalid rows
    order = next(e.record for e in events if e.topic == domain.ORDERS and e.record)
    data = avro.writer_serde(domain.ORDERS).serialize(f"o-{tag}", order)
    with LocalSchemaRegistry() as gone:
        unreachable = RawFormat("avro", SchemaRegistry(gone.url))
    decode = value_decoder(domain.ORDERS, unreachable, f"o-{tag}", max_stall_s=0.5)
    with pytest.raises(RuntimeError, match="schema registry was unavailable"):
        decode(data)


def test_the_catalog_shows_each_raw_topics_schema(schema_registry) -> None:
    """Declared on the raw topic assets: the ``.avsc`` fields; recorded when the topics are
    Avro: the subject, version, id and fields the registry holds (a new version too)."""
    import json

    from assets.keys import kafka_key
    from assets.streams import generator
    from assets.topic_schemas import registered_schema_metadata
    from sensors.topic_materializations import grown_topics

    specs = {spec.key: spec for spec in generator.specs}
    for topic in domain.RAW_TOPICS:
        columns = specs[kafka_key(topic)].metadata["dagster/column_schema"].columns
        assert [c.name for c in columns] == [f["name"] for f in avro_schema(topic)["fields"]]
    orders = {
        c.name: c for c in specs[kafka_key(domain.ORDERS)].metadata["dagster/column_schema"].columns
    }
    assert orders["amount"].type == "double" and not orders["amount"].constraints.nullable
    assert orders["location"].type == "string" and orders["location"].constraints.nullable

    avro = RawFormat("avro", SchemaRegistry(schema_registry.url))
    topic = f"orders-meta-{uuid.uuid4().hex[:8]}"
    assert registered_schema_metadata(JSON, topic) == {}
    avro.register({domain.ORDERS: topic})
    meta = registered_schema_metadata(avro, topic)
    assert meta["schema_subject"] == subject(topic) and meta["schema_version"] == 1
    assert meta["schema_id"] == avro.register({domain.ORDERS: topic})[subject(topic)]
    assert [c.name for c in meta["dagster/column_schema"].columns] == list(
        domain.SCHEMAS[domain.ORDERS]
    )
    # a compatible new version (a field with a default) is what the catalog shows next
    evolved = avro_schema(domain.ORDERS)
    evolved["fields"].append({"name": "channel", "type": "string", "default": "web"})
    from confluent_kafka.schema_registry import Schema

    avro.registry.client().register_schema(subject(topic), Schema(json.dumps(evolved), "AVRO"))
    # the registry lists a new version once it has read its own write back: on a busy
    # machine a moment after the registration returned
    deadline = time.monotonic() + 30
    meta = registered_schema_metadata(avro, topic)
    while meta["schema_version"] == 1 and time.monotonic() < deadline:
        time.sleep(0.2)
        meta = registered_schema_metadata(avro, topic)
    assert meta["schema_version"] == 2
    assert meta["dagster/column_schema"].columns[-1].name == "channel"
    # the sensor's runless materializations carry it too
    (event,) = grown_topics({topic: {0: 5}}, {}, lambda t: registered_schema_metadata(avro, t))
    assert event.metadata["schema_version"].value == 2
    assert event.metadata["schema_subject"].value == subject(topic)


def test_a_registry_behind_basic_auth_and_tls_through_the_kafka_resource() -> None:
    """The resource's registry settings reach every client: the generator's writer, the
    stream applications' and the lake's readers; wrong credentials are refused, not taken
    for bad records."""
    from resources.kafka import KafkaResource
    from streaming.errors import StreamsException

    order = next(e.record for e in fixture_events() if e.topic == domain.ORDERS and e.record)
    with LocalSchemaRegistry(users={"app": "s3cret"}, tls=True) as secured:
        resource = KafkaResource(
            value_format="avro",
            schema_registry_url=secured.url,
            schema_registry_username="app",
            schema_registry_password="s3cret",
            schema_registry_ssl_ca_location=str(secured.ca_path),
        )
        raw = resource.raw_format
        assert raw.registry is not None and raw.registry.url.startswith("https://")
        topic = f"orders-secured-{uuid.uuid4().hex[:8]}"
        assert subject(topic) in raw.register({domain.ORDERS: topic})
        data = raw.writer_serde(domain.ORDERS).serialize(topic, order)
        assert raw.reader_serde(domain.ORDERS).deserialize(topic, data) == order
        assert value_decoder(domain.ORDERS, raw, topic)(data) == domain.typed_record(
            domain.ORDERS, order
        )
        wrong = resource.model_copy(update={"schema_registry_password": "wrong"}).raw_format
        with pytest.raises(StreamsException, match="refused the credentials"):
            wrong.reader_serde(domain.ORDERS).deserialize(topic, data)
