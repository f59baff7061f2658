"""The five processors of a foreign-key join (Kafka's ``kstream/internals/foreignkeyjoin``).

Left side: ``SubscriptionSend`` turns each left-table change into subscriptions keyed by the
foreign key (with the murmur3 hash of the new left value and an ``Instruction``), written to
the subscription topic. Foreign side: ``SubscriptionReceive`` keeps them in the subscription
store (keyed ``CombinedKey(fk, pk)``), ``SubscriptionJoin`` answers each with the foreign
row, and ``ForeignTableJoin`` answers every subscriber of a foreign key (prefix scan) when the
foreign row changes; answers go to the response topic keyed by the primary key. Back on the
left side, ``ResponseJoin`` drops answers whose hash no longer matches the current left value
and joins the rest; a ``KTableSource`` after it holds the result table.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streaming.dsl.change import Change
from streaming.dsl.processors.foreign_key.murmur3 import hash128
from streaming.dsl.processors.foreign_key.wrappers import (
    SUBSCRIPTION_VERSION,
    CombinedKeySchema,
    Instruction,
    SubscriptionResponseWrapper,
    SubscriptionWrapper,
)
from streaming.dsl.processors.value_getters import ValueGetterSupplier
from streaming.serdes import Bytes, resolve
from streaming.state import ValueAndTimestamp
from streaming.topology.processor import Processor, Record

if TYPE_CHECKING:
    from streaming.runtime.context import TaskContext

log = logging.getLogger(__name__)

_DELETE_NO_PROPAGATE = Instruction.DELETE_KEY_NO_PROPAGATE
_DELETE_AND_PROPAGATE = Instruction.DELETE_KEY_AND_PROPAGATE
_PROPAGATE_NULL = Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE
_PROPAGATE_ONLY = Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE


def _log_skipped(context: Any, what: str) -> None:
    md = context.record_metadata()
    if md is not None:
        log.warning(
            "Skipping record due to null %s. topic=[%s] partition=[%s] offset=[%s]",
            what,
            md.topic,
            md.partition,
            md.offset,
        )
    else:
        log.warning("Skipping record due to null %s. Topic, partition, and offset not known.", what)


class PseudoTopics:
    """The pseudo-topic names serializers see (``<app>-<subscription topic>-pk``...), and the
    subscription serde shared by the subscription sink, source and store."""

    def __init__(self, subscription_topic: str, subscription_serde: Any = None) -> None:
        self.subscription_topic = subscription_topic
        self.subscription_serde = subscription_serde

    def decorated(self, context: Any, suffix: str) -> str:
        return f"{context.application_id}-{self.subscription_topic}{suffix}"

    def init(self, context: Any) -> None:
        """Complete the subscription serde with the default key serde (Kafka's setIfUnset)."""
        if self.subscription_serde is not None:
            self.subscription_serde.set_if_unset(
                context.default_key_serde, self.decorated(context, "-pk")
            )


# -- left side: SubscriptionSendProcessorSupplier --------------------------------------


class SubscriptionSendSupplier:
    """Left-table changes -> subscriptions keyed by the (old and new) foreign keys."""

    def __init__(
        self,
        foreign_key_extractor: Callable[[Any, Any], Any],
        topics: PseudoTopics,
        foreign_key_serde: Any,
        value_serde: Any,
        left_join: bool,
    ) -> None:
        self.extract = foreign_key_extractor
        self.topics = topics
        self.foreign_key_serde = foreign_key_serde
        self.value_serde = value_serde
        self.left_join = left_join
        self.use_versioned_semantics = False

    def set_use_versioned_semantics(self, use_versioned_semantics: bool) -> None:
        self.use_versioned_semantics = use_versioned_semantics

    def __call__(self) -> Processor:
        return SubscriptionSendProcessor(self)


class SubscriptionSendProcessor(Processor):
    context: TaskContext  # the runtime context: record context and current node

    def __init__(self, supplier: SubscriptionSendSupplier) -> None:
        self.s = supplier
        self.extract = supplier.extract

    def init(self, context: Any) -> None:
        super().init(context)
        s = self.s
        s.topics.init(context)
        self.fk_topic = s.topics.decorated(context, "-fk")
        self.value_topic = s.topics.decorated(context, "-vh")
        self.fk_serde = resolve(s.foreign_key_serde, context.default_key_serde)
        self.value_serde = resolve(s.value_serde, context.default_value_serde)

    def process(self, record: Record) -> None:
        change: Change = record.value
        # drop out-of-order records from versioned tables (cf. KIP-914)
        if self.s.use_versioned_semantics and not change.is_latest:
            log.info(
                "Skipping out-of-order record from versioned table while performing "
                "table-table join."
            )
            return
        self._hash: tuple[int, int] | None = None
        self._hashed = False
        if self.s.left_join:
            self._left_join_instructions(record, change)
        else:
            self._default_join_instructions(record, change)

    def _fk_bytes(self, fk: Any) -> bytes | None:
        return self.fk_serde.serialize(self.fk_topic, fk)

    def _left_join_instructions(self, record: Record, change: Change) -> None:
        key = record.key
        if change.old_value is not None:
            old_fk = self.extract(key, change.old_value)
            new_fk = None if change.new_value is None else self.extract(key, change.new_value)
            if old_fk is not None and self._fk_bytes(new_fk) != self._fk_bytes(old_fk):
                self._forward(record, old_fk, _DELETE_NO_PROPAGATE)
            self._forward(record, new_fk, _PROPAGATE_NULL)
        elif change.new_value is not None:
            self._forward(record, self.extract(key, change.new_value), _PROPAGATE_NULL)

    def _default_join_instructions(self, record: Record, change: Change) -> None:
        key = record.key
        if change.old_value is not None:
            old_fk = self.extract(key, change.old_value)
            new_fk = None if change.new_value is None else self.extract(key, change.new_value)
            if old_fk is None and new_fk is None:
                _log_skipped(self.context, "foreign key")
            elif old_fk is None:
                self._forward(record, new_fk, _PROPAGATE_ONLY)
            elif new_fk is None:
                self._forward(record, old_fk, _DELETE_AND_PROPAGATE)
            elif self._fk_bytes(new_fk) != self._fk_bytes(old_fk):
                # a different foreign key: delete the old subscription, propagate the new one
                # (null if there is no foreign row, to unset the previous result)
                self._forward(record, old_fk, _DELETE_NO_PROPAGATE)
                self._forward(record, new_fk, _PROPAGATE_NULL)
            else:  # unchanged foreign key
                self._forward(record, new_fk, _PROPAGATE_ONLY)
        elif change.new_value is not None:
            new_fk = self.extract(key, change.new_value)
            if new_fk is None:
                _log_skipped(self.context, "foreign key")
            else:
                self._forward(record, new_fk, _PROPAGATE_ONLY)

    def _value_hash(self, change: Change) -> tuple[int, int] | None:
        if not self._hashed:
            self._hashed = True
            if change.new_value is not None:
                self._hash = hash128(
                    # a non-None value serializes to bytes
                    self.value_serde.serialize(self.value_topic, change.new_value)  # type: ignore[arg-type]
                )
        return self._hash

    def _forward(self, record: Record, foreign_key: Any, instruction: Instruction) -> None:
        rc = self.context.record_context()
        partition = rc.partition if rc is not None and rc.partition >= 0 else 0
        wrapper = SubscriptionWrapper(
            self._value_hash(record.value), instruction, record.key, partition
        )
        self.context.forward(Record(foreign_key, wrapper, record.timestamp, record.headers))


# -- foreign side: SubscriptionReceiveProcessorSupplier --------------------------------


class SubscriptionReceiveSupplier:
    """Subscriptions -> the subscription store, forwarded as ``Change``s keyed by (fk, pk)."""

    def __init__(self, store_builder: Any, key_schema: CombinedKeySchema, topics: PseudoTopics):
        self.store_builder = store_builder
        self.store_name = store_builder.name
        self.key_schema = key_schema
        self.topics = topics

    def stores(self) -> list[Any]:
        return [self.store_builder]

    def __call__(self) -> Processor:
        return SubscriptionReceiveProcessor(self)


def _init_schema(schema: CombinedKeySchema, context: Any, topics: PseudoTopics) -> None:
    topics.init(context)
    schema.init(
        context.default_key_serde,
        topics.decorated(context, "-fk"),
        topics.decorated(context, "-pk"),
    )


class SubscriptionReceiveProcessor(Processor):
    def __init__(self, supplier: SubscriptionReceiveSupplier) -> None:
        self.s = supplier
        self.schema = supplier.key_schema

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store(self.s.store_name)
        _init_schema(self.schema, context, self.s.topics)

    def process(self, record: Record) -> None:
        wrapper: SubscriptionWrapper = record.value
        fk = record.key
        if fk is None and wrapper.instruction is not _PROPAGATE_NULL:
            _log_skipped(self.context, "foreign key")
            return
        if wrapper.version > SUBSCRIPTION_VERSION:
            raise ValueError("SubscriptionWrapper is of an incompatible version.")
        new_value = ValueAndTimestamp(wrapper, record.timestamp)
        if fk is None:
            change = Change(new_value, None)
        else:
            subscription_key = self.schema.to_bytes(fk, wrapper.primary_key)
            old_value = self.store.get(subscription_key)
            # this store is used by the prefix scan of the foreign-table join processor
            if wrapper.instruction in (_DELETE_AND_PROPAGATE, _DELETE_NO_PROPAGATE):
                self.store.delete(subscription_key)
            else:
                self.store.put(subscription_key, new_value)
            change = Change(new_value, old_value)
        self.context.forward(
            Record((fk, wrapper.primary_key), change, record.timestamp, record.headers)
        )


# -- foreign side: SubscriptionJoinProcessorSupplier -----------------------------------


class SubscriptionJoinSupplier:
    """Answer a subscription with the foreign row as it is now."""

    def __init__(self, foreign_getter: ValueGetterSupplier) -> None:
        self.foreign_getter = foreign_getter

    def __call__(self) -> Processor:
        return SubscriptionJoinProcessor(self)


class SubscriptionJoinProcessor(Processor):
    def __init__(self, supplier: SubscriptionJoinSupplier) -> None:
        self.getter = supplier.foreign_getter.get()

    def init(self, context: Any) -> None:
        super().init(context)
        self.getter.init(context)

    def process(self, record: Record) -> None:
        fk, pk = record.key
        subscription: ValueAndTimestamp = record.value.new_value
        wrapper: SubscriptionWrapper = subscription.value
        if wrapper.version > SUBSCRIPTION_VERSION:
            raise ValueError("SubscriptionWrapper is of an incompatible version.")
        foreign = None if fk is None else self.getter.get(fk)
        timestamp = (
            subscription.timestamp
            if foreign is None
            else max(subscription.timestamp, foreign.timestamp)
        )
        instruction = wrapper.instruction
        if instruction is _DELETE_AND_PROPAGATE:
            value = SubscriptionResponseWrapper(wrapper.hash, None, wrapper.primary_partition)
        elif instruction is _PROPAGATE_NULL:
            # goes through for inner and left joins alike: the foreign key changed and has no
            # match, so (key, null) must reach downstream
            value = SubscriptionResponseWrapper(
                wrapper.hash,
                None if foreign is None else foreign.value,
                wrapper.primary_partition,
            )
        elif instruction is _PROPAGATE_ONLY:
            if foreign is None:
                return
            value = SubscriptionResponseWrapper(
                wrapper.hash, foreign.value, wrapper.primary_partition
            )
        else:  # DELETE_KEY_NO_PROPAGATE
            return
        self.context.forward(Record(pk, value, timestamp, record.headers))

    def close(self) -> None:
        self.getter.close()


# -- foreign side: ForeignTableJoinProcessorSupplier -----------------------------------


class ForeignTableJoinSupplier:
    """A foreign-row change -> a response to every subscriber of its key (prefix scan)."""

    def __init__(self, store_builder: Any, key_schema: CombinedKeySchema, topics: PseudoTopics):
        self.store_builder = store_builder
        self.store_name = store_builder.name
        self.key_schema = key_schema
        self.topics = topics
        self.use_versioned_semantics = False

    def set_use_versioned_semantics(self, use_versioned_semantics: bool) -> None:
        self.use_versioned_semantics = use_versioned_semantics

    def stores(self) -> list[Any]:
        return [self.store_builder]

    def __call__(self) -> Processor:
        return ForeignTableJoinProcessor(self)


_BYTES = Bytes()


class ForeignTableJoinProcessor(Processor):
    def __init__(self, supplier: ForeignTableJoinSupplier) -> None:
        self.s = supplier
        self.schema = supplier.key_schema

    def init(self, context: Any) -> None:
        super().init(context)
        self.store = context.get_state_store(self.s.store_name)
        _init_schema(self.schema, context, self.s.topics)

    def process(self, record: Record) -> None:
        key = record.key
        # if the key is null, there is nothing to join the record with
        if key is None:
            _log_skipped(self.context, "key")
            return
        change: Change = record.value
        # drop out-of-order records from versioned tables (cf. KIP-914)
        if self.s.use_versioned_semantics and not change.is_latest:
            log.info(
                "Skipping out-of-order record from versioned table while performing "
                "table-table join."
            )
            return
        prefix = self.schema.prefix_bytes(key)
        new_value = change.new_value
        forward = self.context.forward
        # materialise the scan first: forwarding may write to the same store
        for raw_key, vat in list(self.store.prefix_scan(prefix, _BYTES)):
            _, pk = self.schema.from_bytes(raw_key)
            wrapper: SubscriptionWrapper = vat.value
            forward(
                Record(
                    pk,
                    SubscriptionResponseWrapper(wrapper.hash, new_value, wrapper.primary_partition),
                    record.timestamp,
                    record.headers,
                )
            )


# -- left side: ResponseJoinProcessorSupplier ------------------------------------------


class ResponseJoinSupplier:
    """Responses -> joined values, dropping stale ones (hash of the current left value)."""

    def __init__(
        self,
        left_getter: ValueGetterSupplier,
        value_serde: Any,
        topics: PseudoTopics,
        joiner: Callable[[Any, Any, Any], Any],
        left_join: bool,
    ) -> None:
        self.left_getter = left_getter
        self.value_serde = value_serde
        self.topics = topics
        self.joiner = joiner
        self.left_join = left_join

    def __call__(self) -> Processor:
        return ResponseJoinProcessor(self)


class ResponseJoinProcessor(Processor):
    def __init__(self, supplier: ResponseJoinSupplier) -> None:
        self.s = supplier
        self.getter = supplier.left_getter.get()
        self.joiner = supplier.joiner
        self.left_join = supplier.left_join

    def init(self, context: Any) -> None:
        super().init(context)
        self.value_topic = self.s.topics.decorated(context, "-vh")
        self.getter.init(context)
        self.value_serde = resolve(self.s.value_serde, context.default_value_serde)

    def process(self, record: Record) -> None:
        response: SubscriptionResponseWrapper = record.value
        if response.version != 0:
            raise ValueError("SubscriptionResponseWrapper is of an incompatible version.")
        current = self.getter.get(record.key)
        current_hash = (
            None
            if current is None
            # a row's value is never None, so it serializes to bytes
            else hash128(self.value_serde.serialize(self.value_topic, current.value))  # type: ignore[arg-type]
        )
        # if the hash differs from the current left value's, the response is stale: drop it
        if response.original_value_hash != current_hash:
            log.debug(
                "Dropping FK-join response due to hash mismatch. Expected %s. Actual %s",
                response.original_value_hash,
                current_hash,
            )
            return
        foreign_value = response.foreign_value
        if foreign_value is None and (not self.left_join or current is None):
            result = None  # emit a tombstone
        else:
            result = self.joiner(
                record.key, None if current is None else current.value, foreign_value
            )
        self.context.forward(record.with_value(result))

    def close(self) -> None:
        self.getter.close()
