"""Grouped-table aggregations: ``KTable.group_by(...)`` then ``aggregate``/``reduce``/``count``.

Ports of Kafka Streams 4.1's ``KTableRepartitionMap``, ``KTableAggregate`` and
``KTableReduce``. The repartition map turns every table update into at most two
``Change`` records keyed by the new grouping key (one removing the old pair, one adding
the new pair; a single ``Change(new, old)`` when both map to the same key, KIP-904).
The DSL writes these to a repartition topic with ``ChangedSerde`` and the aggregate
reads them back: it first subtracts the old value, then adds the new one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streaming.dsl.change import Change
from streaming.dsl.processors.forwarding import TupleForwarder
from streaming.dsl.processors.table import TableSupplier, is_output_versioned
from streaming.dsl.processors.value_getters import StoreValueGetterSupplier
from streaming.errors import StreamsException
from streaming.state import ValueAndTimestamp
from streaming.topology.processor import Processor, Record

# Kafka's VersionedKeyValueStore.PUT_RETURN_CODE_NOT_PUT (Long.MIN_VALUE) and
# KeyValueStoreWrapper.PUT_RETURN_CODE_IS_LATEST (PUT_RETURN_CODE_VALID_TO_UNDEFINED).
PUT_RETURN_CODE_NOT_PUT = -(2**63)
PUT_RETURN_CODE_IS_LATEST = -1

# ``upgrade.from`` values for which the repartition map keeps splitting a same-key
# update into two records (the ChangedSerializer of those versions cannot encode both).
_OLD_UPGRADE_FROM = frozenset(
    {
        "0.10.0", "0.10.1", "0.10.2", "0.11.0", "1.0", "1.1",
        "2.0", "2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "2.7", "2.8",
        "3.0", "3.1", "3.2", "3.3", "3.4",
    }
)  # fmt: skip


def _is_not_upgrade(configs: Any) -> bool:
    """``KTableMapProcessor.isNotUpgrade``: False while upgrading from a pre-3.5 version."""
    upgrade_from = (configs or {}).get("upgrade.from")
    return upgrade_from is None or str(upgrade_from) not in _OLD_UPGRADE_FROM


def _pair(result: Any) -> tuple[Any, Any] | None:
    """The mapper's ``(key, value)`` (a tuple or a ``KeyValue``-like object), or None."""
    if result is None:
        return None
    if isinstance(result, tuple):
        return result[0], result[1]
    return result.key, result.value


class _StoreWrapper:
    """Kafka's ``KeyValueStoreWrapper``: a timestamped or a versioned key-value store."""

    __slots__ = ("store", "versioned")

    def __init__(self, store: Any) -> None:
        self.store = store
        flag = getattr(store, "is_versioned", False)
        self.versioned = bool(flag() if callable(flag) else flag)

    def get(self, key: Any) -> Any:
        """The latest ``(value, timestamp)`` of ``key`` or None."""
        return self.store.get(key)

    def put(self, key: Any, value: Any, timestamp: int) -> int:
        if self.versioned:
            return self.store.put(key, value, timestamp)
        self.store.put(key, ValueAndTimestamp.make(value, timestamp))
        return PUT_RETURN_CODE_IS_LATEST


# -- KTableRepartitionMap -------------------------------------------------------------


class KTableRepartitionMapSupplier(TableSupplier):
    """``KTable.group_by(selector)``: re-key each table update for the repartition topic.

    Kafka's ``KTableImpl.groupBy`` calls ``enableSendingOldValues(true)`` on the grouped
    table; this constructor does it, so the parent table sends (new, old) pairs.
    """

    def __init__(
        self,
        parent: TableSupplier,
        mapper: Callable[[Any, Any], Any],
    ) -> None:
        self.parent = parent
        self.mapper = mapper
        # KIP-914: a versioned parent table's out-of-order updates are not aggregated (Kafka
        # decides this at build time from the parents; they are all known by now)
        self.use_versioned_semantics = is_output_versioned(parent)
        parent.enable_sending_old_values(True)

    def set_use_versioned_semantics(self, use_versioned_semantics: bool) -> None:
        self.use_versioned_semantics = use_versioned_semantics

    def enable_sending_old_values(self, force_materialization: bool) -> bool:
        # this should never be called
        raise RuntimeError("KTableRepartitionMap should always require sending old values.")

    def __call__(self) -> Processor:
        return KTableRepartitionMapProcessor(self)


