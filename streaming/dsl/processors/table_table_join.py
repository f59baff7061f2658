"""KTable-KTable joins on the primary key: Kafka's ``KTableKTable{Inner,Left,Right,Outer}Join``
and ``KTableKTableJoinMerger``.

A join is three processors: one per side (``KTABLE-JOINTHIS-``, ``KTABLE-JOINOTHER-``), each
looking the key up in the other table's value getter, and a merge node (``KTABLE-MERGE-``)
that forwards both and may materialise the result. A left join is a left join on the
"this" side and a right join on the "other" side; joiners are ``(key, this, other)`` on the
"this" side and reversed on the "other" side. The output timestamp is the max of both rows.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from streaming.dsl.change import Change
from streaming.dsl.processors.forwarding import TupleForwarder
from streaming.dsl.processors.table import TableSupplier
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

INNER, LEFT, RIGHT, OUTER = "inner", "left", "right", "outer"
# Kafka's RecordQueue.UNKNOWN: the timestamp of a missing row
UNKNOWN = -1

Joiner = Callable[[Any, Any, Any], Any]


def reverse_joiner(joiner: Joiner) -> Joiner:
    """The joiner seen from the other side: ``(key, other, this) -> joiner(key, this, other)``."""
    return lambda key, v2, v1: joiner(key, v1, v2)


class KTableKTableJoinSupplier(TableSupplier):
    """One side of a table-table join: changes of ``table1`` joined with ``table2``'s rows."""

    def __init__(
        self,
        kind: str,
        table1: TableSupplier,
        table2: TableSupplier,
        joiner: Joiner,
        table1_node: str,
    ) -> None:
        if kind not in (INNER, LEFT, RIGHT, OUTER):
            raise ValueError(f"unknown table-table join kind {kind!r}")
        self.kind = kind
        self.table1 = table1
        self.table2 = table2
        # Kafka asks both tables for their value getters here (materialising source tables)
        self.getter_supplier1 = table1.view()
        self.getter_supplier2 = table2.view()
        self.joiner = joiner
        self.table1_node = table1_node
        self.use_versioned_semantics = False
        self.send_old_values = False

    def set_use_versioned_semantics(self, use_versioned_semantics: bool) -> None:
        self.use_versioned_semantics = use_versioned_semantics

    def enable_sending_old_values(self, force_materialization: bool) -> bool:
        # table-table joins require upstream materialization
        self.table1.enable_sending_old_values(True)
        self.table2.enable_sending_old_values(True)
        self.send_old_values = True
        return True

    def __call__(self) -> Processor:
        return _PROCESSORS[self.kind](self)

    def view(self) -> ValueGetterSupplier:
        return JoinValueGetterSupplier(
            self.kind, self.getter_supplier1, self.getter_supplier2, self.joiner
        )


# -- processors ------------------------------------------------------------------------


class _JoinProcessor(Processor):
    """Shared init and null-key handling of the four join processors."""

    def __init__(self, supplier: KTableKTableJoinSupplier) -> None:
        self.s = supplier
        self.getter = supplier.getter_supplier2.get()
        self.joiner = supplier.joiner

    def init(self, context: Any) -> None:
        super().init(context)
        self.getter.init(context)

    def _skip(self, record: Record) -> bool:
        if record.key is None:
            md = self.context.record_metadata()
            if md is not None:
                log.warning(
                    "Skipping record due to null key. topic=[%s] partition=[%s] offset=[%s]",
                    md.topic,
                    md.partition,
                    md.offset,
                )
            else:
                log.warning(
                    "Skipping record due to null key. Topic, partition, and offset not known."
                )
            return True
        if self.s.use_versioned_semantics and not record.value.is_latest:
            log.info(
                "Skipping out-of-order record from versioned table while performing "
                "table-table join."
            )
            return True
        return False

    def close(self) -> None:
        self.getter.close()


class _InnerJoinProcessor(_JoinProcessor):
    def process(self, record: Record) -> None:
        if self._skip(record):
            return
        key = record.key
        right = self.getter.get(key)
        if right is None:
            return
        change: Change = record.value
        value2 = right.value
        new = None if change.new_value is None else self.joiner(key, change.new_value, value2)
        old = None
        if self.s.send_old_values and change.old_value is not None:
            old = self.joiner(key, change.old_value, value2)
        self.context.forward(
            Record(
                key,
                Change(new, old, change.is_latest),
                max(record.timestamp, right.timestamp),
                record.headers,
            )
        )


