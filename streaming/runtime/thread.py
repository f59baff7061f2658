"""A stream thread (Kafka's ``StreamThread``): one consumer, one producer, the active tasks.

The loop: poll a batch of records, hand them to their tasks' queues, restore newly assigned
tasks from their changelogs, process ready tasks, run wall-clock punctuation, and commit every
``commit.interval.ms``:

- at-least-once: flush stores (caches forward, changelog records are sent), wait for every
  write to be acknowledged, commit the input offsets, write the checkpoint files;
- exactly-once v2: the producer is transactional (``<application.id>-<process id>-<n>``);
  flush stores, send the input offsets to the transaction with the consumer group metadata,
  commit the transaction. Nothing is checkpointed while running, so a crash leaves no
  checkpoint and the next owner wipes the state and restores it from the (committed)
  changelog. Any abortable failure aborts the transaction, closes the tasks dirty (their
  state is wiped), rewinds the consumer to the committed offsets and restores.

Partitions come from the consumer group ``application.id`` with the range assignor, so
co-partitioned topics' partition ``p`` land on the same thread; rebalance callbacks commit
before revocation and build or close tasks on assignment (tasks kept across a rebalance
keep their state).
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from streaming.runtime import metrics as metrics_mod
from streaming.runtime.active_task import CLOSED, RESTORING, RUNNING, ActiveTask
from streaming.runtime.producer import RecordCollector
from streaming.runtime.restore import ChangelogReader

if TYPE_CHECKING:
    from streaming.runtime.app import KafkaStreams

log = logging.getLogger(__name__)

# thread states (Kafka's StreamThread.State)
CREATED = "CREATED"
STARTING = "STARTING"
PARTITIONS_REVOKED = "PARTITIONS_REVOKED"
PARTITIONS_ASSIGNED = "PARTITIONS_ASSIGNED"
THREAD_RUNNING = "RUNNING"
PENDING_SHUTDOWN = "PENDING_SHUTDOWN"
DEAD = "DEAD"

MAX_POLL_RECORDS = 1000
#: changelog records written before an at-least-once commit also writes the checkpoint
CHECKPOINT_DELTA = 10_000
PROCESS_BATCH = 1000


class StreamThread(threading.Thread):
    """Runs the tasks of the partitions assigned to its consumer."""

    def __init__(self, app: KafkaStreams, index: int) -> None:
        super().__init__(name=f"{app.config.application_id}-StreamThread-{index}", daemon=True)
        self.app = app
        self.index = index
        self.config = app.config
        self.plan = app.plan
        self.topology = app.topology
        self.app_configs = app.app_configs
        self.state_directory = app.state_directory
        self.thread_client_id = f"{app.client_id}-StreamThread-{index}"
        cache_bytes = self.config.cache_max_bytes
        if cache_bytes > 0:
            from streaming.state import ThreadCache

            self.cache = ThreadCache(cache_bytes // max(1, self.config.num_stream_threads))
        else:
            self.cache = None
        self.metrics = metrics_mod.ThreadMetrics()
        self.tasks: dict[str, ActiveTask] = {}
        self.by_partition: dict[tuple[str, int], ActiveTask] = {}
        self.assigned: list[tuple[str, int]] = []
        self.lock = threading.RLock()
        self.state = CREATED
        self._stop_event = threading.Event()
        self._paused: set[tuple[str, int]] = set()
        self._last_commit = time.monotonic()
        self._last_purge = time.monotonic()
        self._sent_at_commit = 0
        self._committed: dict[tuple[str, int], int] = {}
        self._repartition_offsets: dict[tuple[str, int], int] = {}
        self._closing = False
        self._busy = False
        self._group_metadata: Any = None
        self._last_lag = 0.0
        #: consumer lag per assigned partition, refreshed about once a second
        self.lag: dict[tuple[str, int], int] = {}
        self.exception: BaseException | None = None
        self.consumer: Consumer | None = None
        self.producer: Producer | None = None
        self.restore_consumer: Consumer | None = None
        self.collector: RecordCollector = None  # type: ignore[assignment]
        self.reader: ChangelogReader = None  # type: ignore[assignment]

    # -- clients --------------------------------------------------------------------------

    def wall_clock_ms(self) -> int:
        return int(time.time() * 1000)

    def _create_clients(self) -> None:
        cfg = self.config
        eos = cfg.exactly_once
        server = cfg.application_server
        consumer_conf: dict[str, Any] = {
            "bootstrap.servers": cfg.bootstrap_servers,
            "group.id": cfg.application_id,
            "client.id": f"{self.thread_client_id}-consumer" + (f"@{server}" if server else ""),
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "range",
            "isolation.level": "read_committed" if eos else "read_uncommitted",
            "logger": self.app.client_logger,
        }
        consumer_conf.update(cfg.consumer)
        if consumer_conf.get("group.instance.id"):
            # static membership: one member per stream thread
            consumer_conf["group.instance.id"] = (
                f"{consumer_conf['group.instance.id']}-{self.index}"
            )
        producer_conf: dict[str, Any] = {
            "bootstrap.servers": cfg.bootstrap_servers,
            "client.id": f"{self.thread_client_id}-producer",
            "partitioner": "murmur2_random",
            "delivery.report.only.error": True,
            "logger": self.app.client_logger,
        }
        if eos:
            producer_conf["transactional.id"] = (
                f"{cfg.application_id}-{self.app.process_id}-{self.index}"
            )
            producer_conf["transaction.timeout.ms"] = 10_000
            producer_conf["enable.idempotence"] = True
        producer_conf.update(cfg.producer)
        restore_conf: dict[str, Any] = {
            "bootstrap.servers": cfg.bootstrap_servers,
            "group.id": f"{cfg.application_id}-restore-unused",
            "client.id": f"{self.thread_client_id}-restore-consumer",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "logger": self.app.client_logger,
        }
        restore_conf.update(
            {
                k: v
                for k, v in cfg.consumer.items()
                if k.startswith(("socket", "security", "sasl", "ssl"))
            }
        )
        self.producer = Producer(producer_conf)
        self.collector = RecordCollector(
            self.producer,
            production_handler=cfg.production_handler,
            dead_letter_topic=cfg.dead_letter_queue_topic,
            partition_counts=self.app.partition_count,
        )
        self.producer_on_delivery = self.collector.on_delivery
        if eos:
            self.producer.init_transactions(60)
            self.producer.begin_transaction()
        self.restore_consumer = Consumer(restore_conf)
        self.reader = ChangelogReader(self.restore_consumer, self.app.restore_listener)
        self.consumer = Consumer(consumer_conf)

    # -- the loop -------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Ask the thread to stop after its current iteration."""
        self._stop_event.set()

    def run(self) -> None:
        metrics_mod.register_thread(self.metrics)
        clean = False
        try:
            self._create_clients()
            self._set_state(STARTING)
            self.consumer.subscribe(  # type: ignore[union-attr]
                self.plan.source_topics,
                on_assign=self._on_assign,
                on_revoke=self._on_revoke,
                on_lost=self._on_lost,
            )
            while not self._stop_event.is_set():
                self.run_once()
            clean = True
        except BaseException as exc:
            self.exception = exc
            log.error("Stream thread %s failed: %s", self.name, exc, exc_info=exc)
        finally:
            self._set_state(PENDING_SHUTDOWN)
            try:
                self._shutdown_clients(clean=clean)
            except Exception:
                log.exception("Error shutting down stream thread %s", self.name)
            metrics_mod.unregister_thread()
            self._set_state(DEAD)
            self.app._thread_finished(self, self.exception)

    def run_once(self) -> None:
        """One iteration: poll, restore, process, punctuate, maybe commit."""
        # poll without waiting while the last iteration found work to do, and wait no longer
        # than until the next commit is due (records of an open transaction are invisible)
        if self._busy:
            timeout = 0.0
        else:
            due = self._last_commit + self.config.commit_interval_ms / 1000.0 - time.monotonic()
            timeout = max(0.0, min(self.config.poll_ms / 1000.0, due))
        msgs = self.consumer.consume(num_messages=MAX_POLL_RECORDS, timeout=timeout)  # type: ignore[union-attr]
        with self.lock:
            if msgs:
                self._add_records(msgs)
            if any(t.state == RESTORING for t in self.tasks.values()):
                self._restore()
            if self.state == PARTITIONS_ASSIGNED and not any(
                t.state == RESTORING for t in self.tasks.values()
            ):
                self._set_state(THREAD_RUNNING)
            self._process()
            self._punctuate()
            self._maybe_commit()
        self.collector.poll()
        self.metrics.sample()
        now = time.monotonic()
        if now - self._last_lag >= 1.0:
            # confluent-kafka consumers must only be used from their own thread, so the
            # lag that metrics() reports is refreshed here
            self._last_lag = now
            self.lag = {
                tp: lag for tp in self.assigned if (lag := self._metric_lag(tp)) is not None
            }

    def _add_records(self, msgs: list[Any]) -> None:
        by_task: dict[ActiveTask, list[Any]] = {}
        by_partition = self.by_partition
        last_topic = None
        last_partition = -1
        batch: list[Any] | None = None
        for msg in msgs:
            if msg.error() is not None:
                self._consumer_error(msg.error())
                continue
            topic = msg.topic()
            partition = msg.partition()
            if partition != last_partition or topic != last_topic:
                last_topic = topic
                last_partition = partition
                task = by_partition.get((topic, partition))
                if task is None:
                    batch = None
                else:
                    batch = by_task.get(task)
                    if batch is None:
                        batch = by_task[task] = []
            if batch is not None:
                batch.append(msg)
        limit = self.config.buffered_records_per_partition
        for task, batch in by_task.items():
            task.add_messages(batch)
            for tp, queue in task.queues.items():
                if len(queue) > limit and tp not in self._paused:
                    self.consumer.pause([TopicPartition(tp[0], tp[1])])  # type: ignore[union-attr]
                    self._paused.add(tp)

    def _consumer_error(self, err: KafkaError) -> None:
        if err.code() == KafkaError._PARTITION_EOF:
            return
        if err.fatal():
            raise KafkaException(err)
        log.warning("Consumer error on %s: %s", self.name, err)

    def _resume_drained(self) -> None:
        if not self._paused:
            return
        limit = self.config.buffered_records_per_partition // 2
        resume = []
        for tp in list(self._paused):
            task = self.by_partition.get(tp)
            queue = task.queues.get(tp) if task is not None else None
            if task is None or queue is None or len(queue) <= limit:
                self._paused.discard(tp)
                if task is not None:
                    resume.append(TopicPartition(tp[0], tp[1]))
        if resume:
            self.consumer.resume(resume)  # type: ignore[union-attr]

    def _lag(self, tp: tuple[str, int]) -> int | None:
        consumer = self.consumer
        try:
            _low, high = consumer.get_watermark_offsets(TopicPartition(tp[0], tp[1]), cached=True)  # type: ignore[union-attr]
            pos = consumer.position([TopicPartition(tp[0], tp[1])])[0].offset  # type: ignore[union-attr]
        except KafkaException:
            return None
        if high is None or high < 0 or pos is None or pos < 0:
            return None
        return max(0, high - pos)

    def _metric_lag(self, tp: tuple[str, int]) -> int | None:
        """Lag for metrics: like ``_lag``, counting a not yet consumed partition from its start."""
        lag = self._lag(tp)
        if lag is not None:
            return lag
        try:
            low, high = self.consumer.get_watermark_offsets(  # type: ignore[union-attr]
                TopicPartition(tp[0], tp[1]), cached=True
            )
        except KafkaException:
            return None
        if high is None or high < 0:
            return None
        start = self._committed.get(tp, low if low is not None and low >= 0 else 0)
        return max(0, high - start)

    def _position(self, tp: tuple[str, int]) -> int | None:
        try:
            pos = self.consumer.position([TopicPartition(tp[0], tp[1])])[0].offset  # type: ignore[union-attr]
        except KafkaException:
            return None
        return pos if pos is not None and pos >= 0 else None

    def _process(self) -> None:
        now = self.wall_clock_ms()
        total = 0
        for task in self.tasks.values():
            if task.state != RUNNING:
                continue
            n = 0
            if len(task.input_partitions) == 1:
                n = task.process_batch(PROCESS_BATCH)
            else:
                while n < PROCESS_BATCH and task.ready(now, self._lag):
                    task.process_one()
                    n += 1
            total += n
        if total:
            self.metrics.processed += total
        self._busy = total > 0
        self._resume_drained()

    def _punctuate(self) -> None:
        now = self.wall_clock_ms()
        for task in self.tasks.values():
            if task.state == RUNNING and task.punctuate_wall_clock(now):
                self.metrics.punctuations += 1

    def _maybe_commit(self) -> None:
        now = time.monotonic()
        requested = any(
            t.stream_task.commit_requested for t in self.tasks.values() if t.state == RUNNING
        )
        if requested or (now - self._last_commit) * 1000 >= self.config.commit_interval_ms:
            self.commit()
            self._last_commit = now
            if (
                self.plan.internal_topics
                and (now - self._last_purge) * 1000 >= self.config.repartition_purge_interval_ms
            ):
                self._purge_repartition_topics()
                self._last_purge = now

    # -- commit ---------------------------------------------------------------------------

    def commit(self) -> bool:
        """Commit every running task (see the module docstring); False if nothing to do."""
        tasks = [t for t in self.tasks.values() if t.state == RUNNING]
        if not tasks:
            return False
        started = time.monotonic()
        for task in tasks:
            if task.commit_needed or task.stream_task.commit_requested:
                task.flush()
        offsets: dict[tuple[str, int], int] = {}
        for task in tasks:
            offsets.update(task.committable_offsets(self._position))
        changed = {tp: o for tp, o in offsets.items() if self._committed.get(tp) != o}
        produced = self.collector.sent != self._sent_at_commit
        if not changed and not produced:
            return False
        tps = [TopicPartition(t, p, o) for (t, p), o in changed.items()]
        if self.config.exactly_once:
            if not self._commit_transaction(tps):
                return False
        else:
            self.collector.flush()
            if tps:
                self.consumer.commit(offsets=tps, asynchronous=False)  # type: ignore[union-attr]
            for task in tasks:
                # like Kafka, checkpoint once enough changelog records were written since
                # the last one (a checkpoint costs a memtable flush and an offsets lookup)
                if task.changelogs and task.logged_since_checkpoint >= CHECKPOINT_DELTA:
                    task.checkpoint(self._changelog_end)
        self.collector.check()
        self._sent_at_commit = self.collector.sent
        self._committed.update(changed)
        for (topic, partition), offset in changed.items():
            if topic in self.plan.internal_topics:
                self._repartition_offsets[(topic, partition)] = offset
        self.metrics.record_commit((time.monotonic() - started) * 1000)
        return True

    def _commit_transaction(self, tps: list[TopicPartition]) -> bool:
        """Send the offsets and commit; on an abortable error roll back (returns False)."""
        producer = self.producer
        try:
            self.collector.check()
            if tps:
                if self._group_metadata is None:  # changes only with the group generation
                    self._group_metadata = self.consumer.consumer_group_metadata()  # type: ignore[union-attr]
                metadata = self._group_metadata
                self._retrying(
                    lambda: producer.send_offsets_to_transaction(  # type: ignore[union-attr]
                        tps, metadata, 30
                    )
                )
            self._retrying(lambda: producer.commit_transaction(60))  # type: ignore[union-attr]
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if isinstance(err, KafkaError) and err.txn_requires_abort():
                log.warning("Transaction aborted on %s: %s; rolling back tasks", self.name, err)
                self._abort_and_rollback()
                return False
            raise
        except Exception:
            self._abort_and_rollback()
            raise
        producer.begin_transaction()  # type: ignore[union-attr]
        return True

    @staticmethod
    def _retrying(call: Any, attempts: int = 3) -> None:
        for attempt in range(attempts):
            try:
                call()
                return
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                if attempt + 1 < attempts and isinstance(err, KafkaError) and err.retriable():
                    log.warning("Retrying after a retriable transaction error: %s", err)
                    continue
                raise

    def _abort_and_rollback(self) -> None:
        """Abort the open transaction and rebuild every task from its committed state."""
        self.metrics.aborted_transactions += 1
        try:
            self.producer.abort_transaction(30)  # type: ignore[union-attr]
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if isinstance(err, KafkaError) and err.fatal():
                raise
            log.warning("abort_transaction failed: %s", exc)
        self.producer.begin_transaction()  # type: ignore[union-attr]
        self._sent_at_commit = self.collector.sent
        partitions = list(self.assigned)
        for task in self.tasks.values():
            task.close(clean=False)
        self.tasks.clear()
        self.by_partition.clear()
        self._build_tasks(partitions)
        self._rewind_to_committed(partitions)

    def _rewind_to_committed(self, partitions: list[tuple[str, int]]) -> None:
        if not partitions:
            return
        consumer = self.consumer
        committed = consumer.committed(  # type: ignore[union-attr]
            [TopicPartition(t, p) for t, p in partitions], timeout=30
        )
        reset = (
            OFFSET_END
            if self.config.consumer.get("auto.offset.reset") == "latest"
            else OFFSET_BEGINNING
        )
        for tp in committed:
            offset = tp.offset if tp.offset is not None and tp.offset >= 0 else reset
            try:
                consumer.seek(TopicPartition(tp.topic, tp.partition, offset))  # type: ignore[union-attr]
            except KafkaException as exc:
                log.warning("Could not rewind %s-%s: %s", tp.topic, tp.partition, exc)
            self._committed[(tp.topic, tp.partition)] = offset

    def _changelog_end(self, topic: str, partition: int) -> int:
        return self.reader.end_offset(topic, partition)

    def _purge_repartition_topics(self) -> None:
        if not self._repartition_offsets:
            return
        tps = [TopicPartition(t, p, o) for (t, p), o in self._repartition_offsets.items()]
        self._repartition_offsets = {}
        try:
            self.app.admin.delete_records(tps, request_timeout=10)
        except Exception as exc:  # purging is best effort
            log.debug("Purging repartition topics failed: %s", exc)

    # -- assignment -----------------------------------------------------------------------

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        with self.lock:
            self.metrics.rebalances += 1
            if self._closing or not self.tasks:
                self._set_state(PARTITIONS_REVOKED)
                return
            try:
                self.commit()
            except Exception as exc:
                log.warning("Commit before revocation failed on %s: %s", self.name, exc)
                for task in self.tasks.values():
                    task.close(clean=False)
                self.tasks.clear()
                if self.config.exactly_once:
                    self._abort_quietly()
            for task in self.tasks.values():
                task.clear_buffers()
                if task.state == RESTORING:
                    task.close(clean=False)
            self.tasks = {tid: t for tid, t in self.tasks.items() if t.state != CLOSED}
            self.by_partition.clear()
            self._paused.clear()
            self.assigned = []
            self._set_state(PARTITIONS_REVOKED)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        with self.lock:
            self._group_metadata = None
            log.warning("Stream thread %s lost its partitions; closing tasks dirty", self.name)
            if self.config.exactly_once:
                self._abort_quietly()
            for task in self.tasks.values():
                task.close(clean=False)
            self.tasks.clear()
            self.by_partition.clear()
            self._paused.clear()
            self.assigned = []
            self._set_state(PARTITIONS_REVOKED)

    def _abort_quietly(self) -> None:
        try:
            self.producer.abort_transaction(30)  # type: ignore[union-attr]
            self.producer.begin_transaction()  # type: ignore[union-attr]
        except KafkaException as exc:
            log.warning("abort_transaction failed: %s", exc)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        with self.lock:
            if self._closing:
                return
            self._group_metadata = None
            assigned = [(tp.topic, tp.partition) for tp in partitions]
            self._build_tasks(assigned)
            self._committed = {}
            self._set_state(PARTITIONS_ASSIGNED)
            self.app._assignment_changed()

    def _build_tasks(self, assigned: list[tuple[str, int]]) -> None:
        wanted = self.plan.tasks_for_partitions(assigned)
        for tid, task in list(self.tasks.items()):
            if tid not in wanted or sorted(wanted[tid]) != task.input_partitions:
                self._close_task_clean(task)
                del self.tasks[tid]
        for tid, parts in wanted.items():
            task = self.tasks.get(tid)
            if task is None:
                sub_id, partition = (int(x) for x in tid.split("_"))
                sub = self.plan.subtopology_by_id[sub_id]
                standby = self.app.standby
                with standby.activating(tid) if standby is not None else nullcontext():
                    task = ActiveTask(tid, sub, partition, parts, self)
                    task.initialize()
                    self.tasks[tid] = task
            elif task.state != RESTORING:
                task.state = RUNNING
        self.by_partition = {tp: t for t in self.tasks.values() for tp in t.input_partitions}
        self.assigned = assigned

    def _close_task_clean(self, task: ActiveTask) -> None:
        try:
            if task.state == RUNNING and task.changelogs:
                task.checkpoint(self._changelog_end)
            task.close(clean=task.state == RUNNING)
        except Exception:
            log.exception("Closing task %s failed; closing it dirty", task.id)
            task.close(clean=False)

    def _restore(self) -> None:
        restoring = [t for t in self.tasks.values() if t.state == RESTORING]
        requests = [r for task in restoring for r in task.pending_restore]
        self.metrics.restored_records += self.reader.restore(requests, self._stop_event.is_set)
        if self._stop_event.is_set():
            return
        for task in restoring:
            task.pending_restore = []
            task.state = RUNNING

    # -- shutdown -------------------------------------------------------------------------

    def _shutdown_clients(self, *, clean: bool) -> None:
        self._closing = True
        with self.lock:
            if clean:
                try:
                    self.commit()
                except Exception:
                    log.exception("Final commit of %s failed", self.name)
                    clean = False
            if not clean and self.config.exactly_once and self.producer is not None:
                self._abort_quietly()
            for task in self.tasks.values():
                if clean:
                    self._close_task_clean(task)
                else:
                    task.close(clean=False)
            self.tasks.clear()
            self.by_partition.clear()
        if self.consumer is not None:
            try:
                self.consumer.close()
            except Exception as exc:
                log.debug("consumer close: %s", exc)
        if self.restore_consumer is not None:
            try:
                self.restore_consumer.close()
            except Exception as exc:
                log.debug("restore consumer close: %s", exc)
        if self.producer is not None:
            self.producer.flush(10)

    def _set_state(self, state: str) -> None:
        self.state = state
        self.app._thread_state_changed(self)
