"""``StreamsBuilder``: the entry point of the DSL, and the naming/materialising helpers.

Nodes are added to the ``Topology`` as DSL calls are made, named exactly as Kafka
Streams names them (``KSTREAM-FILTER-0000000001``, one counter per builder), so that
``describe()`` output, store names and internal topic names match the Java reference.

This module sits on top of the DSL: ``InternalBuilder`` makes the streams, tables and
groupings and dispatches joins, so their modules refer to each other only in type hints.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from streaming.dsl.cogroup import CogroupedKStream
from streaming.dsl.graph_marks import GraphMarks
from streaming.dsl.grouped import KGroupedStream, KGroupedTable
from streaming.dsl.joins import foreign_key, global_table, stream_stream, stream_table, table_table
from streaming.dsl.joins.kinds import OUTER
from streaming.dsl.kstream import KStream
from streaming.dsl.ktable import GlobalKTable, KTable
from streaming.dsl.optimizer import optimize
from streaming.dsl.options import Consumed, Grouped, Materialized, as_materialized
from streaming.dsl.processors.table import KTableSourceSupplier, TableSupplier
from streaming.errors import TopologyException
from streaming.time import to_millis
from streaming.topology.graph import Topology
from streaming.topology.nodes import SinkNode, SourceNode


class InternalBuilder:
    """Shared state of one DSL build: the topology and the name counter."""

    def __init__(self) -> None:
        self.topology = Topology()
        self._index = 0
        #: (source read back from the repartition topic, the null-key filter in front of it)
        self.repartitions: list[tuple[str, Any]] = []
        #: processors of left/outer joins (Kafka's ``NULL_KEY_RELAXED_JOIN`` label)
        self.null_key_relaxed_joins: set[str] = set()
        #: what ``topology.optimization`` needs to know (streaming.dsl.optimizer)
        self.graph = GraphMarks()
        self.optimized = False
        #: errors Kafka raises at build() rather than when the DSL call is made
        self.deferred_errors: list[Exception] = []
        #: the source node of each ``stream()`` topic set or pattern, for a second
        #: ``stream()`` on the same ones to share (``mergeDuplicateSourceNodes``)
        self.stream_sources: dict[frozenset[str] | tuple[str, int], str] = {}

    def stream_source_of(self, subscription: frozenset[str] | tuple[str, int]) -> str | None:
        """Kafka's ``mergeDuplicateSourceNodes`` (KAFKA-6687): ``stream()`` on the topics or
        pattern of an earlier ``stream()`` shares its source node; a topic set that overlaps
        an earlier one without being equal to it is refused."""
        merged = self.stream_sources.get(subscription)
        if merged is None and isinstance(subscription, frozenset):
            for other in self.stream_sources:
                if isinstance(other, frozenset) and other & subscription:
                    raise TopologyException(
                        "Two source nodes are subscribed to overlapping but not equal input "
                        f"topics: {sorted(other)} and {sorted(subscription)}."
                    )
        return merged

    def rewrite_repartition_nodes(self) -> None:
        """Kafka's ``rewriteRepartitionNodes`` (KIP-962): a repartition topic lets null keys
        through when a left or outer join lies anywhere downstream of it, and drops them
        otherwise. Downstream follows processors, and repartition sinks to the sources that
        read their topic back."""
        topology = self.topology
        readers: dict[str, list[str]] = {}
        for node in topology.nodes.values():
            if isinstance(node, SourceNode):
                for topic in node.topics:
                    readers.setdefault(topic, []).append(node.name)

        def downstream(name: str) -> list[str]:
            node = topology.nodes[name]
            if isinstance(node, SinkNode) and node.topic in topology.internal_topics:
                return readers.get(node.topic, [])
            return node.children

        for source, null_key_filter in self.repartitions:
            seen, stack, relaxed = {source}, [source], False
            while stack and not relaxed:
                name = stack.pop()
                relaxed = name in self.null_key_relaxed_joins
                for child in downstream(name):
                    if child not in seen:
                        seen.add(child)
                        stack.append(child)
            null_key_filter.relaxed = relaxed

    def next_index(self) -> int:
        index = self._index
        self._index += 1
        return index

    def new_processor_name(self, prefix: str) -> str:
        return f"{prefix}{self.next_index():010d}"

    def new_store_name(self, prefix: str) -> str:
        return f"{prefix}STATE-STORE-{self.next_index():010d}"

    def name_or(self, name: str | None, prefix: str) -> str:
        """A user name, or a generated one; like Kafka's ``orElseGenerateWithPrefix`` the
        counter advances in both cases (so later generated names match Kafka's)."""
        generated = self.new_processor_name(prefix)
        return name if name else generated

    # -- stores -----------------------------------------------------------------------

    def kv_store_builder(
        self, materialized: Materialized, name: str, key_serde: Any, value_serde: Any
    ) -> Any:
        """A timestamped key-value store builder for a KTable or aggregation."""
        from streaming.state import Stores

        key_serde = materialized.key_serde or key_serde
        value_serde = materialized.value_serde or value_serde
        if materialized.store_supplier is not None:
            supplier = materialized.store_supplier
        elif materialized.versioned_history_retention_ms is not None:
            supplier = Stores.persistent_versioned_key_value_store(
                name, materialized.versioned_history_retention_ms
            )
        elif materialized.store_type == "in_memory":
            supplier = Stores.in_memory_key_value_store(name)
        else:
            supplier = Stores.persistent_timestamped_key_value_store(name)
        if getattr(supplier, "versioned", False):
            # Kafka's KeyValueStoreMaterializer: versioned stores are never cached
            builder = Stores.versioned_key_value_store_builder(supplier, key_serde, value_serde)
            if materialized.logging_enabled:
                return builder.with_logging_enabled(dict(materialized.log_config))
            return builder.with_logging_disabled()
        builder = Stores.timestamped_key_value_store_builder(supplier, key_serde, value_serde)
        return self._configure(builder, materialized)

    @staticmethod
    def _configure(builder: Any, materialized: Materialized) -> Any:
        builder = (
            builder.with_caching_enabled()
            if materialized.caching_enabled
            else builder.with_caching_disabled()
        )
        if materialized.logging_enabled:
            return builder.with_logging_enabled(dict(materialized.log_config))
        return builder.with_logging_disabled()

    def window_store_builder(
        self,
        materialized: Materialized,
        name: str,
        *,
        window_size_ms: int,
        grace_ms: int,
        default_retention_ms: int,
        time_ordered: bool,
        key_serde: Any,
        value_serde: Any,
        disable_caching: bool = False,
    ) -> Any:
        """A timestamped window store for a windowed aggregation (Kafka's materialize())."""
        from streaming.state import Stores

        retention = (
            materialized.retention_ms
            if materialized.retention_ms is not None
            else default_retention_ms
        )
        if retention < window_size_ms + grace_ms:
            raise ValueError(
                f"The retention period of the window store {name} must be no smaller than its "
                f"window size plus the grace period. Got size=[{window_size_ms}], "
                f"grace=[{grace_ms}], retention=[{retention}]"
            )
        key_serde = materialized.key_serde or key_serde
        value_serde = materialized.value_serde or value_serde
        if materialized.store_supplier is not None:
            supplier = materialized.store_supplier
        elif materialized.store_type == "in_memory":
            # Kafka's InMemoryDslStoreSuppliers: the same in-memory store for every emit strategy
            supplier = Stores.in_memory_window_store(name, retention, window_size_ms, False)
        elif time_ordered:
            supplier = Stores.persistent_time_ordered_window_store(
                name, retention, window_size_ms, False
            )
        else:
            supplier = Stores.persistent_timestamped_window_store(
                name, retention, window_size_ms, False
            )
        builder = Stores.timestamped_window_store_builder(supplier, key_serde, value_serde)
        if time_ordered and disable_caching:
            # Kafka's SlidingWindowStoreMaterializer: no cache under emit-on-window-close
            materialized = Materialized(
                store_name=materialized.store_name,
                caching_enabled=False,
                logging_enabled=materialized.logging_enabled,
                log_config=materialized.log_config,
            )
        return self._configure(builder, materialized)

    def session_store_builder(
        self,
        materialized: Materialized,
        name: str,
        *,
        default_retention_ms: int,
        gap_ms: int,
        grace_ms: int,
        emit_on_close: bool,
        key_serde: Any,
        value_serde: Any,
    ) -> Any:
        """A session store for a session-windowed aggregation."""
        from streaming.state import Stores

        retention = (
            materialized.retention_ms
            if materialized.retention_ms is not None
            else default_retention_ms
        )
        if retention < gap_ms + grace_ms:
            raise ValueError(
                f"The retention period of the session store {name} must be no smaller than the "
                f"session inactivity gap plus the grace period. Got gap=[{gap_ms}], "
                f"grace=[{grace_ms}], retention=[{retention}]"
            )
        key_serde = materialized.key_serde or key_serde
        value_serde = materialized.value_serde or value_serde
        if materialized.store_supplier is not None:
            supplier = materialized.store_supplier
        elif materialized.store_type == "in_memory":
            supplier = Stores.in_memory_session_store(name, retention)
        else:
            supplier = Stores.persistent_session_store(name, retention)
        builder = Stores.session_store_builder(supplier, key_serde, value_serde)
        if emit_on_close:
            materialized = Materialized(
                store_name=materialized.store_name,
                caching_enabled=False,
                logging_enabled=materialized.logging_enabled,
                log_config=materialized.log_config,
            )
        return self._configure(builder, materialized)

    # -- API objects ------------------------------------------------------------------
    # The streams, tables and groupings make each other through these (and join through
    # the dispatch below), so their modules need not import one another.

    def new_stream(
        self, name: str, key_serde: Any, value_serde: Any, *, repartition_required: bool
    ) -> KStream:
        return KStream(
            self, name, key_serde, value_serde, repartition_required=repartition_required
        )

    def new_table(
        self,
        name: str,
        supplier: TableSupplier,
        key_serde: Any,
        value_serde: Any,
        *,
        queryable_store_name: str | None = None,
        window_grace_ms: int | None = None,
    ) -> KTable:
        return KTable(
            self,
            name,
            supplier,
            key_serde,
            value_serde,
            queryable_store_name=queryable_store_name,
            window_grace_ms=window_grace_ms,
        )

    def new_grouped_stream(
        self,
        parent: str,
        grouped: Grouped,
        key_serde: Any,
        value_serde: Any,
        *,
        repartition_required: bool,
    ) -> KGroupedStream:
        return KGroupedStream(
            self,
            parent,
            grouped,
            key_serde,
            value_serde,
            repartition_required=repartition_required,
        )

    def new_grouped_table(
        self, parent: str, grouped: Grouped, key_serde: Any, value_serde: Any
    ) -> KGroupedTable:
        return KGroupedTable(self, parent, grouped, key_serde, value_serde)

    def new_cogrouped_stream(
        self, grouped: KGroupedStream, aggregator: Callable[[Any, Any, Any], Any]
    ) -> CogroupedKStream:
        return CogroupedKStream(self, grouped, aggregator)

    # -- joins: the module that builds one depends on what is joined (streaming.dsl.joins)

    def stream_join(
        self, stream: KStream, other: Any, kind: str, args: tuple, kwargs: dict
    ) -> KStream:
        """A KStream join, dispatched on the type of ``other``."""
        if isinstance(other, KStream):
            return stream_stream.join(stream, other, kind, *args, **kwargs)
        if kind == OUTER:
            raise TypeError(f"outer_join() needs a KStream to join with, got {other!r}")
        if isinstance(other, KTable):
            return stream_table.join(stream, other, kind, *args, **kwargs)
        if isinstance(other, GlobalKTable):
            return global_table.join(stream, other, kind, *args, **kwargs)
        raise TypeError(f"a KStream joins a KStream, KTable or GlobalKTable, not {other!r}")

    def table_join(self, table: KTable, other: Any, kind: str, args: tuple, kwargs: dict) -> KTable:
        """A KTable join: on the primary key, or on a foreign key when one is extracted."""
        if not isinstance(other, KTable):
            raise TypeError(f"a KTable joins a KTable, not {other!r}")
        if "foreign_key_extractor" in kwargs or (len(args) >= 2 and callable(args[1])):
            if kind == OUTER:
                raise TypeError("a foreign-key join is inner or left, not outer")
            return foreign_key.join(table, other, kind, *args, **kwargs)
        return table_table.join(table, other, kind, *args, **kwargs)


class StreamsBuilder:
    """Build a topology with the DSL: ``stream``, ``table``, ``global_table``, then ``build``."""

    def __init__(self) -> None:
        self._internal = InternalBuilder()

    @property
    def topology(self) -> Topology:
        return self._internal.topology

    def stream(
        self,
        topics: str | list[str] | re.Pattern[str],
        *,
        key_serde: Any = None,
        value_serde: Any = None,
        timestamp_extractor: Any = None,
        consumed: Consumed | None = None,
        name: str | None = None,
    ) -> KStream:
        """A ``KStream`` over one topic, several topics, or every topic matching a pattern."""
        if consumed is not None:
            key_serde = key_serde or consumed.key_serde
            value_serde = value_serde or consumed.value_serde
            timestamp_extractor = timestamp_extractor or consumed.timestamp_extractor
            name = name or consumed.name
        b = self._internal
        source = b.name_or(name, "KSTREAM-SOURCE-")
        subscription: frozenset[str] | tuple[str, int]
        if isinstance(topics, re.Pattern):
            subscription = (topics.pattern, topics.flags)
            topic_list: list[str] = []
        else:
            topic_list = [topics] if isinstance(topics, str) else list(topics)
            if not topic_list:
                raise ValueError("stream() needs at least one topic")
            subscription = frozenset(topic_list)
        shared = b.stream_source_of(subscription)
        if shared is not None:
            # the first stream's serdes and timestamp extractor read the records
            return KStream(b, shared, key_serde, value_serde, repartition_required=False)
        b.topology.add_source(
            source,
            *topic_list,
            pattern=topics if isinstance(topics, re.Pattern) else None,
            key_serde=key_serde,
            value_serde=value_serde,
            timestamp_extractor=timestamp_extractor,
        )
        b.stream_sources[subscription] = source
        return KStream(b, source, key_serde, value_serde, repartition_required=False)

    def table(
        self,
        topic: str,
        *,
        materialized: Materialized | str | None = None,
        key_serde: Any = None,
        value_serde: Any = None,
        timestamp_extractor: Any = None,
        consumed: Consumed | None = None,
    ) -> KTable:
        """A ``KTable`` (changelog view) over a topic; materialised in a store."""
        mat = as_materialized(materialized)
        if consumed is not None:
            key_serde = key_serde or consumed.key_serde
            value_serde = value_serde or consumed.value_serde
            timestamp_extractor = timestamp_extractor or consumed.timestamp_extractor
        key_serde = key_serde or mat.key_serde
        value_serde = value_serde or mat.value_serde
        b = self._internal
        store_name = mat.store_name or f"{topic}-STATE-STORE-{b.next_index():010d}"
        # Kafka's NamedInternal: a Consumed name gives "<name>-source" (still burning an
        # index) for the source and "<name>" for the KTABLE-SOURCE processor
        user_name = consumed.name if consumed is not None else None
        source = b.new_processor_name("KSTREAM-SOURCE-")
        if user_name:
            source = f"{user_name}-source"
        table_source = b.name_or(user_name, "KTABLE-SOURCE-")
        b.topology.add_source(
            source,
            topic,
            key_serde=key_serde,
            value_serde=value_serde,
            timestamp_extractor=timestamp_extractor,
        )
        store_builder = b.kv_store_builder(mat, store_name, key_serde, value_serde)
        supplier = KTableSourceSupplier(store_name, store_builder, b.topology, table_source)
        b.topology.add_processor(table_source, supplier, source)
        b.graph.table_sources.append((source, table_source, supplier))
        if mat.store_name is not None:
            supplier.materialize()
        return KTable(
            b,
            table_source,
            supplier,
            key_serde,
            value_serde,
            queryable_store_name=mat.store_name,
        )

    def global_table(
        self,
        topic: str,
        *,
        materialized: Materialized | str | None = None,
        key_serde: Any = None,
        value_serde: Any = None,
        timestamp_extractor: Any = None,
        consumed: Consumed | None = None,
    ) -> GlobalKTable:
        """A fully replicated table over ``topic``, kept in a global store (no changelog:
        the topic is the changelog); join streams with it by a key selector."""
        mat = as_materialized(materialized)
        if mat.versioned_history_retention_ms is not None or getattr(
            mat.store_supplier, "versioned", False
        ):
            raise TopologyException("GlobalTables cannot be versioned.")
        if consumed is not None:
            key_serde = key_serde or consumed.key_serde
            value_serde = value_serde or consumed.value_serde
            timestamp_extractor = timestamp_extractor or consumed.timestamp_extractor
        key_serde = key_serde or mat.key_serde
        value_serde = value_serde or mat.value_serde
        b = self._internal
        # Kafka's order: the store name (MaterializedInternal), then the source, then the
        # KTABLE-SOURCE processor; a Consumed name gives "<name>-source" and "<name>"
        store_name = mat.store_name or f"{topic}-STATE-STORE-{b.next_index():010d}"
        user_name = consumed.name if consumed is not None else None
        source = b.new_processor_name("KSTREAM-SOURCE-")
        if user_name:
            source = f"{user_name}-source"
        processor = b.name_or(user_name, "KTABLE-SOURCE-")
        store_builder = b.kv_store_builder(mat, store_name, key_serde, value_serde)
        supplier = KTableSourceSupplier(store_name, store_builder, b.topology, processor)
        supplier.store_name = store_name  # always materialised, in the global store

        try:
            b.topology.add_global_store(
                store_builder,
                source,
                key_serde,
                value_serde,
                topic,
                processor,
                supplier,
                timestamp_extractor=timestamp_extractor,
                reprocess_on_restore=False,
            )
        except TopologyException as exc:
            # Kafka writes a global table into the topology at build(): a topic that another
            # source reads fails there, not here
            b.deferred_errors.append(exc)
        return GlobalKTable(store_name, mat.store_name, key_serde, value_serde)

    def add_state_store(self, store_builder: Any) -> StreamsBuilder:
        """Register a store for ``process(...)`` calls that name it."""
        self._internal.topology.add_state_store(store_builder)
        return self

    def build(self, config: Mapping[str, Any] | None = None) -> Topology:
        """The topology built so far (the same object on every call). With
        ``topology.optimization`` in ``config`` (``all``, or a comma-separated list of
        ``reuse.ktable.source.topics``, ``merge.repartition.topics``,
        ``single.store.self.join``), Kafka's optimizations are applied on the first call."""
        b = self._internal
        if b.deferred_errors:
            raise b.deferred_errors[0]
        if not b.optimized:
            optimize(b, config or {})
            b.optimized = True
        b.rewrite_repartition_nodes()
        return b.topology


def retention_or(default: int, materialized: Materialized) -> int:
    return materialized.retention_ms if materialized.retention_ms is not None else default


__all__ = ["InternalBuilder", "StreamsBuilder", "retention_or", "to_millis"]
