"""The processor behind a time-windowed aggregation, shared by grouped and cogrouped streams."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streaming.dsl.windows import EmitStrategy, SlidingWindows


def time_windowed_aggregate_supplier(
    windows: Any,
    store_name: str,
    emit: EmitStrategy,
    initializer: Callable[[], Any],
    aggregator: Callable[[Any, Any, Any], Any],
) -> Any:
    """Kafka's ``KStreamSlidingWindowAggregate`` for sliding windows, its
    ``KStreamWindowAggregate`` for time and custom windows."""
    if isinstance(windows, SlidingWindows):
        from streaming.dsl.processors.sliding_aggregate import (
            KStreamSlidingWindowAggregateSupplier,
        )

        return KStreamSlidingWindowAggregateSupplier(
            windows, store_name, emit, initializer, aggregator
        )
    from streaming.dsl.processors.window_aggregate import KStreamWindowAggregateSupplier

    return KStreamWindowAggregateSupplier(windows, store_name, emit, initializer, aggregator)
