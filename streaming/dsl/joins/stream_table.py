"""KStream-KTable joins: ``stream.join(table, joiner, joined=)`` and ``left_join`` (Kafka's
KStreamImpl.join/leftJoin(KTable) and doStreamTableJoin).

The join processor is named ``KSTREAM-JOIN-``/``KSTREAM-LEFTJOIN-`` (or ``Joined.as_(name)``)
and connected to the table's stores (a source table gets materialised). A stream whose key was
changed is first repartitioned through ``<joined name or stream name>-repartition``. A grace
period needs a versioned table whose history retention is at least the grace period; the
stream records then wait in the store ``<join name>-Buffer``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streaming.dsl.joins.kinds import LEFT, as_joiner
from streaming.dsl.options import Joined
from streaming.dsl.processors.stream_table_join import (
    GRACE_NEEDS_VERSIONED,
    KStreamKTableJoinSupplier,
    TimeOrderedJoinBufferBuilder,
)
from streaming.dsl.repartition import repartition_for_join
from streaming.dsl.subtopology import source_nodes

if TYPE_CHECKING:
    from streaming.dsl.kstream import KStream
    from streaming.dsl.ktable import KTable


def join(
    stream: KStream,
    table: KTable,
    kind: str,
    joiner: Callable[..., Any],
    joined: Joined | None = None,
) -> KStream:
    """Join ``stream`` with ``table`` (kind "inner" or "left"); returns the joined KStream."""
    if joiner is None:
        raise ValueError("joiner cannot be null")
    if joined is not None and not isinstance(joined, Joined):
        raise TypeError(f"joined must be a Joined, got {joined!r}")
    jn = joined or Joined()
    if stream._builder is not table._builder:
        raise ValueError("a KStream and a KTable of different StreamsBuilders cannot be joined")
    b = stream._builder
    left = kind == LEFT
    parent = stream.name
    key_serde = stream.key_serde
    if stream.repartition_required:
        repartitioned = repartition_for_join(
            stream,
            jn.name if jn.name is not None else stream.name,
            jn.key_serde,
            jn.value_serde,
        )
        parent, key_serde = repartitioned.name, repartitioned.key_serde

    name = jn.name or b.new_processor_name("KSTREAM-LEFTJOIN-" if left else "KSTREAM-JOIN-")
    if left:
        b.null_key_relaxed_joins.add(name)
    getter_supplier = table.supplier.view()
    buffer_builder = None
    if jn.grace_period_ms is not None:
        # Kafka checks the table node itself here (unknown counts as versioned), the stores below
        if table.supplier.output_versioned is False:
            raise ValueError(GRACE_NEEDS_VERSIONED)
        buffer_builder = TimeOrderedJoinBufferBuilder(
            f"{name}-Buffer",
            jn.key_serde or key_serde,
            jn.value_serde or stream.value_serde,
            jn.grace_period_ms,
        )
    supplier = KStreamKTableJoinSupplier(
        getter_supplier,
        as_joiner(joiner),
        left,
        jn.grace_period_ms,
        buffer_builder.name if buffer_builder is not None else None,
    )
    topology = b.topology
    topology.add_processor(name, supplier, parent)
    # Kafka's ensureCopartitionWith: the stream's and the table's sources are co-partitioned
    topology.copartition(source_nodes(topology, name, table.name))
    if buffer_builder is not None:
        topology.add_state_store(buffer_builder, name)
    store_names = list(getter_supplier.store_names())
    topology.connect_processor_and_state_stores(name, *store_names)
    if jn.grace_period_ms is not None:
        _check_grace(topology, store_names, jn.grace_period_ms)
    return b.new_stream(name, jn.key_serde or key_serde, None, repartition_required=False)


def _check_grace(topology: Any, store_names: list[str], grace_ms: int) -> None:
    """Kafka's StreamTableJoinNode.writeToTopology checks on the table's stores."""
    for store_name in store_names:
        store_builder = topology.store_builders[store_name]
        if not getattr(store_builder, "versioned", False):
            raise ValueError(GRACE_NEEDS_VERSIONED)
        if grace_ms > store_builder.history_retention():
            raise ValueError("History retention must be at least grace period.")
