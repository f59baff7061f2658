"""The ``KTableReduce`` processor: a port of Kafka Streams 4.1.1's ``KTableReduceTest``
(org.apache.kafka.streams.kstream.internals), its one test.

Kafka drives ``new KTableReduce<>(new MaterializedInternal<>(Materialized.as("myStore")),
union, difference).get()`` directly against an ``InternalMockProcessorContext`` with a
``GenericInMemoryTimestampedKeyValueStore`` registered as ``myStore``; here the engine's
``KTableReduceSupplier("myStore", union, difference)`` runs against Python counterparts of
those two test helpers (a context handing out the registered store and a plain in-memory
timestamped store, which - like Kafka's, a ``WrappedStateStore`` over no cache - accepts
no cache flush listener, so results are forwarded directly). Nothing is skipped.
"""

from __future__ import annotations

from typing import Any

from streaming.dsl.change import Change
from streaming.dsl.processors.table_aggregate import KTableReduceSupplier
from streaming.state import ValueAndTimestamp
from streaming.topology.processor import Record


class GenericInMemoryTimestampedKeyValueStore:
    """Kafka's test store of the same name: objects in a map, no serdes, no cache."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.map: dict[Any, ValueAndTimestamp] = {}

    def get(self, key: Any) -> ValueAndTimestamp | None:
        return self.map.get(key)

    def put(self, key: Any, value: ValueAndTimestamp | None) -> None:
        if value is None:
            self.map.pop(key, None)
        else:
            self.map[key] = value

    def set_flush_listener(self, listener: Any, send_old_values: bool) -> bool:
        # WrappedStateStore.setFlushListener: false unless the wrapped store is a cache
        return False


class InternalMockProcessorContext:
    """Just what a processor under test needs: registered stores, forward, the current node."""

    def __init__(self) -> None:
        self.stores: dict[str, Any] = {}
        self.app_configs: dict[str, Any] = {}
        self.current_node: Any = None
        self.forwarded: list[Record] = []

    def register(self, store: Any, state_restore_callback: Any) -> None:
        self.stores[store.name] = store

    def get_state_store(self, name: str) -> Any:
        return self.stores[name]

    def set_current_node(self, node: Any) -> None:
        self.current_node = node

    def forward(self, record: Record, child_name: str | None = None) -> None:
        self.forwarded.append(record)

    def record_metadata(self) -> None:
        return None


def difference_not_null_args(left: set[str], right: set[str]) -> set[str]:
    assert left is not None
    assert right is not None

    strings = set(left)
    strings -= right
    return strings


def union_not_null_args(left: set[str], right: set[str]) -> set[str]:
    assert left is not None
    assert right is not None

    strings: set[str] = set()
    strings |= left
    strings |= right
    return strings


def singleton(value: str) -> frozenset[str]:
    return frozenset([value])


def test_should_add_and_subtract() -> None:
    context = InternalMockProcessorContext()

    reduce_processor = KTableReduceSupplier(
        "myStore", union_not_null_args, difference_not_null_args
    )()

    my_store = GenericInMemoryTimestampedKeyValueStore("myStore")

    context.register(my_store, None)
    reduce_processor.init(context)
    context.set_current_node("reduce")

    reduce_processor.process(Record("A", Change(singleton("a"), None), 10))
    assert my_store.get("A") == ValueAndTimestamp.make(singleton("a"), 10)
    reduce_processor.process(Record("A", Change(singleton("b"), singleton("a")), 15))
    assert my_store.get("A") == ValueAndTimestamp.make(singleton("b"), 15)
    reduce_processor.process(Record("A", Change(None, singleton("b")), 12))
    assert my_store.get("A") == ValueAndTimestamp.make(frozenset(), 15)
