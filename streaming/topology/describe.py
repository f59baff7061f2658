"""``Topology.describe()``: the same text Kafka Streams' ``TopologyDescription`` prints.

Character for character, list orders included. Kafka 4.1.1 (on JDK 17, the reference JVM)
prints store names and source topics in ``HashSet`` order, and successors / predecessors in
the order of ``TreeSet``s whose comparator (sub-tree size, then name) changes its answers
after insertion, because ``describeSubtopology`` grows the sizes while it links the nodes
(visiting them in ``HashMap`` order). We replay that: String hash buckets with the JDK's
resize rules, and a port of ``TreeMap.put`` with its red-black rebalancing. Not modelled:
HashMap tree bins (nine or more names in one bucket of a table of 64 or more).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache, cmp_to_key
from typing import TYPE_CHECKING, Any

from streaming.topology.nodes import ProcessorNodeDef, SinkNode, SourceNode

if TYPE_CHECKING:
    from streaming.topology.graph import Topology


class TopologyDescription:
    """A printable description of the processor graph, formatted like Kafka Streams'."""

    def __init__(self, subtopologies: list[Any], global_stores: list[Any]) -> None:
        self.subtopologies = subtopologies
        self.global_stores = global_stores

    def __str__(self) -> str:
        return render(self)

    __repr__ = __str__


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


# -- java.util emulation ---------------------------------------------------------------
# Kafka prints several lists in the iteration order of java.util.HashSet / HashMap (string
# keys) or of a java.util.TreeSet whose comparator's answers change after insertion. The
# helpers below reproduce those orders exactly (OpenJDK 17 HashMap / TreeMap algorithms).


@cache
def _java_string_hash(text: str) -> int:
    """``String.hashCode()`` as an unsigned 32-bit int (UTF-16 code units, ``31*h + c``)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h


def _java_bucket(text: str, capacity: int) -> int:
    h = _java_string_hash(text)
    return (h ^ (h >> 16)) & (capacity - 1)


def _table_size_for(capacity: int) -> int:
    n = 1
    while n < capacity:
        n <<= 1
    return n


class _JavaHashSet:
    """The iteration order of a ``java.util.HashSet<String>`` (HashMap buckets, chains in
    insertion order, resize at load factor 0.75 and when a chain of 8 grows below 64)."""

    def __init__(self, items: Iterable[str] = (), *, copy_of: int | None = None) -> None:
        # copy_of=n: ``new HashSet<>(collection of n)`` pre-sizes to max(n/.75 + 1, 16)
        self._keys: list[str] = []
        self._seen: set[str] = set()
        self._capacity = (
            16 if copy_of is None else _table_size_for(max(int(copy_of / 0.75) + 1, 16))
        )
        for item in items:
            self.add(item)

    def add(self, key: str) -> None:
        if key in self._seen:
            return
        bucket = _java_bucket(key, self._capacity)
        chain = sum(1 for k in self._keys if _java_bucket(k, self._capacity) == bucket)
        self._seen.add(key)
        self._keys.append(key)
        if chain >= 8 and self._capacity < 64:  # HashMap.treeifyBin resizes small tables
            self._capacity *= 2
        if len(self._keys) > self._capacity * 0.75:
            self._capacity *= 2

    def __iter__(self) -> Iterator[str]:
        capacity = self._capacity
        return iter(sorted(self._keys, key=lambda k: _java_bucket(k, capacity)))


def _java_copy(items: list[str]) -> list[str]:
    """Iteration order of ``new HashSet<>(items)`` where ``items`` iterates in this order."""
    return list(_JavaHashSet(items, copy_of=len(items)))


class _Entry:
    __slots__ = ("key", "left", "parent", "red", "right")

    def __init__(self, key: _Node, parent: _Entry | None) -> None:
        self.key = key
        self.left: _Entry | None = None
        self.right: _Entry | None = None
        self.parent = parent
        self.red = False


class _JavaTreeSet:
    """A ``java.util.TreeSet`` with Kafka's NODE_COMPARATOR: a red-black tree built with the
    comparator's answers at insertion time (TreeMap.put + fixAfterInsertion); iteration is
    the in-order walk, which stays as built when node sizes change later."""

    def __init__(self) -> None:
        self._root: _Entry | None = None

    def add(self, key: _Node) -> None:
        t = self._root
        if t is None:
            self._root = _Entry(key, None)
            return
        parent = t
        cmp = 0
        while t is not None:
            parent = t
            cmp = _node_compare(key, t.key)
            if cmp < 0:
                t = t.left
            elif cmp > 0:
                t = t.right
            else:
                return
        entry = _Entry(key, parent)
        if cmp < 0:
            parent.left = entry
        else:
            parent.right = entry
        self._fix_after_insertion(entry)

    def __iter__(self) -> Iterator[_Node]:
        out: list[_Node] = []
        stack: list[_Entry] = []
        e = self._root
        while stack or e is not None:
            while e is not None:
                stack.append(e)
                e = e.left
            e = stack.pop()
            out.append(e.key)
            e = e.right
        return iter(out)

    @staticmethod
    def _red(e: _Entry | None) -> bool:
        return e is not None and e.red

    @staticmethod
    def _set_red(e: _Entry | None, red: bool) -> None:
        if e is not None:
            e.red = red

    @staticmethod
    def _parent(e: _Entry | None) -> _Entry | None:
        return None if e is None else e.parent

    @staticmethod
    def _left(e: _Entry | None) -> _Entry | None:
        return None if e is None else e.left

    @staticmethod
    def _right(e: _Entry | None) -> _Entry | None:
        return None if e is None else e.right

    def _fix_after_insertion(self, entry: _Entry) -> None:
        parent, left, right, set_red = self._parent, self._left, self._right, self._set_red
        entry.red = True
        x: _Entry | None = entry
        # past the root check x has a parent, so _red(x.parent) is x.parent.red
        while x is not None and x is not self._root and self._red(x.parent):
            if parent(x) is left(parent(parent(x))):
                y = right(parent(parent(x)))
                if self._red(y):
                    set_red(parent(x), False)
                    set_red(y, False)
                    set_red(parent(parent(x)), True)
                    x = parent(parent(x))
                else:
                    if x is right(parent(x)):
                        x = parent(x)
                        self._rotate_left(x)
                    set_red(parent(x), False)
                    set_red(parent(parent(x)), True)
                    self._rotate_right(parent(parent(x)))
            else:
                y = left(parent(parent(x)))
                if self._red(y):
                    set_red(parent(x), False)
                    set_red(y, False)
                    set_red(parent(parent(x)), True)
                    x = parent(parent(x))
                else:
                    if x is left(parent(x)):
                        x = parent(x)
                        self._rotate_right(x)
                    set_red(parent(x), False)
                    set_red(parent(parent(x)), True)
                    self._rotate_left(parent(parent(x)))
        assert self._root is not None  # the tree holds at least the inserted entry
        self._root.red = False

    def _rotate_left(self, p: _Entry | None) -> None:
        if p is None:
            return
        r = p.right
        assert r is not None  # only rotated towards an existing child
        p.right = r.left
        if r.left is not None:
            r.left.parent = p
        r.parent = p.parent
        if p.parent is None:
            self._root = r
        elif p.parent.left is p:
            p.parent.left = r
        else:
            p.parent.right = r
        r.left = p
        p.parent = r

    def _rotate_right(self, p: _Entry | None) -> None:
        if p is None:
            return
        lft = p.left
        assert lft is not None  # only rotated towards an existing child
        p.left = lft.right
        if lft.right is not None:
            lft.right.parent = p
        lft.parent = p.parent
        if p.parent is None:
            self._root = lft
        elif p.parent.right is p:
            p.parent.right = lft
        else:
            p.parent.left = lft
        lft.right = p
        p.parent = lft


class _Node:
    """Kafka's ``InternalTopologyBuilder.AbstractNode`` while it is being described."""

    __slots__ = ("name", "predecessors", "size", "successors")

    def __init__(self, name: str) -> None:
        self.name = name
        self.size = 1
        self.predecessors = _JavaTreeSet()
        self.successors = _JavaTreeSet()


