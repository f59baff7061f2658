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
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streaming.runtime.task import StampedRecord

UNKNOWN = -1
#: how long a task waits for a partition whose lag is unknown before processing without it
UNKNOWN_LAG_WAIT_MS = 500

TopicPartition = tuple[str, int]


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
        self.queues: dict[TopicPartition, deque[StampedRecord]] = {}
        #: the largest timestamp taken so far (``UNKNOWN`` before the first record)
        self.stream_time = UNKNOWN
        #: offset of the last record taken from each input partition
        self.processed_offsets: dict[TopicPartition, int] = {}
        self.input_partitions = sorted(input_partitions)
        self.max_idle_ms = max_idle_ms
        self._idle_deadlines: dict[TopicPartition, int] = {}

    def queue(self, tp: TopicPartition) -> deque[StampedRecord]:
        """The queue of partition ``tp`` (created on first use)."""
        queue = self.queues.get(tp)
        if queue is None:
            queue = self.queues[tp] = deque()
        return queue

    def partition_time(self, tp: TopicPartition) -> int:
        """The timestamp of the last record queued for ``tp``, else the stream time (what a
        timestamp extractor gets as the partition time)."""
        queue = self.queues.get(tp)
        return queue[-1].timestamp if queue else self.stream_time

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
                    ts = queue[0].timestamp
                    if best is None or ts < best_ts:
                        best, best_ts = queue, ts
        if not best or (until is not None and best[0].timestamp > until):
            return None
        rec = best.popleft()
        if rec.timestamp > self.stream_time:
            self.stream_time = rec.timestamp
        self.processed_offsets[(rec.topic, rec.partition)] = rec.offset
        return rec

    def head_timestamp(self) -> int | None:
        """The smallest timestamp of the records at the queues' heads (None: all empty)."""
        heads = [queue[0].timestamp for queue in self.queues.values() if queue]
        return min(heads) if heads else None

    def unseen(self, tp: TopicPartition, msgs: list[Any]) -> list[Any]:
        """The consumer messages of ``tp`` (in offset order) after the last record queued
        or processed for it: after a rebalance a kept partition is fetched again from its
        committed offset while records polled before the rebalance may be queued already."""
        queue = self.queues.get(tp)
        floor = queue[-1].offset if queue else self.processed_offsets.get(tp)
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
