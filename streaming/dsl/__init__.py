"""The Kafka Streams DSL: builder, streams, tables, grouping, windows and options."""

from streaming.dsl.builder import StreamsBuilder
from streaming.dsl.change import Change
from streaming.dsl.cogroup import (
    CogroupedKStream,
    SessionWindowedCogroupedKStream,
    TimeWindowedCogroupedKStream,
)
from streaming.dsl.grouped import (
    KGroupedStream,
    KGroupedTable,
    SessionWindowedKStream,
    TimeWindowedKStream,
)
from streaming.dsl.kstream import BranchedKStream, KStream
from streaming.dsl.ktable import GlobalKTable, KTable
from streaming.dsl.options import (
    Branched,
    Consumed,
    Grouped,
    Joined,
    Materialized,
    Named,
    Printed,
    Produced,
    Repartitioned,
    StreamJoined,
    TableJoined,
)
from streaming.dsl.processors.late import LateRecord
from streaming.dsl.suppressed import BufferConfig, Suppressed
from streaming.dsl.windows import (
    EmitStrategy,
    JoinWindows,
    SessionWindows,
    SlidingWindows,
    TimeWindows,
    UnlimitedWindows,
    Windows,
)

__all__ = [
    "Branched",
    "BranchedKStream",
    "BufferConfig",
    "Change",
    "CogroupedKStream",
    "Consumed",
    "EmitStrategy",
    "GlobalKTable",
    "Grouped",
    "JoinWindows",
    "Joined",
    "KGroupedStream",
    "KGroupedTable",
    "KStream",
    "KTable",
    "LateRecord",
    "Materialized",
    "Named",
    "Printed",
    "Produced",
    "Repartitioned",
    "SessionWindowedCogroupedKStream",
    "SessionWindowedKStream",
    "SessionWindows",
    "SlidingWindows",
    "StreamJoined",
    "StreamsBuilder",
    "Suppressed",
    "TableJoined",
    "TimeWindowedCogroupedKStream",
    "TimeWindowedKStream",
    "TimeWindows",
    "UnlimitedWindows",
    "Windows",
]
