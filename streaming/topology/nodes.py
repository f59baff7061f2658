"""The nodes of a processor graph as ``Topology`` records them: sources, processors,
sinks, and the source and processor pair of a global store."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from streaming.topology.processor import ProcessorSupplier


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
    #: reached only by its parent's ``forward(record, name)``, never by a plain forward (a
    #: side output, like the late records of a windowed aggregation)
    side_output: bool = False


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
    """A global store: its builder, the source reading ``topic`` and the updating processor."""

    store_builder: Any
    source_name: str
    topic: str
    processor_name: str
    reprocess_on_restore: bool = True


NodeDef = SourceNode | ProcessorNodeDef | SinkNode
