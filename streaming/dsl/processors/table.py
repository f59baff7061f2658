"""KTable processors: source, filter, map_values, to_stream, and the stream-to-table step."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from streaming.dsl.change import Change
from streaming.dsl.processors.forwarding import TupleForwarder, value_of
from streaming.state import ValueAndTimestamp
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


class KTableSourceSupplier(TableSupplier):
    """``builder.table(...)`` / ``to_table()``: upserts into the store, forwards changes."""

    def __init__(self, store_name: str, store_builder: Any, topology: Any, node_name: str) -> None:
        self.store_builder = store_builder
        self._store_name = store_name
        self._topology = topology
        self._node_name = node_name
        self.store_name: str | None = None

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


class KTableSourceProcessor(Processor):
    def __init__(self, supplier: KTableSourceSupplier) -> None:
        self.supplier = supplier

    def init(self, context: Any) -> None:
        super().init(context)
        name = self.supplier.store_name
        self.store = context.get_state_store(name) if name is not None else None
        if self.store is not None:
            self.forwarder = TupleForwarder(self.store, context, self.supplier.send_old_values)

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


class KTableFilterSupplier(TableSupplier):
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

    def enable_sending_old_values(self, force_materialization: bool) -> bool:
        if self.store_name is not None or self.parent.enable_sending_old_values(
            force_materialization
        ):
            self.send_old_values = True
        return self.send_old_values

    def stores(self) -> list[Any]:
        return [self.store_builder] if self.store_builder is not None else []

    def __call__(self) -> Processor:
        return KTableFilterProcessor(self)


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


class KTableMapValuesSupplier(TableSupplier):
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

    def enable_sending_old_values(self, force_materialization: bool) -> bool:
        if self.store_name is not None or self.parent.enable_sending_old_values(
            force_materialization
        ):
            self.send_old_values = True
        return self.send_old_values

    def stores(self) -> list[Any]:
        return [self.store_builder] if self.store_builder is not None else []

    def __call__(self) -> Processor:
        return KTableMapValuesProcessor(self)


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


class PassThroughTableSupplier(TableSupplier):
    """A table node that forwards changes unchanged (e.g. after a windowed aggregation)."""

    def __init__(self, parent: TableSupplier) -> None:
        self.parent = parent

    def enable_sending_old_values(self, force_materialization: bool) -> bool:
        ok = self.parent.enable_sending_old_values(force_materialization)
        self.send_old_values = ok
        return ok

    def __call__(self) -> Processor:
        return _ForwardAll()


class _ForwardAll(Processor):
    def process(self, record: Record) -> None:
        self.context.forward(record)


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
