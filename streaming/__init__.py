"""Kafka Streams for Python: a DSL and Processor API with Kafka Streams semantics.

```python
from streaming import StreamsBuilder, TopologyTestDriver, TimeWindows, serdes
```
"""

from streaming import serdes
from streaming.dsl import (
    Branched,
    BranchedKStream,
    BufferConfig,
    Change,
    CogroupedKStream,
    Consumed,
    EmitStrategy,
    GlobalKTable,
    Grouped,
    Joined,
    JoinWindows,
    KGroupedStream,
    KGroupedTable,
    KStream,
    KTable,
    LateRecord,
    Materialized,
    Named,
    Printed,
    Produced,
    Repartitioned,
    SessionWindowedKStream,
    SessionWindows,
    SlidingWindows,
    StreamJoined,
    StreamsBuilder,
    Suppressed,
    TableJoined,
    TimeWindowedKStream,
    TimeWindows,
    UnlimitedWindows,
    Windows,
)
from streaming.errors import (
    ConfigException,
    IllegalStateException,
    InvalidStateStoreException,
    SerializationError,
    StreamsException,
    TopologyException,
)
from streaming.testing import KeyValue, TestRecord, TopologyTestDriver
from streaming.topology import (
    FixedKeyProcessor,
    Processor,
    PunctuationType,
    Record,
    Topology,
)
from streaming.windowed import SessionWindow, TimeWindow, Window, Windowed

__all__ = [
    "Branched",
    "BranchedKStream",
    "BufferConfig",
    "Change",
    "CogroupedKStream",
    "ConfigException",
    "Consumed",
    "EmitStrategy",
    "FixedKeyProcessor",
    "GlobalKTable",
    "Grouped",
    "IllegalStateException",
    "InvalidStateStoreException",
    "JoinWindows",
    "Joined",
    "KGroupedStream",
    "KGroupedTable",
    "KStream",
    "KTable",
    "KafkaStreams",
    "KeyValue",
    "LateRecord",
    "Materialized",
    "Named",
    "Printed",
    "Processor",
    "Produced",
    "PunctuationType",
    "QueryServer",
    "Record",
    "Repartitioned",
    "SerializationError",
    "SessionWindow",
    "SessionWindowedKStream",
    "SessionWindows",
    "SlidingWindows",
    "StreamJoined",
    "StreamsBuilder",
    "StreamsConfig",
    "StreamsException",
    "Suppressed",
    "TableJoined",
    "TestRecord",
    "TimeWindow",
    "TimeWindowedKStream",
    "TimeWindows",
    "Topology",
    "TopologyException",
    "TopologyTestDriver",
    "UnlimitedWindows",
    "Window",
    "Windowed",
    "Windows",
    "serdes",
]

# The Kafka runtime imports confluent-kafka: load it on first use only.
_RUNTIME_EXPORTS = {
    "KafkaStreams": "streaming.app",
    "QueryServer": "streaming.query.server",
    "StreamsConfig": "streaming.runtime.config",
}


def __getattr__(name: str):
    module = _RUNTIME_EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'streaming' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
