"""Grouped streams and their aggregations: plain, time-windowed, sliding and session."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, overload

from streaming import serdes
from streaming.dsl.naming import as_name
from streaming.dsl.options import Grouped, Materialized, as_materialized
from streaming.dsl.processors.quiet_close import check_quiet_ms
from streaming.dsl.repartition import create_repartition
from streaming.dsl.windowed_aggregates import time_windowed_aggregate_supplier
from streaming.dsl.windows import (
    EmitStrategy,
    SessionWindows,
    SlidingWindows,
    TimeWindows,
    Windows,
    window_size_and_retention,
)
from streaming.time import to_millis

if TYPE_CHECKING:
    from streaming.dsl.builder import InternalBuilder
    from streaming.dsl.ktable import KTable


def _count_init() -> int:
    return 0


def _count_agg(key: Any, value: Any, agg: int) -> int:
    return agg + 1


def _reduce_init() -> None:
    return None


def _reduce_aggregator(reducer: Callable[[Any, Any], Any]) -> Callable[[Any, Any, Any], Any]:
    def aggregate(key: Any, value: Any, agg: Any) -> Any:
        return value if agg is None else reducer(agg, value)

    return aggregate


def _own_quiet_ms(quiet_ms: int | timedelta) -> int:
    """The quiet time ``close_when_quiet`` was given, in ms (-1: off), checked."""
    what = "close_when_quiet(quiet_ms)"
    return check_quiet_ms(to_millis(quiet_ms, what, allow_negative=True), what)


def _burn_unnamed_count_store(builder: Any, materialized: Materialized | str | None) -> None:
    """Kafka's ``count(Materialized)`` of grouped, time- and session-windowed streams burns a
    store name first when the ``Materialized`` names none (KGroupedStreamImpl L170,
    TimeWindowedKStreamImpl L85, SessionWindowedKStreamImpl L85), so the names generated
    after it match Kafka's; ``count()`` without a ``Materialized`` does not."""
    if isinstance(materialized, Materialized) and materialized.store_name is None:
        builder.new_store_name("KSTREAM-AGGREGATE-")


class _Grouping:
    """What every grouped stream shares: the parent node and the repartition rule."""

    def __init__(
        self,
        builder: InternalBuilder,
        parent: str,
        grouped: Grouped,
        key_serde: Any,
        value_serde: Any,
        *,
        repartition_required: bool,
        shared: dict[str, Any] | None = None,
    ) -> None:
        self._builder = builder
        self._parent = parent
        self._grouped = grouped
        self.key_serde = key_serde
        self.value_serde = value_serde
        self._repartition_required = repartition_required
        # Kafka's GroupedStreamAggregateBuilder, shared with the windowed streams made from
        # this grouped stream: remembers the repartition source for reuse
        self._shared: dict[str, Any] = {} if shared is None else shared

    def _source_for(self, store_name: str) -> str:
        """The parent for the aggregate: a repartition source when the key was changed.

        Like Kafka, a repartition topic named by ``Grouped`` is created once and reused by
        every aggregation of this grouped stream (the names are still generated, burning
        counter values); otherwise each aggregation gets its own topic, named by its store.
        """
        if not self._repartition_required:
            return self._parent
        reused = self._shared.get("repartition_source")
        if self._grouped.name and reused is not None:
            for _ in range(3):  # sink, filter, source names of createRepartitionedSource
                self._builder.next_index()
            return reused
        prefix = self._grouped.name or store_name
        source = create_repartition(
            self._builder, self._parent, prefix, self.key_serde, self.value_serde
        )
        self._shared["repartition_source"] = source
        return source

    def _names(self, mat: Materialized, prefix: str, named: Any) -> tuple[str, str]:
        store = mat.store_name or self._builder.new_store_name(prefix)
        name = self._builder.name_or(as_name(named), prefix)
        return store, name


