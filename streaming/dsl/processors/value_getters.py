"""KTable value getters: read a table's current row from any processor (Kafka's
``KTableValueGetterSupplier`` / ``KTableValueGetter``).

Joins and other lookups ask a table for ``supplier.view()``; the getter supplier names the
stores the looking-up processor must be connected to, and each task builds its own getter with
``get()`` and ``init(context)``. A materialised table reads its store; an unmaterialised
filter/map_values applies its function to the parent's getter, as Kafka does.
"""

from __future__ import annotations

from typing import Any

from streaming.state import ValueAndTimestamp


class ValueGetter:
    """Per-task reader of a table's rows."""

    def init(self, context: Any) -> None:
        """Resolve stores from the processor context of the processor that owns the getter."""

    def get(self, key: Any) -> ValueAndTimestamp | None:
        """The current row for ``key`` (value and timestamp), or None."""
        raise NotImplementedError

    def get_as_of(self, key: Any, as_of_timestamp: int) -> ValueAndTimestamp | None:
        """The row as of a time; only versioned tables answer it (see ``is_versioned``)."""
        raise NotImplementedError(f"{type(self).__name__} is not versioned")

    def is_versioned(self) -> bool:
        return False

    def close(self) -> None:
        """Release what ``init`` acquired."""


class ValueGetterSupplier:
    """Creates ``ValueGetter`` instances and names the state stores they read."""

    def get(self) -> ValueGetter:
        raise NotImplementedError

    def store_names(self) -> list[str]:
        raise NotImplementedError


class StoreValueGetter(ValueGetter):
    """Reads a materialised key-value store by name, timestamped or versioned (Kafka's
    ``KTableMaterializedValueGetterSupplier`` over a ``KeyValueStoreWrapper``)."""

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name
        self.store: Any = None
        self.versioned = False

    def init(self, context: Any) -> None:
        from streaming.state.versioned_wrapper import KeyValueStoreWrapper

        self.store = context.get_state_store(self.store_name)
        wrapper = KeyValueStoreWrapper(self.store)
        self.versioned = wrapper.versioned
        # a timestamped store answers ValueAndTimestamp itself: skip the wrapper's extra call
        self.get = wrapper.get if wrapper.versioned else self.store.get  # type: ignore[method-assign]
        self.get_as_of = wrapper.get_as_of  # type: ignore[method-assign]

    def get(self, key: Any) -> ValueAndTimestamp | None:
        return self.store.get(key)

    def is_versioned(self) -> bool:
        return self.versioned


class StoreValueGetterSupplier(ValueGetterSupplier):
    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def get(self) -> ValueGetter:
        return StoreValueGetter(self.store_name)

    def store_names(self) -> list[str]:
        return [self.store_name]
