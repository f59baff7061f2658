"""Non-windowed stream aggregations: ``count``, ``reduce``, ``aggregate`` of a grouped stream."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from streaming.dsl.change import Change
from streaming.dsl.processors.forwarding import TupleForwarder
from streaming.dsl.processors.table import TableSupplier
from streaming.dsl.processors.value_getters import StoreValueGetterSupplier
from streaming.state import ValueAndTimestamp
from streaming.topology.processor import Processor, Record

log = logging.getLogger(__name__)


class KStreamAggregateSupplier(TableSupplier):
    """``aggregate`` (and ``count``): initializer + aggregator into a timestamped KV store."""

    store_name: str

    def __init__(
        self,
        store_name: str,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
    ) -> None:
        self.store_name = store_name
        self.initializer = initializer
        self.aggregator = aggregator

    def __call__(self) -> Processor:
        return KStreamAggregateProcessor(self)

    def view(self) -> StoreValueGetterSupplier:
        return StoreValueGetterSupplier(self.store_name)


class KStreamAggregateProcessor(Processor):
    def __init__(self, supplier: KStreamAggregateSupplier) -> None:
        self.s = supplier

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store(self.s.store_name)
        self.forwarder = TupleForwarder(self.store, context, self.s.send_old_values)

    def process(self, record: Record) -> None:
        key, value = record.key, record.value
        if key is None or value is None:
            log.debug("Skipping record due to null key or value.")
            return
        old = self.store.get(key)
        if old is None:
            old_agg = self.s.initializer()
            timestamp = record.timestamp
        else:
            old_agg = old.value
            timestamp = max(record.timestamp, old.timestamp)
        new_agg = self.s.aggregator(key, value, old_agg)
        self.store.put(key, ValueAndTimestamp(new_agg, timestamp) if new_agg is not None else None)
        self.forwarder.maybe_forward(
            Record(
                key,
                Change(new_agg, old_agg if self.s.send_old_values else None),
                timestamp,
                record.headers,
            )
        )


class KStreamReduceSupplier(TableSupplier):
    """``reduce``: the first value starts the aggregate, then ``reducer(agg, value)``."""

    store_name: str

    def __init__(self, store_name: str, reducer: Callable[[Any, Any], Any]) -> None:
        self.store_name = store_name
        self.reducer = reducer

    def __call__(self) -> Processor:
        return KStreamReduceProcessor(self)

    def view(self) -> StoreValueGetterSupplier:
        return StoreValueGetterSupplier(self.store_name)


class KStreamReduceProcessor(Processor):
    def __init__(self, supplier: KStreamReduceSupplier) -> None:
        self.s = supplier

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store(self.s.store_name)
        self.forwarder = TupleForwarder(self.store, context, self.s.send_old_values)

    def process(self, record: Record) -> None:
        key, value = record.key, record.value
        if key is None or value is None:
            log.debug("Skipping record due to null key or value.")
            return
        store = self.store
        old = store.get(key)
        timestamp = record.timestamp
        if old is None:
            old_agg = None
            new_agg = value
        else:
            old_agg = old.value
            new_agg = self.s.reducer(old_agg, value)
            if old.timestamp > timestamp:
                timestamp = old.timestamp
        store.put(key, ValueAndTimestamp(new_agg, timestamp) if new_agg is not None else None)
        forwarder = self.forwarder
        if not forwarder.caching:  # TupleForwarder.maybe_forward
            self.context.forward(
                Record(
                    key,
                    Change(new_agg, old_agg if self.s.send_old_values else None),
                    timestamp,
                    record.headers,
                )
            )
