"""``KafkaResource``: the cluster the platform reads and writes, with its TLS and SASL
settings; every Kafka client of the platform (stream applications, generator, lake sink,
sensors, Spark's Kafka source) connects through ``connection``. The raw topics' value
format (``json`` or ``avro``) and the schema registry of the Avro schemas are part of it:
every client of those topics reads them through ``raw_format``."""

from typing import Any

from dagster import ConfigurableResource
from pydantic import Field

from pipelines.connection import KafkaConnection
from pipelines.schemas import RawFormat, SchemaRegistry
from pipelines.streams import monitor


class KafkaResource(ConfigurableResource):
    """A Kafka cluster: how to connect, admin, offsets, lag and topic tails."""

    bootstrap_servers: str = Field(default="localhost:9092", description="bootstrap servers")
    security_protocol: str = Field(
        default="PLAINTEXT", description="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
    )
    sasl_mechanism: str | None = Field(
        default=None, description="PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"
    )
    sasl_username: str | None = None
    sasl_password: str | None = Field(
        default=None, repr=False, description="use an EnvVar, never a literal"
    )
    ssl_ca_location: str | None = Field(
        default=None, description="PEM file of the CA that signed the brokers' certificates"
    )
    value_format: str = Field(
        default="json",
        description="the raw topics' value format: json, or avro (Confluent's wire format, "
        "the schemas in the schema registry below)",
    )
    schema_registry_url: str | None = Field(
        default=None, description="the schema registry (needed by the avro format)"
    )
    schema_registry_username: str | None = Field(
        default=None, description="basic auth user of the schema registry"
    )
    schema_registry_password: str | None = Field(
        default=None, repr=False, description="use an EnvVar, never a literal"
    )
    schema_registry_ssl_ca_location: str | None = Field(
        default=None, description="PEM file of the CA that signed the registry's certificate"
    )

    @property
    def connection(self) -> KafkaConnection:
        """The settings every client of this cluster uses."""
        return KafkaConnection(
            bootstrap_servers=self.bootstrap_servers,
            security_protocol=self.security_protocol,
            sasl_mechanism=self.sasl_mechanism,
            sasl_username=self.sasl_username,
            sasl_password=self.sasl_password,
            ssl_ca_location=self.ssl_ca_location,
        )

    @property
    def schema_registry(self) -> SchemaRegistry | None:
        """The schema registry, when configured."""
        if not self.schema_registry_url:
            return None
        return SchemaRegistry(
            url=self.schema_registry_url,
            username=self.schema_registry_username,
            password=self.schema_registry_password,
            ssl_ca_location=self.schema_registry_ssl_ca_location,
        )

    @property
    def raw_format(self) -> RawFormat:
        """How the raw topics' values are written (and read)."""
        return RawFormat(self.value_format, self.schema_registry)

    def client_config(self, **extra: Any) -> dict[str, Any]:
        """confluent-kafka settings for this cluster plus ``extra``."""
        return self.connection.client_config(**extra)

    def reachable(self, timeout: float = 3.0) -> str | None:
        """None when a broker answers within ``timeout`` seconds, else why not."""
        probe = monitor.BrokerProbe(self.connection, timeout)
        try:
            return probe.check()
        finally:
            probe.close()

    def end_offsets(self, topic: str) -> dict[int, int]:
        """Partition -> end offset of ``topic``."""
        return monitor.end_offsets(self.connection, topic)

    def consumer_lag(self, group: str, topics: list[str] | None = None) -> dict[str, int]:
        """Lag per ``topic-partition`` of consumer group ``group``."""
        return monitor.consumer_lag(self.connection, group, topics)

    def closed_window_watermark(self, topic: str, timeout: float = 10.0) -> int | None:
        """Window end through which every key's windows on ``topic`` are final; raises
        ``TimeoutError`` when the topic's tail cannot be read in ``timeout`` seconds."""
        return monitor.closed_window_watermark(self.connection, topic, timeout=timeout)

    def has_records_between(self, topic: str, start_ms: int, end_ms: int) -> bool:
        """Whether ``topic`` holds a record timestamped in ``[start_ms, end_ms)``."""
        return monitor.has_records_between(self.connection, topic, start_ms, end_ms)

    def ensure_topics(self, topics: dict[str, int]) -> list[str]:
        """Create missing topics (name -> partitions)."""
        return monitor.ensure_topics(self.connection, topics)
