"""The active tasks of one stream thread (Kafka's ``TaskManager``).

Builds the tasks of an assignment (tasks kept across a rebalance keep their state), closes
them clean (checkpointing a running task's changelogs) or dirty, handles a revocation and a
lost assignment, restores restoring tasks from their changelogs (``restore``), hands polled
records to their tasks' queues (pausing a partition whose queue is full, resuming it once
drained), and runs the running tasks' processing and wall-clock punctuation.

Under exactly-once it bounds what the tasks' transactional stores hold uncommitted
(``statestore.uncommitted.max.bytes``, split among the stream threads): at the limit it
asks for a commit, and processes nothing more until one succeeded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from streaming.runtime import metrics as metrics_mod
from streaming.runtime.active_task import (
    CLOSED,
    CREATED,
    RESTORING,
    RUNNING,
    ActiveTask,
    ActiveTaskCreator,
)
from streaming.runtime.failures import Stall, calling
from streaming.runtime.restore import ChangelogReader

if TYPE_CHECKING:
    from streaming.runtime.alignment import ThreadAlignment
    from streaming.runtime.assignment import TopologyPlan
    from streaming.runtime.config import StreamsConfig
    from streaming.runtime.listeners import StandbyHandover
    from streaming.runtime.partition_group import PartitionGroup

log = logging.getLogger(__name__)


class TaskManager:
    """Owns the active tasks of one stream thread and the partitions assigned to it."""

    def __init__(
        self,
        *,
        config: StreamsConfig,
        plan: TopologyPlan,
        task_creator: ActiveTaskCreator,
        consumer: Consumer,
        standby: Callable[[], StandbyHandover | None],
        stall: Stall,
        metrics: metrics_mod.ThreadMetrics,
        changelog_end: Callable[[str, int], int],
        alignment: ThreadAlignment | None = None,
        uncommitted_limit: int | None = None,
    ) -> None:
        self.config = config
        self.plan = plan
        self.task_creator = task_creator
        #: the thread's current main consumer (replaced when the group fences it)
        self.consumer = consumer
        self._standby = standby
        self.stall = stall
        self.metrics = metrics
        self._changelog_end = changelog_end
        self.tasks: dict[str, ActiveTask] = {}
        self.by_partition: dict[tuple[str, int], ActiveTask] = {}
        self.assigned: list[tuple[str, int]] = []
        #: partitions paused in the consumer because their task's queue is full
        self.paused: set[tuple[str, int]] = set()
        #: the task being processed (the source of a dead letter of its writes)
        self.current_task: ActiveTask | None = None
        #: event-time alignment of the source partitions (None: off)
        self.alignment = alignment
        #: exactly-once: what the tasks' stores may hold uncommitted (None: no limit)
        self.uncommitted_limit = uncommitted_limit

    # -- assignment -----------------------------------------------------------------------

    def handle_assignment(self, assigned: list[tuple[str, int]]) -> set[tuple[str, int]]:
        """Build the tasks of a new assignment; the input partitions of the kept tasks."""
        before = set(self.tasks.values())
        self.create_tasks(assigned)
        return {
            tp for task in self.tasks.values() if task in before for tp in task.input_partitions
        }

    def create_tasks(self, assigned: list[tuple[str, int]]) -> None:
        """Close the tasks whose partitions changed (clean) and build the missing ones."""
        wanted = self.plan.tasks_for_partitions(assigned)
        task: ActiveTask | None
        for tid, task in list(self.tasks.items()):
            if tid not in wanted or sorted(wanted[tid]) != task.input_partitions:
                self.close_task_clean(task)
                del self.tasks[tid]
        for tid, parts in wanted.items():
            task = self.tasks.get(tid)
            if task is None:
                sub_id, partition = (int(x) for x in tid.split("_"))
                sub = self.plan.subtopology_by_id[sub_id]
                standby = self._standby()
                with standby.activating(tid) if standby is not None else nullcontext():
                    task = self.task_creator.create(tid, sub, partition, parts)
                    task.initialize()
                    self.tasks[tid] = task
            elif task.state != RESTORING:
                task.state = RUNNING
        self.by_partition = {tp: t for t in self.tasks.values() for tp in t.input_partitions}
        self.assigned = assigned

    def handle_revocation(self) -> None:
        """Forget the revoked partitions: queues are cleared, restoring tasks closed dirty;
        running tasks stay (the next assignment keeps or closes them)."""
        for task in self.tasks.values():
            task.partition_group.clear()
            if task.state == RESTORING:
                task.close(clean=False)
        self.tasks = {tid: t for tid, t in self.tasks.items() if t.state != CLOSED}
        self.by_partition.clear()
        self.resume_paused()
        self.assigned = []

    def handle_lost_all(self) -> None:
        """Forget the lost partitions (their tasks were closed dirty)."""
        self.by_partition.clear()
        self.resume_paused()
        self.assigned = []

    def resume_paused(self) -> None:
        """Resume every partition paused for a full queue and forget them: the queues were
        dropped, and librdkafka keeps a partition paused across a rebalance that assigns it
        to this consumer again, where no full queue would ever resume it."""
        paused = [TopicPartition(t, p) for t, p in self.paused]
        self.paused.clear()
        if paused:
            try:
                self.consumer.resume(paused)
            except KafkaException as exc:  # a consumer fenced or closing: nothing to fetch
                log.debug("resuming %s: %s", paused, exc)

    # -- closing --------------------------------------------------------------------------

    def close_task_clean(self, task: ActiveTask) -> None:
        """Checkpoint a running task's changelogs and close it; dirty if that fails."""
        try:
            if task.state == RUNNING and task.changelogs:
                task.checkpoint(self._changelog_end)
            task.close(clean=task.state == RUNNING)
        except Exception:
            log.exception("Closing task %s failed; closing it dirty", task.id)
            task.close(clean=False)

    def close_all_dirty(self) -> None:
        """Close every task dirty (its uncommitted state is dropped) and forget it."""
        for task in self.tasks.values():
            task.close(clean=False)
        self.tasks.clear()

    def close_dirty_and_revive(self) -> list[tuple[str, int]]:
        """Close every task dirty and build it again from its committed state; the
        assigned partitions (to rewind to their committed offsets)."""
        partitions = list(self.assigned)
        for task in self.tasks.values():
            task.close(clean=False)
        self.tasks.clear()
        self.by_partition.clear()
        # the partitions stay assigned: the rebuilt tasks start with empty queues
        self.resume_paused()
        self.create_tasks(partitions)
        return partitions

    def shutdown(self, *, clean: bool) -> None:
        """Close every task (clean: checkpointed) and forget them."""
        for task in self.tasks.values():
            if clean:
                self.close_task_clean(task)
            else:
                task.close(clean=False)
        self.tasks.clear()
        self.by_partition.clear()

    # -- restoration ----------------------------------------------------------------------

    def has_restoring(self) -> bool:
        """Whether a task still restores its state."""
        return any(t.state == RESTORING for t in self.tasks.values())

    def try_to_complete_restoration(
        self, reader: ChangelogReader, stopping: Callable[[], bool]
    ) -> None:
        """Restore the restoring tasks from their changelogs; they run once restored."""
        restoring = [t for t in self.tasks.values() if t.state == RESTORING]
        requests = [r for task in restoring for r in task.pending_restore]
        with calling("restoring state from changelogs"):
            self.metrics.restored_records += reader.restore(requests, stopping)
        if stopping():
            return
        self.stall.recovered()
        for task in restoring:
            task.pending_restore = []
            task.state = RUNNING

    # -- records --------------------------------------------------------------------------

    def add_records_to_tasks(self, msgs: list[Any], on_error: Callable[[Any], None]) -> None:
        """Hand polled records to their tasks' queues (``on_error`` gets error events);
        pause a partition whose queue holds more than ``buffered.records.per.partition``."""
        by_tp: dict[tuple[str, int], list[Any]] = {}
        last_topic = None
        last_partition = -1
        batch: list[Any] = []
        for msg in msgs:
            if msg.error() is not None:
                on_error(msg.error())
                continue
            topic = msg.topic()
            partition = msg.partition()
            if partition != last_partition or topic != last_topic:
                last_topic = topic
                last_partition = partition
                batch = by_tp.setdefault((topic, partition), [])
            batch.append(msg)
        by_partition = self.by_partition
        limit = self.config.buffered_records_per_partition
        for tp, batch in by_tp.items():
            task = by_partition.get(tp)
            if task is None:
                continue  # no task of this thread reads it (revoked meanwhile)
            task.add_messages(tp[0], tp[1], batch)
            if len(task.partition_group.queues[tp]) > limit and tp not in self.paused:
                self.consumer.pause([TopicPartition(tp[0], tp[1])])
                self.paused.add(tp)

    def resume_drained(self) -> None:
        """Resume the paused partitions whose queue is down to half its limit."""
        if not self.paused:
            return
        limit = self.config.buffered_records_per_partition // 2
        resume = []
        for tp in list(self.paused):
            task = self.by_partition.get(tp)
            queue = task.partition_group.queues.get(tp) if task is not None else None
            if task is None or queue is None or len(queue) <= limit:
                self.paused.discard(tp)
                if task is not None:
                    resume.append(TopicPartition(tp[0], tp[1]))
        if resume:
            self.consumer.resume(resume)

    # -- processing -----------------------------------------------------------------------

    def running(self) -> Iterator[ActiveTask]:
        """The running tasks (restored, assigned)."""
        return (t for t in self.tasks.values() if t.state == RUNNING)

    def process(
        self,
        max_records: int,
        now: int,
        lag: Callable[..., int | None],
        unread: Callable[..., int | None] | None = None,
    ) -> int:
        """Process up to ``max_records`` records of each running task; how many were.

        Under event-time alignment a task reading source topics takes no record past the
        event time the alignment allows (``unread``: a partition's records not yet consumed,
        counted from its committed offset before its first record; default ``lag``); the
        bound is moved on and the tasks are offered records again while that frees some
        (until each took ``max_records``)."""
        if self.uncommitted_full():
            return 0  # the commit the limit asks for comes first
        if self.alignment is None:
            return self._process_pass(dict.fromkeys(self.tasks, max_records), now, lag, None)
        budget = dict.fromkeys(self.tasks, max_records)
        total = 0
        while True:
            until = self.alignment.limit(self._source_partitions(), unread or lag, now)
            processed = self._process_pass(budget, now, lag, until)
            total += processed
            if until is None or not processed:
                break
        return total

    def _process_pass(
        self, budget: dict[str, int], now: int, lag: Callable[..., int | None], until: int | None
    ) -> int:
        """Offer each running task records once (at most its ``budget``, which shrinks by
        what it took; source tasks none past ``until``); how many were processed."""
        waited = False
        total = 0
        for tid, task in self.tasks.items():
            left = budget.get(tid, 0)
            if task.state != RUNNING or left <= 0:
                continue
            self.current_task = task
            bound = until if until is not None and task.reads_sources else None
            processed = task.process(left, now, lag, until=bound)
            budget[tid] = left - processed
            if bound is not None and processed < left and task.waits_beyond(bound):
                waited = True
            total += processed
        self.current_task = None
        if waited:
            self.metrics.alignment_waits += 1
        return total

    def _source_partitions(self) -> Iterator[tuple[tuple[str, int], PartitionGroup]]:
        """The source-topic partitions (not repartition topics) and groups of the assigned
        tasks, restoring ones included: a partition just assigned holds the client's other
        partitions back from the start (a worker whose tasks restore after a rebalance
        would otherwise report none, and the others would run its records into lateness)."""
        for task in self.tasks.values():
            if task.state in (CREATED, RESTORING, RUNNING) and task.reads_sources:
                group = task.partition_group
                for tp in task.source_partitions:
                    yield tp, group

    def punctuate(self, now: int) -> None:
        """Run the running tasks' due wall-clock punctuations."""
        for task in self.tasks.values():
            if task.state == RUNNING and task.punctuate_wall_clock(now):
                self.metrics.punctuations += 1

    def commit_requested(self) -> bool:
        """Whether a running task asked for a commit (``context.commit()``), or the stores
        hold as much uncommitted as they may."""
        requested = any(t.stream_task.commit_requested for t in self.running())
        return requested or self.uncommitted_full()

    def uncommitted_full(self) -> bool:
        """Whether the running tasks' transactional stores reached the uncommitted limit."""
        limit = self.uncommitted_limit
        if limit is None:
            return False
        held = sum(t.uncommitted_bytes for t in self.running())
        return held > 0 and held >= limit
