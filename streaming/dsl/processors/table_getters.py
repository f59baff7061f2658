"""Value getters of derived tables: computed on the fly, read from a buffer, or a session.

Kafka's ``KTableFilter``/``KTableMapValues`` value getters apply their function to the
parent's getter when they are not materialised; ``KTableSuppressProcessorSupplier`` answers
from the suppression buffer's prior value first; ``KStreamSessionWindowAggregate`` looks
a session up in its store. Each supplier names the stores the reading processor needs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streaming.dsl.processors.value_getters import ValueGetter, ValueGetterSupplier
from streaming.state import ValueAndTimestamp

# Kafka's RecordQueue.UNKNOWN: the timestamp of a suppressed table's prior value
UNKNOWN_TIMESTAMP = -1

Compute = Callable[[Any, "ValueAndTimestamp | None"], "ValueAndTimestamp | None"]


class ComputedValueGetter(ValueGetter):
    """A parent getter with a function applied to each row (unmaterialised filter/map_values)."""

    __slots__ = ("compute", "parent")

    def __init__(self, parent: ValueGetter, compute: Compute) -> None:
        self.parent = parent
        self.compute = compute

    def init(self, context: Any) -> None:
        self.parent.init(context)

    def get(self, key: Any) -> ValueAndTimestamp | None:
        return self.compute(key, self.parent.get(key))

    def get_as_of(self, key: Any, as_of_timestamp: int) -> ValueAndTimestamp | None:
        return self.compute(key, self.parent.get_as_of(key, as_of_timestamp))

    def is_versioned(self) -> bool:
        return self.parent.is_versioned()

    def close(self) -> None:
        self.parent.close()


class ComputedValueGetterSupplier(ValueGetterSupplier):
    """Getters that apply ``compute(key, row)`` to the parent table's rows."""

    def __init__(self, parent: ValueGetterSupplier, compute: Compute) -> None:
        self.parent = parent
        self.compute = compute

    def get(self) -> ValueGetter:
        return ComputedValueGetter(self.parent.get(), self.compute)

    def store_names(self) -> list[str]:
        return self.parent.store_names()


def filter_compute(predicate: Callable[[Any, Any], bool], negate: bool) -> Compute:
    """Kafka's ``KTableFilter.computeValue`` on a ``ValueAndTimestamp``."""

    def compute(key: Any, row: ValueAndTimestamp | None) -> ValueAndTimestamp | None:
        if row is not None and bool(predicate(key, row.value)) is not negate:
            return row
        return None

    return compute


def map_values_compute(mapper: Callable[..., Any], with_key: bool) -> Compute:
    """Kafka's ``KTableMapValues.computeValueAndTimestamp``."""

    def compute(key: Any, row: ValueAndTimestamp | None) -> ValueAndTimestamp | None:
        if row is None:
            return None
        value = mapper(key, row.value) if with_key else mapper(row.value)
        return None if value is None else ValueAndTimestamp(value, row.timestamp)

    return compute


class SuppressedValueGetter(ValueGetter):
    """The suppression buffer's prior value for buffered keys, else the parent's row."""

    def __init__(self, parent: ValueGetter, buffer_name: str) -> None:
        self.parent = parent
        self.buffer_name = buffer_name
        self.buffer: Any = None

    def init(self, context: Any) -> None:
        self.parent.init(context)
        # the suppress processor is responsible for the buffer's lifecycle
        self.buffer = context.get_state_store(self.buffer_name)

    def get(self, key: Any) -> ValueAndTimestamp | None:
        defined, prior = self.buffer.prior_value_for_buffered(key)
        if defined:
            # the prior value's timestamp is unknown unless the suppression is materialised
            return None if prior is None else ValueAndTimestamp(prior, UNKNOWN_TIMESTAMP)
        # not buffered, so the suppressed view is equal to the parent view
        return self.parent.get(key)

    def close(self) -> None:
        self.parent.close()


class SuppressedValueGetterSupplier(ValueGetterSupplier):
    def __init__(self, parent: ValueGetterSupplier, buffer_name: str) -> None:
        self.parent = parent
        self.buffer_name = buffer_name

    def get(self) -> ValueGetter:
        return SuppressedValueGetter(self.parent.get(), self.buffer_name)

    def store_names(self) -> list[str]:
        return [self.buffer_name, *self.parent.store_names()]


class SessionValueGetter(ValueGetter):
    """Kafka's ``KTableSessionWindowValueGetter``: a session's aggregate, stamped at its end."""

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name
        self.store: Any = None

    def init(self, context: Any) -> None:
        self.store = context.get_state_store(self.store_name)

    def get(self, key: Any) -> ValueAndTimestamp | None:
        window = key.window
        value = self.store.fetch_session(key.key, window.start, window.end)
        return None if value is None else ValueAndTimestamp(value, window.end)


class SessionValueGetterSupplier(ValueGetterSupplier):
    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def get(self) -> ValueGetter:
        return SessionValueGetter(self.store_name)

    def store_names(self) -> list[str]:
        return [self.store_name]
