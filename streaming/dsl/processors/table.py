"""KTable processors: source, filter, map_values, to_stream, and the stream-to-table step."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from streaming.dsl.change import Change
from streaming.dsl.processors.forwarding import TupleForwarder, value_of
from streaming.dsl.processors.table_getters import (
    ComputedValueGetterSupplier,
    filter_compute,
    map_values_compute,
)
from streaming.dsl.processors.value_getters import (
    StoreValueGetterSupplier,
    ValueGetter,
    ValueGetterSupplier,
)
from streaming.state import ValueAndTimestamp
from streaming.state.versioned import is_versioned
from streaming.state.versioned_wrapper import (
    PUT_RETURN_CODE_IS_LATEST,
    PUT_RETURN_CODE_NOT_PUT,
    KeyValueStoreWrapper,
)
from streaming.topology.processor import Processor, Record

log = logging.getLogger(__name__)


class TableSupplier:
    """A KTable processor supplier that knows whether to send old values downstream."""

    store_name: str | None = None
    send_old_values: bool = False
    parent: TableSupplier | None = None

    def enable_sending_old_values(self, force_materialization: bool) -> bool:
        """Ask for (new, old) pairs; False when this table cannot provide them."""
        self.send_old_values = True
        return True

    def stores(self) -> list[Any]:
        return []

    def view(self) -> ValueGetterSupplier:
        """How other processors read this table's rows (materialising it if it must)."""
        raise NotImplementedError(f"{type(self).__name__} has no value getter yet")

    #: Kafka's GraphNode.isOutputVersioned: True/False when this node decides, None to inherit
    output_versioned: bool | None = None


class WindowedAggregateSupplier(TableSupplier):
    """A time, sliding or session windowed aggregation: the one table whose processor can
    send the records it leaves out as late to a side output (``KTable.late_records``)."""

    #: the node the late records go to, or None
    late_output: str | None = None
    #: the aggregation's own quiet time before its windows close on the wall clock
    #: (``close_when_quiet``; -1: off), or None: the application's ``window.close.quiet.ms``
    close_quiet_ms: int | None = None


def is_output_versioned(supplier: TableSupplier | None) -> bool:
    """Whether a table's rows are versioned, deciding or inheriting up the parent chain
    (Kafka's InternalStreamsBuilder.isVersionedOrVersionedUpstream)."""
    while supplier is not None:
        if supplier.output_versioned is not None:
            return supplier.output_versioned
        supplier = supplier.parent
    return False


class KTableSourceSupplier(TableSupplier):
    """``builder.table(...)`` / ``to_table()``: upserts into the store, forwards changes."""

    def __init__(self, store_name: str, store_builder: Any, topology: Any, node_name: str) -> None:
        self.store_builder = store_builder
        self._store_name = store_name
        self._topology = topology
        self._node_name = node_name
        self.store_name: str | None = None
        # a source table's output is versioned iff its store is (KIP-914)
        self.output_versioned = is_versioned(store_builder)

    def materialize(self) -> None:
        """Kafka materialises a source table lazily, when it is named or a downstream needs it."""
        if self.store_name is None:
            self.store_name = self._store_name
            self._topology.add_state_store(self.store_builder, self._node_name)

    def enable_sending_old_values(self, force_materialization: bool) -> bool:
        if force_materialization:
            self.materialize()
        if self.store_name is None:
            return False
        self.send_old_values = True
        return True

    def __call__(self) -> Processor:
        return KTableSourceProcessor(self)

    def view(self) -> ValueGetterSupplier:
        # Kafka's KTableImpl.valueGetterSupplier: a source table gets materialised
        self.materialize()
        return KTableSourceValueGetterSupplier(self._store_name)


class KTableSourceValueGetterSupplier(ValueGetterSupplier):
    """Reads a source table's store, timestamped or versioned (Kafka's
    KTableSourceValueGetterSupplier)."""

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def get(self) -> ValueGetter:
        return KTableSourceValueGetter(self.store_name)

    def store_names(self) -> list[str]:
        return [self.store_name]


