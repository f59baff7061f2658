"""Kafka's ``GraphNode`` flags, recorded as the DSL builds; ``topology.optimization`` reads
them (streaming.dsl.optimizer)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class RepartitionMark:
    """The filter -> sink -> topic -> source of one repartition."""

    filter: str
    sink: str
    source: str
    topic: str
    optimizable: bool  # Kafka's OptimizableRepartitionNode (every one but ``repartition()``)


@dataclass
class SelfJoinMark:
    """A stream-stream join: rewritten by ``single.store.self.join`` when ``this_windowed``
    and ``other_windowed`` have one and the same parent."""

    this_windowed: str
    other_windowed: str
    join_this: str
    join_other: str
    merge: str
    this_store: str
    dropped_stores: list[str]
    before_ms: int
    after_ms: int
    retention_ms: int
    joiner: Any


@dataclass
class GraphMarks:
    """Kafka's ``GraphNode`` flags, recorded per physical node as the DSL builds them."""

    key_changing: set[str] = field(default_factory=set)
    value_changing: set[str] = field(default_factory=set)
    #: ``process`` / ``processValues`` nodes: key/value-changing only with the
    #: ``__enable.process.processValue.fix__`` flag (KAFKA-19668)
    process: set[str] = field(default_factory=set)
    process_values: set[str] = field(default_factory=set)
    merge: list[str] = field(default_factory=list)
    repartitions: list[RepartitionMark] = field(default_factory=list)
    #: (source node, KTABLE-SOURCE processor, its supplier) of every ``builder.table()``
    table_sources: list[tuple[str, str, Any]] = field(default_factory=list)
    self_joins: list[SelfJoinMark] = field(default_factory=list)
