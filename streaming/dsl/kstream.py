"""``KStream``: an unbounded stream of records, and its stateless operators."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from streaming.dsl.joins.kinds import INNER, LEFT, OUTER
from streaming.dsl.naming import as_name
from streaming.dsl.options import (
    Branched,
    Grouped,
    Materialized,
    Printed,
    Produced,
    Repartitioned,
    as_materialized,
)
from streaming.dsl.processors import stateless
from streaming.dsl.processors.table import KTableSourceSupplier
from streaming.dsl.repartition import create_repartition
from streaming.dsl.suppliers import check_supplier
from streaming.topology.processor import ProcessorSupplier

if TYPE_CHECKING:
    from streaming.dsl.builder import InternalBuilder
    from streaming.dsl.grouped import KGroupedStream
    from streaming.dsl.ktable import KTable
    from streaming.dsl.repartition import NullKeyFilter


class KStream:
    """A record stream. Operators return new streams; nothing runs until the topology does."""

    #: set by repartition_for_join on the stream it repartitioned: (source name, filter) of
    #: the repartition, which a later unnamed join of the same stream reuses
    _join_repartition: tuple[str, NullKeyFilter] | None

    def __init__(
        self,
        builder: InternalBuilder,
        name: str,
        key_serde: Any,
        value_serde: Any,
        *,
        repartition_required: bool,
    ) -> None:
        self._builder = builder
        self.name = name
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.repartition_required = repartition_required

    def _add(
        self,
        prefix: str,
        factory: Callable[[], Any],
        named: Any = None,
        *,
        key_serde: Any = None,
        value_serde: Any = None,
        key_changing: bool = False,
        value_changing: bool = False,
        keep_value_serde: bool = True,
        keep_key_serde: bool = True,
    ) -> KStream:
        name = self._builder.name_or(as_name(named), prefix)
        self._builder.topology.add_processor(name, stateless.supplier(factory), self.name)
        if key_changing:
            self._builder.graph.key_changing.add(name)
        if value_changing:
            self._builder.graph.value_changing.add(name)
        return KStream(
            self._builder,
            name,
            key_serde if key_serde is not None else (self.key_serde if keep_key_serde else None),
            value_serde
            if value_serde is not None
            else (self.value_serde if keep_value_serde else None),
            repartition_required=self.repartition_required or key_changing,
        )

    # -- stateless --------------------------------------------------------------------

    def filter(self, predicate: Callable[[Any, Any], bool], named: Any = None) -> KStream:
        """Keep records for which ``predicate(key, value)`` is true."""
        return self._add(
            "KSTREAM-FILTER-", lambda: stateless.FilterProcessor(predicate, False), named
        )

    def filter_not(self, predicate: Callable[[Any, Any], bool], named: Any = None) -> KStream:
        """Drop records for which ``predicate(key, value)`` is true."""
        return self._add(
            "KSTREAM-FILTER-", lambda: stateless.FilterProcessor(predicate, True), named
        )

    def map(self, mapper: Callable[[Any, Any], tuple[Any, Any]], named: Any = None) -> KStream:
        """A new ``(key, value)`` per record; marks the stream for repartitioning."""
        return self._add(
            "KSTREAM-MAP-",
            lambda: stateless.MapProcessor(mapper),
            named,
            key_changing=True,
            keep_key_serde=False,
            keep_value_serde=False,
        )

    def map_values(
        self, mapper: Callable[..., Any], named: Any = None, *, with_key: bool = False
    ) -> KStream:
        """A new value per record (``mapper(value)``, or ``mapper(key, value)`` with_key)."""
        return self._add(
            "KSTREAM-MAPVALUES-",
            lambda: stateless.MapValuesProcessor(mapper, with_key),
            named,
            value_changing=True,
            keep_value_serde=False,
        )

    def select_key(self, selector: Callable[[Any, Any], Any], named: Any = None) -> KStream:
        """A new key per record; marks the stream for repartitioning."""
        return self._add(
            "KSTREAM-KEY-SELECT-",
            lambda: stateless.SelectKeyProcessor(selector),
            named,
            key_changing=True,
            keep_key_serde=False,
        )

    def flat_map(
        self, mapper: Callable[[Any, Any], Iterable[tuple[Any, Any]]], named: Any = None
    ) -> KStream:
        """Zero or more ``(key, value)`` pairs per record."""
        return self._add(
            "KSTREAM-FLATMAP-",
            lambda: stateless.FlatMapProcessor(mapper),
            named,
            key_changing=True,
            keep_key_serde=False,
            keep_value_serde=False,
        )

    def flat_map_values(
        self, mapper: Callable[..., Iterable[Any]], named: Any = None, *, with_key: bool = False
    ) -> KStream:
        """Zero or more values per record, same key."""
        return self._add(
            "KSTREAM-FLATMAPVALUES-",
            lambda: stateless.FlatMapValuesProcessor(mapper, with_key),
            named,
            value_changing=True,
            keep_value_serde=False,
        )

    def peek(self, action: Callable[[Any, Any], None], named: Any = None) -> KStream:
        """Call ``action(key, value)`` and pass the record on."""
        return self._add("KSTREAM-PEEK-", lambda: stateless.PeekProcessor(action, True), named)

    def foreach(self, action: Callable[[Any, Any], None], named: Any = None) -> None:
        """Call ``action(key, value)`` for every record (terminal)."""
        self._add("KSTREAM-FOREACH-", lambda: stateless.PeekProcessor(action, False), named)

    def print(self, printed: Printed | None = None) -> None:
        """Write every record as a line ``[label]: key, value`` (terminal; for debugging):
        ``Printed.to_sys_out()`` or ``Printed.to_file(path)``, ``.with_label(...)``; the
        label defaults to the processor's name, as in Kafka."""
        p = printed or Printed.to_sys_out()
        name = self._builder.name_or(p.name, "KSTREAM-PRINTER-")
        label = p.label if p.label is not None else name
        self._builder.topology.add_processor(
            name,
            stateless.supplier(lambda: stateless.PrintProcessor(label, p.mapper, p.path)),
            self.name,
        )

    def merge(self, other: KStream, named: Any = None) -> KStream:
        """Records of both streams, interleaved as they arrive."""
        if other._builder is not self._builder:
            raise ValueError("merge() needs two streams of the same StreamsBuilder")
        name = self._builder.name_or(as_name(named), "KSTREAM-MERGE-")
        self._builder.topology.add_processor(
            name, stateless.supplier(stateless.PassThrough), self.name, other.name
        )
        self._builder.graph.merge.append(name)
        # KStreamImpl.doMerge: no serdes, "as we cannot safely use either one"
        return KStream(
            self._builder,
            name,
            None,
            None,
            repartition_required=self.repartition_required or other.repartition_required,
        )

    def split(self, named: Any = None) -> BranchedKStream:
        """Route records into branches by predicate: ``split().branch(p).default_branch()``."""
        splitter = self._builder.name_or(as_name(named), "KSTREAM-BRANCH-")
        return BranchedKStream(self, splitter)

    # -- repartitioning / grouping ----------------------------------------------------

    def repartition(self, repartitioned: Repartitioned | None = None) -> KStream:
        """Write through an internal topic (re-keyed data lands on the right partition)."""
        rp = repartitioned or Repartitioned()
        name = rp.name or self._builder.new_processor_name("KSTREAM-REPARTITION-")
        key_serde = rp.key_serde or self.key_serde
        value_serde = rp.value_serde or self.value_serde
        source = create_repartition(
            self._builder,
            self.name,
            name,
            key_serde,
            value_serde,
            rp.partitioner,
            rp.number_of_partitions,
            optimizable=False,
        )
        return KStream(self._builder, source, key_serde, value_serde, repartition_required=False)

    def group_by_key(self, grouped: Grouped | None = None) -> KGroupedStream:
        """Group by the current key (repartitions first if the key was changed)."""
        g = grouped or Grouped()
        return self._builder.new_grouped_stream(
            self.name,
            g,
            g.key_serde or self.key_serde,
            g.value_serde or self.value_serde,
            repartition_required=self.repartition_required,
        )

    def group_by(
        self,
        selector: Callable[[Any, Any], Any],
        grouped: Grouped | None = None,
        *,
        key_serde: Any = None,
        value_serde: Any = None,
    ) -> KGroupedStream:
        """Group by a new key ``selector(key, value)`` (always repartitions)."""
        g = grouped or Grouped()
        name = self._builder.name_or(g.name, "KSTREAM-KEY-SELECT-")
        self._builder.topology.add_processor(
            name, stateless.supplier(lambda: stateless.SelectKeyProcessor(selector)), self.name
        )
        self._builder.graph.key_changing.add(name)
        return self._builder.new_grouped_stream(
            name,
            g,
            key_serde or g.key_serde,
            value_serde or g.value_serde or self.value_serde,
            repartition_required=True,
        )

    # -- sinks and tables -------------------------------------------------------------

    def to(
        self,
        topic: str | Callable[[Any, Any, Any], str],
        produced: Produced | None = None,
        *,
        key_serde: Any = None,
        value_serde: Any = None,
        partitioner: Any = None,
    ) -> None:
        """Write every record to ``topic`` (or to ``topic(key, value, record_context)``)."""
        p = produced or Produced()
        name = self._builder.name_or(p.name, "KSTREAM-SINK-")
        self._builder.topology.add_sink(
            name,
            topic,
            self.name,
            key_serde=key_serde or p.key_serde or self.key_serde,
            value_serde=value_serde or p.value_serde or self.value_serde,
            partitioner=partitioner or p.partitioner,
        )

    def to_table(self, materialized: Materialized | str | None = None, named: Any = None) -> KTable:
        """This stream as a changelog: each record upserts its key (null values delete)."""
        b = self._builder
        name = b.name_or(as_name(named), "KSTREAM-TOTABLE-")
        mat = as_materialized(materialized)
        store_name = mat.store_name or b.new_store_name("KSTREAM-TOTABLE-")
        key_serde = mat.key_serde or self.key_serde
        value_serde = mat.value_serde or self.value_serde
        parent = self.name
        if self.repartition_required:
            # Kafka passes the processor name as the prefix: a generated one gives generated
            # node names, and the topic "<name>-repartition"
            parent = create_repartition(b, self.name, name, key_serde, value_serde)
        store_builder = b.kv_store_builder(mat, store_name, key_serde, value_serde)
        supplier = KTableSourceSupplier(store_name, store_builder, b.topology, name)
        b.topology.add_processor(name, supplier, parent)
        if mat.store_name is not None:
            supplier.materialize()
        return b.new_table(
            name, supplier, key_serde, value_serde, queryable_store_name=mat.store_name
        )

    # -- Processor API ----------------------------------------------------------------

    def process(self, supplier: ProcessorSupplier, *store_names: str, named: Any = None) -> KStream:
        """Run a ``Processor`` per record; it may forward any key/value (repartition-marking)."""
        # Kafka generates a name only when none is given (no counter burn)
        check_supplier(supplier)
        name = as_name(named) or self._builder.new_processor_name("KSTREAM-PROCESSOR-")
        self._builder.topology.add_processor(name, supplier, self.name)
        self._builder.graph.process.add(name)
        if store_names:
            self._builder.topology.connect_processor_and_state_stores(name, *store_names)
        return KStream(self._builder, name, None, None, repartition_required=True)

    def process_values(
        self, supplier: ProcessorSupplier, *store_names: str, named: Any = None
    ) -> KStream:
        """Run a ``FixedKeyProcessor`` per record: values may change, keys never do."""
        # Kafka generates a name only when none is given (no counter burn)
        check_supplier(supplier)
        name = as_name(named) or self._builder.new_processor_name("KSTREAM-PROCESSVALUES-")
        self._builder.topology.add_processor(name, supplier, self.name, fixed_key=True)
        self._builder.graph.process_values.add(name)
        if store_names:
            self._builder.topology.connect_processor_and_state_stores(name, *store_names)
        return KStream(
            self._builder,
            name,
            self.key_serde,
            None,
            repartition_required=self.repartition_required,
        )

    # -- joins (streaming.dsl.joins) -----------------------------------------------------

    def join(self, other: Any, *args: Any, **kwargs: Any) -> KStream:
        """Inner join: ``join(stream, joiner, windows, stream_joined=)``,
        ``join(table, joiner, joined=)`` or ``join(global_table, key_selector, joiner)``."""
        return self._builder.stream_join(self, other, INNER, args, kwargs)

    def left_join(self, other: Any, *args: Any, **kwargs: Any) -> KStream:
        """Left join: every record of this stream gives a result (the other side may be None)."""
        return self._builder.stream_join(self, other, LEFT, args, kwargs)

    def outer_join(self, other: Any, *args: Any, **kwargs: Any) -> KStream:
        """Outer join of two streams: ``outer_join(stream, joiner, windows, stream_joined=)``."""
        return self._builder.stream_join(self, other, OUTER, args, kwargs)

    def __repr__(self) -> str:
        return f"KStream({self.name})"


