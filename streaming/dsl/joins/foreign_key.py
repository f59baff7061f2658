"""KTable-KTable foreign-key joins (Kafka's ``KTableImpl.doJoinOnForeignKey``).

``table.join/left_join(other, foreign_key_extractor, joiner, table_joined=None,
materialized=None)``: ``foreign_key_extractor(value)`` (or ``(key, value)``) names the row of
``other`` each left row joins with. Two internal topics carry the subscriptions
(``<app>-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-<n>-topic``, keyed by the foreign key) and the
responses (``<app>-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-<n>-topic``, keyed by the primary key);
the foreign side keeps the subscriptions in ``KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-<n>``. The
result is a table source node (``KTABLE-FK-JOIN-OUTPUT-<n>``), materialised when named.
Names follow ``TableJoined.as_(name)`` like Kafka's (``<name>-subscription-registration``...).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streaming.dsl.joins.kinds import LEFT, as_joiner
from streaming.dsl.options import Materialized, TableJoined, as_materialized
from streaming.dsl.processors.foreign_key.processors import (
    ForeignTableJoinSupplier,
    PseudoTopics,
    ResponseJoinSupplier,
    SubscriptionJoinSupplier,
    SubscriptionReceiveSupplier,
    SubscriptionSendSupplier,
)
from streaming.dsl.processors.foreign_key.wrappers import (
    CombinedKeySchema,
    SubscriptionResponseWrapperSerde,
    SubscriptionWrapperSerde,
)
from streaming.dsl.processors.table import KTableSourceSupplier, is_output_versioned
from streaming.dsl.subtopology import source_nodes
from streaming.serdes import Bytes

if TYPE_CHECKING:
    from streaming.dsl.builder import InternalBuilder
    from streaming.dsl.ktable import KTable

FK_JOIN = "KTABLE-FK-JOIN-"
FK_JOIN_STATE_STORE_NAME = FK_JOIN + "SUBSCRIPTION-STATE-STORE-"
SUBSCRIPTION_REGISTRATION = FK_JOIN + "SUBSCRIPTION-REGISTRATION-"
SUBSCRIPTION_RESPONSE = FK_JOIN + "SUBSCRIPTION-RESPONSE-"
SUBSCRIPTION_PROCESSOR = FK_JOIN + "SUBSCRIPTION-PROCESSOR-"
SUBSCRIPTION_RESPONSE_RESOLVER_PROCESSOR = FK_JOIN + "SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-"
FK_JOIN_OUTPUT_NAME = FK_JOIN + "OUTPUT-"
TOPIC_SUFFIX = "-topic"
SINK_NAME = "KTABLE-SINK-"
SOURCE_NAME = "KTABLE-SOURCE-"


def as_foreign_key_extractor(extractor: Callable[..., Any]) -> Callable[[Any, Any], Any]:
    """A ``(key, value) -> foreign key`` from ``f(value)`` or ``f(key, value)`` (by arity)."""
    try:
        params = inspect.signature(extractor).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature: assume f(value)
        return lambda key, value: extractor(value)
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params):
        return extractor
    return lambda key, value: extractor(value)


def _partitioner(partitioner: Any) -> Any:
    """A ``StreamPartitioner<K, Void>``: sees the key only."""
    if partitioner is None:
        return None
    return lambda topic, key, value, n: partitioner(topic, key, None, n)


def _response_partitioner(topic: str, key: Any, value: Any, n: int) -> int | None:
    """Responses go back to the partition the subscription came from."""
    return None if value is None else value.primary_partition


def join(
    table: KTable,
    other: KTable,
    kind: str,
    foreign_key_extractor: Callable[..., Any],
    joiner: Callable[..., Any],
    table_joined: TableJoined | None = None,
    materialized: Materialized | str | None = None,
) -> KTable:
    """Join each row of ``table`` with the row of ``other`` its foreign key names."""
    if other is None:
        raise ValueError("foreignKeyTable can't be null")
    if foreign_key_extractor is None:
        raise ValueError("foreignKeyExtractor can't be null")
    if joiner is None:
        raise ValueError("joiner can't be null")
    tj = table_joined if table_joined is not None else TableJoined()
    if isinstance(tj, str):
        tj = TableJoined.as_(tj)
    left_join = kind == LEFT
    extract = as_foreign_key_extractor(foreign_key_extractor)
    fn = as_joiner(joiner)
    b: InternalBuilder = table._builder
    topology = b.topology

    # old values of the foreign table avoid needless prefix scans; old values of this table
    # let the subscription processor unsubscribe from a foreign key that changed
    other.supplier.enable_sending_old_values(True)
    table.supplier.enable_sending_old_values(True)

    name = tj.name

    def named(suffix: str, prefix: str) -> str:
        # Kafka's NamedInternal.suffixWithOrElseGet burns a counter value even for a name
        generated = b.new_processor_name(prefix)
        return f"{name}{suffix}" if name else generated

    subscription_topic = (
        named("-subscription-registration", SUBSCRIPTION_REGISTRATION) + TOPIC_SUFFIX
    )
    topology.add_internal_topic(subscription_topic)

    foreign_key_serde = other.key_serde
    subscription_serde = SubscriptionWrapperSerde(table.key_serde)
    topics = PseudoTopics(subscription_topic, subscription_serde)
    response_serde = SubscriptionResponseWrapperSerde(other.value_serde)
    key_schema = CombinedKeySchema(foreign_key_serde, table.key_serde)

    send_name = named("-subscription-registration-processor", SUBSCRIPTION_REGISTRATION)
    send = SubscriptionSendSupplier(
        extract, topics, foreign_key_serde, table.value_serde, left_join
    )
    topology.add_processor(send_name, send, table.name)

    sink_name = named("-subscription-registration-sink", SINK_NAME)
    topology.add_sink(
        sink_name,
        subscription_topic,
        send_name,
        key_serde=foreign_key_serde,
        value_serde=subscription_serde,
        partitioner=_partitioner(tj.other_partitioner),
    )
    source_name = named("-subscription-registration-source", SOURCE_NAME)
    topology.add_source(
        source_name, subscription_topic, key_serde=foreign_key_serde, value_serde=subscription_serde
    )
    # the subscription topic is co-partitioned with the foreign table
    topology.copartition(source_nodes(topology, other.name) | {source_name})

    store_name = named("-subscription-store", FK_JOIN_STATE_STORE_NAME)
    store_builder = b.kv_store_builder(
        Materialized(store_name=store_name, caching_enabled=False),
        store_name,
        Bytes(),
        subscription_serde,
    )

    receive_name = named("-subscription-receive", SUBSCRIPTION_PROCESSOR)
    topology.add_processor(
        receive_name, SubscriptionReceiveSupplier(store_builder, key_schema, topics), source_name
    )

    foreign_getter = other.supplier.view()
    join_foreign_name = named("-subscription-join-foreign", SUBSCRIPTION_PROCESSOR)
    topology.add_processor(
        join_foreign_name, SubscriptionJoinSupplier(foreign_getter), receive_name
    )
    _connect(topology, join_foreign_name, foreign_getter.store_names())

    foreign_join_name = named("-foreign-join-subscription", SUBSCRIPTION_PROCESSOR)
    foreign_join = ForeignTableJoinSupplier(store_builder, key_schema, topics)
    topology.add_processor(foreign_join_name, foreign_join, other.name)

    response_topic = named("-subscription-response", SUBSCRIPTION_RESPONSE) + TOPIC_SUFFIX
    topology.add_internal_topic(response_topic)
    response_sink = named("-subscription-response-sink", SINK_NAME)
    partitioner = tj.partitioner
    topology.add_sink(
        response_sink,
        response_topic,
        join_foreign_name,
        foreign_join_name,
        key_serde=table.key_serde,
        value_serde=response_serde,
        partitioner=_response_partitioner if partitioner is None else _partitioner(partitioner),
    )
    response_source = named("-subscription-response-source", SOURCE_NAME)
    topology.add_source(
        response_source, response_topic, key_serde=table.key_serde, value_serde=response_serde
    )
    # the response topic is co-partitioned with the left (primary) table
    topology.copartition(source_nodes(topology, table.name) | {response_source})

    primary_getter = table.supplier.view()
    resolver_name = named(
        "-subscription-response-resolver", SUBSCRIPTION_RESPONSE_RESOLVER_PROCESSOR
    )
    topology.add_processor(
        resolver_name,
        ResponseJoinSupplier(primary_getter, table.value_serde, topics, fn, left_join),
        response_source,
    )
    _connect(topology, resolver_name, primary_getter.store_names())

    result_name = named("-result", FK_JOIN_OUTPUT_NAME)
    mat = as_materialized(materialized)
    result_store = mat.store_name or b.new_store_name(FK_JOIN_OUTPUT_NAME)
    key_serde = mat.key_serde or table.key_serde
    result_builder = b.kv_store_builder(mat, result_store, key_serde, mat.value_serde)
    result = KTableSourceSupplier(result_store, result_builder, topology, result_name)
    topology.add_processor(result_name, result, resolver_name)
    if mat.store_name is not None:
        result.materialize()

    # Kafka's enableVersionedSemantics: drop out-of-order updates of versioned tables
    send.set_use_versioned_semantics(is_output_versioned(table.supplier))
    foreign_join.set_use_versioned_semantics(is_output_versioned(other.supplier))

    return b.new_table(
        result_name,
        result,
        key_serde,
        mat.value_serde,
        queryable_store_name=mat.store_name,
    )


def _connect(topology: Any, processor: str, store_names: list[str]) -> None:
    if store_names:
        topology.connect_processor_and_state_stores(processor, *store_names)