class KTableSourceValueGetter(ValueGetter):
    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def init(self, context: Any) -> None:
        wrapper = KeyValueStoreWrapper(context.get_state_store(self.store_name))
        self.get = wrapper.get  # type: ignore[method-assign]
        self.get_as_of = wrapper.get_as_of  # type: ignore[method-assign]
        self.versioned = wrapper.versioned

    def is_versioned(self) -> bool:
        return self.versioned


class KTableSourceProcessor(Processor):
    def __init__(self, supplier: KTableSourceSupplier) -> None:
        self.supplier = supplier

    def init(self, context: Any) -> None:
        super().init(context)
        name = self.supplier.store_name
        self.store = context.get_state_store(name) if name is not None else None
        if self.store is not None:
            self.forwarder = TupleForwarder(self.store, context, self.supplier.send_old_values)
            if is_versioned(self.store):
                self.process = self._process_versioned  # type: ignore[method-assign]
                self.wrapper = KeyValueStoreWrapper(self.store)

    def _process_versioned(self, record: Record) -> None:
        """KIP-914: an out-of-order update is stored and forwarded as not the latest; one
        older than the history retention is dropped (not put, not forwarded)."""
        key = record.key
        if key is None:
            log.warning("Skipping record due to null key. topic=%s", self.context.record_metadata())
            return
        store = self.wrapper
        old = store.get(key)
        code = store.put(key, record.value, record.timestamp)
        if code != PUT_RETURN_CODE_NOT_PUT:
            old_value = old.value if old is not None and self.supplier.send_old_values else None
            self.forwarder.maybe_forward(
                record.with_value(
                    Change(record.value, old_value, code == PUT_RETURN_CODE_IS_LATEST)
                )
            )

    def process(self, record: Record) -> None:
        key = record.key
        if key is None:
            log.warning("Skipping record due to null key. topic=%s", self.context.record_metadata())
            return
        store = self.store
        if store is None:
            self.context.forward(record.with_value(Change(record.value, None)))
            return
        old = store.get(key)
        if old is not None and record.timestamp < old.timestamp:
            log.warning(
                "Detected out-of-order KTable update for %s, old timestamp=%s new timestamp=%s",
                store.name,
                old.timestamp,
                record.timestamp,
            )
        # Kafka 4.x puts every update (the KIP-557 idempotent-update drop is gone)
        store.put(
            key,
            ValueAndTimestamp(record.value, record.timestamp) if record.value is not None else None,
        )
        old_value = old.value if old is not None else None
        self.forwarder.maybe_forward(
            record.with_value(
                Change(record.value, old_value if self.supplier.send_old_values else None)
            )
        )


class DerivedTableSupplier(TableSupplier):
    """A table computed row by row from its parent (filter, map_values, transform_values):
    materialised in ``store_builder`` when it has a store name, else old values come from
    recomputing the parent's."""

    parent: TableSupplier
    store_builder: Any = None

    def enable_sending_old_values(self, force_materialization: bool) -> bool:
        if self.store_name is not None or self.parent.enable_sending_old_values(
            force_materialization
        ):
            self.send_old_values = True
        return self.send_old_values

    def stores(self) -> list[Any]:
        return [self.store_builder] if self.store_builder is not None else []


class KTableFilterSupplier(DerivedTableSupplier):
    """``KTable.filter`` / ``filter_not``."""

    def __init__(
        self,
        parent: TableSupplier,
        predicate: Callable[[Any, Any], bool],
        negate: bool,
        store_name: str | None,
        store_builder: Any = None,
    ) -> None:
        self.parent = parent
        self.predicate = predicate
        self.negate = negate
        self.store_name = store_name
        self.store_builder = store_builder
        # KAFKA-10077: if the parent is materialised anyway, take its old values and so
        # avoid forwarding tombstones for rows that were never in the filtered table
        self.send_old_values = parent.enable_sending_old_values(False)

    def __call__(self) -> Processor:
        return KTableFilterProcessor(self)

    def view(self) -> ValueGetterSupplier:
        if self.store_name is not None:
            return StoreValueGetterSupplier(self.store_name)
        return ComputedValueGetterSupplier(
            self.parent.view(), filter_compute(self.predicate, self.negate)
        )


