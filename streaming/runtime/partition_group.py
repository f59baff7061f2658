"""A task's input: one queue of stamped records per input partition, as Kafka Streams'
``PartitionGroup`` has it.

It hands out the queued record with the smallest timestamp across the partitions, advances
the task's stream time and remembers the offset of the last record taken from each
partition (what the next offset commit covers). ``ready`` is Kafka's ``readyToProcess``:
a task reading several partitions waits up to ``max.task.idle.ms`` for an empty partition
whose records may be on their way, so that records are processed in time order across
partitions.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Final, NamedTuple

from streaming.topology.processor import Headers

UNKNOWN = -1
#: how long a task waits for a partition whose lag is unknown before processing without it
UNKNOWN_LAG_WAIT_MS = 500

TopicPartition = tuple[str, int]


class StampedRecord(NamedTuple):
    """A deserialised record waiting in a queue, with its extracted timestamp.

    The queues' hot path holds the same fields as a plain tuple (``Queued``: no named
    tuple built and freed per record); code reading fields by name gets a
    ``StampedRecord`` (``as_stamped``)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: Any
    value: Any
    headers: Headers
    #: the bytes as consumed: a processing error's dead letter carries them (KIP-1034)
    raw_key: bytes | None = None
    raw_value: bytes | None = None


#: a queued record: ``(topic, partition, offset, timestamp, key, value, headers, raw_key,
#: raw_value)``, a plain tuple or a ``StampedRecord``
Queued = tuple[str, int, int, int, Any, Any, Headers, bytes | None, bytes | None]
#: field positions in a ``Queued``
TOPIC: Final = 0
PARTITION: Final = 1
OFFSET: Final = 2
TIMESTAMP: Final = 3
HEADERS: Final = 6

#: ``_new_stamped(StampedRecord, queued)``: a record built without the generated
#: ``__new__``'s frame
_new_stamped: Any = tuple.__new__


def as_stamped(rec: Queued) -> StampedRecord:
    """``rec`` as a ``StampedRecord`` (itself if it is one)."""
    if type(rec) is StampedRecord:
        return rec
    stamped: StampedRecord = _new_stamped(StampedRecord, rec)
    return stamped


class PartitionGroup:
    """The queues of one task's input partitions, its stream time and processed offsets."""

    __slots__ = (
        "_idle_deadlines",
        "input_partitions",
        "max_idle_ms",
        "processed_offsets",
        "queues",
        "stream_time",
    )

    def __init__(
        self, input_partitions: Iterable[TopicPartition] = (), max_idle_ms: int = 0
    ) -> None:
        self.queues: dict[TopicPartition, deque[Queued]] = {}
        #: the largest timestamp taken so far (``UNKNOWN`` before the first record)
        self.stream_time = UNKNOWN
        #: offset of the last record taken from each input partition
        self.processed_offsets: dict[TopicPartition, int] = {}
        self.input_partitions = sorted(input_partitions)
        self.max_idle_ms = max_idle_ms
        self._idle_deadlines: dict[TopicPartition, int] = {}

    def queue(self, tp: TopicPartition) -> deque[Queued]:
        """The queue of partition ``tp`` (created on first use)."""
        queue = self.queues.get(tp)
        if queue is None:
            queue = self.queues[tp] = deque()
        return queue

    def partition_time(self, tp: TopicPartition) -> int:
        """The timestamp of the last record queued for ``tp``, else the stream time (what a
        timestamp extractor gets as the partition time)."""
        queue = self.queues.get(tp)
        return queue[-1][TIMESTAMP] if queue else self.stream_time

    def next_record(self, until: int | None = None) -> StampedRecord | None:
        """Take the queued record with the smallest timestamp (None when all are empty, or
        it lies past ``until``), advancing the stream time and the partition's processed
        offset."""
        queues = self.queues
        best = None
        if len(queues) == 1:  # one input partition (the common case): nothing to choose
            for queue in queues.values():
                best = queue
        else:
            best_ts = 0
            for queue in queues.values():
                if queue:
                    ts = queue[0][TIMESTAMP]
                    if best is None or ts < best_ts:
                        best, best_ts = queue, ts
        if not best or (until is not None and best[0][TIMESTAMP] > until):
            return None
        rec = as_stamped(best.popleft())
        if rec.timestamp > self.stream_time:
            self.stream_time = rec.timestamp
        self.processed_offsets[(rec.topic, rec.partition)] = rec.offset
        return rec

    def head_timestamp(self) -> int | None:
        """The smallest timestamp of the records at the queues' heads (None: all empty)."""
        heads = [queue[0][TIMESTAMP] for queue in self.queues.values() if queue]
        return min(heads) if heads else None

    def unseen(self, tp: TopicPartition, msgs: list[Any]) -> list[Any]:
        """The consumer messages of ``tp`` (in offset order) after the last record queued
        or processed for it: after a rebalance a kept partition is fetched again from its
        committed offset while records polled before the rebalance may be queued already."""
        queue = self.queues.get(tp)
        floor = queue[-1][OFFSET] if queue else self.processed_offsets.get(tp)
        if floor is None or not msgs or msgs[0].offset() > floor:
            return msgs
        return [m for m in msgs if m.offset() > floor]

    def has_records(self) -> bool:
        return any(self.queues.values())

    def buffered(self) -> int:
        """How many records wait in all queues."""
        return sum(len(q) for q in self.queues.values())

    def clear(self) -> None:
        """Drop every queued record (the task is closed or rewound)."""
        for queue in self.queues.values():
            queue.clear()

    def ready(self, now_ms: int, lag: Callable[[TopicPartition], int | None]) -> bool:
        """Kafka's ``readyToProcess``: every input partition has records, or the empty ones
        have nothing fetched on its way (``lag``) and waited ``max_idle_ms`` since they
        were found empty (a negative idle time processes at once). A partition with
        records forgets its deadline, so its next idle wait starts afresh."""
        queues = self.queues
        partitions = self.input_partitions
        if len(partitions) == 1:
            return bool(queues.get(partitions[0]))
        deadlines = self._idle_deadlines
        any_queued = False
        for tp in partitions:
            if queues.get(tp):
                deadlines.pop(tp, None)
                any_queued = True
                continue
            if self.max_idle_ms < 0:
                continue
            fetched_lag = lag(tp)
            if fetched_lag is not None and fetched_lag > 0:
                deadlines.pop(tp, None)
                return False  # data is on its way: wait for it
            wait = (
                self.max_idle_ms
                if fetched_lag is not None
                else max(self.max_idle_ms, UNKNOWN_LAG_WAIT_MS)
            )
            if now_ms < deadlines.setdefault(tp, now_ms + wait):
                return False
        return any_queued  # enforced processing when some partition idled past its deadline
