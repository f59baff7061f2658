"""Standby replicas (``num.standby.replicas``): warm copies of other instances' task state.

librdkafka runs the partition assignment itself, so standby tasks are placed outside of it:
every instance reads the consumer group (``AssignmentDirectory``), and the standbys of a
task are the next ``num.standby.replicas`` instances after its active owner in sorted order
of instance ids (each instance computes the same answer). An instance keeps, for each of
its standby tasks, the task's logged stores under ``state.dir/<application.id>/<task>/``
and follows their changelogs (``read_committed``) with its own consumer, writing the
checkpoint every ``commit.interval.ms``. Its stores resume as an active task's do
(``store_offsets``): under exactly-once they are transactional, and each applied batch is
committed with the offset after it. When the task becomes active here, the standby is
closed first (checkpoint written) and the active task restores only the changelog records
written since.

A store whose changelog is its source topic (``reuse.ktable.source.topics``) is followed only
up to the consumer group's committed offsets, as Kafka's ``StoreChangelogReader`` limits
standby tasks: past them the active task has not processed the records yet. A partition that
reaches its limit waits (paused, rewound to the first record past it) until the limit moves.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from streaming.runtime.assignment import Subtopology, task_id
from streaming.runtime.failures import Kind, classify, error_of
from streaming.runtime.messages import changelog_entry, offset_of, topic_partition
from streaming.runtime.metadata import process_from_client_id
from streaming.runtime.state_directory import TaskLock, read_checkpoint, write_checkpoint
from streaming.runtime.store_offsets import prepare_task_dir, restore_start
from streaming.state.api import InMemoryStateStoreContext, TransactionalStore, transactional_layer

if TYPE_CHECKING:
    from streaming.runtime.metadata import AssignmentDirectory
    from streaming.runtime.services import ClientServices

log = logging.getLogger(__name__)

REFRESH_S = 2.0


class StandbyTask:
    """The logged stores of one task, kept up to date from their changelogs."""

    def __init__(
        self, tid: str, sub: Subtopology, partition: int, services: ClientServices
    ) -> None:
        self.id = tid
        self.partition = partition
        self.services = services
        self.task_dir = services.state_directory.task_dir(tid)
        self.changelogs = {store: spec.topic for store, spec in sub.changelogs.items()}
        #: source topics serving as changelogs: followed up to the committed offsets only
        self.source_partitions = {
            (spec.topic, partition) for spec in sub.changelogs.values() if spec.source
        }
        self.stores: dict[str, Any] = {}
        self.callbacks: dict[str, Any] = {}
        self.offsets: dict[tuple[str, int], int | None] = {}
        #: the transactional stores (exactly-once) by changelog partition
        self.transactional: dict[tuple[str, int], TransactionalStore] = {}
        self.applied = 0
        self._dir_lock: TaskLock | None = None

    def open(self) -> None:
        # fails while an active task has the directory (another worker's, or closing)
        self._dir_lock = self.services.state_directory.lock_task(self.id)
        try:
            self._open()
        except BaseException:
            self._close_stores()
            raise

    def _open(self) -> None:
        checkpoint = read_checkpoint(self.task_dir)
        cfg = self.services.config
        context = InMemoryStateStoreContext(
            application_id=cfg.application_id,
            task_id=self.id,
            state_dir=self.task_dir,
            app_configs=self.services.app_configs,
            default_key_serde=cfg.default_key_serde,
            default_value_serde=cfg.default_value_serde,
            transactional_state=cfg.exactly_once,
        )
        builders = self.services.topology.store_builders
        built = {name: builders[name].build() for name in self.changelogs}
        prepare_task_dir(self.task_dir, built, checkpoint, transactional=cfg.exactly_once)
        try:
            for name, topic in self.changelogs.items():
                store = built[name]
                store.init(context, store)
                self.stores[name] = store
                self.callbacks[topic] = context.registered.get(name)
                tp = (topic, self.partition)
                self.offsets[tp] = restore_start(store, tp, checkpoint)
                layer = transactional_layer(store)
                if layer is not None:
                    self.transactional[tp] = layer
        except BaseException:
            self._close_stores()
            raise

    def topic_partitions(self) -> Iterator[TopicPartition]:
        for (topic, partition), offset in self.offsets.items():
            yield TopicPartition(topic, partition, OFFSET_BEGINNING if offset is None else offset)

    def apply(
        self, tp: tuple[str, int], batch: list[tuple[bytes, bytes | None, int]], next_offset: int
    ) -> None:
        callback = self.callbacks.get(tp[0])
        if callback is not None and batch:
            callback(batch)
            self.applied += len(batch)
        layer = self.transactional.get(tp)
        if layer is not None:
            layer.commit({tp: next_offset})
        self.offsets[tp] = next_offset

    def checkpoint(self) -> None:
        for store in self.stores.values():
            store.flush()
            inner = store.inner() if hasattr(store, "inner") else store
            force = getattr(inner, "force_flush", None)
            if force is not None:
                force()
        # like Kafka, only persistent stores are checkpointed
        persistent = {
            (topic, self.partition)
            for name, topic in self.changelogs.items()
            if getattr(self.stores.get(name), "persistent", True)
        }
        offsets = {tp: o for tp, o in self.offsets.items() if tp in persistent}
        known = {tp: o for tp, o in offsets.items() if o is not None}
        if len(known) == len(offsets):
            write_checkpoint(self.task_dir, known)

    def close(self) -> None:
        try:
            self.checkpoint()
        finally:
            self._close_stores()

    def _close_stores(self) -> None:
        for store in self.stores.values():
            with contextlib.suppress(Exception):
                store.close()
        self.stores.clear()
        self.transactional.clear()
        if self._dir_lock is not None:
            self._dir_lock.release()
            self._dir_lock = None


class StandbyManager(threading.Thread):
    """Opens, updates and closes this instance's standby tasks."""

    def __init__(
        self,
        services: ClientServices,
        directory: AssignmentDirectory,
        local_tasks: Callable[[], Iterable[str]],
    ) -> None:
        super().__init__(name=f"{services.config.application_id}-StandbyUpdater", daemon=True)
        self.services = services
        #: where the group's tasks are (which standbys this instance keeps)
        self.directory = directory
        #: the ids of this instance's active tasks (never kept as standbys too)
        self.local_tasks = local_tasks
        self.replicas = services.config.num_standby_replicas
        self.lock = threading.RLock()
        self.tasks: dict[str, StandbyTask] = {}
        self._stop_event = threading.Event()
        self._consumer: Consumer | None = None
        self._refresh_needed = True
        self._reassign_needed = False
        #: committed offset of each source-topic changelog partition: the standby's limit
        self.limits: dict[tuple[str, int], int] = {}
        #: source-topic changelog partitions paused at their limit (-> the offset waiting)
        self.held: dict[tuple[str, int], int] = {}
        self.stateful = {
            task_id(sub.id, p)
            for sub in services.plan.subtopologies
            if sub.changelogs
            for p in range(sub.num_tasks)
        }
        self.process = process_from_client_id(f"{services.thread_client_id(1)}-consumer")

    def invalidate(self) -> None:
        self._refresh_needed = True

    def shutdown(self) -> None:
        self._stop_event.set()

    @contextlib.contextmanager
    def activating(self, tid: str) -> Iterator[None]:
        """Held by a stream thread while it turns ``tid`` into an active task here."""
        with self.lock:
            if tid in self.tasks:
                log.info("Standby task %s becomes active", tid)
                self._close_task(tid)
                self._reassign_needed = True  # the consumer is only used by its own thread
            yield

    # -- loop -----------------------------------------------------------------------------

    def run(self) -> None:
        cfg = self.services.config
        self._consumer = Consumer(  # Kafka's standby tasks read with the restore consumer
            cfg.clients(self.services.client_logger).state_consumer(
                role="standby",
                client_id=f"{self.services.client_id}-standby-consumer",
                partition_eof=False,
            )
        )
        last_refresh = 0.0
        last_checkpoint = time.monotonic()
        next_warning = 0.0
        try:
            while not self._stop_event.is_set():
                try:
                    now = time.monotonic()
                    if self._refresh_needed or now - last_refresh >= REFRESH_S:
                        self._refresh_needed = False
                        last_refresh = now
                        self._refresh()
                        self._update_limits()
                    if self._reassign_needed:
                        self._reassign_needed = False
                        with self.lock:
                            self._reassign()
                    if not self.tasks:
                        self._stop_event.wait(0.2)
                        continue
                    self._poll()
                    if (now - last_checkpoint) * 1000 >= max(cfg.commit_interval_ms, 1000):
                        last_checkpoint = now
                        with self.lock:
                            for task in self.tasks.values():
                                task.checkpoint()
                except KafkaException as exc:
                    # brokers away, leaders moving: standbys lag behind until they return
                    err = error_of(exc)
                    if err is not None and classify(err) is Kind.FATAL:
                        raise
                    if time.monotonic() >= next_warning:
                        next_warning = time.monotonic() + 30.0
                        log.warning("Standby updater retrying after: %s", exc)
                    self._refresh_needed = True
                    self._stop_event.wait(1.0)
        except Exception:
            log.exception("Standby updater failed; standby replicas stop updating")
        finally:
            with self.lock:
                for task in self.tasks.values():
                    with contextlib.suppress(Exception):
                        task.close()
                self.tasks.clear()
                consumer, self._consumer = self._consumer, None
                consumer.close()

    def _refresh(self) -> None:
        wanted = self.directory.standby_tasks(self.process, self.replicas, self.stateful)
        with self.lock:
            active = set(self.local_tasks())
            wanted -= active
            changed = False
            for tid in list(self.tasks):
                if tid not in wanted:
                    self._close_task(tid)
                    changed = True
            for tid in sorted(wanted - set(self.tasks)):
                sub_id, partition = (int(x) for x in tid.split("_"))
                task = StandbyTask(
                    tid, self.services.plan.subtopology_by_id[sub_id], partition, self.services
                )
                try:
                    task.open()
                except Exception as exc:  # e.g. the active task is still closing its stores
                    log.info("Standby task %s not opened yet: %s", tid, exc)
                    self._refresh_needed = True
                    continue
                log.info("Standby task %s opened", tid)
                self.tasks[tid] = task
                changed = True
            if changed:
                self._reassign()

    def _close_task(self, tid: str) -> None:
        """Close standby task ``tid`` and forget its source partitions' limits (the caller
        holds the lock)."""
        task = self.tasks.pop(tid)
        for tp in task.source_partitions:
            self.limits.pop(tp, None)
            self.held.pop(tp, None)
        task.close()

    def _update_limits(self) -> None:
        """Read the group's committed offsets of the source-topic changelog partitions and
        let the held ones go on up to them."""
        wanted = sorted(self._source_partitions())
        if not wanted:
            return
        from confluent_kafka import ConsumerGroupTopicPartitions

        group = self.services.config.application_id
        request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p) for t, p in wanted])
        futures = self.services.admin.list_consumer_group_offsets([request], require_stable=True)
        result = futures[group].result(timeout=10)
        with self.lock:
            for tp in result.topic_partitions:
                if tp.error is None:
                    key = (tp.topic, tp.partition)
                    self.limits[key] = max(self.limits.get(key, 0), tp.offset, 0)
            ready = [tp for tp, offset in self.held.items() if offset < self.limits.get(tp, 0)]
            if ready and self._consumer is not None:
                for tp in ready:
                    del self.held[tp]
                self._consumer.resume([TopicPartition(t, p) for t, p in ready])

    def _reassign(self) -> None:
        if self._consumer is None:
            return
        self.held.clear()  # a new assignment starts every partition unpaused
        tps = [tp for task in self.tasks.values() for tp in task.topic_partitions()]
        if tps:
            self._consumer.assign(tps)
        else:
            self._consumer.unassign()

    def _poll(self) -> None:
        assert self._consumer is not None
        msgs = self._consumer.consume(num_messages=2000, timeout=0.2)
        if not msgs:
            return
        batches: dict[tuple[str, int], list[tuple[bytes, bytes | None, int]]] = {}
        ends: dict[tuple[str, int], int] = {}
        limits = self.limits
        sources = self._source_partitions()
        stopped: dict[tuple[str, int], int] = {}
        for msg in msgs:
            if msg.error() is not None:
                continue
            tp = topic_partition(msg)
            offset = offset_of(msg)
            if tp in sources:
                if tp in stopped or offset >= limits.get(tp, 0):
                    stopped.setdefault(tp, offset)
                    continue
                ends[tp] = offset + 1
                if msg.key() is None:  # the source node skips these too
                    batches.setdefault(tp, [])
                    continue
            # changelog records have keys (null-key source records were skipped above)
            batches.setdefault(tp, []).append(changelog_entry(msg))
            ends[tp] = offset + 1
        if stopped:
            consumer = self._consumer
            for (topic, partition), offset in stopped.items():
                consumer.seek(TopicPartition(topic, partition, offset))
            consumer.pause([TopicPartition(t, p) for t, p in stopped])
            with self.lock:
                self.held.update(stopped)
        with self.lock:
            by_partition = {tp: task for task in self.tasks.values() for tp in task.offsets}
            for tp, batch in batches.items():
                task = by_partition.get(tp)
                if task is not None:
                    task.apply(tp, batch, ends[tp])

    def _source_partitions(self) -> set[tuple[str, int]]:
        with self.lock:
            return {tp for task in self.tasks.values() for tp in task.source_partitions}

    def standby_task_ids(self) -> list[str]:
        return sorted(self.tasks)
