"""How late a record may reach a topology's event-time operators before one of them drops it.

Event-time alignment (``runtime.alignment``) keeps a backlog's source partitions within a
drift of each other so that the windows and joins downstream see its records within their
grace; the smallest grace of those operators is what that drift must stay well inside.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from streaming.dsl.processors.stream_stream_join import SelfJoinSupplier, StreamStreamJoinSupplier
from streaming.dsl.processors.table import WindowedAggregateSupplier


def _graces(topology: Any) -> Iterator[int]:
    for node in topology.nodes.values():
        supplier = getattr(node, "supplier", None)
        if isinstance(supplier, WindowedAggregateSupplier):
            windows = getattr(supplier, "windows", None)
            if windows is not None:
                yield windows.grace_period_ms()
        elif isinstance(supplier, StreamStreamJoinSupplier):
            yield supplier.grace_ms
        elif isinstance(supplier, SelfJoinSupplier):
            yield supplier.retention_ms - supplier.before_ms - supplier.after_ms


def smallest_grace_ms(topology: Any) -> int | None:
    """The smallest grace of the topology's windowed aggregations and stream-stream joins
    (None: it has none)."""
    return min(_graces(topology), default=None)