class _LeftJoinProcessor(_JoinProcessor):
    def process(self, record: Record) -> None:
        if self._skip(record):
            return
        key = record.key
        change: Change = record.value
        right = self.getter.get(key)
        if right is None:
            if change.new_value is None and change.old_value is None:
                return
            value2 = None
            timestamp = max(record.timestamp, UNKNOWN)
        else:
            value2 = right.value
            timestamp = max(record.timestamp, right.timestamp)
        new = None if change.new_value is None else self.joiner(key, change.new_value, value2)
        old = None
        if self.s.send_old_values and change.old_value is not None:
            old = self.joiner(key, change.old_value, value2)
        self.context.forward(
            Record(key, Change(new, old, change.is_latest), timestamp, record.headers)
        )


class _RightJoinProcessor(_JoinProcessor):
    """The "other" side of a left join: the joiner (reversed) also sees a null new/old value."""

    def process(self, record: Record) -> None:
        if self._skip(record):
            return
        key = record.key
        left = self.getter.get(key)
        if left is None:
            return
        change: Change = record.value
        value_left = left.value
        new = self.joiner(key, change.new_value, value_left)
        old = self.joiner(key, change.old_value, value_left) if self.s.send_old_values else None
        self.context.forward(
            Record(
                key,
                Change(new, old, change.is_latest),
                max(record.timestamp, left.timestamp),
                record.headers,
            )
        )


class _OuterJoinProcessor(_JoinProcessor):
    def process(self, record: Record) -> None:
        if self._skip(record):
            return
        key = record.key
        change: Change = record.value
        other = self.getter.get(key)
        if other is None:
            if change.new_value is None and change.old_value is None:
                return
            value2 = None
            timestamp = record.timestamp
        else:
            value2 = other.value
            timestamp = max(record.timestamp, other.timestamp)
        new = None
        if value2 is not None or change.new_value is not None:
            new = self.joiner(key, change.new_value, value2)
        old = None
        if self.s.send_old_values and (value2 is not None or change.old_value is not None):
            old = self.joiner(key, change.old_value, value2)
        self.context.forward(
            Record(key, Change(new, old, change.is_latest), timestamp, record.headers)
        )


_PROCESSORS: dict[str, type[_JoinProcessor]] = {
    INNER: _InnerJoinProcessor,
    LEFT: _LeftJoinProcessor,
    RIGHT: _RightJoinProcessor,
    OUTER: _OuterJoinProcessor,
}


# -- value getters ---------------------------------------------------------------------


class JoinValueGetter(ValueGetter):
    """The joined row of a key, computed from both tables' getters (Kafka's join getters)."""

    def __init__(self, kind: str, getter1: ValueGetter, getter2: ValueGetter, joiner: Joiner):
        self.kind = kind
        self.getter1 = getter1
        self.getter2 = getter2
        self.joiner = joiner

    def init(self, context: Any) -> None:
        self.getter1.init(context)
        self.getter2.init(context)

    def get(self, key: Any) -> ValueAndTimestamp | None:
        kind = self.kind
        if kind == OUTER:
            row1 = self.getter1.get(key)
            row2 = self.getter2.get(key)
            if row1 is None and row2 is None:
                return None
            value1, ts1 = (None, UNKNOWN) if row1 is None else row1
            value2, ts2 = (None, UNKNOWN) if row2 is None else row2
            return ValueAndTimestamp.make(self.joiner(key, value1, value2), max(ts1, ts2))
        if kind == RIGHT:
            # the row exists while the second table (the left side of the user's join) has one
            row2 = self.getter2.get(key)
            if row2 is None:
                return None
            row1 = self.getter1.get(key)
            value1 = None if row1 is None else row1.value
            ts = row2.timestamp if row1 is None else max(row1.timestamp, row2.timestamp)
            return ValueAndTimestamp.make(self.joiner(key, value1, row2.value), ts)
        row1 = self.getter1.get(key)
        if row1 is None:
            return None
        row2 = self.getter2.get(key)
        if row2 is None:
            if kind == INNER:
                return None
            return ValueAndTimestamp.make(self.joiner(key, row1.value, None), row1.timestamp)
        return ValueAndTimestamp.make(
            self.joiner(key, row1.value, row2.value), max(row1.timestamp, row2.timestamp)
        )

    def is_versioned(self) -> bool:
        # the output of a join of two versioned tables is not versioned (KIP-914)
        return False

    def close(self) -> None:
        self.getter1.close()
        self.getter2.close()


