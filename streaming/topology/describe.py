"""``Topology.describe()``: the same text Kafka Streams' ``TopologyDescription`` prints."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

from streaming.topology.graph import (
    ProcessorNodeDef,
    SinkNode,
    SourceNode,
    Topology,
    TopologyDescription,
)


@dataclass
class NodeDescription:
    name: str
    kind: str  # "Source" | "Processor" | "Sink"
    detail: str
    successors: list[str] = field(default_factory=list)
    predecessors: list[str] = field(default_factory=list)
    size: int = 1

    def __str__(self) -> str:
        out = f"{self.kind}: {self.name} ({self.detail})"
        if self.kind != "Sink":
            out += f"\n      --> {_names(self.successors)}"
        if self.kind != "Source":
            out += f"\n      <-- {_names(self.predecessors)}"
        return out


@dataclass
class SubtopologyDescription:
    id: int
    nodes: list[NodeDescription]

    def __str__(self) -> str:
        body = "".join(f"    {node}\n" for node in self.nodes)
        return f"Sub-topology: {self.id}\n{body}\n"


@dataclass
class GlobalStoreDescription:
    id: int
    source: NodeDescription
    processor: NodeDescription

    def __str__(self) -> str:
        return (
            f"Sub-topology: {self.id} for global store (will not generate tasks)\n"
            f"    {self.source}\n    {self.processor}\n"
        )


def _names(names: list[str]) -> str:
    return ", ".join(names) if names else "none"


def _java_set(items: list[str]) -> str:
    return "[" + ", ".join(items) + "]"


def describe(topology: Topology) -> TopologyDescription:
    nodes = topology.nodes

    @cache
    def size(name: str) -> int:
        return 1 + sum(size(child) for child in nodes[name].children)

    def order(names: list[str]) -> list[str]:
        # Kafka's NODE_COMPARATOR: larger sub-tree first, then by name.
        return sorted(set(names), key=lambda n: (-size(n), n))

    subtopologies = []
    global_stores = []
    global_by_source = {gs.source_name: (name, gs) for name, gs in topology.global_stores.items()}
    for sub_id, group, is_global in topology.node_groups():
        if is_global:
            source_name = next(n for n in group if n in global_by_source)
            store_name, gs = global_by_source[source_name]
            source = NodeDescription(
                gs.source_name, "Source", f"topics: [{gs.topic}]", [gs.processor_name]
            )
            processor = NodeDescription(
                gs.processor_name, "Processor", f"stores: [{store_name}]", [], [gs.source_name]
            )
            global_stores.append(GlobalStoreDescription(sub_id, source, processor))
            continue
        described = []
        for name in order(group):
            node = nodes[name]
            if isinstance(node, SourceNode):
                topics = (
                    node.pattern.pattern if node.pattern is not None else _java_set(node.topics)
                )
                kind, detail = "Source", f"topics: {topics}"
            elif isinstance(node, ProcessorNodeDef):
                kind, detail = "Processor", f"stores: {_java_set(sorted(node.stores))}"
            else:
                assert isinstance(node, SinkNode)
                if node.topic is not None:
                    kind, detail = "Sink", f"topic: {node.topic}"
                else:
                    kind, detail = "Sink", f"extractor class: {node.topic_extractor}"
            described.append(
                NodeDescription(
                    name,
                    kind,
                    detail,
                    order(node.children),
                    order(node.parents),
                    size(name),
                )
            )
        subtopologies.append(SubtopologyDescription(sub_id, described))
    return TopologyDescription(subtopologies, global_stores)


def render(description: TopologyDescription) -> str:
    parts = sorted(
        [*description.subtopologies, *description.global_stores], key=lambda part: part.id
    )
    return "Topologies:\n " + "".join(f"  {part}" for part in parts)
