"""``KTable.transform_values``: Kafka's ``KTableTransformValues``.

Like ``map_values``, but each task (and each value getter) has its own transformer, made by
the supplier, given the processor context (with its state stores; forwarding is disabled:
the returned value is what goes downstream) and closed with the task. Unlike ``map_values``
the transformer also sees deletes (``None`` values).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from streaming.dsl.change import Change
from streaming.dsl.processors.forwarding import TupleForwarder, value_of
from streaming.dsl.processors.table import DerivedTableSupplier, TableSupplier
from streaming.dsl.processors.table_getters import UNKNOWN_TIMESTAMP
from streaming.dsl.processors.value_getters import (
    StoreValueGetterSupplier,
    ValueGetter,
    ValueGetterSupplier,
)
from streaming.errors import StreamsException
from streaming.state import ValueAndTimestamp
from streaming.topology.processor import Processor, Record


class ValueTransformerWithKey(Protocol):
    """Kafka's ``ValueTransformerWithKey``: ``init(context)``, ``transform(key, value)``,
    ``close()``."""

    def init(self, context: Any) -> None: ...

    def transform(self, key: Any, value: Any) -> Any: ...

    def close(self) -> None: ...


class _ForwardingDisabledContext:
    """Kafka's ``ForwardingDisabledProcessorContext``: the transformer's value is forwarded;
    the transformer itself may not forward."""

    def __init__(self, context: Any) -> None:
        self._context = context

    def forward(self, *args: Any, **kwargs: Any) -> None:
        raise StreamsException(
            "ProcessorContext#forward() is not supported from this context, as the framework "
            "must ensure the key is not changed (#forward allows changing the key on messages "
            "which are sent). Try another function, which doesn't allow the key to be changed "
            "(for example - #tranformValues)."
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


def _call(method: Any, *args: Any) -> Any:
    return method(*args) if method is not None else None


class KTableTransformValuesSupplier(DerivedTableSupplier):
    """``KTable.transform_values``: a new transformer per task from ``transformer_supplier``."""

    def __init__(
        self,
        parent: TableSupplier,
        transformer_supplier: Callable[[], ValueTransformerWithKey],
        store_name: str | None,
        store_builder: Any = None,
    ) -> None:
        self.parent = parent
        self.transformer_supplier = transformer_supplier
        self.store_name = store_name
        self.store_builder = store_builder

    def __call__(self) -> Processor:
        return KTableTransformValuesProcessor(self, self.transformer_supplier())

    def view(self) -> ValueGetterSupplier:
        if self.store_name is not None:
            return StoreValueGetterSupplier(self.store_name)
        return TransformValuesGetterSupplier(self.parent.view(), self.transformer_supplier)


class KTableTransformValuesProcessor(Processor):
    def __init__(
        self, supplier: KTableTransformValuesSupplier, transformer: ValueTransformerWithKey
    ) -> None:
        self.s = supplier
        self.transformer = transformer

    def init(self, context: Any) -> None:
        super().init(context)
        _call(getattr(self.transformer, "init", None), _ForwardingDisabledContext(context))
        self.store = (
            context.get_state_store(self.s.store_name) if self.s.store_name is not None else None
        )
        if self.store is not None:
            self.forwarder = TupleForwarder(self.store, context, self.s.send_old_values)

    def process(self, record: Record) -> None:
        change: Change = record.value
        key = record.key
        new = self.transformer.transform(key, change.new_value)
        if self.store is not None:
            old = value_of(self.store.get(key)) if self.s.send_old_values else None
            self.store.put(
                key, ValueAndTimestamp(new, record.timestamp) if new is not None else None
            )
            self.forwarder.maybe_forward(record.with_value(Change(new, old, change.is_latest)))
        else:
            old = (
                self.transformer.transform(key, change.old_value)
                if self.s.send_old_values
                else None
            )
            self.context.forward(record.with_value(Change(new, old, change.is_latest)))

    def close(self) -> None:
        _call(getattr(self.transformer, "close", None))


class TransformValuesGetter(ValueGetter):
    """The parent's row through this getter's own transformer."""

    def __init__(self, parent: ValueGetter, transformer: ValueTransformerWithKey) -> None:
        self.parent = parent
        self.transformer = transformer

    def init(self, context: Any) -> None:
        self.parent.init(context)
        _call(getattr(self.transformer, "init", None), _ForwardingDisabledContext(context))

    def _transform(self, key: Any, row: ValueAndTimestamp | None) -> ValueAndTimestamp | None:
        value = self.transformer.transform(key, row.value if row is not None else None)
        if value is None:
            return None
        return ValueAndTimestamp(value, row.timestamp if row is not None else UNKNOWN_TIMESTAMP)

    def get(self, key: Any) -> ValueAndTimestamp | None:
        return self._transform(key, self.parent.get(key))

    def get_as_of(self, key: Any, as_of_timestamp: int) -> ValueAndTimestamp | None:
        return self._transform(key, self.parent.get_as_of(key, as_of_timestamp))

    def is_versioned(self) -> bool:
        return self.parent.is_versioned()

    def close(self) -> None:
        self.parent.close()
        _call(getattr(self.transformer, "close", None))


class TransformValuesGetterSupplier(ValueGetterSupplier):
    def __init__(
        self,
        parent: ValueGetterSupplier,
        transformer_supplier: Callable[[], ValueTransformerWithKey],
    ) -> None:
        self.parent = parent
        self.transformer_supplier = transformer_supplier

    def get(self) -> ValueGetter:
        return TransformValuesGetter(self.parent.get(), self.transformer_supplier())

    def store_names(self) -> list[str]:
        return self.parent.store_names()
