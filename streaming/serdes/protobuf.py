"""Protobuf in Confluent's wire format (Kafka's ``KafkaProtobufSerde``).

Records are instances of a generated message class (``message_type``, from ``protoc
--python_out``); the serializer registers the class's ``.proto`` file under the subject on
first use (``auto_register``), the framing carries the message's index path in that file
after the schema id, as Confluent's serializer writes it. Reading parses the payload as
``message_type``::

    value_serde = ProtobufSerde({"schema.registry.url": url}, Order)
"""

from __future__ import annotations

from typing import Any

from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

from streaming.serdes.confluent import (
    RegistryLike,
    RegistrySerde,
    SubjectNameStrategy,
    constructor_arguments,
)


class ProtobufSerde(RegistrySerde):
    """Messages of one generated Protobuf class, framed with their schema id."""

    _format = "Protobuf"

    def __init__(
        self,
        registry: RegistryLike,
        message_type: type,
        *,
        is_key: bool = False,
        auto_register: bool = True,
        use_latest_version: bool = False,
        subject_name_strategy: str | SubjectNameStrategy = "topic",
        normalize: bool = False,
        max_stall_s: float | None = None,
    ) -> None:
        self._arguments = constructor_arguments(locals())
        super().__init__(
            registry,
            is_key=is_key,
            auto_register=auto_register,
            use_latest_version=use_latest_version,
            subject_name_strategy=subject_name_strategy,
            normalize=normalize,
            max_stall_s=max_stall_s,
        )
        self.message_type = message_type
        message: Any = message_type
        self._serializer = ProtobufSerializer(message, self.registry, conf=self._serializer_conf)
        self._deserializer = ProtobufDeserializer(
            message, conf=self._deserializer_conf, schema_registry_client=self.registry
        )

    def __repr__(self) -> str:
        return f"ProtobufSerde({self.message_type.__name__}, is_key={self.is_key})"