class JoinValueGetterSupplier(ValueGetterSupplier):
    def __init__(
        self,
        kind: str,
        supplier1: ValueGetterSupplier,
        supplier2: ValueGetterSupplier,
        joiner: Joiner,
    ) -> None:
        self.kind = kind
        self.supplier1 = supplier1
        self.supplier2 = supplier2
        self.joiner = joiner

    def get(self) -> ValueGetter:
        return JoinValueGetter(self.kind, self.supplier1.get(), self.supplier2.get(), self.joiner)

    def store_names(self) -> list[str]:
        return _union(self.supplier1.store_names(), self.supplier2.store_names())


def _union(names1: list[str], names2: list[str]) -> list[str]:
    return list(dict.fromkeys([*names1, *names2]))


# -- merger ----------------------------------------------------------------------------


class _UnionViewSupplier(ValueGetterSupplier):
    """An unmaterialised merge: the "this" side's join getter over both sides' stores."""

    def __init__(self, parent1: TableSupplier, parent2: TableSupplier) -> None:
        self.parent1 = parent1
        self.parent2 = parent2

    def get(self) -> ValueGetter:
        return self.parent1.view().get()

    def store_names(self) -> list[str]:
        return _union(self.parent1.view().store_names(), self.parent2.view().store_names())


class KTableKTableJoinMergerSupplier(TableSupplier):
    """Kafka's ``KTableKTableJoinMerger``: forwards both join sides, optionally materialised."""

    def __init__(
        self,
        parent1: KTableKTableJoinSupplier,
        parent2: KTableKTableJoinSupplier,
        store_name: str | None,
        store_builder: Any = None,
    ) -> None:
        self.parent1 = parent1
        self.parent2 = parent2
        self.store_name = store_name
        self.store_builder = store_builder
        self.send_old_values = False
        # the join result is versioned only when materialised in a versioned store (KIP-914)
        self.output_versioned = store_builder is not None and is_versioned(store_builder)

    def stores(self) -> list[Any]:
        return [self.store_builder] if self.store_builder is not None else []

    def enable_sending_old_values(self, force_materialization: bool) -> bool:
        # table-table joins require upstream materialization
        self.parent1.enable_sending_old_values(True)
        self.parent2.enable_sending_old_values(True)
        self.send_old_values = True
        return True

    def view(self) -> ValueGetterSupplier:
        if self.store_name is not None:
            return StoreValueGetterSupplier(self.store_name)
        return _UnionViewSupplier(self.parent1, self.parent2)

    def __call__(self) -> Processor:
        return KTableKTableJoinMergeProcessor(self)


class KTableKTableJoinMergeProcessor(Processor):
    def __init__(self, supplier: KTableKTableJoinMergerSupplier) -> None:
        self.s = supplier
        self.store: Any = None

    def init(self, context: Any) -> None:
        super().init(context)
        if self.s.store_name is not None:
            store = context.get_state_store(self.s.store_name)
            self.store = KeyValueStoreWrapper(store)
            self.forwarder = TupleForwarder(store, context, self.s.send_old_values)

    def process(self, record: Record) -> None:
        change: Change = record.value
        store = self.store
        if store is not None:
            code = store.put(record.key, change.new_value, record.timestamp)
            # if not put to the store, do not forward downstream either
            if code != PUT_RETURN_CODE_NOT_PUT:
                self.forwarder.maybe_forward(
                    record.with_value(
                        Change(
                            change.new_value,
                            change.old_value,
                            code == PUT_RETURN_CODE_IS_LATEST,
                        )
                    )
                )
        elif self.s.send_old_values:
            self.context.forward(record)
        else:
            self.context.forward(
                record.with_value(Change(change.new_value, None, change.is_latest))
            )