class KTableFilterProcessor(Processor):
    def __init__(self, supplier: KTableFilterSupplier) -> None:
        self.s = supplier

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = (
            context.get_state_store(self.s.store_name) if self.s.store_name is not None else None
        )
        if self.store is not None:
            self.forwarder = TupleForwarder(self.store, context, self.s.send_old_values)

    def _compute(self, key: Any, value: Any) -> Any:
        if value is not None and bool(self.s.predicate(key, value)) is not self.s.negate:
            return value
        return None

    def process(self, record: Record) -> None:
        change: Change = record.value
        new = self._compute(record.key, change.new_value)
        send_old = self.s.send_old_values
        old = None
        if send_old:
            if self.store is not None:
                old = value_of(self.store.get(record.key))
            else:
                old = self._compute(record.key, change.old_value)
        if send_old and new is None and old is None:
            return  # nothing to forward
        out = record.with_value(Change(new, old, change.is_latest))
        if self.store is not None:
            self.store.put(
                record.key, ValueAndTimestamp(new, record.timestamp) if new is not None else None
            )
            self.forwarder.maybe_forward(out)
        else:
            self.context.forward(out)


class KTableMapValuesSupplier(DerivedTableSupplier):
    """``KTable.map_values``."""

    def __init__(
        self,
        parent: TableSupplier,
        mapper: Callable[..., Any],
        with_key: bool,
        store_name: str | None,
        store_builder: Any = None,
    ) -> None:
        self.parent = parent
        self.mapper = mapper
        self.with_key = with_key
        self.store_name = store_name
        self.store_builder = store_builder

    def __call__(self) -> Processor:
        return KTableMapValuesProcessor(self)

    def view(self) -> ValueGetterSupplier:
        if self.store_name is not None:
            return StoreValueGetterSupplier(self.store_name)
        return ComputedValueGetterSupplier(
            self.parent.view(), map_values_compute(self.mapper, self.with_key)
        )


class KTableMapValuesProcessor(Processor):
    def __init__(self, supplier: KTableMapValuesSupplier) -> None:
        self.s = supplier

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = (
            context.get_state_store(self.s.store_name) if self.s.store_name is not None else None
        )
        if self.store is not None:
            self.forwarder = TupleForwarder(self.store, context, self.s.send_old_values)

    def _compute(self, key: Any, value: Any) -> Any:
        if value is None:
            return None
        return self.s.mapper(key, value) if self.s.with_key else self.s.mapper(value)

    def process(self, record: Record) -> None:
        change: Change = record.value
        new = self._compute(record.key, change.new_value)
        old = None
        if self.s.send_old_values:
            if self.store is not None:
                old = value_of(self.store.get(record.key))
            else:
                old = self._compute(record.key, change.old_value)
        out = record.with_value(Change(new, old, change.is_latest))
        if self.store is not None:
            self.store.put(
                record.key, ValueAndTimestamp(new, record.timestamp) if new is not None else None
            )
            self.forwarder.maybe_forward(out)
        else:
            self.context.forward(out)


class ToStreamProcessor(Processor):
    """``KTable.to_stream()``: emit each change's new value (tombstones included)."""

    def __init__(self, mapper: Callable[[Any, Any], Any] | None = None) -> None:
        self.mapper = mapper

    def process(self, record: Record) -> None:
        value = record.value.new_value
        if self.mapper is not None:
            self.context.forward(record.with_key(self.mapper(record.key, value)).with_value(value))
        else:
            self.context.forward(record.with_value(value))
