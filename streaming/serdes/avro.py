"""Avro in Confluent's wire format, with a schema registry (Kafka's ``KafkaAvroSerde``).

Generic records are dicts; ``record_type=`` a dataclass gives specific records (Kafka's
``SpecificAvroSerde``): written from its fields and read back as instances. ``schema`` is
the schema records are written with, registered under the subject on first use
(``auto_register``) or looked up there, or the subject's latest version with
``use_latest_version``. ``reader_schema`` is the schema records are read as: a record
written with another version is resolved to it by Avro's rules (a field the writer lacks
takes its default, a field the reader lacks is dropped); without one a record is read as it
was written. A specific record's reader schema is ``schema`` unless given::

    registry = {"schema.registry.url": "http://127.0.0.1:8081"}
    value_serde = AvroSerde(registry, schema=ORDER_V1)             # dicts
    key_serde = AvroSerde(registry, schema=KEY, is_key=True)
    orders = AvroSerde(registry, schema=ORDER_V2, record_type=Order)  # Order instances
"""

from __future__ import annotations

from typing import Any

from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import SerializationContext

from streaming.serdes.confluent import (
    RegistryLike,
    RegistrySerde,
    SubjectNameStrategy,
    check_record_type,
    constructor_arguments,
    dataclass_to_dict,
)


class AvroSerde(RegistrySerde):
    """Avro records (dicts, or ``record_type`` instances) framed with their schema id."""

    _format = "Avro"

    def __init__(
        self,
        registry: RegistryLike,
        schema: str | None = None,
        *,
        reader_schema: str | None = None,
        record_type: type | None = None,
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
        check_record_type(record_type)
        self.schema = schema
        self.record_type = record_type
        self.reader_schema = (
            reader_schema
            if reader_schema is not None
            else (schema if record_type is not None else None)
        )
        if schema is not None or use_latest_version:
            self._serializer = AvroSerializer(
                self.registry, schema, to_dict=dataclass_to_dict, conf=self._serializer_conf
            )
        from_dict = None
        if record_type is not None:
            cls = record_type

            def from_dict(record: dict[str, Any], ctx: SerializationContext) -> Any:
                return cls(**record)

        self._deserializer = AvroDeserializer(
            self.registry, self.reader_schema, from_dict=from_dict, conf=self._deserializer_conf
        )

    def __repr__(self) -> str:
        kind = self.record_type.__name__ if self.record_type is not None else "generic"
        return f"AvroSerde({kind}, is_key={self.is_key})"
