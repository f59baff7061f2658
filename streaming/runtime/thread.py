"""A stream thread (Kafka's ``StreamThread``): one consumer, one producer, the active tasks.

The loop: poll a batch of records, hand them to their tasks' queues, restore newly assigned
tasks from their changelogs, process ready tasks, run wall-clock punctuation, and commit every
``commit.interval.ms``. The thread owns its clients; two collaborators do the rest, as in
Kafka's ``StreamThread.create``:

- ``task_manager.TaskManager``: the active tasks (built and closed on assignment, revocation
  and lost partitions, restored from their changelogs, fed records, processed, punctuated);
- ``commit.Committer``: the commit, at-least-once or exactly-once v2 (the producer is
  transactional, ``<application.id>-<process id>-<n>``; the stores are transactional and
  write what a transaction changed, with their changelog offsets, once it committed, so a
  crash leaves them at their last commit and the next owner restores only the changelog
  records after it), and the recovery steps before processing may go on.

Failures follow ``streaming.runtime.failures``: a retriable one (brokers away, leaders moving)
is retried after a backoff while the thread reports a stall, up to ``task.timeout.ms``; a
corrupted one aborts the transaction, closes the tasks dirty (their stores drop what was not
committed), rewinds the consumer to the committed offsets and restores what the changelogs
hold past the stores' offsets; a migrated one (fenced or failed
producer) also replaces the producer. The recovery steps that need the brokers (initializing
transactions, aborting, finishing a timed-out commit, reading committed offsets) are retried
by ``Committer.recover`` until they succeed; nothing is processed meanwhile.

Partitions come from the consumer group ``application.id`` with the range assignor, so
co-partitioned topics' partition ``p`` land on the same thread; rebalance callbacks commit
before revocation and build or close tasks on assignment (tasks kept across a rebalance
keep their state). Each thread's consumer is a static member named after the process id
(``config.main_consumer_membership``): after a broker outage longer than its session, or a
restart, it takes its old place at once; it leaves the group explicitly when it closes.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from streaming.errors import StreamsException
from streaming.runtime import metrics as metrics_mod
from streaming.runtime.active_task import RUNNING, ActiveTask, ActiveTaskCreator
from streaming.runtime.clients import main_consumer_membership
from streaming.runtime.collector_tuning import prepare_for_stream_threads
from streaming.runtime.commit import CALL_TIMEOUT_S, Committer
from streaming.runtime.failures import (
    ConsumerFencedException,
    Kind,
    RetriableStreamsException,
    Stall,
    TaskCorruptedException,
    TaskMigratedException,
    TaskTimeoutException,
    classify,
    translate,
)
from streaming.runtime.messages import topic_partition
from streaming.runtime.producer import RecordCollector
from streaming.runtime.restore import ChangelogReader
from streaming.runtime.runner import PartitionStore
from streaming.runtime.task_manager import TaskManager

if TYPE_CHECKING:
    from streaming.runtime.listeners import StreamThreadListener
    from streaming.runtime.services import ClientServices
    from streaming.state import ThreadCache

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
#: how long an idle thread waits in ``poll`` while event-time alignment paces the client's
#: threads: another thread's next report (a worker's, in the shared table) or this thread's
#: own acknowledged records may let a task go on, and neither wakes the consumer
ALIGNMENT_RECHECK_S = 0.005
#: longest a poll waits while the thread has no running assignment (``run_once``)
ASSIGNMENT_POLL_S = 0.01
#: how long the lag metric waits for a partition's committed offset (once per assignment)
COMMITTED_LAG_TIMEOUT_S = 1.0
#: rollbacks in a row (no commit between) after which task.timeout.ms applies to them
MAX_ROLLBACKS = 10
PROCESS_BATCH = 1000


class StreamThread(threading.Thread):
    """Runs the tasks of the partitions assigned to its consumer."""

    @classmethod
    def create(
        cls, services: ClientServices, index: int, listener: StreamThreadListener
    ) -> StreamThread:
        """Stream thread ``index`` of a client, its clients and collaborators built (Kafka's
        ``StreamThread.create``): ``start()`` runs it; ``listener`` hears of its state
        changes, assignment changes and end. The first one in a process sets up its garbage
        collector for stream threads (``collector_tuning``)."""
        prepare_for_stream_threads()
        return cls(services, index, listener)

    def __init__(
        self, services: ClientServices, index: int, listener: StreamThreadListener
    ) -> None:
        super().__init__(name=f"{services.config.application_id}-StreamThread-{index}", daemon=True)
        self.listener = listener
        self.index = index
        self.config = cfg = services.config
        self.plan = services.plan
        self.state_directory = services.state_directory
        self.thread_client_id = services.thread_client_id(index)
        cache_bytes = cfg.cache_max_bytes
        self.cache: ThreadCache | None
        if cache_bytes > 0:
            from streaming.state import ThreadCache

            self.cache = ThreadCache(cache_bytes // max(1, cfg.num_stream_threads))
        else:
            self.cache = None
        self.metrics = metrics_mod.ThreadMetrics()
        self.lock = threading.RLock()
        self.state = CREATED
        self._stop_event = threading.Event()
        self._last_commit = time.monotonic()
        self._last_purge = time.monotonic()
        self._closing = False
        self._busy = False
        self._last_lag = 0.0
        #: consumer lag per assigned partition, refreshed about once a second
        self.lag: dict[tuple[str, int], int] = {}
        #: the group's committed offsets of the assigned partitions, as read for the lag
        self._group_committed_offsets: dict[tuple[str, int], int | None] = {}
        self.exception: BaseException | None = None
        self._next_consumer_warning = 0.0
        self._last_fencing = float("-inf")
        self._producer_generation = 0
        self._admin = services.admin
        # -- the clients: static membership, one member per stream thread (see
        # main_consumer_membership), and under exactly-once a transactional producer
        eos = cfg.exactly_once
        server = cfg.application_server
        clients = cfg.clients(services.client_logger)
        #: the consumer's group.instance.id, and whether it leaves the group explicitly on
        #: close (see main_consumer_membership)
        self.group_instance_id, self._leave_on_close = main_consumer_membership(
            cfg.consumer, services.process_id, index
        )
        self._consumer_conf = clients.main_consumer(
            client_id=f"{self.thread_client_id}-consumer" + (f"@{server}" if server else ""),
            group_instance_id=self.group_instance_id,
        )
        # under exactly-once, other producers pace their sources by what this thread's
        # producer has appended (see runtime.alignment)
        paced_by_acks = (
            eos
            and cfg.alignment.enabled
            and (
                cfg.num_stream_threads > 1
                or cfg.alignment.across_instances
                or services.alignment.table is not None
            )
        )
        self._producer_conf = clients.producer(
            client_id=f"{self.thread_client_id}-producer",
            transactional_id=(
                f"{cfg.application_id}-{services.process_id}-{index}" if eos else None
            ),
            paced=paced_by_acks,
        )
        self.producer = self._new_producer()
        #: retriable failures in a row, bounded by task.timeout.ms (see failures.Stall)
        self.stall = Stall(self.name, cfg.task_timeout_ms, cfg.retry_backoff_ms)
        self.collector = RecordCollector(
            self.producer,
            production_handler=cfg.production_handler,
            dead_letter_topic=cfg.dead_letter_queue_topic,
            partition_counts=services.partition_count,
            exactly_once=eos,
            source_context=self._source_context,
            topic_limits=functools.partial(services.topic_limits, waiting=self.stall.waiting),
            waiting=self.stall.waiting,
        )
        self.restore_consumer = Consumer(
            clients.state_consumer(
                role="restore", client_id=f"{self.thread_client_id}-restore-consumer"
            )
        )
        self.reader = ChangelogReader(self.restore_consumer, services.restore_listener)
        self.consumer = Consumer(self._consumer_conf)
        #: builds the active tasks with what they need of this thread
        self.task_creator = ActiveTaskCreator(
            services=services,
            collector=self.collector,
            cache=self.cache,
            clock=self.wall_clock_ms,
            metrics=self.metrics,
            consumer=self.consumer,
        )
        #: the active tasks and the assigned partitions
        self.task_manager = TaskManager(
            config=cfg,
            plan=self.plan,
            task_creator=self.task_creator,
            consumer=self.consumer,
            standby=services.standby_handover,
            stall=self.stall,
            metrics=self.metrics,
            changelog_end=self._changelog_end,
            alignment=(
                services.alignment.member(self.name, index - 1) if cfg.alignment.enabled else None
            ),
            uncommitted_limit=cfg.thread_uncommitted_max_bytes,
        )
        alignment = self.task_manager.alignment
        if alignment is not None and paced_by_acks:
            # other producers align with this thread's report: it counts the records this
            # thread wrote to the repartition topics that are not appended yet
            self.collector.track_in_flight(self.plan.internal_topics)
            alignment.in_flight = self.collector.in_flight_low
        #: commits the tasks, and holds the recovery steps still to do before processing
        self.committer = Committer(
            name=self.name,
            config=cfg,
            internal_topics=lambda: self.plan.internal_topics,
            task_manager=self.task_manager,
            stall=self.stall,
            metrics=self.metrics,
            position=self._position,
            changelog_end=self._changelog_end,
            consumer=self.consumer,
            producer=self.producer,
            collector=self.collector,
            known_topic=lambda: next(iter(self.plan.source_topics), None),
        )

    @property
    def tasks(self) -> dict[str, ActiveTask]:
        """The active tasks by task id."""
        return self.task_manager.tasks

    @property
    def assigned(self) -> list[tuple[str, int]]:
        """The partitions assigned to the thread's consumer."""
        return self.task_manager.assigned

    def status(self) -> metrics_mod.ThreadStatus:
        """This thread's state, tasks and counters now."""
        restore: dict[str, dict[str, Any]] = {}
        for (topic, partition), prog in list(self.reader.progress.items()):
            restore[f"{topic}-{partition}"] = {
                "store": prog.store,
                "start-offset": prog.start,
                "end-offset": prog.end,
                "restored": prog.restored,
                "remaining": 0 if prog.done else max(0, prog.end - prog.start - prog.restored),
                "done": prog.done,
            }
        return metrics_mod.ThreadStatus(
            name=self.name,
            state=self.state,
            alive=self.is_alive(),
            tasks={tid: task.state for tid, task in list(self.tasks.items())},
            assigned=list(self.assigned),
            # the counters only: the rate samples change while a worker pickles this
            metrics=dataclasses.replace(self.metrics, _samples=collections.deque(maxlen=1)),
            process_rate=self.metrics.process_rate(),
            lag=dict(self.lag),
            restore=restore,
            records_sent=self.collector.sent,
            stalled=self.stall.stalled,
            stalled_seconds=self.stall.seconds(),
            stall_reason=self.stall.reason,
            stalls_total=self.stall.total_stalls,
        )

    def partition_stores(self, name: str) -> list[PartitionStore]:
        """Store ``name`` of every running task of this thread, read under its lock."""
        out = []
        for task in list(self.tasks.values()):
            if task.state != RUNNING:
                continue
            store = task.stream_task.context.stores.get(name)
            if store is not None:
                out.append(PartitionStore(task.partition, self.lock, store))
        return out

    # -- clients --------------------------------------------------------------------------

    def wall_clock_ms(self) -> int:
        """The wall clock in milliseconds (the tasks' punctuation clock)."""
        return int(time.time() * 1000)

    def _bind_consumer(self, consumer: Consumer) -> None:
        """``consumer`` replaces the main consumer, for the thread and its collaborators."""
        self.consumer = consumer
        self.task_manager.consumer = consumer
        self.committer.consumer = consumer
        self.task_creator.consumer = consumer

    def _new_producer(self) -> Producer:
        """A producer whose delivery reports reach the collector while it is the current
        one (a replaced producer's late failures, e.g. purged records, are not ours)."""
        self._producer_generation += 1
        generation = self._producer_generation

        def on_delivery(err: Any, msg: Any) -> None:
            if generation == self._producer_generation:
                self.collector.on_delivery(err, msg)

        return Producer({**self._producer_conf, "on_delivery": on_delivery})

    def _source_context(self) -> Any:
        """Where the record being processed came from (for dead letters of its writes)."""
        task = self.task_manager.current_task
        if task is None:
            return None
        rc = task.stream_task.context.record_context()
        if rc is None:
            return None
        from streaming.runtime.errors import ErrorHandlerContext

        return ErrorHandlerContext(
            rc.topic, rc.partition, rc.offset, rc.timestamp, rc.headers, None, task.id
        )

    # -- the loop -------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Ask the thread to stop after its current iteration."""
        self._stop_event.set()

    def run(self) -> None:
        """Create the clients, subscribe, loop until asked to stop, then shut down."""
        clean = False
        try:
            self._set_state(STARTING)
            self._hold_alignment()
            self._subscribe()
            while not self._stop_event.is_set():
                try:
                    self.run_once()
                except RetriableStreamsException as exc:
                    self.stall.failed(exc)  # past task.timeout.ms: TaskTimeoutException
                    self._stop_event.wait(max(0.0, self.stall.next_attempt - time.monotonic()))
                except TaskCorruptedException as exc:
                    self._handle_corrupted(exc)
                except TaskMigratedException as exc:
                    self._handle_migrated(exc)
            clean = not self._recovering()
        except BaseException as exc:
            self.exception = exc
            log.error("Stream thread %s failed: %s", self.name, exc, exc_info=exc)
        finally:
            self._set_state(PENDING_SHUTDOWN)
            try:
                self._shutdown_clients(clean=clean)
            except Exception:
                log.exception("Error shutting down stream thread %s", self.name)
            if self.task_manager.alignment is not None:
                self.task_manager.alignment.forget()
            self._set_state(DEAD)
            self.listener.on_thread_finished(self, self.exception)

    def _subscribe(self) -> None:
        """Subscribe to the plan's source topics (again, after a pattern matched new ones:
        librdkafka then rebalances the group)."""
        self._subscribed_version = self.plan.version
        self._patterns_checked = time.monotonic()
        self.consumer.subscribe(
            self.plan.source_topics,
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )

    def _maybe_refresh_patterns(self) -> None:
        """Every ``metadata.max.age.ms``, match the cluster's topics against the pattern
        sources; subscribe again when this or another thread found new ones."""
        now = time.monotonic()
        if now - self._patterns_checked >= self.config.metadata_max_age_ms / 1000.0:
            self._patterns_checked = now
            try:
                meta = self.consumer.list_topics(timeout=5.0)
            except KafkaException as exc:
                log.debug("pattern subscription: no metadata (%s); trying again later", exc)
            else:
                self.plan.match_patterns(
                    {n: len(t.partitions) for n, t in meta.topics.items() if t.error is None}
                )
        if self.plan.version != self._subscribed_version:
            log.info("Stream thread %s: new topics match the source patterns", self.name)
            self._subscribe()

    def run_once(self) -> None:
        """One iteration: poll, restore, process, punctuate, maybe commit."""
        if self.plan.patterns:
            self._maybe_refresh_patterns()
        # poll without waiting while the last iteration found work to do, and wait no longer
        # than until the next commit is due (records of an open transaction are invisible)
        if self._busy:
            timeout = 0.0
        else:
            due = self._last_commit + self.config.commit_interval_ms / 1000.0 - time.monotonic()
            timeout = max(0.0, min(self.config.poll_ms / 1000.0, due))
            alignment = self.task_manager.alignment
            if alignment is not None and alignment.aligning:
                timeout = min(timeout, ALIGNMENT_RECHECK_S)
            if self.state != THREAD_RUNNING:
                # an assignment is served inside the poll, which then waits on for records
                # until its timeout: the new tasks' restoration would start that much later
                timeout = min(timeout, ASSIGNMENT_POLL_S)
        if self._recovering():
            # records fetched meanwhile are dropped, and their partitions rewound to the
            # committed offsets once recovered (the seek fetches them again)
            dropped = self.consumer.consume(num_messages=MAX_POLL_RECORDS, timeout=0.0)
            with self.lock:
                for msg in dropped:
                    err = msg.error()
                    if err is not None:
                        self._consumer_error(err)  # a fatal one ends the recovery too
                    else:
                        self.committer.needs_rewind.add(topic_partition(msg))
                self.committer.recover()
            if self._recovering():  # still backing off
                self._stop_event.wait(0.05)
            return
        msgs = self._poll(timeout)
        with self.lock:
            if msgs:
                self.task_manager.add_records_to_tasks(msgs, self._consumer_error)
            if self.task_manager.has_restoring():
                self.task_manager.try_to_complete_restoration(self.reader, self._stop_event.is_set)
            if self.state == PARTITIONS_ASSIGNED and not self.task_manager.has_restoring():
                self._set_state(THREAD_RUNNING)
            if self.state in (PARTITIONS_ASSIGNED, THREAD_RUNNING):
                # nothing is processed before the first assignment, nor between a revocation
                # and the next assignment (Kafka suspends the revoked tasks: the group's
                # generation is over, so a commit would fail and roll the transaction back);
                # meanwhile the thread's alignment hold stands, as its processing pass would
                # report that none of its partitions holds the others back
                self._process()
                self.task_manager.punctuate(self.wall_clock_ms())
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

    def _poll(self, timeout: float) -> list[Any]:
        """What the consumer has fetched (at most ``MAX_POLL_RECORDS``), waiting up to
        ``timeout`` for the first record only: librdkafka's batch consume waits for a full
        batch until its timeout, which would hold a few records back for the whole wait."""
        consumer = self.consumer
        msgs = consumer.consume(num_messages=MAX_POLL_RECORDS, timeout=0.0)
        if msgs or timeout <= 0:
            return msgs
        msgs = consumer.consume(num_messages=1, timeout=timeout)
        if msgs:
            msgs.extend(consumer.consume(num_messages=MAX_POLL_RECORDS - 1, timeout=0.0))
        return msgs

    def _process(self) -> None:
        total = self.task_manager.process(
            PROCESS_BATCH, self.wall_clock_ms(), self._lag, self._metric_lag
        )
        if total:
            self.metrics.processed += total
        self._busy = total > 0
        self.task_manager.resume_drained()

    def _maybe_commit(self) -> None:
        now = time.monotonic()
        requested = self.task_manager.commit_requested()
        if requested or (now - self._last_commit) * 1000 >= self.config.commit_interval_ms:
            self.committer.commit()
            self._last_commit = now
            if (
                self.plan.internal_topics
                and (now - self._last_purge) * 1000 >= self.config.repartition_purge_interval_ms
            ):
                self.committer.purge_repartition_topics(self._admin)
                self._last_purge = now

    # -- the consumer ---------------------------------------------------------------------

    def _consumer_error(self, err: KafkaError) -> None:
        if err.code() == KafkaError._PARTITION_EOF:
            return
        # consume() reports a fatal error as code _FATAL with its fatal() flag unset
        if err.fatal() or err.code() == KafkaError._FATAL:
            fenced = err.code() == KafkaError.FENCED_INSTANCE_ID or "group.instance.id" in err.str()
            if fenced:
                self._consumer_fenced(err)
            # the consumer is unusable for good: no retry or new producer helps
            raise StreamsException(f"consuming failed: {err.name()}: {err.str()}")
        if classify(err) is Kind.FATAL:
            raise translate(KafkaException(err), "consuming")
        # the consumer retries by itself (brokers down, leaders moving): say so now and then
        now = time.monotonic()
        if now >= self._next_consumer_warning:
            self._next_consumer_warning = now + 10.0
            log.warning("Consumer error on %s (retrying): %s", self.name, err)

    def _consumer_fenced(self, err: KafkaError) -> None:
        """A static member fenced off: rejoin with a new consumer, unless it happened twice
        within a session.

        librdkafka fences a static member by itself when its session times out while the
        coordinator moves (a heartbeat goes out without its member id after the timeout):
        the consumer is then dead for good, though no other member took its place. A new
        consumer takes the place back. Another instance with the same
        ``group.instance.id`` fences the new consumer again within a heartbeat or two,
        while a session timeout cannot happen again sooner than a session after the
        rejoin: then the thread fails and says what to fix."""
        now = time.monotonic()
        session_s = int(self._consumer_conf.get("session.timeout.ms", 45_000)) / 1000.0
        if now - self._last_fencing > session_s:
            self._last_fencing = now
            raise ConsumerFencedException(f"{err.str()}; rejoining with a new consumer")
        raise StreamsException(
            f"consuming failed: {err.str()}; another consumer joined the group as "
            f"{self.group_instance_id!r}: each instance needs its own state.dir (its process "
            "id names the members), or its own main.consumer.group.instance.id"
        )

    def _lag(self, tp: tuple[str, int]) -> int | None:
        consumer = self.consumer
        try:
            _low, high = consumer.get_watermark_offsets(TopicPartition(tp[0], tp[1]), cached=True)
            pos = consumer.position([TopicPartition(tp[0], tp[1])])[0].offset
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
            low, high = self.consumer.get_watermark_offsets(
                TopicPartition(tp[0], tp[1]), cached=True
            )
        except KafkaException:
            return None
        if high is None or high < 0:
            return None
        start = self.committer.committed.get(tp)
        if start is None:
            start = self._group_committed(tp)
        if start is None:
            start = low if low is not None and low >= 0 else 0
        return max(0, high - start)

    def _group_committed(self, tp: tuple[str, int]) -> int | None:
        """The group's committed offset of a partition this thread has not committed yet
        (asked once per assignment): a partition with nothing new since a restart is caught
        up, not behind by all it holds."""
        if tp not in self._group_committed_offsets:
            try:
                (committed,) = self.consumer.committed(
                    [TopicPartition(tp[0], tp[1])], timeout=COMMITTED_LAG_TIMEOUT_S
                )
            except KafkaException:  # not asked again before the next assignment
                committed = None
            offset = None if committed is None or committed.error is not None else committed.offset
            self._group_committed_offsets[tp] = (
                offset if offset is not None and offset >= 0 else None
            )
        return self._group_committed_offsets[tp]

    def _position(self, tp: tuple[str, int]) -> int | None:
        try:
            pos = self.consumer.position([TopicPartition(tp[0], tp[1])])[0].offset
        except KafkaException:
            return None
        return pos if pos is not None and pos >= 0 else None

    # -- failures -------------------------------------------------------------------------

    def _recovering(self) -> bool:
        return self.committer.pending()

    def _handle_corrupted(self, exc: BaseException) -> None:
        """Roll back: abort the transaction, rebuild every task from its committed state.

        Rollbacks that keep coming without a commit in between (the same failure on every
        retry) end the thread once they have lasted longer than ``task.timeout.ms``."""
        log.warning("Stream thread %s rolls back its tasks: %s", self.name, exc)
        committer = self.committer
        now = time.monotonic()
        if not committer.rollbacks:
            committer.rollbacks_since = now
        committer.rollbacks += 1
        if (
            committer.rollbacks >= MAX_ROLLBACKS
            and now - committer.rollbacks_since > self.stall.timeout_s
        ):
            raise TaskTimeoutException(
                f"{self.name} rolled back {committer.rollbacks} times in "
                f"{now - committer.rollbacks_since:.0f} s without a successful commit (longer "
                f"than task.timeout.ms={int(self.stall.timeout_s * 1000)}); last cause: {exc}"
            ) from exc
        with self.lock:
            committer.abort_after_corruption()
            self._rebuild_tasks_dirty()

    def _handle_migrated(self, exc: BaseException) -> None:
        """The producer (or the membership) is gone: close the tasks dirty, replace the
        producer and rebuild the tasks from their committed state."""
        log.warning(
            "Stream thread %s: %s; closing its tasks dirty and replacing its producer",
            self.name,
            exc,
        )
        if isinstance(exc, ConsumerFencedException):
            self._replace_consumer(exc)
            return
        with self.lock:
            self.metrics.producer_replacements += 1
            self.committer.group_metadata = None
            self._replace_producer()
            self._rebuild_tasks_dirty()

    def _replace_consumer(self, exc: ConsumerFencedException) -> None:
        """The group membership is gone with the consumer: close every task dirty (rolling
        back the open transaction), then join again with a new consumer."""
        with self.lock:
            self.committer.group_metadata = None
            self._drop_tasks_after_failure(exc)
            self.task_manager.handle_lost_all()
            self.committer.needs_rewind.clear()
            self._set_state(PARTITIONS_REVOKED)
        old = self.consumer
        self._bind_consumer(Consumer(self._consumer_conf))
        try:
            old.close()
        except Exception as close_exc:  # a fenced consumer may refuse: it is dropped anyway
            log.debug("closing the fenced consumer: %s", close_exc)
        self._subscribe()

    def _replace_producer(self) -> None:
        old = self.producer
        try:
            old.purge(in_queue=True, in_flight=True, blocking=False)
        except Exception as purge_exc:  # a fatal producer may refuse: it is dropped anyway
            log.debug("purging the old producer: %s", purge_exc)
        self.producer = self._new_producer()
        self.collector.replace_producer(self.producer)
        if self.committer.producer_replaced(self.producer):
            threading.Thread(target=_close_quietly, args=(old,), daemon=True).start()

    def _rebuild_tasks_dirty(self) -> None:
        partitions = self.task_manager.close_dirty_and_revive()
        self.committer.needs_rewind.update(partitions)

    def _drop_tasks_after_failure(self, exc: BaseException | None) -> None:
        """Close every task dirty; under exactly-once the open transaction is rolled back
        (aborted by the committer's recovery, or by a new producer when the old one is
        unusable)."""
        self.task_manager.close_all_dirty()
        if not self.config.exactly_once:
            return
        if isinstance(exc, TaskMigratedException):
            self.metrics.producer_replacements += 1
            self._replace_producer()
        else:
            self.committer.abort_after_dropping_tasks()

    def _changelog_end(self, topic: str, partition: int) -> int:
        return self.reader.end_offset(topic, partition)

    # -- assignment -----------------------------------------------------------------------

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if consumer is not self.consumer:
            return  # a replaced consumer closing
        with self.lock:
            self.metrics.rebalances += 1
            self._hold_alignment()
            if self._closing or not self.task_manager.tasks:
                self._set_state(PARTITIONS_REVOKED)
                return
            if self._recovering():
                # the tasks hold nothing uncommitted: they are rebuilt from committed state
                self._drop_tasks_after_failure(None)
            else:
                try:
                    # not at the consumer's positions: the consume() serving this callback
                    # may have returned records past them that no task has processed
                    self.committer.commit(at_positions=False)
                except Exception as exc:
                    log.warning("Commit before revocation failed on %s: %s", self.name, exc)
                    self._drop_tasks_after_failure(exc)
            self.task_manager.handle_revocation()
            self.committer.needs_rewind.clear()
            self._set_state(PARTITIONS_REVOKED)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if consumer is not self.consumer:
            return  # a replaced consumer closing
        with self.lock:
            self._hold_alignment()
            self.committer.group_metadata = None
            log.warning("Stream thread %s lost its partitions; closing tasks dirty", self.name)
            self._drop_tasks_after_failure(None)
            self.task_manager.handle_lost_all()
            self.committer.needs_rewind.clear()
            self._set_state(PARTITIONS_REVOKED)

    def _hold_alignment(self) -> None:
        """A rebalance may give this thread partitions: the others wait until it says which
        (its next processing pass)."""
        if self.task_manager.alignment is not None and not self._closing:
            self.task_manager.alignment.hold()

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if consumer is not self.consumer:
            return  # a replaced consumer closing
        with self.lock:
            if self._closing:
                return
            self.committer.group_metadata = None
            assigned = [(tp.topic, tp.partition) for tp in partitions]
            self._group_committed_offsets.clear()
            kept = self.task_manager.handle_assignment(assigned)
            # what is known to be committed stays known for the partitions of kept tasks
            # (ours until the revocation, which committed them); others may have moved
            self.committer.retain_committed(kept)
            # newly assigned partitions start from their committed offsets
            self.committer.needs_rewind.clear()
            positions = self.committer.assignment_positions(partitions)
            consumer.assign(positions)
            # where each partition starts (its committed offset, or its log start) is where
            # its lag counts from: no lookup per partition for the first lag metric
            self._group_committed_offsets.update(
                ((tp.topic, tp.partition), tp.offset) for tp in positions if tp.offset >= 0
            )
            self._set_state(PARTITIONS_ASSIGNED)
            self.listener.on_assignment_change()

    # -- shutdown -------------------------------------------------------------------------

    def _shutdown_clients(self, *, clean: bool) -> None:
        self._closing = True
        with self.lock:
            if clean:
                try:
                    self.committer.commit()
                except Exception:
                    log.exception("Final commit of %s failed", self.name)
                    clean = False
            if not clean and self.config.exactly_once:
                self.committer.finish_on_close(self.producer)
            self.task_manager.shutdown(clean=clean)
        if self._leave_on_close:
            self._leave_group()
        try:
            self.consumer.close()
        except Exception as exc:
            log.debug("consumer close: %s", exc)
        try:
            self.restore_consumer.close()
        except Exception as exc:
            log.debug("restore consumer close: %s", exc)
        if not self.committer.producer_hung:
            self.producer.flush(CALL_TIMEOUT_S if clean else 0)
        self.committer.close()

    def _leave_group(self) -> None:
        """Leave the group before closing: librdkafka's close() does not for a static member
        (KIP-345), whose partitions would then wait ``session.timeout.ms`` for another
        member, but unsubscribe() does (a LeaveGroup, or nothing when the coordinator is
        away); librdkafka clears the member id once it has left."""
        consumer = self.consumer
        try:
            if not consumer.memberid():
                return
            consumer.unsubscribe()
            deadline = time.monotonic() + CALL_TIMEOUT_S
            while consumer.memberid() and time.monotonic() < deadline:
                # serves the revocation (nothing left to commit) and the leave
                consumer.consume(num_messages=MAX_POLL_RECORDS, timeout=0.05)
        except Exception as exc:  # a fatal consumer, say: close() is all there is left
            log.debug("leaving the group: %s", exc)

    def _set_state(self, state: str) -> None:
        self.state = state
        self.listener.on_thread_state_change(self)


def _close_quietly(producer: Producer) -> None:
    """Close a replaced producer off the stream thread (it may wait for unreachable brokers)."""
    try:
        # the stub omits close()'s timeout argument, which confluent-kafka accepts
        producer.close(0)  # type: ignore[call-arg]
    except Exception as exc:
        log.debug("closing a replaced producer: %s", exc)
