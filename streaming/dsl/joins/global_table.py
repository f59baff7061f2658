"""KStream-GlobalKTable joins (Kafka's ``KStreamImpl.doGlobalTableJoin``).

No repartitioning and no co-partitioning: the global table holds every partition, the
stream record is joined where it is, on ``key_selector(key, value)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streaming.dsl.joins.kinds import INNER, LEFT, as_joiner
from streaming.dsl.naming import as_name

if TYPE_CHECKING:
    from streaming.dsl.kstream import KStream
    from streaming.dsl.ktable import GlobalKTable


def join(
    stream: KStream,
    global_table: GlobalKTable,
    kind: str,
    key_selector: Callable[[Any, Any], Any] | None = None,
    joiner: Callable[..., Any] | None = None,
    named: Any = None,
) -> KStream:
    """``stream.join/left_join(global_table, key_selector, joiner, named=)``."""
    from streaming.dsl.processors.global_join import KStreamGlobalKTableJoinSupplier

    if kind not in (INNER, LEFT):
        raise TypeError(f"a stream-global table join is inner or left, not {kind}")
    if key_selector is None or not callable(key_selector):
        raise TypeError("keySelector can't be null")
    if joiner is None or not callable(joiner):
        raise TypeError("joiner can't be null")
    b = stream._builder
    # Kafka names both kinds with the left-join prefix
    name = b.name_or(as_name(named), "KSTREAM-LEFTJOIN-")
    if kind == LEFT:
        b.null_key_relaxed_joins.add(name)
    supplier = KStreamGlobalKTableJoinSupplier(
        global_table.value_getter_supplier(), key_selector, as_joiner(joiner), kind == LEFT
    )
    b.topology.add_processor(name, supplier, stream.name)
    return b.new_stream(
        name, stream.key_serde, None, repartition_required=stream.repartition_required
    )
