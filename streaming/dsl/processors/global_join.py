"""Stream-GlobalKTable joins: Kafka's ``KStreamGlobalKTableJoin`` (its
``KStreamKTableJoinProcessor`` without a grace buffer) and the global store's value getter.

A global store lives outside the task (Kafka's ``GlobalStateManager``); a task processor
reaches it without being connected to it. Runtimes publish the global stores on each task
context as ``context.global_stores`` (see ``streaming.topology.graph``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from streaming.dsl.processors.value_getters import ValueGetter, ValueGetterSupplier
from streaming.state import ValueAndTimestamp
from streaming.topology.processor import Processor, Record

log = logging.getLogger(__name__)


def global_store(context: Any, name: str) -> Any:
    """The global store ``name`` as seen from a task's processor context."""
    stores = getattr(context, "global_stores", None)
    if stores:
        store = stores.get(name)
        if store is not None:
            return store
    return context.get_state_store(name)


class GlobalStoreValueGetter(ValueGetter):
    """Reads the current row of a global table (Kafka's ``KTableSourceValueGetter``)."""

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name
        self.store: Any = None

    def init(self, context: Any) -> None:
        self.store = global_store(context, self.store_name)

    def get(self, key: Any) -> ValueAndTimestamp | None:
        return self.store.get(key)


class GlobalStoreValueGetterSupplier(ValueGetterSupplier):
    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def get(self) -> ValueGetter:
        return GlobalStoreValueGetter(self.store_name)

    def store_names(self) -> list[str]:
        return [self.store_name]


class KStreamGlobalKTableJoinSupplier:
    """``KStream.join/left_join(global_table, key_selector, joiner)``."""

    def __init__(
        self,
        getter_supplier: ValueGetterSupplier,
        key_selector: Callable[[Any, Any], Any],
        joiner: Callable[[Any, Any, Any], Any],
        left: bool,
    ) -> None:
        self.getter_supplier = getter_supplier
        self.key_selector = key_selector
        self.joiner = joiner
        self.left = left

    def __call__(self) -> Processor:
        return KStreamGlobalKTableJoinProcessor(self)


class KStreamGlobalKTableJoinProcessor(Processor):
    """Looks up ``key_selector(key, value)`` in the global table at processing time.

    Null stream values are dropped; a null lookup key drops the record in an inner join
    and joins it with None in a left join. The output keeps the stream record's key and
    timestamp.
    """

    def __init__(self, supplier: KStreamGlobalKTableJoinSupplier) -> None:
        self.s = supplier
        self.getter = supplier.getter_supplier.get()

    def init(self, context: Any) -> None:
        super().init(context)
        self.getter.init(context)

    def process(self, record: Record) -> None:
        value = record.value
        s = self.s
        # Kafka applies the key selector in maybeDropRecord and again in doJoin; once is
        # enough for a side-effect-free selector.
        mapped_key = s.key_selector(record.key, value)
        if value is None or (mapped_key is None and not s.left):
            log.warning(
                "Skipping record due to null join key or value. %s", self.context.record_metadata()
            )
            return
        other = None
        if mapped_key is not None:
            vat = self.getter.get(mapped_key)
            if vat is not None:
                other = vat.value
        if other is not None or s.left:
            self.context.forward(record.with_value(s.joiner(record.key, value, other)))

    def close(self) -> None:
        self.getter.close()
