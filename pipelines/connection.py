"""How the platform reaches its Kafka cluster: bootstrap servers plus TLS and SASL settings,
given once and turned into the settings each client needs (librdkafka for the stream
applications, generator, lake sink and monitors; Java's for Spark's Kafka source)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}

#: KafkaConnection field -> the environment variable the ``cluster`` deployment reads it from
ENV_VARS = {
    "bootstrap_servers": "KAFKA_BOOTSTRAP_SERVERS",
    "security_protocol": "KAFKA_SECURITY_PROTOCOL",
    "sasl_mechanism": "KAFKA_SASL_MECHANISM",
    "sasl_username": "KAFKA_SASL_USERNAME",
    "sasl_password": "KAFKA_SASL_PASSWORD",
    "ssl_ca_location": "KAFKA_SSL_CA_LOCATION",
}


@dataclass(frozen=True)
class KafkaConnection:
    """Bootstrap servers and security settings of one Kafka cluster."""

    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None
    ssl_ca_location: str | None = None

    def __post_init__(self) -> None:
        protocol = self.security_protocol.upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(
                f"Kafka security protocol {self.security_protocol!r} is not one of "
                f"{', '.join(SECURITY_PROTOCOLS)}"
            )
        object.__setattr__(self, "security_protocol", protocol)
        if self.uses_sasl:
            if (self.sasl_mechanism or "").upper() not in SASL_MECHANISMS:
                raise ValueError(
                    f"{protocol} needs a SASL mechanism, one of {', '.join(SASL_MECHANISMS)} "
                    f"(got {self.sasl_mechanism!r})"
                )
            if not self.sasl_username or self.sasl_password is None:
                raise ValueError(f"{protocol} needs a SASL username and password")
            object.__setattr__(self, "sasl_mechanism", self.sasl_mechanism.upper())  # type: ignore[union-attr]

    @classmethod
    def of(cls, kafka: KafkaConnection | str) -> KafkaConnection:
        """``kafka`` itself, or a plaintext connection to the bootstrap servers ``kafka``."""
        return kafka if isinstance(kafka, KafkaConnection) else cls(bootstrap_servers=kafka)

    @classmethod
    def from_env(
        cls, env: Mapping[str, str], default_bootstrap: str = "localhost:9092"
    ) -> KafkaConnection:
        """The connection the environment describes (``ENV_VARS``: ``KAFKA_BOOTSTRAP_SERVERS``,
        ``KAFKA_SECURITY_PROTOCOL``, ``KAFKA_SASL_MECHANISM``, ``KAFKA_SASL_USERNAME``,
        ``KAFKA_SASL_PASSWORD``, ``KAFKA_SSL_CA_LOCATION``)."""
        return cls(
            **{
                field: env[var]
                if field != "bootstrap_servers"
                else env.get(var) or default_bootstrap
                for field, var in ENV_VARS.items()
                if env.get(var) or field == "bootstrap_servers"
            }
        )

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    def security_config(self) -> dict[str, Any]:
        """The librdkafka security settings (empty for plaintext)."""
        config: dict[str, Any] = {}
        if self.security_protocol != "PLAINTEXT":
            config["security.protocol"] = self.security_protocol
        if self.uses_sasl:
            config["sasl.mechanism"] = self.sasl_mechanism
            config["sasl.username"] = self.sasl_username
            config["sasl.password"] = self.sasl_password
        if self.uses_tls and self.ssl_ca_location:
            config["ssl.ca.location"] = self.ssl_ca_location
        return config

    def client_config(self, **extra: Any) -> dict[str, Any]:
        """librdkafka settings of a client of this cluster, plus ``extra``."""
        return {"bootstrap.servers": self.bootstrap_servers, **self.security_config(), **extra}

    def verify(self, timeout_s: float = 15.0) -> None:
        """Fail within about ``timeout_s`` when the cluster cannot be reached or refuses
        the login or TLS handshake, with a message that says what to check."""
        from streaming.runtime.bootstrap_probe import check_bootstrap_servers

        check_bootstrap_servers(self.client_config(), timeout_s)

    def spark_options(self) -> dict[str, str]:
        """Spark Kafka source options (Java client settings prefixed ``kafka.``)."""
        options = {"kafka.bootstrap.servers": self.bootstrap_servers}
        if self.security_protocol != "PLAINTEXT":
            options["kafka.security.protocol"] = self.security_protocol
        if self.uses_sasl:
            assert self.sasl_mechanism is not None
            options["kafka.sasl.mechanism"] = self.sasl_mechanism
            options["kafka.sasl.jaas.config"] = (
                f'{_JAAS_MODULES[self.sasl_mechanism]} required username="{_jaas(self.sasl_username)}" '
                f'password="{_jaas(self.sasl_password)}";'
            )
        if self.uses_tls and self.ssl_ca_location:
            options["kafka.ssl.truststore.type"] = "PEM"
            options["kafka.ssl.truststore.location"] = self.ssl_ca_location
        return options

    def __repr__(self) -> str:  # never print the password
        shown = "***" if self.sasl_password else None
        return (
            f"KafkaConnection({self.bootstrap_servers!r}, {self.security_protocol}"
            + (
                f", {self.sasl_mechanism} as {self.sasl_username!r} password={shown}"
                if self.uses_sasl
                else ""
            )
            + ")"
        )


Kafka = KafkaConnection | str
"""A cluster to connect to: a ``KafkaConnection``, or plaintext bootstrap servers."""


def _jaas(value: str | None) -> str:
    """``value`` quoted for a JAAS option."""
    return (value or "").replace("\\", "\\\\").replace('"', '\\"')