class KGroupedStream(_Grouping):
    """A stream grouped by key, ready to aggregate or to window."""

    def _aggregate(
        self,
        supplier_factory: Callable[[str], Any],
        materialized: Materialized | str | None,
        named: Any,
        prefix: str,
        value_serde: Any,
    ) -> KTable:
        b = self._builder
        mat = as_materialized(materialized)
        store_name, name = self._names(mat, prefix, named)
        source = self._source_for(store_name)
        key_serde = mat.key_serde or self.key_serde
        value_serde = mat.value_serde or value_serde
        store_builder = b.kv_store_builder(mat, store_name, key_serde, value_serde)
        supplier = supplier_factory(store_name)
        b.topology.add_processor(name, supplier, source)
        b.topology.add_state_store(store_builder, name)
        return b.new_table(
            name, supplier, key_serde, value_serde, queryable_store_name=mat.store_name
        )

    def count(self, materialized: Materialized | str | None = None, named: Any = None) -> KTable:
        """Count records per key (null keys and values are skipped)."""
        from streaming.dsl.processors.aggregate import KStreamAggregateSupplier

        _burn_unnamed_count_store(self._builder, materialized)
        return self._aggregate(
            lambda store: KStreamAggregateSupplier(store, _count_init, _count_agg),
            materialized,
            named,
            "KSTREAM-AGGREGATE-",
            serdes.Long(),  # KGroupedStreamImpl.count: Serdes.Long() unless Materialized sets one
        )

    def reduce(
        self,
        reducer: Callable[[Any, Any], Any],
        materialized: Materialized | str | None = None,
        named: Any = None,
    ) -> KTable:
        """Combine values per key with ``reducer(aggregate, value)``."""
        from streaming.dsl.processors.aggregate import KStreamReduceSupplier

        return self._aggregate(
            lambda store: KStreamReduceSupplier(store, reducer),
            materialized,
            named,
            "KSTREAM-REDUCE-",
            self.value_serde,
        )

    def aggregate(
        self,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
        materialized: Materialized | str | None = None,
        named: Any = None,
    ) -> KTable:
        """Fold values per key: ``aggregator(key, value, aggregate)`` from ``initializer()``."""
        from streaming.dsl.processors.aggregate import KStreamAggregateSupplier

        return self._aggregate(
            lambda store: KStreamAggregateSupplier(store, initializer, aggregator),
            materialized,
            named,
            "KSTREAM-AGGREGATE-",
            None,
        )

    @overload
    def windowed_by(self, windows: SessionWindows) -> SessionWindowedKStream: ...

    @overload
    def windowed_by(
        self, windows: TimeWindows | SlidingWindows | Windows
    ) -> TimeWindowedKStream: ...

    def windowed_by(
        self, windows: TimeWindows | SlidingWindows | SessionWindows | Windows
    ) -> TimeWindowedKStream | SessionWindowedKStream:
        """Aggregate per window: tumbling/hopping, sliding, session or custom (``Windows``)."""
        args = (
            self._builder,
            self._parent,
            self._grouped,
            self.key_serde,
            self.value_serde,
        )
        if isinstance(windows, TimeWindows | SlidingWindows | Windows):
            return TimeWindowedKStream(
                *args,
                windows=windows,
                repartition_required=self._repartition_required,
                shared=self._shared,
            )
        if isinstance(windows, SessionWindows):
            return SessionWindowedKStream(
                *args,
                windows=windows,
                repartition_required=self._repartition_required,
                shared=self._shared,
            )
        raise TypeError(
            "windowed_by() takes TimeWindows, SlidingWindows, SessionWindows or a Windows "
            f"subclass, got {windows!r}"
        )

    def cogroup(self, aggregator: Callable[[Any, Any, Any], Any]) -> Any:
        """Combine several grouped streams into one aggregate (see ``CogroupedKStream``)."""
        return self._builder.new_cogrouped_stream(self, aggregator)


