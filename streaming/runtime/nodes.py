"""Run-time nodes of a task: the source, processor and sink instances of one sub-topology."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streaming.errors import SerializationError, StreamsException
from streaming.serdes import fast as fast_serdes
from streaming.serdes import resolve
from streaming.topology.processor import Processor, Record

if TYPE_CHECKING:
    from streaming.runtime.context import TaskContext


class _StrBytes(dict[str, bytes]):
    """The bytes a pure serializer wrote for the latest string keys (at most
    ``_STR_BYTES_MAX``; cleared when full): a repeated key is written once. A ``str`` is
    immutable and so are the ``bytes`` given back, so a repeat is what the serializer
    would write again."""

    __slots__ = ("serialize",)

    def __init__(self, serialize: Callable[[Any], bytes]) -> None:
        super().__init__()
        self.serialize = serialize

    def add(self, key: str) -> bytes:
        """``serialize(key)``, remembered (raises what it raises, remembering nothing)."""
        data = self.serialize(key)
        if len(self) >= _STR_BYTES_MAX:
            self.clear()
        self[key] = data
        return data


#: how many string keys a direct sink remembers the bytes of
_STR_BYTES_MAX = 4096


class ProcessorNode:
    """A node instance: its processor and its children, in topology order."""

    __slots__ = ("children", "children_by_name", "handle", "name", "processor", "stores")

    def __init__(self, name: str, processor: Processor | None, stores: list[str]) -> None:
        self.name = name
        self.processor = processor
        self.stores = frozenset(stores)
        self.children: list[ProcessorNode] = []
        self.children_by_name: dict[str, ProcessorNode] = {}
        #: what a parent's forward calls: the processor's own ``process`` (bound once its
        #: ``init`` has run, which may pick another) where this node adds nothing to it, one
        #: call less per record and hop; else ``self.process``
        self.handle: Callable[[Record], None] = self.process

    def add_child(self, child: ProcessorNode, *, side_output: bool = False) -> None:
        """``child`` gets this node's forwards; a side output only those naming it."""
        if not side_output:
            self.children.append(child)
        self.children_by_name[child.name] = child

    def init(self, context: TaskContext) -> None:
        if self.processor is not None:
            self.processor.init(context)
            if type(self) is ProcessorNode:
                self.handle = self.processor.process

    def process(self, record: Record) -> None:
        self.processor.process(record)  # type: ignore[union-attr]

    def close(self) -> None:
        if self.processor is not None:
            self.processor.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"


class FixedKeyNode(ProcessorNode):
    """A ``process_values`` node: whatever its processor forwards keeps the input key."""

    __slots__ = ("current_key",)

    def __init__(self, name: str, processor: Processor | None, stores: list[str]) -> None:
        super().__init__(name, processor, stores)
        self.current_key: Any = None

    def process(self, record: Record) -> None:
        self.current_key = record.key
        self.processor.process(record)  # type: ignore[union-attr]


class SourceNode(ProcessorNode):
    """Entry of a sub-topology: forwards the deserialised record to its children."""

    __slots__ = ("_context", "key_serde", "timestamp_extractor", "topics", "value_serde")

    def __init__(
        self, name: str, topics: list[str], key_serde: Any, value_serde: Any, extractor: Any
    ) -> None:
        super().__init__(name, None, [])
        self.topics = topics
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.timestamp_extractor = extractor

    def init(self, context: TaskContext) -> None:
        self.key_serde = resolve(self.key_serde, context.default_key_serde)
        self.value_serde = resolve(self.value_serde, context.default_value_serde)
        self._context = context

    def process(self, record: Record) -> None:
        self._context.forward(record)


class SinkNode(ProcessorNode):
    """Exit of a sub-topology: serialises and hands the record to the record collector."""

    __slots__ = ("_context", "key_serde", "partitioner", "topic", "topic_extractor", "value_serde")

    def __init__(
        self,
        name: str,
        topic: str | None,
        topic_extractor: Any,
        key_serde: Any,
        value_serde: Any,
        partitioner: Any,
    ) -> None:
        super().__init__(name, None, [])
        self.topic = topic
        self.topic_extractor = topic_extractor
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.partitioner = partitioner

    def init(self, context: TaskContext) -> None:
        self.key_serde = resolve(self.key_serde, context.default_key_serde)
        self.value_serde = resolve(self.value_serde, context.default_value_serde)
        self._context = context

    def process(self, record: Record) -> None:
        context = self._context
        timestamp = record.timestamp
        if timestamp < 0:
            raise StreamsException(
                f"Invalid (negative) timestamp of {timestamp} for output record "
                f"<{record.key}:{record.value}>."
            )
        topic = self.topic
        if topic is None:
            topic = self.topic_extractor(record.key, record.value, context.record_context())
            if not topic:
                raise StreamsException(f"topic extractor of {self.name} returned no topic")
        try:
            key = self.key_serde.serialize(topic, record.key)
            value = self.value_serde.serialize(topic, record.value)
        except (SerializationError, TypeError, AttributeError, ValueError) as exc:
            raise StreamsException(
                f"Sink {self.name} could not serialise the record for topic {topic} "
                f"(key serde {self.key_serde!r}, value serde {self.value_serde!r}): {exc}. "
                f"Pass matching serdes to to(...) / the sink."
            ) from exc
        context.send(topic, key, value, timestamp, record.headers, record, self.partitioner)

    def direct(self) -> Callable[[Any, Any, int, Any], None] | None:
        """What a fused chain calls with ``(key, value, timestamp, headers)`` instead of
        ``process`` with a ``Record``, for a sink of a fixed topic whose serdes both have
        one-argument equivalents (``streaming.serdes.fast``); else None. It sends what
        ``process`` sends (the ``Record`` argument of ``send`` is built only for a
        partitioner, its one reader; a string key's bytes are remembered, ``_StrBytes``)
        and hands any record it cannot write as such (a negative timestamp, a value the
        serde refuses) to ``process``, which raises."""
        topic = self.topic
        fast_key = fast_serdes.serializer(self.key_serde)
        fast_value = fast_serdes.serializer(self.value_serde)
        if topic is None or fast_key is None or fast_value is None:
            return None
        send = self._context.send
        partitioner = self.partitioner
        process = self.process
        refused = (SerializationError, TypeError, AttributeError, ValueError)
        key_bytes = _StrBytes(fast_key)

        def sink(key: Any, value: Any, timestamp: int, headers: Any) -> None:
            if timestamp >= 0:
                try:
                    if type(key) is str:
                        kb = key_bytes.get(key)
                        if kb is None:
                            kb = key_bytes.add(key)
                    else:
                        kb = None if key is None else fast_key(key)
                    vb = None if value is None else fast_value(value)
                except refused:
                    pass
                else:
                    send(
                        topic,
                        kb,
                        vb,
                        timestamp,
                        headers,
                        None if partitioner is None else Record(key, value, timestamp, headers),
                        partitioner,
                    )
                    return
            process(Record(key, value, timestamp, headers))

        return sink
