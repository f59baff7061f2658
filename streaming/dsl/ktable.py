"""``KTable``: a changelog stream viewed as a table, with its operators."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streaming.dsl.joins.kinds import INNER, LEFT, OUTER
from streaming.dsl.naming import as_name
from streaming.dsl.options import Grouped, Materialized, Named
from streaming.dsl.processors import stateless
from streaming.dsl.processors.table import (
    KTableFilterSupplier,
    KTableMapValuesSupplier,
    TableSupplier,
    ToStreamProcessor,
    WindowedAggregateSupplier,
)
from streaming.dsl.suppliers import check_supplier
from streaming.dsl.suppressed import Suppressed
from streaming.errors import TopologyException

if TYPE_CHECKING:
    from streaming.dsl.builder import InternalBuilder
    from streaming.dsl.grouped import KGroupedTable
    from streaming.dsl.kstream import KStream


class KTable:
    """A table: the latest value per key, updated by a changelog of ``Change`` records."""

    def __init__(
        self,
        builder: InternalBuilder,
        name: str,
        supplier: TableSupplier,
        key_serde: Any,
        value_serde: Any,
        *,
        queryable_store_name: str | None = None,
        window_grace_ms: int | None = None,
    ) -> None:
        self._builder = builder
        self.name = name
        self.supplier = supplier
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.queryable_store_name = queryable_store_name
        self.window_grace_ms = window_grace_ms

    def _derive(
        self,
        name: str,
        supplier: TableSupplier,
        value_serde: Any,
        store_name: str | None,
        key_serde: Any = None,
    ) -> KTable:
        return KTable(
            self._builder,
            name,
            supplier,
            key_serde if key_serde is not None else self.key_serde,
            value_serde,
            queryable_store_name=store_name,
            window_grace_ms=self.window_grace_ms,
        )

    def _materialized_store(
        self, materialized: Materialized | str | None, prefix: str, value_serde: Any
    ) -> tuple[str | None, Any]:
        if materialized is None:
            return None, None
        mat = (
            Materialized(store_name=materialized) if isinstance(materialized, str) else materialized
        )
        name = mat.store_name or self._builder.new_store_name(prefix)
        if mat.store_name is None:
            # Kafka does not materialise a store whose name it generated for filter/map_values
            return None, None
        return name, self._builder.kv_store_builder(
            mat, name, mat.key_serde or self.key_serde, mat.value_serde or value_serde
        )

    def _filter(
        self, predicate: Callable[[Any, Any], bool], negate: bool, named: Any, materialized: Any
    ) -> KTable:
        store_name, store_builder = self._materialized_store(
            materialized, "KTABLE-FILTER-", self.value_serde
        )
        name = self._builder.name_or(as_name(named), "KTABLE-FILTER-")
        supplier = KTableFilterSupplier(self.supplier, predicate, negate, store_name, store_builder)
        self._builder.topology.add_processor(name, supplier, self.name)
        # KTableImpl.doFilter: Materialized's serdes, else the parent's
        mat = materialized if isinstance(materialized, Materialized) else None
        return self._derive(
            name,
            supplier,
            (mat and mat.value_serde) or self.value_serde,
            store_name,
            key_serde=mat.key_serde if mat is not None else None,
        )

    def filter(
        self,
        predicate: Callable[[Any, Any], bool],
        named: Any = None,
        materialized: Materialized | str | None = None,
    ) -> KTable:
        """Rows for which ``predicate(key, value)`` holds; others become tombstones."""
        return self._filter(predicate, False, named, materialized)

    def filter_not(
        self,
        predicate: Callable[[Any, Any], bool],
        named: Any = None,
        materialized: Materialized | str | None = None,
    ) -> KTable:
        """Rows for which ``predicate(key, value)`` does not hold."""
        return self._filter(predicate, True, named, materialized)

    def map_values(
        self,
        mapper: Callable[..., Any],
        named: Any = None,
        materialized: Materialized | str | None = None,
        *,
        with_key: bool = False,
    ) -> KTable:
        """A new value per row (``mapper(value)``, or ``mapper(key, value)`` with_key)."""
        mat_serde = materialized.value_serde if isinstance(materialized, Materialized) else None
        store_name, store_builder = self._materialized_store(
            materialized, "KTABLE-MAPVALUES-", mat_serde
        )
        name = self._builder.name_or(as_name(named), "KTABLE-MAPVALUES-")
        supplier = KTableMapValuesSupplier(
            self.supplier, mapper, with_key, store_name, store_builder
        )
        self._builder.topology.add_processor(name, supplier, self.name)
        # KTableImpl.mapValues: Materialized's key serde, else the parent's; its value serde
        key_serde = materialized.key_serde if isinstance(materialized, Materialized) else None
        return self._derive(name, supplier, mat_serde, store_name, key_serde=key_serde)

    def transform_values(
        self,
        transformer_supplier: Callable[[], Any],
        *store_names: str,
        materialized: Materialized | str | None = None,
        named: Any = None,
    ) -> KTable:
        """A new value per row from a ``ValueTransformerWithKey`` (``init(context)``,
        ``transform(key, value)``, ``close()``) made per task by ``transformer_supplier``;
        it may use the named state stores, and sees deletes (``None``) too."""
        from streaming.dsl.processors.table_transform import KTableTransformValuesSupplier

        check_supplier(transformer_supplier)
        mat = Materialized.as_(materialized) if isinstance(materialized, str) else materialized
        store_name = store_builder = None
        key_serde = value_serde = None
        if mat is not None:
            # KTableImpl.doTransformValues: no index burnt; materialised only when named
            key_serde, value_serde = mat.key_serde, mat.value_serde
            if mat.store_name is not None:
                store_name = mat.store_name
                store_builder = self._builder.kv_store_builder(
                    mat, store_name, mat.key_serde or self.key_serde, mat.value_serde
                )
        name = self._builder.name_or(as_name(named), "KTABLE-TRANSFORMVALUES-")
        supplier = KTableTransformValuesSupplier(
            self.supplier, transformer_supplier, store_name, store_builder
        )
        self._builder.topology.add_processor(name, supplier, self.name)
        if store_names:
            self._builder.topology.connect_processor_and_state_stores(name, *store_names)
        return self._derive(name, supplier, value_serde, store_name, key_serde=key_serde)

    def to_stream(
        self, mapper: Callable[[Any, Any], Any] | None = None, named: Any = None
    ) -> KStream:
        """The changelog as a stream: one record per update (deletes as null values).
        ``to_stream(Named.as_(...))`` names it, as Kafka's ``toStream(Named)`` does."""
        if isinstance(mapper, Named):
            mapper, named = None, mapper
        name = self._builder.name_or(as_name(named), "KTABLE-TOSTREAM-")
        self._builder.topology.add_processor(
            name, stateless.supplier(lambda: ToStreamProcessor(mapper)), self.name
        )
        return self._builder.new_stream(
            name,
            None if mapper is not None else self.key_serde,
            self.value_serde,
            repartition_required=mapper is not None,
        )

    def late_records(self, named: Named | str | None = None) -> KStream:
        """The records the windowed aggregation that made this table left out as late, as
        a stream (Flink's ``sideOutputLateData``): one per (record, window), keyed by the
        record's key, valued ``LateRecord(value, window, stream_time)``. They are no longer
        logged one by one. Only a table made by a time, sliding or session windowed
        aggregation has them."""
        supplier = self.supplier
        if not isinstance(supplier, WindowedAggregateSupplier):
            raise TopologyException(
                f"late_records() needs a table made by a windowed aggregation; {self.name} is not"
            )
        if supplier.late_output is not None:
            raise TopologyException(f"late_records() of {self.name} was already called")
        b = self._builder
        name = b.name_or(as_name(named), "KTABLE-LATE-RECORDS-")
        b.topology.add_processor(
            name, stateless.supplier(stateless.PassThrough), self.name, side_output=True
        )
        supplier.late_output = name
        return b.new_stream(
            name,
            getattr(self.key_serde, "inner", None),
            None,
            repartition_required=False,
        )

    def group_by(
        self,
        selector: Callable[[Any, Any], tuple[Any, Any]],
        grouped: Grouped | None = None,
        *,
        key_serde: Any = None,
        value_serde: Any = None,
    ) -> KGroupedTable:
        """Re-group rows by ``selector(key, value) -> (new_key, new_value)``."""
        from streaming.dsl.processors.table_aggregate import KTableRepartitionMapSupplier

        g = grouped or Grouped()
        name = self._builder.name_or(g.name, "KTABLE-SELECT-")
        supplier = KTableRepartitionMapSupplier(self.supplier, selector)
        self.supplier.enable_sending_old_values(True)
        self._builder.topology.add_processor(name, supplier, self.name)
        return self._builder.new_grouped_table(
            name, g, key_serde or g.key_serde, value_serde or g.value_serde
        )

    def suppress(self, suppressed: Suppressed) -> KTable:
        """Hold updates back: until the window closes, or for a time limit per key."""
        from streaming.dsl.processors.suppress import (
            KTableSuppressSupplier,
            suppress_buffer_store_builder,
        )

        b = self._builder
        name = suppressed.name or b.new_processor_name("KTABLE-SUPPRESS-")
        if suppressed.kind == "window_close":
            if self.window_grace_ms is None:
                raise ValueError(
                    "suppress(Suppressed.until_window_closes(...)) is only supported for "
                    "windowed KTables (the result of a windowed aggregation)."
                )
            suppressed = Suppressed(
                "window_close", self.window_grace_ms, suppressed.buffer_config, suppressed.name
            )
        store_name = (
            f"{suppressed.name}-store" if suppressed.name else b.new_store_name("KTABLE-SUPPRESS-")
        )
        supplier = KTableSuppressSupplier(suppressed, store_name, self.supplier)
        store_builder = suppress_buffer_store_builder(
            store_name, self.key_serde, self.value_serde, suppressed.buffer_config.logging_enabled
        )
        b.topology.add_processor(name, supplier, self.name)
        b.topology.add_state_store(store_builder, name)
        return self._derive(name, supplier, self.value_serde, None)

    # -- joins (streaming.dsl.joins) -----------------------------------------------------

    def join(self, other: KTable, *args: Any, **kwargs: Any) -> KTable:
        """Inner join: ``join(other, joiner, named=, materialized=)`` on the primary key, or
        ``join(other, foreign_key_extractor, joiner, table_joined=, materialized=)``."""
        return self._builder.table_join(self, other, INNER, args, kwargs)

    def left_join(self, other: KTable, *args: Any, **kwargs: Any) -> KTable:
        """Left join on the primary key or a foreign key (the right side may be None)."""
        return self._builder.table_join(self, other, LEFT, args, kwargs)

    def outer_join(self, other: KTable, *args: Any, **kwargs: Any) -> KTable:
        """Outer join on the primary key: a row while either side has one."""
        return self._builder.table_join(self, other, OUTER, args, kwargs)

    def __repr__(self) -> str:
        return f"KTable({self.name})"


class GlobalKTable:
    """A fully replicated table: every instance holds the whole topic in a global store.

    Only streams join it (``KStream.join/left_join(global_table, key_selector, joiner)``);
    lookups read the store directly (Kafka's ``KTableSourceValueGetterSupplier``).
    """

    def __init__(
        self,
        store_name: str,
        queryable_store_name: str | None,
        key_serde: Any = None,
        value_serde: Any = None,
    ) -> None:
        self.store_name = store_name
        self.queryable_store_name = queryable_store_name
        self.key_serde = key_serde
        self.value_serde = value_serde

    def value_getter_supplier(self) -> Any:
        """Reads the global store by name (any processor may, without being connected)."""
        from streaming.dsl.processors.global_join import GlobalStoreValueGetterSupplier

        return GlobalStoreValueGetterSupplier(self.store_name)

    def __repr__(self) -> str:
        return f"GlobalKTable({self.store_name})"
