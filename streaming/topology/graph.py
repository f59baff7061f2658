"""The processor graph: sources, processors, sinks and the state stores they use.

Mirrors Kafka Streams' ``Topology`` / ``InternalTopologyBuilder``: nodes are kept in
insertion (topological) order, sub-topologies are the connected components of the
graph (processors sharing a store are connected; a sink and a source meet only
through a topic), numbered in node order.

Global stores (``add_global_store``, ``StreamsBuilder.global_table``) are node groups
of their own: one source reading the global topic and one processor updating the store.
``node_groups()`` numbers every group like Kafka's ``makeNodeGroups`` (global groups take
ids too, so sub-topology ids may skip one); ``subtopologies()`` lists only the groups that
make tasks. How a runtime runs global state (Kafka's ``GlobalStateUpdateTask``):

- ``topology.global_stores`` maps store name -> ``GlobalStoreDef`` (``source_name``,
  ``topic``, ``processor_name``, ``store_builder``, ``reprocess_on_restore``);
  ``global_node_names()`` gives both nodes of every global store and
  ``global_topics()`` their topics. The global nodes and stores are ordinary entries
  of ``nodes`` / ``store_builders`` (the processor is connected to its store), so a
  ``StreamTask`` built over ``global_node_names()`` is a global state task: feed it every
  partition of each global topic from the beginning (no consumer group), calling
  ``process_stamped`` with the record's own timestamp (no timestamp extractor, records
  are not ordered across partitions), and flush its stores after each batch.
- There is no changelog: the global topic is the changelog (logging is forced off).
  DSL global tables (``reprocess_on_restore`` False) may be restored by putting the
  topic's records straight into the store; ``add_global_store`` processors
  (``reprocess_on_restore`` True) must see every record again.
- Stream tasks never contain global nodes. Their processors reach global stores with
  ``context.get_state_store(name)`` without being connected: the runtime makes every
  global store visible to every task context through ``context.global_stores`` (a dict
  store name -> store; ``streaming.dsl.processors.global_join.global_store`` reads it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from streaming.errors import TopologyException
from streaming.time import as_extractor
from streaming.topology.nodes import GlobalStoreDef, NodeDef, ProcessorNodeDef, SinkNode, SourceNode
from streaming.topology.processor import ProcessorSupplier, stores_of

if TYPE_CHECKING:
    from streaming.topology.describe import TopologyDescription


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def add(self, x: str) -> None:
        self.parent.setdefault(x, x)

    def root(self, x: str) -> str:
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def unite(self, a: str, b: str) -> None:
        ra, rb = self.root(a), self.root(b)
        if ra != rb:
            self.parent[rb] = ra


class Topology:
    """A graph of processors; build it by hand (Processor API) or with ``StreamsBuilder``."""

    def __init__(self) -> None:
        self.nodes: dict[str, NodeDef] = {}
        self.store_builders: dict[str, Any] = {}
        self.store_users: dict[str, list[str]] = {}
        self.global_stores: dict[str, GlobalStoreDef] = {}
        self.internal_topics: dict[str, dict[str, Any]] = {}
        self.copartition_groups: list[set[str]] = []
        #: store -> the source topic that serves as its changelog (``reuse.ktable.source.topics``)
        self.source_changelogs: dict[str, str] = {}
        #: the ``topology.optimization`` rules ``StreamsBuilder.build`` applied
        self.optimizations: frozenset[str] = frozenset()
        self._grouper = _UnionFind()
        self._source_topics: dict[str, str] = {}

    # -- building -------------------------------------------------------------------

    def _check_new(self, name: str) -> None:
        if not name:
            raise TopologyException("node name must not be empty")
        if name in self.nodes:
            raise TopologyException(f"Processor {name} is already added.")

    def _link(self, name: str, parents: Iterable[str]) -> list[str]:
        parent_list = list(parents)
        for parent in parent_list:
            if parent == name:
                raise TopologyException(f"Processor {name} cannot be a predecessor of itself.")
            node = self.nodes.get(parent)
            if node is None:
                raise TopologyException(f"Parent processor {parent} is not added yet for {name}.")
            if isinstance(node, SinkNode):
                raise TopologyException(f"Sink {parent} cannot be used a parent.")
            node.children.append(name)
        self._grouper.add(name)
        for parent in parent_list:
            self._grouper.unite(name, parent)
        return parent_list

    def add_source(
        self,
        name: str,
        *topics: str,
        pattern: str | re.Pattern[str] | None = None,
        key_serde: Any = None,
        value_serde: Any = None,
        timestamp_extractor: Any = None,
    ) -> Topology:
        """A source node reading ``topics`` (or every topic matching ``pattern``)."""
        self._check_new(name)
        if not topics and pattern is None:
            raise TopologyException(f"Source {name} needs at least one topic or a pattern.")
        for topic in topics:
            if topic in self._source_topics:
                raise TopologyException(
                    f"Topic {topic} has already been registered by another source "
                    f"({self._source_topics[topic]})."
                )
            self._source_topics[topic] = name
        compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
        self.nodes[name] = SourceNode(
            name,
            list(topics),
            compiled,
            key_serde,
            value_serde,
            as_extractor(timestamp_extractor),
        )
        self._grouper.add(name)
        return self

    def add_processor(
        self,
        name: str,
        supplier: ProcessorSupplier,
        *parent_names: str,
        fixed_key: bool = False,
        side_output: bool = False,
    ) -> Topology:
        """A processor node; ``supplier()`` makes one ``Processor`` per task. A
        ``side_output`` node has one parent, which reaches it by name only."""
        self._check_new(name)
        if not parent_names:
            raise TopologyException(f"Processor {name} must have at least one parent")
        if not callable(supplier):
            raise TopologyException(f"supplier of {name} must be callable returning a Processor")
        if side_output and len(parent_names) != 1:
            raise TopologyException(f"Side output {name} must have exactly one parent")
        parents = self._link(name, parent_names)
        self.nodes[name] = ProcessorNodeDef(
            name, supplier, parents, fixed_key=fixed_key, side_output=side_output
        )
        for builder in stores_of(supplier):
            self.add_state_store(builder, name)
        return self

    def add_sink(
        self,
        name: str,
        topic: str | Callable[[Any, Any, Any], str],
        *parent_names: str,
        key_serde: Any = None,
        value_serde: Any = None,
        partitioner: Callable[..., int | None] | None = None,
    ) -> Topology:
        """A sink node writing to ``topic`` (or to ``topic(key, value, record_context)``)."""
        self._check_new(name)
        if not parent_names:
            raise TopologyException(f"Sink {name} must have at least one parent")
        parents = self._link(name, parent_names)
        static = topic if isinstance(topic, str) else None
        extractor = None if isinstance(topic, str) else topic
        self.nodes[name] = SinkNode(
            name, static, extractor, key_serde, value_serde, partitioner, parents
        )
        return self

    def add_state_store(self, store_builder: Any, *processor_names: str) -> Topology:
        """Register a store builder and connect it to the named processors."""
        name = store_builder.name
        existing = self.store_builders.get(name)
        if existing is not None and existing is not store_builder:
            raise TopologyException(
                f"A different StateStore has already been added with the name {name}"
            )
        self.store_builders[name] = store_builder
        self.store_users.setdefault(name, [])
        self.connect_processor_and_state_stores_many(processor_names, [name])
        return self

    def connect_processor_and_state_stores(
        self, processor_name: str, *store_names: str
    ) -> Topology:
        """Give a processor access to already registered stores."""
        return self.connect_processor_and_state_stores_many([processor_name], store_names)

    def connect_processor_and_state_stores_many(
        self, processor_names: Iterable[str], store_names: Iterable[str]
    ) -> Topology:
        for processor_name in processor_names:
            node = self.nodes.get(processor_name)
            if not isinstance(node, ProcessorNodeDef):
                raise TopologyException(f"Processor {processor_name} is not added yet.")
            for store in store_names:
                if store not in self.store_builders:
                    raise TopologyException(f"StateStore {store} is not added yet.")
                global_def = self.global_stores.get(store)
                if global_def is not None and global_def.processor_name != processor_name:
                    raise TopologyException(
                        f"Global StateStore {store} can be used by a Processor without being "
                        "specified; it should not be explicitly passed."
                    )
                if store not in node.stores:
                    node.stores.append(store)
                users = self.store_users[store]
                if processor_name not in users:
                    users.append(processor_name)
                self._grouper.unite(users[0], processor_name)
        return self

    def add_global_store(
        self,
        store_builder: Any,
        source_name: str,
        key_serde: Any,
        value_serde: Any,
        topic: str,
        processor_name: str,
        processor_supplier: ProcessorSupplier,
        *,
        timestamp_extractor: Any = None,
        reprocess_on_restore: bool = True,
    ) -> Topology:
        """A global store fed from ``topic`` by ``processor_supplier`` (Kafka's addGlobalStore).

        Every instance holds the whole topic; the topic is the store's changelog, so logging
        is disabled. Any processor may read the store without being connected to it.
        """
        self._check_new(source_name)
        self._check_new(processor_name)
        if source_name == processor_name:
            raise TopologyException("sourceName and processorName must be different.")
        if not callable(processor_supplier):
            raise TopologyException(
                f"supplier of {processor_name} must be callable returning a Processor"
            )
        if topic in self._source_topics:
            raise TopologyException(f"Topic {topic} has already been registered by another source.")
        name = store_builder.name
        if name in self.store_builders:
            raise TopologyException(
                f"A different StateStore has already been added with the name {name}"
            )
        store_builder.with_logging_disabled()
        self._source_topics[topic] = source_name
        self.nodes[source_name] = SourceNode(
            source_name, [topic], None, key_serde, value_serde, as_extractor(timestamp_extractor)
        )
        self._grouper.add(source_name)
        parents = self._link(processor_name, [source_name])
        self.nodes[processor_name] = ProcessorNodeDef(processor_name, processor_supplier, parents)
        self.store_builders[name] = store_builder
        self.store_users[name] = []
        self.global_stores[name] = GlobalStoreDef(
            store_builder, source_name, topic, processor_name, reprocess_on_restore
        )
        self.connect_processor_and_state_stores_many([processor_name], [name])
        return self

    def global_node_names(self) -> set[str]:
        """The source and processor nodes of every global store (never part of a task)."""
        return {n for g in self.global_stores.values() for n in (g.source_name, g.processor_name)}

    def global_topics(self) -> list[str]:
        """The topics feeding global stores."""
        return [g.topic for g in self.global_stores.values()]

    def add_internal_topic(self, topic: str, **properties: Any) -> None:
        """Mark a topic as internal (repartition): prefixed with the application id at run time."""
        self.internal_topics[topic] = properties

    def replace_nodes(self, nodes: dict[str, NodeDef]) -> None:
        """Swap in a rewritten node graph (topology optimization) and regroup its nodes."""
        self.nodes = nodes
        self._grouper = _UnionFind()
        self._source_topics = {}
        for name, node in nodes.items():
            self._grouper.add(name)
            for parent in node.parents:
                self._grouper.unite(name, parent)
            if isinstance(node, SourceNode):
                for topic in node.topics:
                    self._source_topics[topic] = name
        for users in self.store_users.values():
            for user in users[1:]:
                self._grouper.unite(users[0], user)
        for g in self.global_stores.values():
            self._grouper.unite(g.source_name, g.processor_name)

    def replace_in_copartition_groups(self, old: str, new: str) -> None:
        """Kafka's ``maybeUpdateCopartitionSourceGroups``: a merged repartition's source
        takes the place of the one it replaced."""
        for group in self.copartition_groups:
            if old in group:
                group.discard(old)
                group.add(new)

    def copartition(self, source_names: Iterable[str]) -> None:
        """Record that these source nodes' topics must have the same partition count."""
        group = set(source_names)
        if group and group not in self.copartition_groups:
            self.copartition_groups.append(group)

    # -- reading --------------------------------------------------------------------

    def source_nodes(self) -> list[SourceNode]:
        return [n for n in self.nodes.values() if isinstance(n, SourceNode)]

    def node_groups(self) -> list[tuple[int, list[str], bool]]:
        """``(id, node names, is_global)`` per node group, numbered like Kafka's makeNodeGroups
        (first node in insertion order; global-store groups take ids as well)."""
        groups: dict[str, list[str]] = {}
        for name in self.nodes:
            groups.setdefault(self._grouper.root(name), []).append(name)
        global_sources = {g.source_name for g in self.global_stores.values()}
        return [
            (group_id, names, any(n in global_sources for n in names))
            for group_id, names in enumerate(groups.values())
        ]

    def subtopologies(self) -> list[list[str]]:
        """Node names per sub-topology (groups that make tasks), in Kafka's order; see
        ``node_groups()`` for Kafka's ids, which also count global-store groups."""
        return [names for _, names, is_global in self.node_groups() if not is_global]

    def decorate(self, topic: str, application_id: str) -> str:
        """The run-time name of a topic: internal topics get the application-id prefix."""
        return f"{application_id}-{topic}" if topic in self.internal_topics else topic

    def describe(self) -> TopologyDescription:
        """The printable description of the graph, as Kafka Streams prints it."""
        from streaming.topology.describe import describe

        return describe(self)