class KTableRepartitionMapProcessor(Processor):
    def __init__(self, supplier: KTableRepartitionMapSupplier) -> None:
        self.s = supplier
        self.is_not_upgrade = True

    def init(self, context: Any) -> None:
        super().init(context)
        self.is_not_upgrade = _is_not_upgrade(getattr(context, "app_configs", None))

    def process(self, record: Record) -> None:
        key = record.key
        # the original key should never be null
        if key is None:
            raise StreamsException("Record key for the grouping KTable should not be null.")
        change: Change = record.value
        is_latest = change.is_latest
        if self.s.use_versioned_semantics and not is_latest:
            # out-of-order update of a versioned table: not part of the aggregate
            return

        mapper = self.s.mapper
        new_pair = None if change.new_value is None else _pair(mapper(key, change.new_value))
        old_pair = None if change.old_value is None else _pair(mapper(key, change.old_value))

        # if the selected repartition key or value is null, skip;
        # forward the old pair first, to be consistent with reduce and aggregate
        old_ok = old_pair is not None and old_pair[0] is not None and old_pair[1] is not None
        new_ok = new_pair is not None and new_pair[0] is not None and new_pair[1] is not None
        forward = self.context.forward
        if self.is_not_upgrade and old_ok and new_ok and old_pair[0] == new_pair[0]:  # type: ignore[index]
            forward(
                record.with_key(old_pair[0]).with_value(  # type: ignore[index]
                    Change(new_pair[1], old_pair[1], is_latest)  # type: ignore[index]
                )
            )
            return
        if old_ok:
            forward(record.with_key(old_pair[0]).with_value(Change(None, old_pair[1], is_latest)))  # type: ignore[index]
        if new_ok:
            forward(record.with_key(new_pair[0]).with_value(Change(new_pair[1], None, is_latest)))  # type: ignore[index]


# -- KTableAggregate ------------------------------------------------------------------


class KTableAggregateSupplier(TableSupplier):
    """``KGroupedTable.aggregate`` (and ``count``): subtract the old value, add the new."""

    store_name: str

    def __init__(
        self,
        store_name: str,
        initializer: Callable[[], Any],
        adder: Callable[[Any, Any, Any], Any],
        subtractor: Callable[[Any, Any, Any], Any],
    ) -> None:
        self.store_name = store_name
        self.initializer = initializer
        self.adder = adder
        self.subtractor = subtractor

    def enable_sending_old_values(self, force_materialization: bool) -> bool:
        # aggregates are always materialized
        self.send_old_values = True
        return True

    def __call__(self) -> Processor:
        return KTableAggregateProcessor(self)

    def view(self) -> StoreValueGetterSupplier:
        return StoreValueGetterSupplier(self.store_name)


