"""``topology.optimization``: Kafka Streams' optimizations of a DSL-built topology.

Ports ``InternalStreamsBuilder.optimizeTopology`` (Kafka 4.1), applied at ``build()``:

- ``reuse.ktable.source.topics``: a materialized ``builder.table()`` store has no changelog
  topic; its source topic serves as one (restored up to the committed offset).
- ``merge.repartition.topics``: the repartition topics fed by one key-changing operation
  (``select_key``, ``map``, ``flat_map``, ``group_by``, or a ``merge`` of such streams) become
  one, named after the first; what lay between the key change and each repartition runs
  after the merged topic. A value-changing operation (``map_values``, ``flat_map_values``)
  between them keeps a repartition apart; ``process``/``process_values`` count as
  key/value-changing only with ``__enable.process.processValue.fix__`` (KAFKA-19668, off by
  default, as in Kafka). ``repartition()`` topics are never merged.
- ``single.store.self.join``: a stream-stream join of a stream with itself runs as one
  ``KStreamKStreamSelfJoin`` processor (named as the join's merge node) over one window store.

Our DSL writes the physical topology as it goes, so the merge works on a logical view of it in
which a repartition (filter -> sink -> topic -> source) is one node, as in Kafka's graph, and
writes the result back in Kafka's build order (node creation order; a merged repartition
right after its key-changing node).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from streaming.dsl.graph_marks import RepartitionMark
from streaming.dsl.processors import stateless
from streaming.dsl.repartition import NullKeyFilter
from streaming.errors import ConfigException, TopologyException
from streaming.topology.nodes import ProcessorNodeDef, SinkNode, SourceNode

if TYPE_CHECKING:
    from streaming.dsl.builder import InternalBuilder

TOPOLOGY_OPTIMIZATION = "topology.optimization"
NO_OPTIMIZATION = "none"
OPTIMIZE = "all"
REUSE_KTABLE_SOURCE_TOPICS = "reuse.ktable.source.topics"
MERGE_REPARTITION_TOPICS = "merge.repartition.topics"
SINGLE_STORE_SELF_JOIN = "single.store.self.join"
#: Kafka's ``TopologyConfig.InternalConfig.ENABLE_PROCESS_PROCESSVALUE_FIX``
ENABLE_PROCESS_PROCESSVALUE_FIX = "__enable.process.processValue.fix__"
_ALL = (REUSE_KTABLE_SOURCE_TOPICS, MERGE_REPARTITION_TOPICS, SINGLE_STORE_SELF_JOIN)


def optimizations(value: Any) -> set[str]:
    """Kafka's ``StreamsConfig.verifyTopologyOptimizationConfigs``: ``none``, ``all``, or a
    comma-separated list of the individual optimizations."""
    if value is None:
        return set()
    items = [v.strip() for v in str(value).split(",")]
    if items == [OPTIMIZE]:
        return set(_ALL)
    if items == [NO_OPTIMIZATION]:
        return set()
    unknown = [v for v in items if v not in _ALL]
    if unknown or OPTIMIZE in items or NO_OPTIMIZATION in items:
        raise ConfigException(
            f"Invalid value {value!r} for configuration {TOPOLOGY_OPTIMIZATION}: acceptable "
            f"values are {NO_OPTIMIZATION!r}, {OPTIMIZE!r}, or a comma-separated list of "
            f"{', '.join(repr(o) for o in _ALL)}"
        )
    return set(items)


def _flag(config: Mapping[str, Any], key: str) -> bool:
    value = config.get(key, False)
    return value is True or str(value).strip().lower() == "true"


def optimize(builder: InternalBuilder, config: Mapping[str, Any]) -> None:
    """Apply the optimizations ``config[topology.optimization]`` names, in Kafka's order."""
    chosen = optimizations(config.get(TOPOLOGY_OPTIMIZATION))
    builder.topology.optimizations = frozenset(chosen)
    if REUSE_KTABLE_SOURCE_TOPICS in chosen:
        _reuse_ktable_source_topics(builder)
    if MERGE_REPARTITION_TOPICS in chosen:
        _RepartitionMerger(builder, _flag(config, ENABLE_PROCESS_PROCESSVALUE_FIX)).run()
    if SINGLE_STORE_SELF_JOIN in chosen:
        _rewrite_single_store_self_joins(builder)


