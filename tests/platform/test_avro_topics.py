"""The raw topics in Avro (``pipelines.schemas``): the ``.avsc`` files agree with the lake's
columns and with what the generator writes, the generator's records round-trip through the
registry (the session's real ``schema_registry``), and the deployment's settings choose the
format and the registry."""

from __future__ import annotations

import io
import uuid
from typing import Any

import fastavro
import pytest
from dagster import EnvVar
from data_fixture import fixture_events

from pipelines import domain
from pipelines.generator import main as generator_main
from pipelines.generator import raw_format_from_env
from pipelines.schemas import AVRO_TOPICS, JSON, RawFormat, SchemaRegistry, avro_schema, subject
from resources import platform_resources

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
    assert raw_format_from_env("avro", env) == RawFormat(
        "avro", SchemaRegistry("https://r", "u", "p")
    )
    assert raw_format_from_env("json", env) == JSON
