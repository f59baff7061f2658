"""The processor graph: sources, processors, sinks and the state stores they use.

Mirrors Kafka Streams' ``Topology`` / ``InternalTopologyBuilder``: nodes are kept in
insertion (topological) order, sub-topologies are the connected components of the
graph (processors sharing a store are connected; a sink and a source meet only
through a topic), numbered in node order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from streaming.time import as_extractor
from streaming.topology.processor import ProcessorSupplier, stores_of


class TopologyException(ValueError):
    """An invalid topology: the message says what to fix."""


@dataclass
class SourceNode:
    name: str
    topics: list[str]
    pattern: re.Pattern[str] | None
    key_serde: Any
    value_serde: Any
    timestamp_extractor: Any
    children: list[str] = field(default_factory=list)
    parents: list[str] = field(default_factory=list)


@dataclass
class ProcessorNodeDef:
    name: str
    supplier: ProcessorSupplier
    parents: list[str]
    stores: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    fixed_key: bool = False


@dataclass
class SinkNode:
    name: str
    topic: str | None
    topic_extractor: Callable[[Any, Any, Any], str] | None
    key_serde: Any
    value_serde: Any
    partitioner: Callable[..., int | None] | None
    parents: list[str]
    children: list[str] = field(default_factory=list)


@dataclass
class GlobalStoreDef:
    store_builder: Any
    source_name: str
    topic: str
    processor_name: str


NodeDef = SourceNode | ProcessorNodeDef | SinkNode


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
    ) -> Topology:
        """A processor node; ``supplier()`` makes one ``Processor`` per task."""
        self._check_new(name)
        if not parent_names:
            raise TopologyException(f"Processor {name} must have at least one parent")
        if not callable(supplier):
            raise TopologyException(f"supplier of {name} must be callable returning a Processor")
        parents = self._link(name, parent_names)
        self.nodes[name] = ProcessorNodeDef(name, supplier, parents, fixed_key=fixed_key)
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
                if store not in node.stores:
                    node.stores.append(store)
                users = self.store_users[store]
                if processor_name not in users:
                    users.append(processor_name)
                self._grouper.unite(users[0], processor_name)
        return self

    def add_internal_topic(self, topic: str, **properties: Any) -> None:
        """Mark a topic as internal (repartition): prefixed with the application id at run time."""
        self.internal_topics[topic] = properties

    def copartition(self, source_names: Iterable[str]) -> None:
        self.copartition_groups.append(set(source_names))

    # -- reading --------------------------------------------------------------------

    def source_nodes(self) -> list[SourceNode]:
        return [n for n in self.nodes.values() if isinstance(n, SourceNode)]

    def subtopologies(self) -> list[list[str]]:
        """Node names per sub-topology, numbered like Kafka Streams (topological order)."""
        groups: dict[str, list[str]] = {}
        for name in self.nodes:
            groups.setdefault(self._grouper.root(name), []).append(name)
        return list(groups.values())

    def decorate(self, topic: str, application_id: str) -> str:
        """The run-time name of a topic: internal topics get the application-id prefix."""
        return f"{application_id}-{topic}" if topic in self.internal_topics else topic

    def describe(self) -> TopologyDescription:
        from streaming.topology.describe import describe

        return describe(self)


class TopologyDescription:
    """A printable description of the processor graph, formatted like Kafka Streams'."""

    def __init__(self, subtopologies: list[Any], global_stores: list[Any]) -> None:
        self.subtopologies = subtopologies
        self.global_stores = global_stores

    def __str__(self) -> str:
        from streaming.topology.describe import render

        return render(self)

    __repr__ = __str__