# ------------------------------------------------------------------ reuse.ktable.source.topics


def _reuse_ktable_source_topics(builder: InternalBuilder) -> None:
    topology = builder.topology
    for source, _processor, supplier in builder.graph.table_sources:
        store = supplier.store_name
        if store is None:  # not materialized: no store, nothing to restore
            continue
        (topic,) = topology.nodes[source].topics  # type: ignore[union-attr]
        topology.store_builders[store].with_logging_disabled()
        topology.source_changelogs[store] = topic


# ------------------------------------------------------------------- merge.repartition.topics


class _RepartitionMerger:
    """``mergeRepartitionTopics`` on a logical view: node ids are physical names, a
    repartition is its filter's name, a merged repartition a new id until written back."""

    def __init__(self, builder: InternalBuilder, process_fix: bool) -> None:
        self.b = builder
        self.t = builder.topology
        marks = builder.graph
        self.process_fix = process_fix
        self.by_source = {r.source: r for r in marks.repartitions}
        self.by_filter = {r.filter: r for r in marks.repartitions}
        hidden = {n for r in marks.repartitions for n in (r.sink, r.source)}
        #: creation order: Kafka's build priority
        self.priority: dict[str, float] = {}
        self.lp: dict[str, list[str]] = {}
        self.lc: dict[str, list[str]] = {}
        for index, (name, node) in enumerate(self.t.nodes.items()):
            if name in hidden:
                continue
            self.priority[name] = index
            self.lp[name] = [self._logical(p) for p in node.parents]
            rep = self.by_filter.get(name)
            children = self.t.nodes[rep.source].children if rep is not None else node.children
            self.lc[name] = [self._logical(c) for c in children]
        #: merged id -> (topic, key serde, value serde, the key-changing node)
        self.merged: dict[str, tuple[str, Any, Any, str]] = {}

    def _logical(self, name: str) -> str:
        rep = self.by_source.get(name)
        return rep.filter if rep is not None else name

    # -- Kafka's GraphNode flags and search ------------------------------------------------

    def key_changing(self, name: str) -> bool:
        marks = self.b.graph
        return name in marks.key_changing or (self.process_fix and name in marks.process)

    def value_changing(self, name: str) -> bool:
        marks = self.b.graph
        return name in marks.value_changing or (
            self.process_fix and (name in marks.process or name in marks.process_values)
        )

    def find(self, start: str, predicate: Callable[[str], bool]) -> str | None:
        """Kafka's ``findParentNodeMatching``, including its answer for several parents (the
        last parent's search wins unless a parent itself matches)."""
        if predicate(start):
            return start
        found = None
        for parent in self.lp.get(start, []):
            if predicate(parent):
                return parent
            found = self.find(parent, predicate)
        return found

    def has_parent(self, parent: str) -> Callable[[str], bool]:
        return lambda n: parent in self.lp.get(n, [])

    # -- the rewrite ------------------------------------------------------------------------

    def run(self) -> None:
        groups = self._groups()
        if not any(groups.values()):
            return
        for changer, reps in groups.items():
            if reps:
                self._merge(changer, reps)
        self._write_back()

    def _groups(self) -> dict[str, list[RepartitionMark]]:
        """``keyChangingOperationsToOptimizableRepartitionNodes`` after
        ``maybeUpdateKeyChangingRepartitionNodeMap``."""
        groups: dict[str, list[RepartitionMark]] = {n: [] for n in self.lp if self.key_changing(n)}
        for rep in self.b.graph.repartitions:
            if not rep.optimizable or rep.filter not in self.lp:
                continue
            nearest = self.find(
                rep.filter, lambda n: self.key_changing(n) or self.value_changing(n)
            )
            changer = self.find(rep.filter, self.key_changing)
            if nearest is not None and nearest == changer:
                groups[changer].append(rep)
        merged_into: dict[str, list[str]] = {}
        for merge in self.b.graph.merge:
            merged_into[merge] = [
                changer
                for changer, reps in groups.items()
                if all(self.find(r.filter, self.has_parent(merge)) is not None for r in reps)
                and self.find(merge, self.has_parent(changer)) is not None
            ]
        removed: set[str] = set()
        for merge, changers in merged_into.items():
            reps: list[RepartitionMark] = []
            for changer in changers:
                reps.extend(r for r in groups[changer] if r not in reps)
                removed.add(changer)
            groups.pop(merge, None)
            groups[merge] = reps
        for changer in removed:
            groups.pop(changer, None)
        return groups

    def _merge(self, changer: str, reps: list[RepartitionMark]) -> None:
        topic = reps[0].topic
        sinks = [self.t.nodes[r.sink] for r in reps]
        key_serde = next((s.key_serde for s in sinks if s.key_serde is not None), None)  # type: ignore[union-attr]
        value_serde = next((s.value_serde for s in sinks if s.value_serde is not None), None)  # type: ignore[union-attr]
        merged = f"\0merged:{topic}"
        self.merged[merged] = (topic, key_serde, value_serde, changer)
        self.priority[merged] = self.priority[changer] + 0.5
        self.lp[merged], self.lc[merged] = [], []
        for rep in reps:
            child = self.find(rep.filter, self.has_parent(changer))
            if child is None:
                raise TopologyException(f"Found a null keyChangingChild node for {rep.filter}")
            self._link(merged, child)
            self._unlink(changer, child)
            node = rep.filter
            for grandchild in list(self.lc[node]):
                for parent in list(self.lp[node]):
                    self._link(parent, grandchild)
            for parent in list(self.lp[node]):
                self._unlink(parent, node)
            for grandchild in list(self.lc[node]):
                self._unlink(node, grandchild)
            del self.lp[node], self.lc[node]
            self.b.graph.repartitions.remove(rep)
            self.t.replace_in_copartition_groups(rep.source, f"{topic}-source")
        self._link(changer, merged)

    def _link(self, parent: str, child: str) -> None:
        if child not in self.lc[parent]:
            self.lc[parent].append(child)
        if parent not in self.lp[child]:
            self.lp[child].append(parent)

    def _unlink(self, parent: str, child: str) -> None:
        if child in self.lc[parent]:
            self.lc[parent].remove(child)
        if parent in self.lp[child]:
            self.lp[child].remove(parent)

    def _write_back(self) -> None:
        """Rebuild the physical nodes from the logical view, in build order."""
        t, b = self.t, self.b
        old = dict(t.nodes)
        kept_filters = {r.filter for r in b.graph.repartitions}
        # physical names of each logical node: (entry name, exit name)
        entry: dict[str, str] = {}
        exit_: dict[str, str] = {}
        for name in self.lp:
            rep = self.by_filter.get(name)
            if name in self.merged:
                topic = self.merged[name][0]
                entry[name], exit_[name] = f"{topic}-filter", f"{topic}-source"
            elif rep is not None:
                entry[name], exit_[name] = rep.filter, rep.source
            else:
                entry[name] = exit_[name] = name
        dropped = {
            n
            for r in self.by_filter.values()
            if r.filter not in kept_filters
            for n in (r.filter, r.sink, r.source)
        }
        order = sorted(self.lp, key=self.priority.__getitem__)
        nodes: dict[str, Any] = {}

        def children_of(logical: str) -> list[str]:
            return [entry[c] for c in sorted(self.lc[logical], key=self.priority.__getitem__)]

        def parents_of(logical: str) -> list[str]:
            return [exit_[p] for p in sorted(self.lp[logical], key=self.priority.__getitem__)]

        for logical in order:
            if logical in self.merged:
                topic, key_serde, value_serde, _ = self.merged[logical]
                null_key_filter = NullKeyFilter()
                filter_name, sink, source = entry[logical], f"{topic}-sink", exit_[logical]
                nodes[filter_name] = ProcessorNodeDef(
                    filter_name,
                    stateless.supplier(partial(stateless.FilterProcessor, null_key_filter, False)),
                    parents_of(logical),
                    children=[sink],
                )
                nodes[sink] = SinkNode(
                    sink, topic, None, key_serde, value_serde, None, [filter_name]
                )
                nodes[source] = SourceNode(
                    source,
                    [topic],
                    None,
                    key_serde,
                    value_serde,
                    t.nodes[old_source(self.by_filter, topic)].timestamp_extractor,  # type: ignore[union-attr]
                    children=children_of(logical),
                )
                b.repartitions.append((source, null_key_filter))
                b.graph.repartitions.append(
                    RepartitionMark(filter_name, sink, source, topic, optimizable=True)
                )
                continue
            rep = self.by_filter.get(logical)
            if rep is not None:
                f = old[rep.filter]
                f.parents = parents_of(logical)
                nodes[rep.filter] = f
                nodes[rep.sink] = old[rep.sink]
                src = old[rep.source]
                src.children = children_of(logical)
                nodes[rep.source] = src
                continue
            node = old[logical]
            if not isinstance(node, SourceNode):
                node.parents = parents_of(logical)
            if not isinstance(node, SinkNode):
                node.children = children_of(logical)
            nodes[logical] = node
        # nodes outside the logical view (global stores' nodes) keep their place at the end
        for name, node in old.items():
            if name not in nodes and name not in dropped:
                nodes[name] = node
        live_topics = {n.topic for n in nodes.values() if isinstance(n, SinkNode)}
        for topic in list(t.internal_topics):
            if topic not in live_topics:
                del t.internal_topics[topic]
        b.repartitions[:] = [(s, f) for s, f in b.repartitions if s in nodes]
        t.replace_nodes(nodes)


