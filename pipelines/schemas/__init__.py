"""The raw topics' value format: JSON, or Avro with its schemas in a schema registry.

The Avro schemas of the raw topics are the ``.avsc`` files beside this module
(``orders.avsc``, ``customers.avsc``, ``payments.avsc``, ``clicks.avsc``), one per platform
topic; their fields and types are the lake's columns of that topic (``domain.SCHEMAS``).

:class:`RawFormat` says how the raw topics are written, and so how every client of the
platform reads them: ``json`` (the generator's JSON objects) or ``avro`` (Confluent's wire
format, the schema registered under ``<kafka topic>-value`` by the generator, read back
with the ``.avsc`` as the reader schema). :class:`SchemaRegistry` is the registry to use:
its URL, basic auth and TLS settings, as the serdes (``streaming.serdes.registry``), the
SQL format ``avro-confluent`` and Spark's batch want them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from pipelines import domain

SCHEMA_DIR = Path(__file__).resolve().parent
FORMATS = ("json", "avro")
#: the topics that have an Avro schema: the raw topics the generator writes
AVRO_TOPICS = domain.RAW_TOPICS


@cache
def avro_schema_text(topic: str) -> str:
    """The ``.avsc`` text of platform topic ``topic`` (``KeyError`` when it has none)."""
    if topic not in AVRO_TOPICS:
        raise KeyError(f"topic {topic!r} has no Avro schema; the raw topics have: {AVRO_TOPICS}")
    return (SCHEMA_DIR / f"{topic}.avsc").read_text()


def avro_schema(topic: str) -> dict[str, Any]:
    """The parsed Avro schema of platform topic ``topic``."""
    parsed: dict[str, Any] = json.loads(avro_schema_text(topic))
    return parsed


def subject(kafka_topic: str) -> str:
    """The registry subject of ``kafka_topic``'s values (``TopicNameStrategy``)."""
    return f"{kafka_topic}-value"


@dataclass(frozen=True)
class SchemaRegistry:
    """A schema registry: URL, optional basic auth (``username`` / ``password``) and TLS
    (``ssl_ca_location``: the CA of its certificate; client certificate and key)."""

    url: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None

    def client_config(self) -> dict[str, Any]:
        """The serdes' registry settings (Confluent's names, ``schema_registry_client``)."""
        config: dict[str, Any] = {"schema.registry.url": self.url}
        if self.username:
            config["basic.auth.user.info"] = f"{self.username}:{self.password or ''}"
            config["basic.auth.credentials.source"] = "USER_INFO"
        for name in ("ca", "certificate", "key"):
            location = getattr(self, f"ssl_{name}_location")
            if location:
                config[f"schema.registry.ssl.{name}.location"] = location
        return config

    def sql_options(self) -> dict[str, str]:
        """The ``avro-confluent`` format's options of a SQL table (Flink's names)."""
        options = {"format": "avro-confluent", "avro-confluent.url": self.url}
        if self.username:
            options["avro-confluent.basic-auth.user-info"] = (
                f"{self.username}:{self.password or ''}"
            )
            options["avro-confluent.basic-auth.credentials-source"] = "USER_INFO"
        if self.ssl_ca_location:
            options["avro-confluent.ssl.truststore.location"] = self.ssl_ca_location
        return options

    def client(self) -> Any:
        """A ``SchemaRegistryClient`` (shared per settings)."""
        from streaming.serdes.registry import schema_registry_client

        return schema_registry_client(self.client_config())


@dataclass(frozen=True)
class RawFormat:
    """How the raw topics' values are written: ``json``, or ``avro`` with ``registry``."""

    value_format: str = "json"
    registry: SchemaRegistry | None = None

    def __post_init__(self) -> None:
        if self.value_format not in FORMATS:
            raise ValueError(
                f"raw topic format {self.value_format!r} is not one of {', '.join(FORMATS)}"
            )
        if self.value_format == "avro" and self.registry is None:
            raise ValueError(
                "the avro format needs a schema registry: set its URL "
                "(kafka.schema_registry_url, SCHEMA_REGISTRY_URL)"
            )

    @property
    def avro(self) -> bool:
        """Whether the raw topics are Avro."""
        return self.value_format == "avro"

    def is_avro(self, topic: str) -> bool:
        """Whether platform topic ``topic`` is written in Avro under this format."""
        return self.avro and topic in AVRO_TOPICS

    def _registry(self) -> SchemaRegistry:
        assert self.registry is not None, "__post_init__ refuses avro without a registry"
        return self.registry

    def writer_serde(self, topic: str) -> Any:
        """The value serde the generator writes platform topic ``topic`` with (Avro: its
        ``.avsc``, registered under the Kafka topic's subject on first use)."""
        from streaming import serdes

        if not self.is_avro(topic):
            return serdes.Json()
        return serdes.AvroSerde(self._registry().client_config(), avro_schema_text(topic))

    def reader_serde(self, topic: str, max_stall_s: float | None = None) -> Any:
        """The value serde platform topic ``topic`` is read with (Avro: any registered
        version, resolved to the ``.avsc`` as the reader schema; ``max_stall_s``: how long
        an unreachable registry is waited for, for ever by default)."""
        from streaming import serdes

        if not self.is_avro(topic):
            return serdes.Json()
        return serdes.AvroSerde(
            self._registry().client_config(),
            reader_schema=avro_schema_text(topic),
            max_stall_s=max_stall_s,
        )

    def register(self, topics: dict[str, str]) -> dict[str, int]:
        """Register the schema of each platform topic under its Kafka topic's subject
        (``topics``: platform topic -> Kafka topic); returns subject -> schema id. A schema
        already registered keeps its id; an incompatible one is refused by the registry."""
        if not self.avro:
            return {}
        from confluent_kafka.schema_registry import Schema

        client = self._registry().client()
        return {
            subject(kafka_topic): client.register_schema(
                subject(kafka_topic), Schema(avro_schema_text(topic), "AVRO")
            )
            for topic, kafka_topic in topics.items()
            if topic in AVRO_TOPICS
        }


JSON = RawFormat()


#: the environment variables of the command lines (``make run`` hands them to its children)
FORMAT_VAR = "PLATFORM_VALUE_FORMAT"
REGISTRY_VARS = {
    "url": "SCHEMA_REGISTRY_URL",
    "username": "SCHEMA_REGISTRY_USERNAME",
    "password": "SCHEMA_REGISTRY_PASSWORD",
    "ssl_ca_location": "SCHEMA_REGISTRY_SSL_CA_LOCATION",
}


def raw_format_from_env(env: Mapping[str, str], value_format: str | None = None) -> RawFormat:
    """The raw format of a command line (the generator's, the supervisor's):
    ``value_format`` (default ``$PLATFORM_VALUE_FORMAT``, else json) with the registry of
    ``$SCHEMA_REGISTRY_URL`` and its ``_USERNAME``, ``_PASSWORD``, ``_SSL_CA_LOCATION``."""
    value_format = value_format or env.get(FORMAT_VAR) or "json"
    url = env.get(REGISTRY_VARS["url"])
    registry = (
        SchemaRegistry(
            url, **{k: env.get(v) or None for k, v in REGISTRY_VARS.items() if k != "url"}
        )
        if url
        else None
    )
    return RawFormat(value_format, registry if value_format == "avro" else None)