class BranchedKStream:
    """The result of ``split()``: add branches, then finish with ``default_branch``/``no_default_branch``."""

    def __init__(self, stream: KStream, splitter: str) -> None:
        self._stream = stream
        self._splitter = splitter
        self._predicates: list[Callable[[Any, Any], bool]] = []
        self._children: list[str] = []
        self._branches: dict[str, KStream] = {}
        self._added = False

    def _child_name(self, branched: Branched, index: int) -> str:
        return f"{self._splitter}{branched.name if branched.name else index}"

    def _ensure_node(self) -> None:
        if not self._added:
            predicates, children = self._predicates, self._children
            self._stream._builder.topology.add_processor(
                self._splitter,
                stateless.supplier(lambda: stateless.BranchProcessor(predicates, children)),
                self._stream.name,
            )
            self._added = True

    def _add_branch(self, branched: Branched, index: int) -> None:
        self._ensure_node()
        child = self._child_name(branched, index)
        b = self._stream._builder
        b.topology.add_processor(child, stateless.supplier(stateless.PassThrough), self._splitter)
        self._children.append(child)
        branch = KStream(
            b,
            child,
            self._stream.key_serde,
            self._stream.value_serde,
            repartition_required=self._stream.repartition_required,
        )
        if branched.function is not None:
            result = branched.function(branch)
            if result is not None:
                self._branches[child] = result
        elif branched.consumer is not None:
            branched.consumer(branch)
        else:
            self._branches[child] = branch

    def branch(
        self,
        predicate: Callable[[Any, Any], bool],
        branched: Branched | str | None = None,
        *,
        named: str | None = None,
    ) -> BranchedKStream:
        """Records matching ``predicate`` (and no earlier one) go to this branch."""
        br = branched if isinstance(branched, Branched) else Branched(name=branched or named)
        self._predicates.append(predicate)
        self._add_branch(br, len(self._predicates))
        return self

    def default_branch(
        self, branched: Branched | str | None = None, *, named: str | None = None
    ) -> dict[str, KStream]:
        """Records matching no predicate go here; returns the branches by name."""
        br = branched if isinstance(branched, Branched) else Branched(name=branched or named)
        self._add_branch(br, 0)
        return self._branches

    def no_default_branch(self) -> dict[str, KStream]:
        """Records matching no predicate are dropped; returns the branches by name."""
        self._ensure_node()
        return self._branches
