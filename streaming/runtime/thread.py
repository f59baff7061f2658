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
  changelog.

Failures follow ``streaming.runtime.failures``: a retriable one (brokers away, leaders moving)
is retried after a backoff while the thread reports a stall, up to ``task.timeout.ms``; a
corrupted one aborts the transaction, closes the tasks dirty (their state is wiped), rewinds
the consumer to the committed offsets and restores; a migrated one (fenced or failed
producer) also replaces the producer. The recovery steps that need the brokers (initializing
transactions, aborting, finishing a timed-out commit, reading committed offsets) are retried
by ``_recover`` until they succeed; nothing is processed meanwhile.

Partitions come from the consumer group ``application.id`` with the range assignor, so
co-partitioned topics' partition ``p`` land on the same thread; rebalance callbacks commit
before revocation and build or close tasks on assignment (tasks kept across a rebalance
keep their state). Each thread's consumer is a static member named after the process id
(``config.main_consumer_membership``): after a broker outage longer than its session, or a
restart, it takes its old place at once; it leaves the group explicitly when it closes.
"""

from __future__ import annotations

import concurrent.futures
import logging
import queue as queue_mod
import threading
import time
from collections.abc import Callable
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
from streaming.runtime.clients import main_consumer_membership
from streaming.runtime.failures import (
    Kind,
    RetriableStreamsException,
    Stall,
    TaskCorruptedException,
    TaskMigratedException,
    TaskTimeoutException,
    calling,
    classify,
    translate,
)
from streaming.runtime.nodes import StreamsException
from streaming.runtime.producer import RecordCollector
from streaming.runtime.restore import ChangelogReader

if TYPE_CHECKING:
    from streaming.runtime.app import KafkaStreams
    from streaming.runtime.listeners import StreamThreadListener
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
#: rollbacks in a row (no commit between) after which task.timeout.ms applies to them
MAX_ROLLBACKS = 10
#: how much longer than its own timeout a transactional call may block before it is abandoned
TXN_CALL_GRACE_S = 2.0
#: a transactional call taking longer than this is reported as a stall while it lasts
SLOW_CALL_S = 2.0
#: longest a single blocking client call (flush, transaction calls, offset lookups) may
#: take before the loop regains control; a timed-out call is retried after the backoff
CALL_TIMEOUT_S = 5.0
#: changelog records written before an at-least-once commit also writes the checkpoint
CHECKPOINT_DELTA = 10_000
PROCESS_BATCH = 1000


class StreamThread(threading.Thread):
    """Runs the tasks of the partitions assigned to its consumer."""

    def __init__(self, app: KafkaStreams, index: int) -> None:
        super().__init__(name=f"{app.config.application_id}-StreamThread-{index}", daemon=True)
        self.app = app
        #: told about state and assignment changes and the thread's end
        self.listener: StreamThreadListener = app
        self.index = index
        self.config = app.config
        self.plan = app.plan
        self.topology = app.topology
        self.app_configs = app.app_configs
        self.state_directory = app.state_directory
        self.thread_client_id = f"{app.client_id}-StreamThread-{index}"
        cache_bytes = self.config.cache_max_bytes
        self.cache: ThreadCache | None
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
        #: retriable failures in a row, bounded by task.timeout.ms (see failures.Stall)
        self.stall = Stall(
            self.name,
            getattr(self.config, "task_timeout_ms", 300_000),
            getattr(self.config, "retry_backoff_ms", 100),
        )
        # recovery steps still to do before the thread may process again (see _recover):
        # initialize the (new) transactional producer, abort the open transaction, finish a
        # commit_transaction that timed out, seek the partitions to their committed offsets
        self._needs_init = False
        self._needs_abort = False
        self._committing: dict[tuple[str, int], int] | None = None
        self._needs_rewind: set[tuple[str, int]] = set()
        self._current_task: ActiveTask | None = None
        self._next_consumer_warning = 0.0
        self._producer_generation = 0
        self._rollbacks = 0
        self._rollbacks_since = 0.0
        self._txn_calls = _txn_executor(self.name)
        self._producer_hung = False
        #: the consumer's group.instance.id (static membership), and whether it leaves the
        #: group explicitly on close (see main_consumer_membership)
        self.group_instance_id: str | None = None
        self._leave_on_close = False

    # -- clients --------------------------------------------------------------------------

    def wall_clock_ms(self) -> int:
        return int(time.time() * 1000)

    def _create_clients(self) -> None:
        cfg = self.config
        eos = cfg.exactly_once
        server = cfg.application_server
        clients = cfg.clients(self.app.client_logger)
        # static membership, one member per stream thread (see main_consumer_membership)
        instance_id, self._leave_on_close = main_consumer_membership(
            cfg.consumer, self.app.process_id, self.index
        )
        self.group_instance_id = instance_id
        consumer_conf = clients.main_consumer(
            client_id=f"{self.thread_client_id}-consumer" + (f"@{server}" if server else ""),
            group_instance_id=instance_id,
        )
        self._producer_conf = clients.producer(
            client_id=f"{self.thread_client_id}-producer",
            transactional_id=(
                f"{cfg.application_id}-{self.app.process_id}-{self.index}" if eos else None
            ),
        )
        restore_conf = clients.state_consumer(
            role="restore", client_id=f"{self.thread_client_id}-restore-consumer"
        )
        self.producer = self._new_producer()
        self.collector = RecordCollector(
            self.producer,
            production_handler=cfg.production_handler,
            dead_letter_topic=cfg.dead_letter_queue_topic,
            partition_counts=self.app.partition_count,
            exactly_once=eos,
            source_context=self._source_context,
            topic_limits=self.app.topic_limits,
        )
        # transactions are initialized by the first _recover(), retried while the brokers
        # are unreachable
        self._needs_init = eos
        self.restore_consumer = Consumer(restore_conf)
        self.reader = ChangelogReader(self.restore_consumer, self.app.restore_listener)
        self.consumer = Consumer(consumer_conf)

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
        task = self._current_task
        if task is None:
            return None
        rc = task.stream_task.context._record_context
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
        metrics_mod.register_thread(self.metrics)
        clean = False
        try:
            self._create_clients()
            self._set_state(STARTING)
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
            metrics_mod.unregister_thread()
            self._set_state(DEAD)
            self.listener.on_thread_finished(self, self.exception)

    def _subscribe(self) -> None:
        """Subscribe to the plan's source topics (again, after a pattern matched new ones:
        librdkafka then rebalances the group)."""
        self._subscribed_version = self.plan.version
        self._patterns_checked = time.monotonic()
        self.consumer.subscribe(  # type: ignore[union-attr]
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
                meta = self.consumer.list_topics(timeout=5.0)  # type: ignore[union-attr]
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
        if self._recovering():
            # records fetched meanwhile are dropped, and their partitions rewound to the
            # committed offsets once recovered (the seek fetches them again)
            dropped = self.consumer.consume(num_messages=MAX_POLL_RECORDS, timeout=0.0)  # type: ignore[union-attr]
            with self.lock:
                for msg in dropped:
                    if msg.error() is None:
                        # a record has its topic and partition (the stubs say Optional)
                        self._needs_rewind.add((msg.topic(), msg.partition()))  # type: ignore[arg-type]
                self._recover()
            if self._recovering():  # still backing off
                self._stop_event.wait(0.05)
            return
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
            for tp, queue in task.partition_group.queues.items():
                if len(queue) > limit and tp not in self._paused:
                    self.consumer.pause([TopicPartition(tp[0], tp[1])])  # type: ignore[union-attr]
                    self._paused.add(tp)

    def _consumer_error(self, err: KafkaError) -> None:
        if err.code() == KafkaError._PARTITION_EOF:
            return
        if err.fatal():
            # the consumer is unusable for good: no retry or new producer helps
            hint = ""
            if err.code() == KafkaError.FENCED_INSTANCE_ID:
                hint = (
                    f"; another consumer joined the group as {self.group_instance_id!r}: "
                    "each instance needs its own state.dir (its process id names the "
                    "members), or its own main.consumer.group.instance.id"
                )
            raise StreamsException(f"consuming failed: {err.name()}: {err.str()}{hint}")
        if classify(err) is Kind.FATAL:
            raise translate(KafkaException(err), "consuming")
        # the consumer retries by itself (brokers down, leaders moving): say so now and then
        now = time.monotonic()
        if now >= self._next_consumer_warning:
            self._next_consumer_warning = now + 10.0
            log.warning("Consumer error on %s (retrying): %s", self.name, err)

    def _resume_drained(self) -> None:
        if not self._paused:
            return
        limit = self.config.buffered_records_per_partition // 2
        resume = []
        for tp in list(self._paused):
            task = self.by_partition.get(tp)
            queue = task.partition_group.queues.get(tp) if task is not None else None
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
            self._current_task = task
            total += task.process(PROCESS_BATCH, now, self._lag)
        self._current_task = None
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
        """Commit every running task (see the module docstring); False if nothing to do.

        Client errors surface as the runtime's exceptions (``failures``): a retriable one
        leaves everything as it was, to be committed again after the backoff.
        """
        tasks = [t for t in self.tasks.values() if t.state == RUNNING]
        if not tasks or self._recovering():
            return False
        started = time.monotonic()
        for task in tasks:
            if task.commit_needed or task.stream_task.commit_requested:
                task.flush()
        offsets: dict[tuple[str, int], int] = {}
        metadata: dict[tuple[str, int], str] = {}
        forced: set[tuple[str, int]] = set()  # processor metadata changed (Kafka's KIP-825)
        for task in tasks:
            task_offsets = task.committable_offsets(self._position)
            offsets.update(task_offsets)
            task_metadata, metadata_changed = task.commit_metadata()
            metadata.update(task_metadata)
            if metadata_changed:
                forced.update(task_offsets)
        committed = self._committed
        changed = {}
        for tp, o in offsets.items():
            known = committed.get(tp)
            if known is not None and o < known:
                # a kept task's consumer position is unknown after a reassignment until it
                # fetches again, and its last processed offset can lie before the committed
                # one (a transaction marker follows it): committed offsets never go back,
                # or a purge of the repartition topic up to them would leave the next owner
                # fetching below the log start
                o = known
            if tp in forced or known != o:
                changed[tp] = o
        produced = self.collector.sent != self._sent_at_commit
        if not changed and not produced:
            return False
        tps = [
            TopicPartition(t, p, o, metadata=metadata.get((t, p))) for (t, p), o in changed.items()
        ]
        if self.config.exactly_once:
            self._commit_transaction(tps, changed)
        else:
            self.collector.flush(CALL_TIMEOUT_S)
            if tps:
                with calling("committing offsets"):
                    self.consumer.commit(offsets=tps, asynchronous=False)  # type: ignore[union-attr]
            self._committed_offsets(changed)
            for task in tasks:
                # like Kafka, checkpoint once enough changelog records were written since
                # the last one (a checkpoint costs a memtable flush and an offsets lookup)
                if task.changelogs and task.logged_since_checkpoint >= CHECKPOINT_DELTA:
                    task.checkpoint(self._changelog_end)
        self.metrics.record_commit((time.monotonic() - started) * 1000)
        return True

    def _commit_transaction(
        self, tps: list[TopicPartition], changed: dict[tuple[str, int], int]
    ) -> None:
        """Deliver the writes, add the offsets to the transaction and commit it."""
        self.collector.flush(CALL_TIMEOUT_S)
        if tps:
            if self._group_metadata is None:  # changes only with the group generation
                self._group_metadata = self.consumer.consumer_group_metadata()  # type: ignore[union-attr]
            self._txn_call(
                "sending offsets to the transaction",
                self.producer.send_offsets_to_transaction,  # type: ignore[union-attr]
                tps,
                self._group_metadata,
                CALL_TIMEOUT_S,
            )
        # from here on nothing may be written until commit_transaction has succeeded: a
        # timed-out commit is finished by _recover() before processing goes on
        self._committing = changed
        self._finish_commit()

    def _finish_commit(self) -> None:
        self._txn_call(
            "committing the transaction",
            self.producer.commit_transaction,  # type: ignore[union-attr]
            CALL_TIMEOUT_S,
        )
        changed, self._committing = self._committing or {}, None
        self._committed_offsets(changed)
        with calling("beginning a transaction"):
            self.producer.begin_transaction()  # type: ignore[union-attr]

    def _txn_call(self, what: str, call: Callable[..., Any], *args: Any) -> None:
        """A transactional producer call, watched: librdkafka can block in some of them past
        their timeout while a coordinator is unreachable (send_offsets_to_transaction does),
        so the call runs on a helper thread and one that overruns is abandoned together with
        its producer (``TaskMigratedException``: a new producer takes over)."""
        future = self._txn_calls.submit(call, *args)
        try:
            with calling(what):
                try:
                    future.result(timeout=SLOW_CALL_S)
                except concurrent.futures.TimeoutError:
                    self.stall.waiting(f"{what} is waiting for the brokers")
                    future.result(timeout=CALL_TIMEOUT_S + TXN_CALL_GRACE_S - SLOW_CALL_S)
        except concurrent.futures.TimeoutError:
            self._txn_calls.shutdown(wait=False)
            self._txn_calls = _txn_executor(self.name)
            self._producer_hung = True
            raise TaskMigratedException(
                f"{what} did not return within {CALL_TIMEOUT_S + TXN_CALL_GRACE_S:.0f} s; "
                "replacing the producer"
            ) from None

    def _committed_offsets(self, changed: dict[tuple[str, int], int]) -> None:
        """Bookkeeping after a successful commit."""
        self._sent_at_commit = self.collector.sent
        self._committed.update(changed)
        for (topic, partition), offset in changed.items():
            if topic in self.plan.internal_topics:
                self._repartition_offsets[(topic, partition)] = offset
        self._rollbacks = 0
        self.stall.recovered()

    # -- failures -------------------------------------------------------------------------

    def _recovering(self) -> bool:
        return (
            bool(self._needs_init or self._needs_abort or self._needs_rewind)
            or self._committing is not None
        )

    def _recover(self) -> None:
        """The pending recovery steps, in order; each raises the runtime's exception on failure
        (a retriable one is tried again after the backoff)."""
        if not self.stall.ready():
            return
        producer = self.producer
        if self._needs_init:
            self._txn_call("initializing transactions", producer.init_transactions, CALL_TIMEOUT_S)  # type: ignore[union-attr]
            with calling("beginning a transaction"):
                producer.begin_transaction()  # type: ignore[union-attr]
            self._needs_init = False
            self._needs_abort = False  # a new producer's init aborted the old transaction
            self._committing = None
        if self._committing is not None:
            self._finish_commit()
        if self._needs_abort:
            try:
                self._txn_call(
                    "aborting the transaction",
                    producer.abort_transaction,  # type: ignore[union-attr]
                    CALL_TIMEOUT_S,
                )
            except RetriableStreamsException as exc:
                # the brokers are away, or were: librdkafka's abort can stay stuck after they
                # are back (a request waits forever on its transaction coordinator
                # connection), and a producer whose records timed out can keep a broken
                # sequence state (OUT_OF_ORDER_SEQUENCE_NUMBER once writing again). A new
                # producer's init_transactions aborts the transaction as well, and fences
                # this one.
                raise TaskMigratedException(f"{exc}; replacing the producer") from exc
            with calling("beginning a transaction"):
                producer.begin_transaction()  # type: ignore[union-attr]
            self._needs_abort = False
        if self._needs_rewind:
            self._rewind_to_committed()
        self.stall.recovered()

    def _handle_corrupted(self, exc: BaseException) -> None:
        """Roll back: abort the transaction, rebuild every task from its committed state.

        Rollbacks that keep coming without a commit in between (the same failure on every
        retry) end the thread once they have lasted longer than ``task.timeout.ms``."""
        log.warning("Stream thread %s rolls back its tasks: %s", self.name, exc)
        now = time.monotonic()
        if not self._rollbacks:
            self._rollbacks_since = now
        self._rollbacks += 1
        if self._rollbacks >= MAX_ROLLBACKS and now - self._rollbacks_since > self.stall.timeout_s:
            raise TaskTimeoutException(
                f"{self.name} rolled back {self._rollbacks} times in "
                f"{now - self._rollbacks_since:.0f} s without a successful commit (longer "
                f"than task.timeout.ms={int(self.stall.timeout_s * 1000)}); last cause: {exc}"
            ) from exc
        with self.lock:
            if self.config.exactly_once:
                self.metrics.aborted_transactions += 1
                if not self._needs_init:
                    self._needs_abort = True
            self._committing = None
            self._rebuild_tasks_dirty()

    def _handle_migrated(self, exc: BaseException) -> None:
        """The producer (or the membership) is gone: close the tasks dirty, replace the
        producer and rebuild the tasks from their committed state."""
        log.warning(
            "Stream thread %s: %s; closing its tasks dirty and replacing its producer",
            self.name,
            exc,
        )
        with self.lock:
            self.metrics.producer_replacements += 1
            self._group_metadata = None
            self._replace_producer()
            self._rebuild_tasks_dirty()

    def _replace_producer(self) -> None:
        old = self.producer
        try:
            old.purge(in_queue=True, in_flight=True, blocking=False)  # type: ignore[union-attr]
        except Exception as purge_exc:  # a fatal producer may refuse: it is dropped anyway
            log.debug("purging the old producer: %s", purge_exc)
        self.producer = self._new_producer()
        self.collector.replace_producer(self.producer)
        self._sent_at_commit = self.collector.sent
        self._needs_init = self.config.exactly_once
        self._needs_abort = False
        self._committing = None
        if self._producer_hung:
            # a call still blocks inside it: closing it under that call is not safe, and
            # the new producer's init_transactions fences it
            self._producer_hung = False
        else:
            threading.Thread(target=_close_quietly, args=(old,), daemon=True).start()

    def _rebuild_tasks_dirty(self) -> None:
        partitions = list(self.assigned)
        for task in self.tasks.values():
            task.close(clean=False)
        self.tasks.clear()
        self.by_partition.clear()
        # the partitions stay assigned, and paused in the consumer: the rebuilt tasks start
        # with empty queues, so nothing would ever resume them
        paused = [TopicPartition(t, p) for t, p in self._paused]
        self._paused.clear()
        if paused:
            try:
                self.consumer.resume(paused)  # type: ignore[union-attr]
            except KafkaException as exc:
                log.debug("resuming %s after a rollback: %s", paused, exc)
        self._build_tasks(partitions)
        self._needs_rewind.update(partitions)

    def _rewind_to_committed(self) -> None:
        partitions = list(self._needs_rewind.intersection(self.assigned))
        if not partitions:
            self._needs_rewind.clear()
            return
        consumer = self.consumer
        with calling("reading committed offsets"):
            committed = consumer.committed(  # type: ignore[union-attr]
                [TopicPartition(t, p) for t, p in partitions], timeout=CALL_TIMEOUT_S
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
            except KafkaException as exc:  # e.g. not fetching yet right after an assignment
                raise RetriableStreamsException(
                    f"seeking {tp.topic}-{tp.partition} to {offset} failed: {exc}"
                ) from exc
            self._committed[(tp.topic, tp.partition)] = offset
            self._needs_rewind.discard((tp.topic, tp.partition))

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
            if self._recovering():
                # the tasks hold nothing uncommitted: they are rebuilt from committed state
                self._drop_tasks_after_failure(None)
            else:
                try:
                    self.commit()
                except Exception as exc:
                    log.warning("Commit before revocation failed on %s: %s", self.name, exc)
                    self._drop_tasks_after_failure(exc)
            for task in self.tasks.values():
                task.partition_group.clear()
                if task.state == RESTORING:
                    task.close(clean=False)
            self.tasks = {tid: t for tid, t in self.tasks.items() if t.state != CLOSED}
            self.by_partition.clear()
            self._paused.clear()
            self.assigned = []
            self._needs_rewind.clear()
            self._set_state(PARTITIONS_REVOKED)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        with self.lock:
            self._group_metadata = None
            log.warning("Stream thread %s lost its partitions; closing tasks dirty", self.name)
            self._drop_tasks_after_failure(None)
            self.by_partition.clear()
            self._paused.clear()
            self.assigned = []
            self._needs_rewind.clear()
            self._set_state(PARTITIONS_REVOKED)

    def _drop_tasks_after_failure(self, exc: BaseException | None) -> None:
        """Close every task dirty; under exactly-once the open transaction is rolled back
        (aborted by ``_recover``, or by a new producer when the old one is unusable)."""
        for task in self.tasks.values():
            task.close(clean=False)
        self.tasks.clear()
        if not self.config.exactly_once:
            return
        if isinstance(exc, TaskMigratedException):
            self.metrics.producer_replacements += 1
            self._replace_producer()
        elif not self._needs_init and self._committing is None:
            self._needs_abort = True
        # else a commit_transaction that timed out is still pending: librdkafka accepts no
        # other transactional call until it is resumed (abort_transaction would fail with
        # _CONFLICT for good), and the transaction holds nothing written after it, so
        # _recover finishes it (an abortable outcome aborts it then, a fenced one replaces
        # the producer)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        with self.lock:
            if self._closing:
                return
            self._group_metadata = None
            assigned = [(tp.topic, tp.partition) for tp in partitions]
            before = set(self.tasks.values())
            self._build_tasks(assigned)
            # what is known to be committed stays known for the partitions of kept tasks
            # (ours until the revocation, which committed them); others may have moved
            kept = {
                tp for task in self.tasks.values() if task in before for tp in task.input_partitions
            }
            self._committed = {tp: o for tp, o in self._committed.items() if tp in kept}
            # newly assigned partitions start from their committed offsets
            self._needs_rewind.clear()
            self._set_state(PARTITIONS_ASSIGNED)
            self.listener.on_assignment_change()

    def _build_tasks(self, assigned: list[tuple[str, int]]) -> None:
        wanted = self.plan.tasks_for_partitions(assigned)
        task: ActiveTask | None
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
        with calling("restoring state from changelogs"):
            self.metrics.restored_records += self.reader.restore(requests, self._stop_event.is_set)
        if self._stop_event.is_set():
            return
        self.stall.recovered()
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
                # best effort: otherwise the coordinator aborts it after transaction.timeout.ms
                # (a pending commit_transaction can only be resumed: librdkafka refuses to abort)
                pending = self._committing is not None
                what = "committing the transaction" if pending else "aborting the transaction"
                call = (
                    self.producer.commit_transaction if pending else self.producer.abort_transaction
                )
                try:
                    self._txn_call(what, call, CALL_TIMEOUT_S)
                except Exception as exc:
                    log.info("Finishing the open transaction of %s failed: %s", self.name, exc)
            for task in self.tasks.values():
                if clean:
                    self._close_task_clean(task)
                else:
                    task.close(clean=False)
            self.tasks.clear()
            self.by_partition.clear()
        if self.consumer is not None:
            if self._leave_on_close:
                self._leave_group()
            try:
                self.consumer.close()
            except Exception as exc:
                log.debug("consumer close: %s", exc)
        if self.restore_consumer is not None:
            try:
                self.restore_consumer.close()
            except Exception as exc:
                log.debug("restore consumer close: %s", exc)
        if self.producer is not None and not self._producer_hung:
            self.producer.flush(CALL_TIMEOUT_S if clean else 0)
        self._txn_calls.shutdown(wait=False)

    def _leave_group(self) -> None:
        """Leave the group before closing: librdkafka's close() does not for a static member
        (KIP-345), whose partitions would then wait ``session.timeout.ms`` for another
        member, but unsubscribe() does (a LeaveGroup, or nothing when the coordinator is
        away); librdkafka clears the member id once it has left."""
        consumer = self.consumer
        try:
            if not consumer.memberid():  # type: ignore[union-attr]
                return
            consumer.unsubscribe()  # type: ignore[union-attr]
            deadline = time.monotonic() + CALL_TIMEOUT_S
            while consumer.memberid() and time.monotonic() < deadline:  # type: ignore[union-attr]
                # serves the revocation (nothing left to commit) and the leave
                consumer.consume(num_messages=MAX_POLL_RECORDS, timeout=0.05)  # type: ignore[union-attr]
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


class _CallThread:
    """One daemon thread running calls in turn, each answered through a ``Future``.

    Unlike a ``ThreadPoolExecutor`` (whose threads the interpreter joins at exit), an
    abandoned call that never returns cannot keep the process from exiting."""

    def __init__(self, name: str) -> None:
        self._calls: queue_mod.SimpleQueue[Any] = queue_mod.SimpleQueue()
        threading.Thread(target=self._run, name=name, daemon=True).start()

    def submit(self, call: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._calls.put((future, call, args))
        return future

    def shutdown(self, wait: bool = False) -> None:
        self._calls.put(None)

    def _run(self) -> None:
        while (item := self._calls.get()) is not None:
            future, call, args = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(call(*args))
            except BaseException as exc:
                future.set_exception(exc)


def _txn_executor(name: str) -> _CallThread:
    return _CallThread(f"{name}-txn")