class TimeWindowedKStream(_Grouping):
    """A grouped stream over tumbling, hopping, sliding or custom windows."""

    def __init__(
        self, *args: Any, windows: TimeWindows | SlidingWindows | Windows, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.windows = windows
        self._emit = EmitStrategy.on_window_update()
        self._close_quiet_ms: int | None = None

    def emit_strategy(self, strategy: EmitStrategy) -> TimeWindowedKStream:
        """``EmitStrategy.on_window_close()``: one final result per window, when it closes."""
        self._emit = strategy
        return self

    def close_when_quiet(self, quiet_ms: int | timedelta) -> TimeWindowedKStream:
        """Close windows on the wall clock once the input stood still for ``quiet_ms``:
        ``window.close.quiet.ms`` for this aggregation alone (and a window-close suppression
        of its result), over the application's; -1 turns it off here."""
        self._close_quiet_ms = _own_quiet_ms(quiet_ms)
        return self

    def _aggregate(
        self,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
        materialized: Materialized | str | None,
        named: Any,
        prefix: str,
        value_serde: Any,
    ) -> KTable:
        b = self._builder
        mat = as_materialized(materialized)
        store_name, name = self._names(mat, prefix, named)
        source = self._source_for(store_name)
        key_serde = mat.key_serde or self.key_serde
        value_serde = mat.value_serde or value_serde
        w = self.windows
        on_close = self._emit.kind == EmitStrategy.ON_WINDOW_CLOSE
        size, retention = window_size_and_retention(w)
        supplier = time_windowed_aggregate_supplier(
            w, store_name, self._emit, initializer, aggregator
        )
        supplier.close_quiet_ms = self._close_quiet_ms
        store_builder = b.window_store_builder(
            mat,
            store_name,
            window_size_ms=size,
            grace_ms=w.grace_period_ms(),
            default_retention_ms=retention,
            time_ordered=on_close,
            key_serde=key_serde,
            value_serde=value_serde,
            disable_caching=on_close and isinstance(w, SlidingWindows),
        )
        b.topology.add_processor(name, supplier, source)
        b.topology.add_state_store(store_builder, name)
        return b.new_table(
            name,
            supplier,
            serdes.TimeWindowedSerde(key_serde, size),
            value_serde,
            queryable_store_name=mat.store_name,
            window_grace_ms=w.grace_period_ms(),
        )

    def count(self, materialized: Materialized | str | None = None, named: Any = None) -> KTable:
        if not isinstance(self.windows, SlidingWindows):  # SlidingWindowedKStreamImpl: no burn
            _burn_unnamed_count_store(self._builder, materialized)
        return self._aggregate(
            _count_init, _count_agg, materialized, named, "KSTREAM-AGGREGATE-", serdes.Long()
        )

    def reduce(
        self,
        reducer: Callable[[Any, Any], Any],
        materialized: Materialized | str | None = None,
        named: Any = None,
    ) -> KTable:
        return self._aggregate(
            _reduce_init,
            _reduce_aggregator(reducer),
            materialized,
            named,
            "KSTREAM-REDUCE-",
            self.value_serde,
        )

    def aggregate(
        self,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
        materialized: Materialized | str | None = None,
        named: Any = None,
    ) -> KTable:
        return self._aggregate(
            initializer, aggregator, materialized, named, "KSTREAM-AGGREGATE-", None
        )


class SessionWindowedKStream(_Grouping):
    """A grouped stream over session windows."""

    def __init__(self, *args: Any, windows: SessionWindows, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.windows = windows
        self._emit = EmitStrategy.on_window_update()
        self._close_quiet_ms: int | None = None

    def emit_strategy(self, strategy: EmitStrategy) -> SessionWindowedKStream:
        self._emit = strategy
        return self

    def close_when_quiet(self, quiet_ms: int | timedelta) -> SessionWindowedKStream:
        """Close sessions on the wall clock once the input stood still for ``quiet_ms``:
        ``window.close.quiet.ms`` for this aggregation alone (and a window-close suppression
        of its result), over the application's; -1 turns it off here."""
        self._close_quiet_ms = _own_quiet_ms(quiet_ms)
        return self

    def _aggregate(
        self,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
        merger: Callable[[Any, Any, Any], Any],
        materialized: Materialized | str | None,
        named: Any,
        prefix: str,
        value_serde: Any,
    ) -> KTable:
        from streaming.dsl.processors.session_aggregate import (
            KStreamSessionWindowAggregateSupplier,
        )

        b = self._builder
        mat = as_materialized(materialized)
        store_name, name = self._names(mat, prefix, named)
        source = self._source_for(store_name)
        key_serde = mat.key_serde or self.key_serde
        value_serde = mat.value_serde or value_serde
        w = self.windows
        store_builder = b.session_store_builder(
            mat,
            store_name,
            default_retention_ms=w.gap_ms + w.grace_ms,
            gap_ms=w.gap_ms,
            grace_ms=w.grace_ms,
            emit_on_close=self._emit.kind == EmitStrategy.ON_WINDOW_CLOSE,
            key_serde=key_serde,
            value_serde=value_serde,
        )
        supplier = KStreamSessionWindowAggregateSupplier(
            w, store_name, self._emit, initializer, aggregator, merger
        )
        supplier.close_quiet_ms = self._close_quiet_ms
        b.topology.add_processor(name, supplier, source)
        b.topology.add_state_store(store_builder, name)
        return b.new_table(
            name,
            supplier,
            serdes.SessionWindowedSerde(key_serde),
            value_serde,
            queryable_store_name=mat.store_name,
            window_grace_ms=w.gap_ms + w.grace_ms,  # a session closes gap + grace after its end
        )

    def count(self, materialized: Materialized | str | None = None, named: Any = None) -> KTable:
        _burn_unnamed_count_store(self._builder, materialized)
        return self._aggregate(
            _count_init,
            _count_agg,
            lambda k, a, b: a + b,
            materialized,
            named,
            "KSTREAM-AGGREGATE-",
            serdes.Long(),
        )

    def reduce(
        self,
        reducer: Callable[[Any, Any], Any],
        materialized: Materialized | str | None = None,
        named: Any = None,
    ) -> KTable:
        return self._aggregate(
            _reduce_init,
            _reduce_aggregator(reducer),
            lambda k, a, b: b if a is None else reducer(a, b),
            materialized,
            named,
            "KSTREAM-REDUCE-",
            self.value_serde,
        )

    def aggregate(
        self,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
        merger: Callable[[Any, Any, Any], Any],
        materialized: Materialized | str | None = None,
        named: Any = None,
    ) -> KTable:
        return self._aggregate(
            initializer, aggregator, merger, materialized, named, "KSTREAM-AGGREGATE-", None
        )


class KGroupedTable:
    """A table re-grouped by a new key: aggregate with an adder and a subtractor."""

    def __init__(
        self,
        builder: InternalBuilder,
        parent: str,
        grouped: Grouped,
        key_serde: Any,
        value_serde: Any,
    ) -> None:
        self._builder = builder
        self._parent = parent
        self._grouped = grouped
        self.key_serde = key_serde
        self.value_serde = value_serde
        self._repartition_source: str | None = None

    def _aggregate(
        self,
        supplier_factory: Callable[[str], Any],
        materialized: Materialized | str | None,
        named: Any,
        prefix: str,
        value_serde: Any,
    ) -> KTable:
        from streaming.dsl.change import ChangedSerde

        b = self._builder
        mat = as_materialized(materialized)
        # Kafka's KGroupedTableImpl names the store KTABLE-AGGREGATE-... for reduce too
        store_name = mat.store_name or b.new_store_name("KTABLE-AGGREGATE-")
        user_name = as_name(named)
        # Kafka's suffixWithOrElseGet: the counter advances even for user names
        sink = b.new_processor_name("KSTREAM-SINK-")
        sink = f"{user_name}-sink" if user_name else sink
        source = b.new_processor_name("KSTREAM-SOURCE-")
        source = f"{user_name}-source" if user_name else source
        name = b.name_or(user_name, prefix)
        topic = f"{self._grouped.name or store_name}-repartition"
        # Kafka's KGroupedTableImpl.doAggregate: a named grouping writes one repartition
        # topic, whatever number of aggregations read it
        if self._grouped.name and self._repartition_source is not None:
            source = self._repartition_source
        else:
            changed = _LazyChangedSerde(self.value_serde, ChangedSerde)
            b.topology.add_internal_topic(topic)
            b.topology.add_sink(
                sink, topic, self._parent, key_serde=self.key_serde, value_serde=changed
            )
            b.topology.add_source(source, topic, key_serde=self.key_serde, value_serde=changed)
            self._repartition_source = source
        key_serde = mat.key_serde or self.key_serde
        value_serde = mat.value_serde or value_serde
        store_builder = b.kv_store_builder(mat, store_name, key_serde, value_serde)
        supplier = supplier_factory(store_name)
        b.topology.add_processor(name, supplier, source)
        b.topology.add_state_store(store_builder, name)
        return b.new_table(
            name, supplier, key_serde, value_serde, queryable_store_name=mat.store_name
        )

    def count(self, materialized: Materialized | str | None = None, named: Any = None) -> KTable:
        from streaming.dsl.processors.table_aggregate import KTableAggregateSupplier

        return self._aggregate(
            lambda store: KTableAggregateSupplier(
                store, _count_init, lambda k, v, a: a + 1, lambda k, v, a: a - 1
            ),
            materialized,
            named,
            "KTABLE-AGGREGATE-",
            serdes.Long(),
        )

    def reduce(
        self,
        adder: Callable[[Any, Any], Any],
        subtractor: Callable[[Any, Any], Any],
        materialized: Materialized | str | None = None,
        named: Any = None,
    ) -> KTable:
        from streaming.dsl.processors.table_aggregate import KTableReduceSupplier

        return self._aggregate(
            lambda store: KTableReduceSupplier(store, adder, subtractor),
            materialized,
            named,
            "KTABLE-REDUCE-",
            self.value_serde,
        )

    def aggregate(
        self,
        initializer: Callable[[], Any],
        adder: Callable[[Any, Any, Any], Any],
        subtractor: Callable[[Any, Any, Any], Any],
        materialized: Materialized | str | None = None,
        named: Any = None,
    ) -> KTable:
        from streaming.dsl.processors.table_aggregate import KTableAggregateSupplier

        return self._aggregate(
            lambda store: KTableAggregateSupplier(store, initializer, adder, subtractor),
            materialized,
            named,
            "KTABLE-AGGREGATE-",
            None,
        )


class _LazyChangedSerde:
    """``ChangedSerde`` whose inner serde may be the task's default, resolved at init."""

    def __init__(self, inner: Any, factory: Any) -> None:
        self.inner = inner
        self._factory = factory
        self._resolved = factory(inner) if inner is not None else None

    def with_default(self, default: Any) -> Any:
        return self._resolved if self._resolved is not None else self._factory(default)