def _java_compare_strings(a: str, b: str) -> int:
    """``String.compareTo``: UTF-16 code unit order."""
    ua, ub = a.encode("utf-16-be"), b.encode("utf-16-be")
    return (ua > ub) - (ua < ub)


def _node_compare(a: _Node, b: _Node) -> int:
    """Kafka's NODE_COMPARATOR: the same node, else larger size first, then name."""
    if a is b:
        return 0
    if a.size != b.size:
        return b.size - a.size
    return _java_compare_strings(a.name, b.name)


def _update_size(node: _Node, delta: int) -> None:
    """Kafka's updateSize: ``delta`` added to the node and, recursively, to every path up."""
    stack = [node]
    while stack:
        current = stack.pop()
        current.size += delta
        stack.extend(current.predecessors)


def _connect(topology: Topology, group: list[str]) -> dict[str, _Node]:
    """Kafka's describeSubtopology: nodes in a HashMap by name (filled in the node group's
    HashSet order), then each node, in HashMap order, linked to its predecessors."""
    group_set = _JavaHashSet(group)
    by_name = _JavaHashSet(list(group_set))
    described = {name: _Node(name) for name in by_name}
    for name in by_name:
        node = described[name]
        for parent_name in topology.nodes[name].parents:
            predecessor = described[parent_name]
            node.predecessors.add(predecessor)
            predecessor.successors.add(node)
            _update_size(predecessor, node.size)
    return described


def describe(topology: Topology) -> TopologyDescription:
    nodes = topology.nodes
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
        connected = _connect(topology, group)
        # SubtopologyDescription re-sorts its nodes once all sizes are final
        ordered = sorted(connected.values(), key=cmp_to_key(_node_compare))
        described = []
        for java_node in ordered:
            name = java_node.name
            node = nodes[name]
            if isinstance(node, SourceNode):
                topics = (
                    node.pattern.pattern
                    if node.pattern is not None
                    else _java_set(_java_copy(node.topics))
                )
                kind, detail = "Source", f"topics: {topics}"
            elif isinstance(node, ProcessorNodeDef):
                stores = _java_copy(list(_JavaHashSet(node.stores)))
                kind, detail = "Processor", f"stores: {_java_set(stores)}"
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
                    [n.name for n in java_node.successors],
                    [n.name for n in java_node.predecessors],
                    java_node.size,
                )
            )
        subtopologies.append(SubtopologyDescription(sub_id, described))
    return TopologyDescription(subtopologies, global_stores)


def render(description: TopologyDescription) -> str:
    parts = sorted(
        [*description.subtopologies, *description.global_stores], key=lambda part: part.id
    )
    return "Topologies:\n " + "".join(f"  {part}" for part in parts)
