"""Which tasks a topology has and which task a consumed partition belongs to.

A task is (sub-topology, partition), named ``"<subtopology>_<partition>"`` as in Kafka
Streams. ``TopologyPlan`` reads the topology once: the (decorated) source topics of every
sub-topology, the repartition topics each writes, and the changelog of each logged store.
``resolve`` then fixes the partition count of every topic (external ones from cluster
metadata, repartition topics from their upstream sub-topology or ``Repartitioned``'s
count, with co-partitioning enforced) and so the task count of every sub-topology.
Pattern-subscribed sources are matched against the cluster's topics by ``match_patterns``,
at start and again whenever a stream thread refreshes its metadata.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from streaming.state.stores import SessionStoreBuilder, WindowStoreBuilder
from streaming.topology import graph, nodes

log = logging.getLogger(__name__)


class TopologyValidationError(ValueError):
    """The topology cannot run against this cluster: the message says what to fix."""


@dataclass
class ChangelogSpec:
    """A logged store's changelog topic and its topic configs."""

    store: str
    topic: str
    config: dict[str, str]
    windowed: bool
    #: the topic is the store's source topic (``reuse.ktable.source.topics``): never
    #: created or written by the application, restored up to the committed offset
    source: bool = False


@dataclass
class Subtopology:
    """One connected part of the topology, run as one task per input partition."""

    id: int
    nodes: list[str]
    source_topics: list[str]  # decorated
    repartition_sinks: list[str]  # decorated internal topics written by this sub-topology
    stores: list[str]
    changelogs: dict[str, ChangelogSpec] = field(default_factory=dict)
    num_tasks: int = 0
    #: the decorated internal (repartition) topics among the source topics
    internal_sources: set[str] = field(default_factory=set)

    @property
    def stateful(self) -> bool:
        return bool(self.stores)


def task_id(subtopology: int, partition: int) -> str:
    """Kafka's ``TaskId.toString()``: ``"<subtopology>_<partition>"``."""
    return f"{subtopology}_{partition}"


