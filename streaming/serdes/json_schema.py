"""JSON Schema in Confluent's wire format (Kafka's ``KafkaJsonSchemaSerde``).

Values are JSON documents (dicts; a dataclass instance is written from its fields) checked
against ``schema`` when written; the schema is registered under the subject on first use
(``auto_register``). They are read and validated against ``reader_schema`` (the writer's
schema from the registry when none is given); a document that fails validation raises
``SerializationError``. ``record_type=`` a dataclass reads instances of it::

    value_serde = JsonSchemaSerde({"schema.registry.url": url}, schema=ORDER_SCHEMA)
"""

from __future__ import annotations

from typing import Any

from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import SerializationContext

from streaming.serdes.confluent import (
    RegistryLike,
    RegistrySerde,
    SubjectNameStrategy,
    check_record_type,
    constructor_arguments,
    dataclass_to_dict,
)


class JsonSchemaSerde(RegistrySerde):
    """JSON documents validated by a JSON Schema and framed with its schema id."""

    _format = "JSON Schema"

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
        if schema is not None or use_latest_version:
            self._serializer = JSONSerializer(
                schema, self.registry, to_dict=dataclass_to_dict, conf=self._serializer_conf
            )
        from_dict = None
        if record_type is not None:
            cls = record_type

            def from_dict(document: dict[str, Any], ctx: SerializationContext) -> Any:
                return cls(**document)

        self._deserializer = JSONDeserializer(
            reader_schema,
            from_dict=from_dict,
            schema_registry_client=self.registry,
            conf=self._deserializer_conf,
        )

    def __repr__(self) -> str:
        return f"JsonSchemaSerde(is_key={self.is_key})"
