"""The processor graph and the Processor API."""

from streaming.errors import TopologyException
from streaming.topology.describe import TopologyDescription
from streaming.topology.graph import Topology
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
