"""What the schema-registry serdes share: Confluent's wire format around a payload.

Every record these serdes write is Confluent's framing, the magic byte 0 and the 4-byte
big-endian schema id, then the payload, as ``KafkaAvroSerializer`` and its Protobuf and
JSON Schema siblings write it; the work is done by ``confluent_kafka.schema_registry``'s
serializers. A serde is for keys or for values (``is_key``), which picks the
``<topic>-key`` / ``<topic>-value`` subject of the default strategy.

Subject name strategies, as Kafka's ``key.subject.name.strategy`` /
``value.subject.name.strategy`` name them: ``"topic"`` (``TopicNameStrategy``, the
default), ``"record"`` (``RecordNameStrategy``: the record's full name) and
``"topic_record"`` (``TopicRecordNameStrategy``), or a callable
``(SerializationContext, record_name) -> subject``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka.schema_registry import (
    SchemaRegistryClient,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
    topic_subject_name_strategy,
)
from confluent_kafka.serialization import MessageField, SerializationContext

from streaming.serdes.registry import call_with_retry, schema_registry_client

SubjectNameStrategy = Callable[[SerializationContext | None, str | None], str | None]

_STRATEGIES: dict[str, SubjectNameStrategy] = {
    "topic": topic_subject_name_strategy,
    "record": record_subject_name_strategy,
    "topic_record": topic_record_subject_name_strategy,
}

RegistryLike = SchemaRegistryClient | Mapping[str, Any] | str


def resolve_subject_name_strategy(strategy: str | SubjectNameStrategy) -> SubjectNameStrategy:
    """The strategy function for a name (Kafka's class names work) or a callable."""
    if callable(strategy):
        return strategy
    simple = strategy.rsplit(".", 1)[-1].lower().replace("-", "_").removesuffix("strategy")
    simple = {"topicname": "topic", "recordname": "record", "topicrecordname": "topic_record"}.get(
        simple.replace("_", ""), simple.removesuffix("_")
    )
    try:
        return _STRATEGIES[simple]
    except KeyError:
        raise ValueError(
            f"unknown subject name strategy {strategy!r}; use one of {sorted(_STRATEGIES)} "
            "or a callable"
        ) from None


def dataclass_to_dict(obj: Any, ctx: SerializationContext) -> Any:
    """A dataclass instance as the dict the serializer writes; anything else as it is."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    return obj


def check_record_type(record_type: type | None) -> None:
    """Refuse a ``record_type`` that is not a dataclass (the serdes build it from dicts)."""
    if record_type is not None and not dataclasses.is_dataclass(record_type):
        raise TypeError(f"record_type must be a dataclass, got {record_type!r}")


def constructor_arguments(frame_locals: Mapping[str, Any]) -> dict[str, Any]:
    """A serde's ``__init__`` arguments, from its ``locals()`` taken first thing."""
    return {k: v for k, v in frame_locals.items() if k not in ("self", "__class__")}


def _rebuild(cls: type, arguments: dict[str, Any]) -> Any:
    return cls(**arguments)


class RegistrySerde:
    """A serde whose bytes are Confluent-framed and whose schemas live in a registry.

    Subclasses record their ``__init__`` arguments in ``self._arguments`` (see
    ``constructor_arguments``) and build ``self._serializer`` (``obj, ctx -> bytes``) and
    ``self._deserializer`` (``bytes, ctx -> obj``); this class adds the context, the
    stall-and-retry on an unavailable registry, and the ``SerializationError`` of bad input.
    A serde pickles as its arguments (the registry client as its settings) and is built
    again where it is loaded: the worker processes of ``num.stream.threads`` get a topology
    by pickle, and a registry client (its HTTP connections, locks) does not travel.
    """

    _arguments: dict[str, Any]

    _format = "schema"

    def __init__(
        self,
        registry: RegistryLike,
        *,
        is_key: bool = False,
        auto_register: bool = True,
        use_latest_version: bool = False,
        subject_name_strategy: str | SubjectNameStrategy = "topic",
        normalize: bool = False,
        max_stall_s: float | None = None,
    ) -> None:
        self.registry = schema_registry_client(registry)
        self.is_key = is_key
        self.max_stall_s = max_stall_s
        self._field = MessageField.KEY if is_key else MessageField.VALUE
        self._strategy = resolve_subject_name_strategy(subject_name_strategy)
        self._serializer_conf: dict[str, Any] = {
            "auto.register.schemas": auto_register and not use_latest_version,
            "use.latest.version": use_latest_version,
            "normalize.schemas": normalize,
            "subject.name.strategy": self._strategy,
        }
        self._deserializer_conf: dict[str, Any] = {"subject.name.strategy": self._strategy}
        self._serializer: Callable[[Any, SerializationContext], bytes | None] | None = None
        self._deserializer: Callable[[bytes, SerializationContext], Any] | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        arguments = dict(self._arguments)
        registry = arguments["registry"]
        if isinstance(registry, SchemaRegistryClient):
            arguments["registry"] = dict(registry.config())
        return (_rebuild, (type(self), arguments))

    def _context(self, topic: str | None) -> SerializationContext:
        return SerializationContext(topic or "", self._field)

    def serialize(self, topic: str | None, data: Any) -> bytes | None:
        if data is None:
            return None
        serializer = self._serializer
        if serializer is None:
            raise TypeError(f"{self!r} has no schema to write with")
        ctx = self._context(topic)
        return call_with_retry(
            f"{self._format} serializer for {self._side} of topic {topic}",
            lambda: serializer(data, ctx),
            max_stall_s=self.max_stall_s,
        )

    def deserialize(self, topic: str | None, data: bytes | None) -> Any:
        if data is None:
            return None
        deserializer = self._deserializer
        assert deserializer is not None, "subclasses set the deserializer"
        ctx = self._context(topic)
        return call_with_retry(
            f"{self._format} deserializer for {self._side} of topic {topic}",
            lambda: deserializer(data, ctx),
            max_stall_s=self.max_stall_s,
        )

    @property
    def _side(self) -> str:
        return "the key" if self.is_key else "the value"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(is_key={self.is_key})"