def old_source(by_filter: Mapping[str, RepartitionMark], topic: str) -> str:
    """The source node that read ``topic`` before the merge (its timestamp extractor)."""
    return next(r.source for r in by_filter.values() if r.topic == topic)


# --------------------------------------------------------------------- single.store.self.join


def _rewrite_single_store_self_joins(builder: InternalBuilder) -> None:
    from streaming.dsl.processors.stream_stream_join import SelfJoinSupplier

    t = builder.topology
    for mark in builder.graph.self_joins:
        this_windowed = t.nodes.get(mark.this_windowed)
        other_windowed = t.nodes.get(mark.other_windowed)
        if this_windowed is None or other_windowed is None:
            continue
        if len(this_windowed.parents) != 1 or this_windowed.parents != other_windowed.parents:
            continue
        merge = t.nodes[mark.merge]
        children = list(merge.children)
        supplier = SelfJoinSupplier(
            store_name=mark.this_store,
            before_ms=mark.before_ms,
            after_ms=mark.after_ms,
            retention_ms=mark.retention_ms,
            joiner=mark.joiner,
        )
        nodes: dict[str, Any] = {}
        for name, node in t.nodes.items():
            if name in (mark.other_windowed, mark.join_this, mark.join_other):
                continue
            if name == mark.merge:
                node = ProcessorNodeDef(
                    name, supplier, [mark.this_windowed], [mark.this_store], children
                )
            elif name == this_windowed.parents[0]:
                node.children = [c for c in node.children if c != mark.other_windowed]
            nodes[name] = node
        this_windowed.children = [mark.merge]
        for store in mark.dropped_stores:
            t.store_builders.pop(store, None)
            t.store_users.pop(store, None)
        t.store_users[mark.this_store] = [mark.this_windowed, mark.merge]
        t.replace_nodes(nodes)
