"""The registry plumbing of the Confluent-format serdes (no server): Kafka-style settings
mapped to the client's, subject name strategies by name, and which failures are retried
(the registry unavailable) and which become SerializationError (the record is bad)."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka.schema_registry import (
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
    topic_subject_name_strategy,
)
from confluent_kafka.schema_registry.common._httpx_compat import httpx
from confluent_kafka.schema_registry.error import SchemaRegistryError

from streaming.errors import SerializationError, StreamsException
from streaming.serdes.confluent import resolve_subject_name_strategy
from streaming.serdes.registry import call_with_retry, client_config, is_unavailable


def test_client_config_takes_confluents_serde_setting_names():
    assert client_config(
        {
            "schema.registry.url": "https://registry:8081",
            "basic.auth.user.info": "app:secret",
            "basic.auth.credentials.source": "USER_INFO",
            "schema.registry.ssl.ca.location": "/etc/ca.pem",
            "auto.register.schemas": False,
            "bootstrap.servers": "broker:9092",
        }
    ) == {
        "url": "https://registry:8081",
        "basic.auth.user.info": "app:secret",
        "basic.auth.credentials.source": "USER_INFO",
        "ssl.ca.location": "/etc/ca.pem",
    }
    with pytest.raises(ValueError, match=r"schema\.registry\.url"):
        client_config({"bootstrap.servers": "broker:9092"})


def test_a_client_is_built_with_the_credentials_source_java_names():
    """``basic.auth.credentials.source=USER_INFO`` (what Java's serdes and Flink's
    ``avro-confluent`` set) builds a client; a source it does not have is refused by name."""
    from streaming.serdes.registry import schema_registry_client

    config = {
        "schema.registry.url": "https://registry.example:8081",
        "basic.auth.user.info": "app:secret",
        "basic.auth.credentials.source": "USER_INFO",
    }
    client = schema_registry_client(config)
    assert client.config()["basic.auth.user.info"] == "app:secret"
    with pytest.raises(ValueError, match=r"SASL_INHERIT.*is not supported"):
        schema_registry_client({**config, "basic.auth.credentials.source": "SASL_INHERIT"})


@pytest.mark.parametrize(
    ("name", "strategy"),
    [
        ("topic", topic_subject_name_strategy),
        ("record", record_subject_name_strategy),
        ("topic_record", topic_record_subject_name_strategy),
        ("io.confluent.kafka.serializers.subject.TopicNameStrategy", topic_subject_name_strategy),
        ("RecordNameStrategy", record_subject_name_strategy),
        ("TopicRecordNameStrategy", topic_record_subject_name_strategy),
    ],
)
def test_subject_name_strategies_by_name(name, strategy):
    assert resolve_subject_name_strategy(name) is strategy


def test_an_unknown_strategy_is_refused():
    with pytest.raises(ValueError, match="unknown subject name strategy 'header'"):
        resolve_subject_name_strategy("header")


def test_an_unavailable_registry_is_retried_until_it_answers(caplog):
    failures = [httpx.ConnectError("refused"), SchemaRegistryError(503, 50003, "busy")]

    def call() -> str:
        if failures:
            raise failures.pop(0)
        return "decoded"

    with caplog.at_level(logging.WARNING, logger="streaming.serdes.registry"):
        assert call_with_retry("reading", call, backoff_s=0.001) == "decoded"
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == [
        "reading: the schema registry is unavailable"
    ] * 2


def test_a_bad_record_is_a_serialization_error_at_once():
    calls = []

    def unknown_id() -> None:
        calls.append(1)
        raise SchemaRegistryError(404, 40403, "Schema 99 not found")

    with pytest.raises(SerializationError, match="reading: the schema registry does not know it"):
        call_with_retry("reading", unknown_id)
    assert len(calls) == 1
    with pytest.raises(SerializationError, match="refused the schema as incompatible"):
        call_with_retry(
            "writing", lambda: (_ for _ in ()).throw(SchemaRegistryError(409, 409, "v3"))
        )
    with pytest.raises(SerializationError, match="EOFError"):
        call_with_retry("reading", lambda: (_ for _ in ()).throw(EOFError("short")))


def test_max_stall_bounds_the_wait():
    def down() -> None:
        raise httpx.ConnectError("refused")

    assert is_unavailable(httpx.ReadTimeout("slow"))
    with pytest.raises(SerializationError, match="unavailable for"):
        call_with_retry("reading", down, max_stall_s=0.01, backoff_s=0.001)


def test_refused_credentials_are_a_setting_to_fix_not_a_bad_record():
    def refused() -> None:
        raise SchemaRegistryError(401, 40101, "Unauthorized")

    with pytest.raises(StreamsException, match="refused the credentials"):
        call_with_retry("reading", refused)


def test_a_missing_registry_binary_says_how_to_get_one(tmp_path):
    from streaming.testing import LocalSchemaRegistry, SchemaRegistryError

    registry = LocalSchemaRegistry(binary=tmp_path / "rivven-schema")
    with pytest.raises(SchemaRegistryError, match="run `make setup`"):
        registry.start()
    with pytest.raises(SchemaRegistryError, match="not started"):
        _ = registry.url
