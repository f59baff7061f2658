"""The processor graph and the Processor API."""

from streaming.errors import TopologyException
from streaming.topology.graph import Topology, TopologyDescription
from streaming.topology.processor import (
    Cancellable,
    FixedKeyProcessor,
    Processor,
    ProcessorContext,
    PunctuationType,
    Record,
    RecordContext,
)

__all__ = [
    "Cancellable",
    "FixedKeyProcessor",
    "Processor",
    "ProcessorContext",
    "PunctuationType",
    "Record",
    "RecordContext",
    "Topology",
    "TopologyDescription",
    "TopologyException",
]
