"""KTable-KTable joins on the primary key (Kafka's ``KTableImpl.doJoin``).

``table.join/left_join/outer_join(other, joiner, named=None, materialized=None)``. The join
adds ``KTABLE-JOINTHIS-`` and ``KTABLE-JOINOTHER-`` (``<named>-join-this``/``-join-other``)
under the two tables and ``KTABLE-MERGE-`` (``<named>``) under both; each side reads the other
table through its value getter, whose stores it is connected to. ``materialized`` (even
without a name) materialises the result in a store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streaming.dsl.joins.kinds import INNER, LEFT, OUTER, as_joiner
from streaming.dsl.naming import as_name
from streaming.dsl.options import Materialized, as_materialized
from streaming.dsl.processors.table import is_output_versioned
from streaming.dsl.processors.table_table_join import (
    KTableKTableJoinMergerSupplier,
    KTableKTableJoinSupplier,
    reverse_joiner,
)
from streaming.dsl.subtopology import source_nodes

if TYPE_CHECKING:
    from streaming.dsl.ktable import KTable

MERGE_NAME = "KTABLE-MERGE-"
JOINTHIS_NAME = "KTABLE-JOINTHIS-"
JOINOTHER_NAME = "KTABLE-JOINOTHER-"

# (this side, other side) processor kinds per join kind
_SIDES = {INNER: ("inner", "inner"), LEFT: ("left", "right"), OUTER: ("outer", "outer")}


def join(
    table: KTable,
    other: KTable,
    kind: str,
    joiner: Callable[..., Any],
    named: Any = None,
    materialized: Materialized | str | None = None,
) -> KTable:
    """Join two tables on their key; ``kind`` is inner, left or outer."""
    if joiner is None:
        raise ValueError("joiner can't be null")
    if other is None:
        raise ValueError("other can't be null")
    if kind not in _SIDES:
        raise ValueError(f"unknown table-table join kind {kind!r}")
    b = table._builder
    topology = b.topology
    fn = as_joiner(joiner)

    mat = as_materialized(materialized) if materialized is not None else None
    store_name = None
    if mat is not None:
        store_name = mat.store_name or b.new_store_name(MERGE_NAME)
    name = as_name(named)
    # Kafka's NamedInternal burns a counter value even for a user-given name
    generated = b.new_processor_name(MERGE_NAME)
    merge_name = name or generated

    if kind in (LEFT, OUTER):
        table.supplier.enable_sending_old_values(True)
    if kind == OUTER:
        other.supplier.enable_sending_old_values(True)

    key_serde = table.key_serde
    value_serde = None
    store_builder = None
    if mat is not None:
        key_serde = mat.key_serde or table.key_serde
        value_serde = mat.value_serde
        assert store_name is not None  # set above whenever mat is
        store_builder = b.kv_store_builder(mat, store_name, key_serde, value_serde)

    this_kind, other_kind = _SIDES[kind]
    join_this = KTableKTableJoinSupplier(this_kind, table.supplier, other.supplier, fn, table.name)
    join_other = KTableKTableJoinSupplier(
        other_kind, other.supplier, table.supplier, reverse_joiner(fn), other.name
    )
    generated = b.new_processor_name(JOINTHIS_NAME)
    this_name = f"{name}-join-this" if name else generated
    generated = b.new_processor_name(JOINOTHER_NAME)
    other_name = f"{name}-join-other" if name else generated
    merger = KTableKTableJoinMergerSupplier(join_this, join_other, store_name, store_builder)

    # Kafka's enableVersionedSemantics: each side drops out-of-order updates of a versioned table
    join_this.set_use_versioned_semantics(is_output_versioned(table.supplier))
    join_other.set_use_versioned_semantics(is_output_versioned(other.supplier))

    # Kafka's ensureCopartitionWith: both tables' source topics must be co-partitioned
    topology.copartition(source_nodes(topology, table.name, other.name))
    topology.add_processor(this_name, join_this, table.name)
    topology.add_processor(other_name, join_other, other.name)
    topology.add_processor(merge_name, merger, this_name, other_name)
    other_stores = join_this.getter_supplier2.store_names()
    this_stores = join_other.getter_supplier2.store_names()
    if other_stores:
        topology.connect_processor_and_state_stores(this_name, *other_stores)
    if this_stores:
        topology.connect_processor_and_state_stores(other_name, *this_stores)

    return b.new_table(
        merge_name,
        merger,
        key_serde,
        value_serde,
        queryable_store_name=mat.store_name if mat is not None else None,
    )
