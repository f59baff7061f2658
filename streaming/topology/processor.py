"""The Processor API: records, processors, their context and punctuation.

Mirrors ``org.apache.kafka.streams.processor.api``: a ``Processor`` receives ``Record``s
in ``process`` and emits with ``context.forward``; ``context.schedule`` registers
punctuators on stream time or wall-clock time.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, NamedTuple, Protocol

Headers = tuple[tuple[str, bytes | None], ...]
NO_HEADERS: Headers = ()


class Record:
    """One key/value with its timestamp and headers; immutable by convention."""

    __slots__ = ("headers", "key", "timestamp", "value")

    def __init__(self, key: Any, value: Any, timestamp: int, headers: Headers = NO_HEADERS) -> None:
        self.key = key
        self.value = value
        self.timestamp = timestamp
        self.headers = headers

    def with_key(self, key: Any) -> Record:
        return Record(key, self.value, self.timestamp, self.headers)

    def with_value(self, value: Any) -> Record:
        return Record(self.key, value, self.timestamp, self.headers)

    def with_timestamp(self, timestamp: int) -> Record:
        return Record(self.key, self.value, timestamp, self.headers)

    def with_headers(self, headers: Headers) -> Record:
        return Record(self.key, self.value, self.timestamp, headers)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Record) and (
            self.key,
            self.value,
            self.timestamp,
            self.headers,
        ) == (other.key, other.value, other.timestamp, other.headers)

    def __repr__(self) -> str:
        return f"Record(key={self.key!r}, value={self.value!r}, timestamp={self.timestamp})"


class RecordContext(NamedTuple):
    """Where the record being processed came from (Kafka's ``ProcessorRecordContext``).

    Immutable, a named tuple: the runtime builds one per record with ``tuple.__new__``,
    without a Python frame (``new_record_context``)."""

    timestamp: int
    offset: int = -1
    partition: int = -1
    topic: str | None = None
    headers: Headers = NO_HEADERS

    def __repr__(self) -> str:
        return (
            f"RecordContext(ts={self.timestamp}, topic={self.topic}, "
            f"partition={self.partition}, offset={self.offset})"
        )


#: ``new_record_context(RecordContext, (timestamp, offset, partition, topic, headers))``
new_record_context: Any = tuple.__new__


def context_of(queued: Any) -> RecordContext:
    """The ``RecordContext`` of a queued record, a tuple ``(topic, partition, offset,
    timestamp, key, value, headers, ...)`` (the runtime's ``Queued``)."""
    return new_record_context(
        RecordContext, (queued[3], queued[2], queued[1], queued[0], queued[6])
    )


class RecordMetadata(Protocol):
    """Where the current record came from (read-only)."""

    @property
    def topic(self) -> str | None: ...

    @property
    def partition(self) -> int: ...

    @property
    def offset(self) -> int: ...


class PunctuationType(enum.Enum):
    """What drives a punctuator: stream time (record timestamps) or the wall clock."""

    STREAM_TIME = "STREAM_TIME"
    WALL_CLOCK_TIME = "WALL_CLOCK_TIME"


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class ProcessorContext(Protocol):
    """What a processor can do: forward, schedule, reach its stores, read metadata."""

    application_id: str
    task_id: str
    app_configs: dict[str, Any]

    def forward(self, record: Record, child_name: str | None = None) -> None: ...

    def schedule(
        self,
        interval: int | timedelta,
        punctuation_type: PunctuationType,
        punctuator: Callable[[int], None],
    ) -> Cancellable: ...

    def get_state_store(self, name: str) -> Any: ...

    def record_metadata(self) -> RecordMetadata | None: ...

    def current_stream_time_ms(self) -> int: ...

    def current_system_time_ms(self) -> int: ...

    def commit(self) -> None: ...


class Processor:
    """Base class for Processor API processors: override ``process`` (and ``init``/``close``)."""

    context: ProcessorContext

    def init(self, context: ProcessorContext) -> None:
        self.context = context

    def process(self, record: Record) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class FixedKeyProcessor(Processor):
    """A processor that may change values but never keys (used with ``process_values``)."""


ProcessorSupplier = Callable[[], Processor]


def stores_of(supplier: Any) -> Sequence[Any]:
    """Store builders a supplier brings along (Kafka's ``ConnectedStoreProvider.stores()``)."""
    stores = getattr(supplier, "stores", None)
    return list(stores()) if callable(stores) else []
