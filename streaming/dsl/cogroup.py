"""Cogrouped streams: several grouped streams folded into one aggregate (Kafka's
``CogroupedKStreamImpl``, ``CogroupedStreamAggregateBuilder`` and the time-, sliding- and
session-windowed variants).

``grouped.cogroup(aggregator)`` starts it, ``.cogroup(other_grouped, aggregator)`` adds
streams, ``.aggregate(initializer)`` (or ``.windowed_by(windows).aggregate(...)``) builds:
a repartition topic for each grouped stream whose key changed (named by its ``Grouped`` or
by the store), one aggregate processor per grouped stream
(``COGROUPKSTREAM-AGGREGATE-``, or ``<named>-cogroup-agg-<i>``) sharing one store, and a
``COGROUPKSTREAM-MERGE-`` (``<named>-cogroup-merge``) node that is the resulting KTable.
Kafka offers no emit strategy here: results are emitted on every update.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streaming import serdes
from streaming.dsl.naming import as_name
from streaming.dsl.options import Materialized, as_materialized
from streaming.dsl.repartition import create_repartition
from streaming.dsl.subtopology import source_nodes
from streaming.dsl.windowed_aggregates import time_windowed_aggregate_supplier
from streaming.dsl.windows import (
    EmitStrategy,
    SessionWindows,
    SlidingWindows,
    TimeWindows,
    Windows,
    window_size_and_retention,
)

if TYPE_CHECKING:
    from streaming.dsl.builder import InternalBuilder
    from streaming.dsl.grouped import KGroupedStream
    from streaming.dsl.ktable import KTable

AGGREGATE_NAME = "COGROUPKSTREAM-AGGREGATE-"
MERGE_NAME = "COGROUPKSTREAM-MERGE-"

Aggregator = Callable[[Any, Any, Any], Any]


class _CogroupBuilder:
    """Kafka's ``CogroupedStreamAggregateBuilder``: shared by a cogroup and its windowed
    views, it remembers the repartition source made for each grouped stream."""

    def __init__(self, builder: InternalBuilder) -> None:
        self.builder = builder
        self.parent_nodes: dict[int, str] = {}

    def process_repartitions(
        self, patterns: list[tuple[KGroupedStream, Aggregator]], store_name: str
    ) -> None:
        b = self.builder
        for grouped, _ in patterns:
            if grouped._repartition_required:
                prefix = grouped._grouped.name or store_name
                if id(grouped) in self.parent_nodes:
                    for _ in range(3):  # Kafka still generates the three repartition names
                        b.next_index()
                    continue
                self.parent_nodes[id(grouped)] = create_repartition(
                    b, grouped._parent, prefix, grouped.key_serde, grouped.value_serde
                )
            else:
                self.parent_nodes[id(grouped)] = grouped._parent
        # Kafka co-partitions the grouped streams' own sub-topology sources
        sources: set[str] = set()
        for grouped, _ in patterns:
            sources |= source_nodes(b.topology, grouped._parent)
        b.topology.copartition(sources)

    def build(
        self,
        patterns: list[tuple[KGroupedStream, Aggregator]],
        named: Any,
        store_name: str,
        store_builder: Any,
        make_supplier: Callable[[Aggregator], Any],
        key_serde: Any,
        value_serde: Any,
        queryable_store_name: str | None,
        window_grace_ms: int | None = None,
    ) -> KTable:
        from streaming.dsl.processors.cogroup import CogroupMergeSupplier

        b = self.builder
        user_name = as_name(named)
        self.process_repartitions(patterns, store_name)
        agg_names: list[str] = []
        suppliers: list[Any] = []
        for counter, (grouped, aggregator) in enumerate(patterns):
            generated = b.new_processor_name(AGGREGATE_NAME)
            name = f"{user_name}-cogroup-agg-{counter}" if user_name else generated
            supplier = make_supplier(aggregator)
            b.topology.add_processor(name, supplier, self.parent_nodes[id(grouped)])
            if not agg_names:
                b.topology.add_state_store(store_builder, name)
            else:
                b.topology.connect_processor_and_state_stores(name, store_name)
            agg_names.append(name)
            suppliers.append(supplier)
        generated = b.new_processor_name(MERGE_NAME)
        merge_name = f"{user_name}-cogroup-merge" if user_name else generated
        merge = CogroupMergeSupplier(suppliers, store_name)
        b.topology.add_processor(merge_name, merge, *agg_names)
        return b.new_table(
            merge_name,
            merge,
            key_serde,
            value_serde,
            queryable_store_name=queryable_store_name,
            window_grace_ms=window_grace_ms,
        )


class CogroupedKStream:
    """Grouped streams (same key type) aggregated together into one table."""

    def __init__(
        self, builder: InternalBuilder, grouped: KGroupedStream, aggregator: Aggregator
    ) -> None:
        self._builder = builder
        self._patterns: list[tuple[KGroupedStream, Aggregator]] = []
        self._agg_builder = _CogroupBuilder(builder)
        self.cogroup(grouped, aggregator)

    def cogroup(self, grouped: KGroupedStream, aggregator: Aggregator) -> CogroupedKStream:
        """Add ``grouped``; its records update the aggregate with ``aggregator(k, v, agg)``."""
        if grouped is None:
            raise TypeError("groupedStream can't be null")
        if aggregator is None or not callable(aggregator):
            raise TypeError("aggregator can't be null")
        if grouped._builder is not self._builder:
            raise ValueError("cogroup() needs grouped streams of the same StreamsBuilder")
        for i, (g, _) in enumerate(self._patterns):
            if g is grouped:  # a LinkedHashMap put: same position, new aggregator
                self._patterns[i] = (grouped, aggregator)
                return self
        self._patterns.append((grouped, aggregator))
        return self

    def aggregate(
        self,
        initializer: Callable[[], Any],
        materialized: Materialized | str | None = None,
        named: Any = None,
    ) -> KTable:
        """The aggregate per key over all cogrouped streams, in a key-value store."""
        from streaming.dsl.processors.aggregate import KStreamAggregateSupplier

        b = self._builder
        mat = as_materialized(materialized)
        store_name = mat.store_name or b.new_store_name(AGGREGATE_NAME)
        store_builder = b.kv_store_builder(mat, store_name, mat.key_serde, mat.value_serde)
        return self._agg_builder.build(
            list(self._patterns),
            named,
            store_name,
            store_builder,
            lambda aggregator: KStreamAggregateSupplier(store_name, initializer, aggregator),
            mat.key_serde,
            mat.value_serde,
            mat.store_name,
        )

    def windowed_by(
        self, windows: TimeWindows | SlidingWindows | SessionWindows | Windows
    ) -> TimeWindowedCogroupedKStream | SessionWindowedCogroupedKStream:
        """Aggregate per window: tumbling/hopping, sliding, session or custom (``Windows``)."""
        if isinstance(windows, TimeWindows | SlidingWindows | Windows):
            return TimeWindowedCogroupedKStream(self, windows)
        if isinstance(windows, SessionWindows):
            return SessionWindowedCogroupedKStream(self, windows)
        raise TypeError(
            "windowed_by() takes TimeWindows, SlidingWindows, SessionWindows or a Windows "
            f"subclass, got {windows!r}"
        )


class TimeWindowedCogroupedKStream:
    """A cogroup over tumbling, hopping (``TimeWindows``), sliding or custom windows."""

    def __init__(
        self, cogrouped: CogroupedKStream, windows: TimeWindows | SlidingWindows | Windows
    ) -> None:
        self._cogrouped = cogrouped
        self.windows = windows

    def aggregate(
        self,
        initializer: Callable[[], Any],
        materialized: Materialized | str | None = None,
        named: Any = None,
    ) -> KTable:
        """The aggregate per key and window over all cogrouped streams."""
        c = self._cogrouped
        b = c._builder
        mat = as_materialized(materialized)
        store_name = mat.store_name or b.new_store_name(AGGREGATE_NAME)
        w = self.windows
        on_update = EmitStrategy.on_window_update()
        size, retention = window_size_and_retention(w)

        def make(aggregator: Aggregator) -> Any:
            return time_windowed_aggregate_supplier(
                w, store_name, on_update, initializer, aggregator
            )

        store_builder = b.window_store_builder(
            mat,
            store_name,
            window_size_ms=size,
            grace_ms=w.grace_period_ms(),
            default_retention_ms=retention,
            time_ordered=False,
            key_serde=mat.key_serde,
            value_serde=mat.value_serde,
        )
        return c._agg_builder.build(
            list(c._patterns),
            named,
            store_name,
            store_builder,
            make,
            serdes.TimeWindowedSerde(mat.key_serde, size),
            mat.value_serde,
            mat.store_name,
            window_grace_ms=w.grace_period_ms(),
        )


class SessionWindowedCogroupedKStream:
    """A cogroup over session windows: sessions of all streams merge with ``merger``."""

    def __init__(self, cogrouped: CogroupedKStream, windows: SessionWindows) -> None:
        self._cogrouped = cogrouped
        self.windows = windows

    def aggregate(
        self,
        initializer: Callable[[], Any],
        merger: Callable[[Any, Any, Any], Any],
        materialized: Materialized | str | None = None,
        named: Any = None,
    ) -> KTable:
        """The aggregate per key and session over all cogrouped streams."""
        from streaming.dsl.processors.session_aggregate import (
            KStreamSessionWindowAggregateSupplier,
        )

        c = self._cogrouped
        b = c._builder
        mat = as_materialized(materialized)
        store_name = mat.store_name or b.new_store_name(AGGREGATE_NAME)
        w = self.windows
        on_update = EmitStrategy.on_window_update()
        store_builder = b.session_store_builder(
            mat,
            store_name,
            default_retention_ms=w.gap_ms + w.grace_ms,
            gap_ms=w.gap_ms,
            grace_ms=w.grace_ms,
            emit_on_close=False,
            key_serde=mat.key_serde,
            value_serde=mat.value_serde,
        )
        return c._agg_builder.build(
            list(c._patterns),
            named,
            store_name,
            store_builder,
            lambda aggregator: KStreamSessionWindowAggregateSupplier(
                w, store_name, on_update, initializer, aggregator, merger
            ),
            serdes.SessionWindowedSerde(mat.key_serde),
            mat.value_serde,
            mat.store_name,
            window_grace_ms=w.gap_ms + w.grace_ms,
        )
