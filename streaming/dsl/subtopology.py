"""The source nodes of a sub-topology, which co-partitioning requirements are stated over."""

from __future__ import annotations

from typing import Any

from streaming.topology.nodes import SourceNode


def source_nodes(topology: Any, *names: str) -> set[str]:
    """The source nodes upstream of ``names`` in their sub-topology (Kafka's
    ``subTopologySourceNodes``): the walk stops at sources, repartition sources included."""
    found: set[str] = set()
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        node = topology.nodes[name]
        if isinstance(node, SourceNode):
            found.add(name)
        else:
            todo.extend(node.parents)
    return found
