"""Committing a stream thread's tasks (Kafka's ``TaskExecutor`` commit and the transactional
half of ``StreamsProducer``).

- at-least-once: flush stores (caches forward, changelog records are sent), wait for every
  write to be acknowledged, commit the input offsets, write the checkpoint files once enough
  changelog records were written;
- exactly-once v2: the producer is transactional; flush stores (their writes stay in memory:
  the stores are transactional), wait for every write to be acknowledged, take the offsets
  the transactional stores will record from the delivery reports (the record collector's
  ``acked``: after the transaction's last record in each changelog partition; no request
  to the brokers, so a commit never waits on an offset lookup), send the input offsets to
  the transaction with the consumer group metadata, commit the transaction, then write each
  store's uncommitted writes with those offsets in one batch
  (``ActiveTask.commit_stores``), and begin the next transaction. A crash before the
  transaction commits leaves the stores at the previous commit, whose changelog records are
  all they hold; a crash after it, before the stores are written, leaves them behind their
  changelog, which restoring replays from their offsets.

The ``Committer`` also holds the recovery steps still to do before the thread may process
again (initializing a new producer's transactions, aborting the open transaction, finishing
a ``commit_transaction`` that timed out, seeking partitions to their committed offsets; see
``recover``), where a new assignment starts (``assignment_positions``), and the bookkeeping
of what is known to be committed. Transactional calls run on a helper thread and are
watched (``txn_call``): one that blocks past its timeout abandons its producer.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import queue as queue_mod
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    Consumer,
    KafkaException,
    Producer,
    TopicPartition,
)

from streaming.errors import StreamsException
from streaming.runtime import metrics as metrics_mod
from streaming.runtime.failures import (
    SLOW_CALL_S,
    RetriableStreamsException,
    Stall,
    TaskMigratedException,
    calling,
    translate,
)
from streaming.runtime.producer import RecordCollector

if TYPE_CHECKING:
    from streaming.runtime.active_task import ActiveTask
    from streaming.runtime.config import StreamsConfig
    from streaming.runtime.task_manager import TaskManager

log = logging.getLogger(__name__)

#: how much longer than its own timeout a transactional call may block before it is abandoned
TXN_CALL_GRACE_S = 2.0
#: longest a single blocking client call (flush, transaction calls, offset lookups) may
#: take before the loop regains control; a timed-out call is retried after the backoff
CALL_TIMEOUT_S = 5.0
#: longest the lookup of a new assignment's committed offsets may take inside the rebalance
#: callback (``Committer.assignment_positions``); the partitions still unknown then are sought
#: to their committed offsets by ``recover``
ASSIGN_LOOKUP_TIMEOUT_S = 2.0
#: auto.offset.reset's values and the start they give a partition without a committed offset
RESET_POSITIONS = {
    "earliest": OFFSET_BEGINNING,
    "smallest": OFFSET_BEGINNING,
    "beginning": OFFSET_BEGINNING,
    "latest": OFFSET_END,
    "largest": OFFSET_END,
    "end": OFFSET_END,
}
#: changelog records written before an at-least-once commit also writes the checkpoint
CHECKPOINT_DELTA = 10_000
#: longest a new transactional producer waits for a broker connection before it asks for
#: its producer id (``Committer._init_transactions``)
CONNECT_WAIT_S = 1.0


class Committer:
    """Commits the running tasks of one thread, at-least-once or exactly-once v2."""

    def __init__(
        self,
        *,
        name: str,
        config: StreamsConfig,
        internal_topics: Callable[[], Any],
        task_manager: TaskManager,
        stall: Stall,
        metrics: metrics_mod.ThreadMetrics,
        position: Callable[[tuple[str, int]], int | None],
        changelog_end: Callable[[str, int], int],
        consumer: Consumer,
        producer: Producer,
        collector: RecordCollector,
        known_topic: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.name = name
        self.config = config
        self._internal_topics = internal_topics
        self.task_manager = task_manager
        self.stall = stall
        self.metrics = metrics
        self._position = position
        self._changelog_end = changelog_end
        #: a topic that exists (one of the sources), or None
        self._known_topic = known_topic
        #: the thread's current main consumer and producer (both replaced after fencing)
        self.consumer = consumer
        self.producer = producer
        self.collector = collector
        self.sent_at_commit = 0
        #: offsets known to be committed, per input partition
        self.committed: dict[tuple[str, int], int] = {}
        #: committed offsets of repartition topics, to purge up to
        self.repartition_offsets: dict[tuple[str, int], int] = {}
        self.group_metadata: Any = None
        # recovery steps still to do before the thread may process again (see recover):
        # initialize the (new) transactional producer, abort the open transaction, finish a
        # commit_transaction that timed out, seek the partitions to their committed offsets;
        # the first recover initializes transactions (retried while brokers are unreachable)
        self.needs_init = config.exactly_once
        self.needs_abort = False
        self.committing: dict[tuple[str, int], int] | None = None
        self.needs_rewind: set[tuple[str, int]] = set()
        #: rollbacks in a row (no commit between), and when the first of them happened
        self.rollbacks = 0
        self.rollbacks_since = 0.0
        self._txn_calls = _txn_executor(name)
        #: a transactional call was abandoned while it blocked inside the producer
        self.producer_hung = False

    # -- commit ---------------------------------------------------------------------------

    def commit(self, *, at_positions: bool = True) -> bool:
        """Commit every running task (see the module docstring); False if nothing to do.

        ``at_positions`` False: a partition is committed after its last processed record,
        never at the consumer's position. Inside a rebalance callback the position can be
        past records the same ``consume()`` call returned, which no task has yet.

        Client errors surface as the runtime's exceptions (``failures``): a retriable one
        leaves everything as it was, to be committed again after the backoff.
        """
        tasks = list(self.task_manager.running())
        if not tasks or self.pending():
            return False
        started = time.monotonic()
        for task in tasks:
            if task.commit_needed or task.stream_task.commit_requested:
                task.flush()
        offsets: dict[tuple[str, int], int] = {}
        metadata: dict[tuple[str, int], str] = {}
        forced: set[tuple[str, int]] = set()  # processor metadata changed (Kafka's KIP-825)
        for task in tasks:
            task_offsets = task.committable_offsets(self._position if at_positions else _unknown)
            offsets.update(task_offsets)
            task_metadata, metadata_changed = task.commit_metadata()
            metadata.update(task_metadata)
            if metadata_changed:
                forced.update(task_offsets)
        committed = self.committed
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
        produced = self.collector.sent != self.sent_at_commit
        # an unlogged transactional store written by a punctuator changes nothing else
        uncommitted = self.config.exactly_once and any(t.uncommitted_bytes for t in tasks)
        if not changed and not produced and not uncommitted:
            return False
        tps = [
            TopicPartition(t, p, o, metadata=metadata.get((t, p))) for (t, p), o in changed.items()
        ]
        if self.config.exactly_once:
            self._commit_transaction(tasks, tps, changed)
        else:
            self.collector.flush(CALL_TIMEOUT_S)
            if tps:
                with calling("committing offsets"):
                    self.consumer.commit(offsets=tps, asynchronous=False)
            self._committed_offsets(changed)
            for task in tasks:
                # like Kafka, checkpoint once enough changelog records were written since
                # the last one (a checkpoint costs a memtable flush and an offsets lookup)
                if task.changelogs and task.logged_since_checkpoint >= CHECKPOINT_DELTA:
                    task.checkpoint(self._changelog_end)
        self.metrics.record_commit((time.monotonic() - started) * 1000)
        return True

    def _commit_transaction(
        self,
        tasks: list[ActiveTask],
        tps: list[TopicPartition],
        changed: dict[tuple[str, int], int],
    ) -> None:
        """Deliver the writes, prepare the stores' offsets, add the input offsets to the
        transaction and commit it."""
        self.collector.flush(CALL_TIMEOUT_S)
        # every record of the transaction is acknowledged: the last one of each changelog
        # partition is where its store's content reaches once the transaction commits
        acked = self.collector.acked
        for task in tasks:
            task.prepare_offsets(acked)
        if tps:
            if self.group_metadata is None:  # changes only with the group generation
                self.group_metadata = self.consumer.consumer_group_metadata()
            self.txn_call(
                "sending offsets to the transaction",
                self.producer.send_offsets_to_transaction,
                tps,
                self.group_metadata,
                CALL_TIMEOUT_S,
            )
        # from here on nothing may be written until commit_transaction has succeeded: a
        # timed-out commit is finished by recover() before processing goes on
        self.committing = changed
        self._finish_commit()

    def _finish_commit(self) -> None:
        self.txn_call(
            "committing the transaction",
            self.producer.commit_transaction,
            CALL_TIMEOUT_S,
        )
        changed, self.committing = self.committing or {}, None
        self._committed_offsets(changed)
        for task in self.task_manager.running():
            task.commit_stores()
        self._begin_transaction()

    def _init_transactions(self, producer: Producer) -> None:
        """``init_transactions`` once ``producer`` is connected. librdkafka asks for a
        producer id only through a broker connection that is up, and else looks again 500
        ms later: a new producer's first call took 60 to 500 ms, against 6 ms once
        connected. A metadata request for a topic that exists (``known_topic``) connects
        it; if none comes within ``CONNECT_WAIT_S`` the call goes ahead regardless. Both
        together take at most ``CALL_TIMEOUT_S``, as the call alone did."""
        started = time.monotonic()
        topic = self._known_topic()
        if topic is not None:
            with contextlib.suppress(KafkaException):  # init_transactions waits for them
                producer.list_topics(topic, timeout=CONNECT_WAIT_S)
        producer.init_transactions(CALL_TIMEOUT_S - (time.monotonic() - started))

    def _begin_transaction(self) -> None:
        self.collector.new_transaction()
        with calling("beginning a transaction"):
            self.producer.begin_transaction()

    def txn_call(self, what: str, call: Callable[..., Any], *args: Any) -> None:
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
            self.producer_hung = True
            raise TaskMigratedException(
                f"{what} did not return within {CALL_TIMEOUT_S + TXN_CALL_GRACE_S:.0f} s; "
                "replacing the producer"
            ) from None

    def _committed_offsets(self, changed: dict[tuple[str, int], int]) -> None:
        """Bookkeeping after a successful commit."""
        self.sent_at_commit = self.collector.sent
        self.committed.update(changed)
        internal_topics = self._internal_topics()
        for (topic, partition), offset in changed.items():
            if topic in internal_topics:
                self.repartition_offsets[(topic, partition)] = offset
        self.rollbacks = 0
        self.stall.recovered()

    def retain_committed(self, kept: set[tuple[str, int]]) -> None:
        """Forget what is known to be committed except for ``kept`` partitions."""
        self.committed = {tp: o for tp, o in self.committed.items() if tp in kept}

    def purge_repartition_topics(self, admin: Any) -> None:
        """Delete the repartition topics' records up to their committed offsets."""
        if not self.repartition_offsets:
            return
        tps = [TopicPartition(t, p, o) for (t, p), o in self.repartition_offsets.items()]
        self.repartition_offsets = {}
        try:
            admin.delete_records(tps, request_timeout=10)
        except Exception as exc:  # purging is best effort
            log.debug("Purging repartition topics failed: %s", exc)

    # -- recovery -------------------------------------------------------------------------

    def pending(self) -> bool:
        """Whether a recovery step is still to do (nothing may be processed meanwhile)."""
        return (
            bool(self.needs_init or self.needs_abort or self.needs_rewind)
            or self.committing is not None
        )

    def recover(self) -> None:
        """The pending recovery steps, in order; each raises the runtime's exception on failure
        (a retriable one is tried again after the backoff)."""
        if not self.stall.ready():
            return
        producer = self.producer
        if self.needs_init:
            self.txn_call("initializing transactions", self._init_transactions, producer)
            self._begin_transaction()
            self.needs_init = False
            self.needs_abort = False  # a new producer's init aborted the old transaction
            self.committing = None
        if self.committing is not None:
            self._finish_commit()
        if self.needs_abort:
            try:
                self.txn_call(
                    "aborting the transaction",
                    producer.abort_transaction,
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
            self._begin_transaction()
            self.needs_abort = False
        if self.needs_rewind:
            self._rewind_to_committed()
        self.stall.recovered()

    # -- assignment -----------------------------------------------------------------------

    def assignment_positions(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """Where the partitions of a new assignment start: each one's committed offset,
        looked up here, or auto.offset.reset's end of a partition without one.

        librdkafka's own lookup (a partition assigned without an offset) is retried while a
        transaction's offsets for the partition are pending, since a read_committed consumer
        asks for stable offsets; a rebalance that ends those retries makes it start the
        partition at auto.offset.reset, as if nothing were committed, and everything after
        that point is processed again. A partition whose lookup here fails starts at its end
        instead and is rewound to its committed offset by ``recover`` (``needs_rewind``)
        before anything is processed."""
        reset = self._reset_position()
        if reset is None:
            reset = OFFSET_INVALID  # librdkafka applies the policy (and reports "error")
        try:
            with calling("reading the committed offsets of the new assignment"):
                answers = self.consumer.committed(
                    [TopicPartition(tp.topic, tp.partition) for tp in partitions],
                    timeout=ASSIGN_LOOKUP_TIMEOUT_S,
                )
        except StreamsException as exc:
            log.info("%s: %s; its partitions start once it succeeds", self.name, exc)
            self.needs_rewind.update((tp.topic, tp.partition) for tp in partitions)
            return [TopicPartition(tp.topic, tp.partition, OFFSET_END) for tp in partitions]
        uncommitted = [tp for tp in answers if tp.error is None and tp.offset < 0]
        log_starts = self._log_starts(uncommitted) if reset == OFFSET_BEGINNING else {}
        positions = []
        starts = []
        for tp in answers:
            name = f"{tp.topic}-{tp.partition}"
            if tp.error is not None:
                self.needs_rewind.add((tp.topic, tp.partition))
                offset, start = OFFSET_END, f"once its committed offset is read ({tp.error})"
            elif tp.offset >= 0:
                offset, start = tp.offset, f"at committed offset {tp.offset}"
            elif (tp.topic, tp.partition) in log_starts:
                offset = log_starts[(tp.topic, tp.partition)]
                start = f"at its log start {offset} (none committed)"
            else:
                offset, start = reset, "at auto.offset.reset (none committed)"
            positions.append(TopicPartition(tp.topic, tp.partition, offset))
            starts.append(f"{name} {start}")
        log.info("%s starts %s", self.name, ", ".join(starts))
        return positions

    def _reset_position(self) -> int | None:
        """Where ``auto.offset.reset`` starts a partition without a committed offset; None
        for a policy without a position (``error``)."""
        return RESET_POSITIONS.get(str(self.config.consumer.get("auto.offset.reset", "earliest")))

    def _log_starts(self, partitions: list[TopicPartition]) -> dict[tuple[str, int], int]:
        """The log start offsets of ``partitions`` (one ListOffsets request per broker; none
        if it fails). A partition assigned at the logical beginning can be fetched only once
        its own offset lookup returned, and the first fetch goes out with the partitions
        known by then: when those held nothing the broker kept it ``fetch.wait.max.ms``, and
        every other partition waited with it (100 ms after every start)."""
        if not partitions:
            return {}
        earliest = [TopicPartition(tp.topic, tp.partition, OFFSET_BEGINNING) for tp in partitions]
        try:  # a timestamp of OFFSET_BEGINNING asks ListOffsets for the earliest offset
            found = self.consumer.offsets_for_times(earliest, timeout=ASSIGN_LOOKUP_TIMEOUT_S)
        except KafkaException:
            return {}
        return {
            (tp.topic, tp.partition): tp.offset
            for tp in found
            if tp.error is None and tp.offset >= 0
        }

    def _rewind_to_committed(self) -> None:
        partitions = list(self.needs_rewind.intersection(self.task_manager.assigned))
        if not partitions:
            self.needs_rewind.clear()
            return
        consumer = self.consumer
        what = "reading committed offsets"
        with calling(what):
            committed = consumer.committed(
                [TopicPartition(t, p) for t, p in partitions], timeout=CALL_TIMEOUT_S
            )
        for tp in committed:
            if tp.error is not None:
                # a partition whose lookup failed (an open transaction's offsets, say) is
                # not one without a committed offset: rewinding it to the auto.offset.reset
                # position would process it again from there
                raise translate(KafkaException(tp.error), f"{what} of {tp.topic}-{tp.partition}")
        reset = self._reset_position()
        if reset is None:
            reset = OFFSET_BEGINNING
        for tp in committed:
            offset = tp.offset if tp.offset is not None and tp.offset >= 0 else reset
            try:
                consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
            except KafkaException as exc:  # e.g. not fetching yet right after an assignment
                raise RetriableStreamsException(
                    f"seeking {tp.topic}-{tp.partition} to {offset} failed: {exc}"
                ) from exc
            self.committed[(tp.topic, tp.partition)] = offset
            self.needs_rewind.discard((tp.topic, tp.partition))

    def abort_after_corruption(self) -> None:
        """Roll the open transaction back (exactly-once): aborted by ``recover``, unless a
        new producer's initialization does it."""
        if self.config.exactly_once:
            self.metrics.aborted_transactions += 1
            if not self.needs_init:
                self.needs_abort = True
        self.committing = None

    def abort_after_dropping_tasks(self) -> None:
        """The tasks were dropped with the producer still usable: the open transaction is
        aborted by ``recover``."""
        if not self.needs_init and self.committing is None:
            self.needs_abort = True
        # else a commit_transaction that timed out is still pending: librdkafka accepts no
        # other transactional call until it is resumed (abort_transaction would fail with
        # _CONFLICT for good), and the transaction holds nothing written after it, so
        # recover finishes it (an abortable outcome aborts it then, a fenced one replaces
        # the producer)

    def producer_replaced(self, producer: Producer) -> bool:
        """A new producer took over (its transactions are initialized by ``recover``);
        whether the old one may be closed (not while a call still blocks inside it: the new
        producer's init_transactions fences it)."""
        self.producer = producer
        self.sent_at_commit = self.collector.sent
        self.needs_init = self.config.exactly_once
        self.needs_abort = False
        self.committing = None
        if self.producer_hung:
            self.producer_hung = False
            return False
        return True

    def finish_on_close(self, producer: Producer) -> None:
        """Best effort on an unclean close under exactly-once: abort the open transaction
        (otherwise the coordinator aborts it after transaction.timeout.ms), or resume a
        pending commit_transaction (librdkafka refuses to abort it)."""
        pending = self.committing is not None
        what = "committing the transaction" if pending else "aborting the transaction"
        call = producer.commit_transaction if pending else producer.abort_transaction
        try:
            self.txn_call(what, call, CALL_TIMEOUT_S)
        except Exception as exc:
            log.info("Finishing the open transaction of %s failed: %s", self.name, exc)

    def close(self) -> None:
        """Stop the helper thread of the transactional calls."""
        self._txn_calls.shutdown(wait=False)


class _CallThread:
    """One daemon thread running calls in turn, each answered through a ``Future``.

    Unlike a ``ThreadPoolExecutor`` (whose threads the interpreter joins at exit), an
    abandoned call that never returns cannot keep the process from exiting."""

    def __init__(self, name: str) -> None:
        self._calls: queue_mod.SimpleQueue[Any] = queue_mod.SimpleQueue()
        threading.Thread(target=self._run, name=name, daemon=True).start()

    def submit(self, call: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
        """Queue ``call(*args)``; its outcome arrives through the returned future."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._calls.put((future, call, args))
        return future

    def shutdown(self, wait: bool = False) -> None:
        """Let the thread end once the queued calls are done (``wait`` is ignored)."""
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


def _unknown(tp: tuple[str, int]) -> int | None:
    """No consumer position: offsets follow the processed records only."""
    return None