class TopologyPlan:
    """The static layout of a topology for one application id."""

    def __init__(
        self,
        topology: graph.Topology,
        application_id: str,
        *,
        window_additional_retention_ms: int = 86_400_000,
    ) -> None:
        self.topology = topology
        self.application_id = application_id
        decorate = lambda t: topology.decorate(t, application_id)  # noqa: E731
        self.internal_topics = {decorate(t): dict(p) for t, p in topology.internal_topics.items()}
        self.subtopologies: list[Subtopology] = []
        self.topic_to_subtopology: dict[str, int] = {}
        store_to_sub: dict[str, int] = {}
        node_groups = getattr(topology, "node_groups", None)
        groups = (
            [(gid, names) for gid, names, is_global in node_groups() if not is_global]
            if node_groups is not None
            else list(enumerate(topology.subtopologies()))
        )
        self.subtopology_by_id: dict[int, Subtopology] = {}
        #: (pattern, sub-topology id) of every pattern-subscribed source
        self.patterns: list[tuple[re.Pattern[str], int]] = []
        #: bumped whenever ``match_patterns`` adds topics (threads then subscribe again)
        self.version = 0
        self._lock = threading.Lock()
        for sub_id, names in groups:
            sources: list[str] = []
            sinks: list[str] = []
            stores: list[str] = []
            for name in names:
                node = topology.nodes[name]
                if isinstance(node, nodes.SourceNode):
                    if node.pattern is not None:
                        self.patterns.append((node.pattern, sub_id))
                    sources.extend(decorate(t) for t in node.topics)
                elif isinstance(node, nodes.SinkNode):
                    if node.topic is not None and node.topic in topology.internal_topics:
                        sinks.append(decorate(node.topic))
                else:
                    for store in node.stores:
                        if store not in stores:
                            stores.append(store)
            sub = Subtopology(sub_id, list(names), sources, sinks, stores)
            sub.internal_sources = {t for t in sources if t in self.internal_topics}
            for topic in sources:
                self.topic_to_subtopology[topic] = sub_id
            for store in stores:
                store_to_sub[store] = sub_id
                builder = topology.store_builders[store]
                if builder.logging_enabled:
                    sub.changelogs[store] = _changelog_spec(
                        application_id, builder, window_additional_retention_ms
                    )
                elif store in topology.source_changelogs:
                    sub.changelogs[store] = ChangelogSpec(
                        store, topology.source_changelogs[store], {}, False, source=True
                    )
            self.subtopologies.append(sub)
            self.subtopology_by_id[sub_id] = sub
        self.store_to_subtopology = store_to_sub
        self.copartition_groups = [
            sorted(
                {
                    decorate(t)
                    for name in group
                    if isinstance(topology.nodes.get(name), nodes.SourceNode)
                    for t in topology.nodes[name].topics  # type: ignore[union-attr]
                }
            )
            for group in topology.copartition_groups
        ]
        self.partitions: dict[str, int] = {}

    # -- topics ---------------------------------------------------------------------------

    @property
    def source_topics(self) -> list[str]:
        """Every topic the application consumes (external and repartition), sorted."""
        return sorted(self.topic_to_subtopology)

    @property
    def external_source_topics(self) -> list[str]:
        return sorted(t for t in self.topic_to_subtopology if t not in self.internal_topics)

    def match_patterns(self, topics: Mapping[str, int]) -> bool:
        """Add every topic of ``topics`` (name -> partition count) that a pattern source
        matches in full (Java's ``matcher(topic).matches()``) to that source's sub-topology.
        Cluster-internal topics (``__...``) and this application's own topics never match.
        Once partition counts are resolved, a stateful sub-topology keeps its task count: a
        topic with more partitions than it has tasks is left out, with an error in the log.
        True if any topic was added."""
        if not self.patterns:
            return False
        own = f"{self.application_id}-"
        added = False
        with self._lock:
            for topic, count in sorted(topics.items()):
                if (
                    count <= 0
                    or topic in self.topic_to_subtopology
                    or topic.startswith("__")
                    or (topic.startswith(own) and topic.endswith(("-changelog", "-repartition")))
                ):
                    continue
                sub_id = next((i for p, i in self.patterns if p.fullmatch(topic)), None)
                if sub_id is None:
                    continue
                sub = self.subtopology_by_id[sub_id]
                if self.partitions:  # resolved: the application is running
                    if sub.stateful and sub.num_tasks and count > sub.num_tasks:
                        log.error(
                            "topic %s matches a source pattern but has %d partitions, and "
                            "sub-topology %d with state stores runs %d tasks: not consumed; "
                            "give it at most %d partitions",
                            topic,
                            count,
                            sub.id,
                            sub.num_tasks,
                            sub.num_tasks,
                        )
                        continue
                    self.partitions[topic] = count
                    sub.num_tasks = max(sub.num_tasks, count)
                sub.source_topics.append(topic)
                self.topic_to_subtopology[topic] = sub_id
                added = True
            if added:
                self.version += 1
        return added

    def changelog_specs(self) -> list[tuple[ChangelogSpec, int]]:
        """(changelog, partition count) of every logged store (not the source topics that
        serve as changelogs)."""
        return [
            (spec, sub.num_tasks)
            for sub in self.subtopologies
            for spec in sub.changelogs.values()
            if not spec.source
        ]

    def resolve(self, external_partitions: Callable[[Iterable[str]], dict[str, int]]) -> None:
        """Fix every topic's partition count; ``external_partitions`` reads cluster metadata."""
        external = sorted(
            {
                t
                for s in self.subtopologies
                for t in s.source_topics
                if t not in self.internal_topics
            }
        )
        counts = dict(external_partitions(external))
        missing = [t for t in external if counts.get(t, 0) <= 0]
        if missing:
            raise TopologyValidationError(
                f"source topics {missing} do not exist; create them before starting the "
                "application (KafkaStreams only creates its internal topics)"
            )
        for topic, props in self.internal_topics.items():
            n = props.get("number_of_partitions")
            if n:
                counts[topic] = int(n)
        # repartition topics: max partitions of the upstream sub-topology's sources
        unresolved = [t for t in self.internal_topics if t not in counts]
        for _ in range(len(self.subtopologies) + 1):
            if not unresolved:
                break
            for topic in list(unresolved):
                writers = [s for s in self.subtopologies if topic in s.repartition_sinks]
                if not writers:
                    unresolved.remove(topic)
                    continue
                upstream = [t for s in writers for t in s.source_topics]
                if all(t in counts for t in upstream) and upstream:
                    counts[topic] = max(counts[t] for t in upstream)
                    unresolved.remove(topic)
        if unresolved:
            raise TopologyValidationError(
                f"cannot determine the partition count of repartition topics {unresolved}"
            )
        self._enforce_copartitioning(counts)
        self.partitions = counts
        for sub in self.subtopologies:
            sizes = {counts[t] for t in sub.source_topics}
            sub.num_tasks = max(sizes) if sizes else 0
            if sub.stateful and len(sizes) > 1:
                detail = {t: counts[t] for t in sub.source_topics}
                raise TopologyValidationError(
                    f"sub-topology {sub.id} has state stores {sub.stores} and reads topics with "
                    f"different partition counts {detail}; give them the same number of "
                    "partitions (or repartition one of them)"
                )

    def _enforce_copartitioning(self, counts: dict[str, int]) -> None:
        for group in self.copartition_groups:
            if len(group) < 2:
                continue
            fixed = {t: counts[t] for t in group if t not in self.internal_topics}
            fixed.update(
                {
                    t: counts[t]
                    for t in group
                    if t in self.internal_topics
                    and self.internal_topics[t].get("number_of_partitions")
                }
            )
            if len(set(fixed.values())) > 1:
                raise TopologyValidationError(
                    f"Topics not co-partitioned: {fixed}. Joined topics must have the same "
                    "number of partitions; repartition one side (e.g. with "
                    "repartition(Repartitioned.with_number_of_partitions(n)))"
                )
            target = next(iter(fixed.values())) if fixed else max(counts[t] for t in group)
            for t in group:
                if t in self.internal_topics and t not in fixed:
                    counts[t] = target

    # -- tasks ----------------------------------------------------------------------------

    def task_for(self, topic: str, partition: int) -> str:
        return task_id(self.topic_to_subtopology[topic], partition)

    def tasks_for_partitions(
        self, partitions: Iterable[tuple[str, int]]
    ) -> dict[str, list[tuple[str, int]]]:
        """Group assigned (topic, partition) pairs by task id."""
        tasks: dict[str, list[tuple[str, int]]] = {}
        for topic, partition in partitions:
            sub = self.topic_to_subtopology.get(topic)
            if sub is None:
                continue
            tasks.setdefault(task_id(sub, partition), []).append((topic, partition))
        return tasks

    def subtopology_for_store(self, store: str) -> Subtopology:
        sub = self.store_to_subtopology.get(store)
        if sub is None:
            raise KeyError(store)
        return self.subtopology_by_id[sub]


def _changelog_spec(
    application_id: str, builder: Any, additional_retention_ms: int
) -> ChangelogSpec:
    topic = f"{application_id}-{builder.name}-changelog"
    windowed = isinstance(builder, WindowStoreBuilder | SessionStoreBuilder)
    if windowed:
        retention = int(builder.supplier.retention_period) + additional_retention_ms
        config = {"cleanup.policy": "compact,delete", "retention.ms": str(retention)}
    else:
        config = {"cleanup.policy": "compact"}
    config.update({k: str(v) for k, v in (builder.log_config or {}).items()})
    return ChangelogSpec(builder.name, topic, config, windowed)