class KTableAggregateProcessor(Processor):
    def __init__(self, supplier: KTableAggregateSupplier) -> None:
        self.s = supplier

    def init(self, context: Any) -> None:
        super().init(context)
        store = context.get_state_store(self.s.store_name)
        self.store = _StoreWrapper(store)
        self.forwarder = TupleForwarder(store, context, self.s.send_old_values)

    def process(self, record: Record) -> None:
        s = self.s
        key = record.key
        # the keys should never be null
        if key is None:
            raise StreamsException(
                f"Record key for KTable aggregate operator with state {s.store_name} "
                "should not be null."
            )
        change: Change = record.value
        old_vat = self.store.get(key)
        old_agg = None if old_vat is None else old_vat.value
        new_timestamp = record.timestamp

        # first try to remove the old value
        if change.old_value is not None and old_agg is not None:
            intermediate_agg = s.subtractor(key, change.old_value, old_agg)
            new_timestamp = max(record.timestamp, old_vat.timestamp)
        else:
            intermediate_agg = old_agg

        # then try to add the new value
        if change.new_value is not None:
            initialized_agg = s.initializer() if intermediate_agg is None else intermediate_agg
            new_agg = s.adder(key, change.new_value, initialized_agg)
            if old_vat is not None:
                new_timestamp = max(record.timestamp, old_vat.timestamp)
        else:
            new_agg = intermediate_agg

        # update the store with the new value; if not put, do not forward either
        code = self.store.put(key, new_agg, new_timestamp)
        if code != PUT_RETURN_CODE_NOT_PUT:
            self.forwarder.maybe_forward(
                Record(
                    key,
                    Change(
                        new_agg,
                        old_agg if s.send_old_values else None,
                        code == PUT_RETURN_CODE_IS_LATEST,
                    ),
                    new_timestamp,
                    record.headers,
                )
            )


# -- KTableReduce ---------------------------------------------------------------------


class KTableReduceSupplier(TableSupplier):
    """``KGroupedTable.reduce(adder, subtractor)``: ``adder(agg, v)``, ``subtractor(agg, v)``."""

    store_name: str

    def __init__(
        self,
        store_name: str,
        adder: Callable[[Any, Any], Any],
        subtractor: Callable[[Any, Any], Any],
    ) -> None:
        self.store_name = store_name
        self.adder = adder
        self.subtractor = subtractor

    def enable_sending_old_values(self, force_materialization: bool) -> bool:
        # reduce is always materialized
        self.send_old_values = True
        return True

    def __call__(self) -> Processor:
        return KTableReduceProcessor(self)

    def view(self) -> StoreValueGetterSupplier:
        return StoreValueGetterSupplier(self.store_name)


class KTableReduceProcessor(Processor):
    def __init__(self, supplier: KTableReduceSupplier) -> None:
        self.s = supplier

    def init(self, context: Any) -> None:
        super().init(context)
        store = context.get_state_store(self.s.store_name)
        self.store = _StoreWrapper(store)
        self.forwarder = TupleForwarder(store, context, self.s.send_old_values)

    def process(self, record: Record) -> None:
        s = self.s
        key = record.key
        # the keys should never be null
        if key is None:
            raise StreamsException(
                f"Record key for KTable reduce operator with state {s.store_name} "
                "should not be null."
            )
        change: Change = record.value
        old_vat = self.store.get(key)
        old_agg = None if old_vat is None else old_vat.value

        # first try to remove the old value
        if change.old_value is not None and old_agg is not None:
            intermediate_agg = s.subtractor(old_agg, change.old_value)
            new_timestamp = max(record.timestamp, old_vat.timestamp)
        else:
            intermediate_agg = old_agg
            new_timestamp = record.timestamp

        # then try to add the new value
        if change.new_value is not None:
            if intermediate_agg is None:
                new_agg = change.new_value
            else:
                new_agg = s.adder(intermediate_agg, change.new_value)
                new_timestamp = max(record.timestamp, old_vat.timestamp)
        else:
            new_agg = intermediate_agg

        # update the store with the new value; if not put, do not forward either
        code = self.store.put(key, new_agg, new_timestamp)
        if code != PUT_RETURN_CODE_NOT_PUT:
            self.forwarder.maybe_forward(
                Record(
                    key,
                    Change(
                        new_agg,
                        old_agg if s.send_old_values else None,
                        code == PUT_RETURN_CODE_IS_LATEST,
                    ),
                    new_timestamp,
                    record.headers,
                )
            )
