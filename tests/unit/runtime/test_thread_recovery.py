"""The stream threads' group membership (``main_consumer_membership``), and how a thread
recovers from what a broker outage leaves behind: a pending commit, an abort that does not
come back, records that timed out, a store that fails to close (no broker needed)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaError, KafkaException

from streaming.runtime.clients import main_consumer_membership
from streaming.runtime.commit import CONNECT_WAIT_S, Committer
from streaming.runtime.config import StreamsConfig
from streaming.runtime.failures import (
    RetriableStreamsException,
    Stall,
    TaskCorruptedException,
    TaskMigratedException,
)
from streaming.runtime.producer import RecordCollector
from streaming.runtime.task import StreamTask
from streaming.runtime.task_manager import TaskManager
from streaming.runtime.thread import StreamThread

BASE = {"application.id": "app", "bootstrap.servers": "localhost:9092"}
PID = "3f1c2b9e-0d4a-4c8e-9a53-7b2f1e6d5c40"


def membership(index=1, process_id=PID, **settings):
    consumer = StreamsConfig.from_mapping({**BASE, **settings}).consumer
    return main_consumer_membership(consumer, process_id, index)


def test_static_member_named_after_the_process_id_that_leaves_on_close():
    assert membership() == (f"{PID}-1", True)
    assert membership(index=3) == (f"{PID}-3", True)


def test_group_instance_id_of_the_user_is_kept_without_leaving_on_close():
    # KIP-345 as in Kafka Streams: a restart within session.timeout.ms needs no rebalance
    assert membership(**{"main.consumer.group.instance.id": "node-a"}) == ("node-a-1", False)
    assert membership(index=2, **{"consumer.group.instance.id": "node-a"}) == ("node-a-2", False)


def test_an_empty_group_instance_id_means_dynamic_membership():
    assert membership(**{"main.consumer.group.instance.id": ""}) == (None, False)


def test_no_process_id_no_static_membership():
    assert membership(process_id="") == (None, False)


def test_the_other_consumers_settings_do_not_matter():
    # group.instance.id only ever reaches the stream threads' consumer
    cfg = StreamsConfig.from_mapping({**BASE, "consumer.group.instance.id": "node-a"})
    assert "group.instance.id" not in cfg.restore_consumer
    assert "group.instance.id" not in cfg.global_consumer


# -- a lost assignment while a commit_transaction is pending --------------------------------


@pytest.fixture
def thread_with():
    """A stream thread (no clients) with its task manager and committer, and under
    exactly-once a ``commit_transaction`` pending (``committing``) or not (None)."""
    committers = []

    def make(committing):
        thread = object.__new__(StreamThread)
        threading.Thread.__init__(thread, name="t")
        thread.committer = _committer()
        thread.config = thread.committer.config
        thread.metrics = thread.committer.metrics
        thread.stall = thread.committer.stall
        thread.task_manager = thread.committer.task_manager
        committers.append(thread.committer)
        thread.committer.needs_init = False  # its transactions were initialized
        thread.committer.committing = committing
        return thread

    yield make
    for committer in committers:
        committer.close()


def test_a_pending_commit_is_finished_not_aborted_when_the_tasks_are_dropped(thread_with):
    # librdkafka refuses abort_transaction (_CONFLICT) until a timed-out commit_transaction
    # has been resumed: the recovery must finish the commit instead
    thread = thread_with({("in", 0): 42})
    thread._drop_tasks_after_failure(None)
    assert thread.committer.committing == {("in", 0): 42}
    assert not thread.committer.needs_abort
    assert thread._recovering()


def test_an_open_transaction_is_aborted_when_the_tasks_are_dropped(thread_with):
    thread = thread_with(None)
    thread._drop_tasks_after_failure(None)
    assert thread.committer.needs_abort


class TimingOutProducer:
    def abort_transaction(self, timeout):
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "retry call to resume"))


def test_an_abort_that_times_out_replaces_the_producer(thread_with):
    # librdkafka's abort can stay stuck once the brokers are back, and a producer whose
    # records timed out can keep a broken sequence state: a new producer aborts instead
    committer = thread_with(None).committer
    committer.needs_abort = True
    committer.producer = TimingOutProducer()
    with pytest.raises(TaskMigratedException, match="replacing the producer"):
        committer.recover()


class Msg:
    def topic(self):
        return "out"


class NoProducer:
    def produce(self, *args, **kwargs):
        raise AssertionError("not expected")

    def poll(self, timeout):
        return 0


def _collector(producer: object, *, exactly_once: bool) -> RecordCollector:
    """A collector over ``producer`` with no handlers and one partition per topic."""
    return RecordCollector(
        producer,
        production_handler=None,
        dead_letter_topic=None,
        partition_counts=lambda topic: 1,
        exactly_once=exactly_once,
    )


class FlushEndsInSystemError(NoProducer):
    """confluent-kafka's flush after a fatal error, as seen in a broker run: a SystemError
    with no KafkaException chained to it."""

    def flush(self, timeout):
        raise SystemError(
            "<method 'flush' of 'cimpl.Producer' objects> returned NULL without setting an "
            "exception"
        )


def test_a_flush_that_ends_in_a_bare_system_error_replaces_the_producer():
    collector = _collector(FlushEndsInSystemError(), exactly_once=True)
    with pytest.raises(TaskMigratedException, match="flushing the producer failed"):
        collector.flush(5)
    # a failure the delivery reports recorded is raised instead
    collector.on_delivery(KafkaError(KafkaError._FENCED), Msg())
    with pytest.raises(TaskMigratedException, match="fenced"):
        collector.flush(5)


@pytest.mark.parametrize(
    ("exactly_once", "expected"),
    [(True, TaskMigratedException), (False, TaskCorruptedException)],
)
def test_records_that_timed_out_replace_a_transactional_producer(exactly_once, expected):
    # its idempotence state needs a new epoch, which its own abort does not reliably give
    collector = _collector(NoProducer(), exactly_once=exactly_once)
    collector.on_delivery(KafkaError(KafkaError._MSG_TIMED_OUT), Msg())
    with pytest.raises(expected):
        collector.check()


# -- closing a task whose store fails to close ----------------------------------------------


class Store:
    def __init__(self, fail=False):
        self.fail = fail
        self.closed = False

    def close(self):
        self.closed = True
        if self.fail:
            raise RuntimeError("flushing the cache failed")


def test_every_store_closes_when_one_fails():
    # a store left open keeps its RocksDB lock: the task rebuilt in its place cannot open it
    task = object.__new__(StreamTask)
    stores = {"counts": Store(fail=True), "sums": Store()}
    task.context = SimpleNamespace(stores=stores)
    task._stores_open = True
    task._initialized = False
    with pytest.raises(RuntimeError):
        task.close(flush=False)
    assert all(store.closed for store in stores.values())
    assert not task._stores_open


# -- a rollback while partitions are paused (back-pressure) ---------------------------------


class PausingConsumer:
    def __init__(self):
        self.resumed = []

    def resume(self, partitions):
        self.resumed.extend((tp.topic, tp.partition) for tp in partitions)


def test_a_rollback_resumes_the_partitions_it_had_paused(thread_with):
    # the rebuilt tasks start with empty queues: a partition left paused in the consumer
    # would never be fetched again (only a full queue's partition is resumed when it drains)
    thread = thread_with(None)
    tasks = thread.task_manager
    tasks.assigned = [("in", 0), ("in", 1)]
    tasks.paused = {("in", 1)}
    tasks.consumer = PausingConsumer()
    built = []
    tasks.create_tasks = built.extend
    thread._rebuild_tasks_dirty()
    assert tasks.consumer.resumed == [("in", 1)]
    assert not tasks.paused
    assert built == tasks.assigned
    assert thread.committer.needs_rewind == set(tasks.assigned)


class CommittedLookup:
    """A consumer whose ``committed()`` answers per partition: an offset, nothing committed
    (-1001) or an error; ``offsets_for_times`` gives the partitions' log starts (fails
    while there are none); ``seek`` is recorded."""

    def __init__(self, answers, log_starts=None):
        self.answers = answers
        self.log_starts = log_starts
        self.seeks = []

    def offsets_for_times(self, partitions, timeout=None):
        assert all(tp.offset == OFFSET_BEGINNING for tp in partitions)  # EARLIEST
        if self.log_starts is None:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        return [
            SimpleNamespace(
                topic=tp.topic,
                partition=tp.partition,
                offset=self.log_starts[tp.partition],
                error=None,
            )
            for tp in partitions
        ]

    def committed(self, partitions, timeout=None):
        out = []
        for tp in partitions:
            answer = self.answers[tp.partition]
            failed = isinstance(answer, KafkaError)
            offset = -1001 if failed else answer
            error = answer if failed else None
            out.append(
                SimpleNamespace(topic=tp.topic, partition=tp.partition, offset=offset, error=error)
            )
        return out

    def seek(self, tp):
        self.seeks.append((tp.partition, tp.offset))


def _rewinding(thread_with, answers):
    thread = thread_with(None)
    committer = thread.committer
    committer.consumer = CommittedLookup(answers)
    committer.config.consumer = {"auto.offset.reset": "earliest"}
    committer.task_manager.assigned = [("in", p) for p in answers]
    committer.needs_rewind = set(committer.task_manager.assigned)
    return committer


def test_a_rewind_seeks_to_the_committed_offsets_or_the_reset_position(thread_with):
    committer = _rewinding(thread_with, {0: 250, 1: -1001})
    committer.recover()
    assert sorted(committer.consumer.seeks) == [(0, 250), (1, OFFSET_BEGINNING)]
    assert not committer.pending()


def test_a_failed_offset_lookup_is_retried_never_taken_for_no_committed_offset(thread_with):
    # an open transaction's offsets make the lookup fail for that partition: seeking it to
    # auto.offset.reset would process everything it committed again (exactly-once broken)
    unstable = KafkaError(KafkaError.UNSTABLE_OFFSET_COMMIT)
    committer = _rewinding(thread_with, {0: 250, 1: unstable})
    with pytest.raises(RetriableStreamsException, match="UNSTABLE_OFFSET_COMMIT"):
        committer.recover()
    assert committer.consumer.seeks == []
    assert committer.needs_rewind == {("in", 0), ("in", 1)}  # tried again after the backoff
    committer.consumer.answers[1] = 120
    committer.recover()
    assert sorted(committer.consumer.seeks) == [(0, 250), (1, 120)]


def _assigning(thread_with, answers, reset="earliest"):
    committer = _rewinding(thread_with, answers)
    committer.needs_rewind = set()
    committer.config.consumer = {"auto.offset.reset": reset}
    return committer


def _positions(committer, partitions):
    assigned = [SimpleNamespace(topic="in", partition=p) for p in partitions]
    return [(tp.partition, tp.offset) for tp in committer.assignment_positions(assigned)]


@pytest.mark.parametrize(
    ("reset", "log_starts", "start"),
    [
        ("earliest", {1: 37}, 37),  # the log start, looked up: fetched at once
        ("earliest", None, OFFSET_BEGINNING),  # that lookup failed: librdkafka's
        ("latest", {1: 37}, OFFSET_END),
    ],
)
def test_a_new_assignment_starts_at_the_committed_offsets_it_looked_up(
    thread_with, reset, log_starts, start
):
    # explicit positions: librdkafka never looks the offsets up itself (see the next test)
    committer = _assigning(thread_with, {0: 250, 1: -1001}, reset)
    committer.consumer.log_starts = log_starts
    assert _positions(committer, [0, 1]) == [(0, 250), (1, start)]
    assert not committer.needs_rewind


def test_a_partition_whose_offset_lookup_fails_waits_for_the_rewind(thread_with):
    # librdkafka retries its own lookup while a transaction's offsets are pending, and a
    # rebalance in between made it start the partition at auto.offset.reset: here such a
    # partition starts at its end and recover() seeks it to its committed offset first
    unstable = KafkaError(KafkaError.UNSTABLE_OFFSET_COMMIT)
    committer = _assigning(thread_with, {0: 250, 1: unstable})
    assert _positions(committer, [0, 1]) == [(0, 250), (1, OFFSET_END)]
    assert committer.needs_rewind == {("in", 1)}
    assert committer.pending()  # nothing is processed before the rewind
    committer.consumer.answers[1] = 120
    committer.recover()
    assert committer.consumer.seeks == [(1, 120)]
    assert not committer.pending()


def test_a_lookup_that_times_out_rewinds_every_partition(thread_with):
    committer = _assigning(thread_with, {0: 250, 1: 7})
    committer.consumer.committed = _timing_out
    assert _positions(committer, [0, 1]) == [(0, OFFSET_END), (1, OFFSET_END)]
    assert committer.needs_rewind == {("in", 0), ("in", 1)}


def _timing_out(partitions, timeout=None):
    raise KafkaException(KafkaError(KafkaError._TIMED_OUT))


# -- a rebalance while partitions are paused (back-pressure) --------------------------------


class LibrdkafkaPauses:
    """librdkafka's pause state: a partition paused stays paused until resumed, across a
    revocation and the assignment that gives it back to the same consumer."""

    def __init__(self):
        self.paused = set()

    def pause(self, partitions):
        self.paused.update((tp.topic, tp.partition) for tp in partitions)

    def resume(self, partitions):
        self.paused.difference_update((tp.topic, tp.partition) for tp in partitions)


class QueueTask:
    """A running task that only queues what it is handed (its offsets)."""

    state = "RUNNING"

    def __init__(self, tp):
        from streaming.runtime.partition_group import PartitionGroup

        self.partition_group = PartitionGroup([tp])

    def add_messages(self, topic, partition, msgs):
        self.partition_group.queue((topic, partition)).extend(m.offset() for m in msgs)


class _PolledMsg:
    def __init__(self, tp, offset):
        self._tp, self._offset = tp, offset

    def error(self):
        return None

    def topic(self):
        return self._tp[0]

    def partition(self):
        return self._tp[1]

    def offset(self):
        return self._offset


@pytest.mark.parametrize("rebalance", ["revoked", "lost"])
def test_a_rebalance_resumes_the_partitions_paused_for_full_queues(thread_with, rebalance):
    # the second worker of a two-thread application joins while the first, assigned every
    # partition, has paused a full queue's partition; the first keeps that partition, but
    # its queue was dropped, so no drained queue would ever resume it: the partition was
    # never fetched again and the application never finished its input
    tp = ("orders", 0)
    tasks = thread_with(None).task_manager
    tasks.config = SimpleNamespace(buffered_records_per_partition=2)
    consumer = tasks.consumer = LibrdkafkaPauses()
    task = QueueTask(tp)
    tasks.tasks = {"0_0": task}
    tasks.by_partition = {tp: task}
    tasks.add_records_to_tasks([_PolledMsg(tp, o) for o in range(3)], on_error=print)
    assert consumer.paused == {tp}  # back-pressure: the queue holds more than the limit
    if rebalance == "revoked":
        tasks.handle_revocation()
        assert not task.partition_group.queues.get(tp)  # the queue was dropped
    else:
        tasks.handle_lost_all()  # after the thread closed the tasks dirty
    assert consumer.paused == set()
    assert not tasks.paused


# -- records a poll returns across a rebalance -------------------------------------------


class _Msg:
    def __init__(self, offset: int) -> None:
        self._offset = offset

    def offset(self) -> int:
        return self._offset


def test_a_kept_partition_fetched_again_after_a_rebalance_queues_each_record_once():
    """A poll returns records fetched before the rebalance callback it served; the new
    assignment fetches the kept partition again from its committed offset (after the last
    processed record, where the revocation committed it). Each record is queued once."""
    from streaming.runtime.partition_group import PartitionGroup
    from streaming.runtime.task import StampedRecord

    tp = ("orders", 2)
    group = PartitionGroup([tp])

    def queue(offsets: list[int]) -> None:
        for m in group.unseen(tp, [_Msg(o) for o in offsets]):
            group.queue(tp).append(StampedRecord(*tp, m.offset(), 0, None, None, ()))

    queue([10, 11, 12])
    assert group.next_record().offset == 10  # processed; the revocation commits 11
    queue([13, 14])  # polled with the revocation, queued after it
    queue([11, 12, 13, 14, 15])  # the new assignment, fetched from the committed 11
    assert [r.offset for r in group.queues[tp]] == [11, 12, 13, 14, 15]
    group.clear()  # a revocation drops what is queued
    queue([11, 12])  # fetched again from the committed offset
    assert [r.offset for r in group.queues[tp]] == [11, 12]


# -- a new transactional producer connects before it asks for its producer id -------------


#: the record collector's part in beginning a transaction
_NEW_TRANSACTIONS = SimpleNamespace(new_transaction=lambda: None)


class _InitRecordingProducer:
    """Records the calls ``recover`` makes to initialize transactions."""

    def __init__(self, metadata_error: bool = False) -> None:
        self.calls: list[tuple] = []
        self.metadata_error = metadata_error

    def list_topics(self, topic=None, timeout=-1):
        self.calls.append(("list_topics", topic, timeout))
        if self.metadata_error:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "brokers down"))

    def init_transactions(self, timeout):
        self.calls.append(("init_transactions",))

    def begin_transaction(self):
        self.calls.append(("begin_transaction",))


@pytest.mark.parametrize("metadata_error", [False, True], ids=["connected", "brokers-down"])
def test_a_new_producer_asks_for_a_topics_metadata_before_its_producer_id(metadata_error):
    # librdkafka asks for a producer id only through a connection that is up, else 500 ms
    # later: a metadata request for a source topic connects it first; if none comes, the
    # initialization goes ahead and waits for the brokers itself
    producer = _InitRecordingProducer(metadata_error)
    committer = _committer(producer, _NEW_TRANSACTIONS, known_topic=lambda: "orders")
    try:
        committer.recover()
    finally:
        committer.close()
    assert producer.calls == [
        ("list_topics", "orders", CONNECT_WAIT_S),
        ("init_transactions",),
        ("begin_transaction",),
    ]
    assert not committer.needs_init


def test_without_a_known_topic_the_producer_id_is_asked_for_at_once():
    producer = _InitRecordingProducer()
    committer = _committer(producer, _NEW_TRANSACTIONS, known_topic=lambda: None)
    try:
        committer.recover()
    finally:
        committer.close()
    assert producer.calls == [("init_transactions",), ("begin_transaction",)]


def _committer(producer=None, collector=None, known_topic=lambda: None) -> Committer:
    """An exactly-once committer over an empty task manager (no clients unless given)."""
    config = SimpleNamespace(exactly_once=True)
    stall = Stall("t", 300_000, 100)
    metrics = SimpleNamespace(producer_replacements=0)
    return Committer(
        name="t",
        config=config,
        internal_topics=set,
        task_manager=TaskManager(
            config=config,
            plan=None,
            task_creator=None,
            consumer=None,
            standby=lambda: None,
            stall=stall,
            metrics=metrics,
            changelog_end=lambda topic, partition: 0,
        ),
        stall=stall,
        metrics=metrics,
        position=lambda tp: None,
        changelog_end=lambda topic, partition: 0,
        consumer=None,
        producer=producer,
        collector=collector,
        known_topic=known_topic,
    )
