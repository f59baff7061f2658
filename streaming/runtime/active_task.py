"""An active task of a running application: a ``StreamTask`` plus what Kafka needs around it.

It wires the task to the record collector (sinks and changelogs), keeps its local state under
``state.dir/<application.id>/<task>/``, knows the changelog partitions to restore and where
each store resumes (``store_offsets``), applies the exception handlers, and decides when the
task may process (``max.task.idle.ms``, as Kafka's ``PartitionGroup``).

Under exactly-once its persistent stores are transactional (KIP-892): what the task writes
stays in memory until the Kafka transaction that carries its changelog records has
committed; then ``commit_stores`` writes it, with the changelog offsets it brings the store
to (``prepare_offsets``: after the last record of the transaction acknowledged in each
changelog partition, known from the producer's delivery reports), in one batch per store. A
killed process leaves every store at its last such commit, and the task restores only what
the changelog holds after the stored offsets; a rolled-back transaction closes the task
dirty, which drops the uncommitted writes. Under at-least-once the stores write as they go
and the checkpoint file records their offsets (``checkpoint``).

Its processor metadata (Kafka's KIP-825, ``processor_metadata``) goes with every offset commit
of its input partitions (``commit_metadata``) and is read back from the committed offsets
before its processors are initialized, once its stores are restored (``_complete``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Collection, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaException, TopicPartition

from streaming.errors import StreamsException
from streaming.runtime import errors, processor_metadata
from streaming.runtime.assignment import Subtopology
from streaming.runtime.failures import (
    RetriableStreamsException,
    TaskCorruptedException,
    TaskMigratedException,
    calling,
    translate,
)
from streaming.runtime.partition_group import StampedRecord
from streaming.runtime.restore import RestoreRequest
from streaming.runtime.state_directory import (
    TaskLock,
    delete_checkpoint,
    read_checkpoint,
    write_checkpoint,
)
from streaming.runtime.store_offsets import commit_restored, prepare_task_dir, restore_start
from streaming.runtime.task import ConsumerRecord, StreamTask
from streaming.state.api import TransactionalStore, transactional_layer

if TYPE_CHECKING:
    from confluent_kafka import Consumer

    from streaming.runtime.metrics import ThreadMetrics
    from streaming.runtime.producer import RecordCollector
    from streaming.runtime.services import ClientServices
    from streaming.state import ThreadCache

log = logging.getLogger(__name__)

CREATED, RESTORING, RUNNING, SUSPENDED, CLOSED = (
    "CREATED",
    "RESTORING",
    "RUNNING",
    "SUSPENDED",
    "CLOSED",
)

#: how long a task waits for its previous owner (a stream thread or worker process that lost
#: it in a rebalance) to close it: it does so at its own next assignment
TASK_LOCK_TIMEOUT_S = 60.0

RUNTIME_FAILURES = (RetriableStreamsException, TaskCorruptedException, TaskMigratedException)

#: how long one attempt to read a task's committed offsets and metadata may take (under
#: exactly-once the broker answers once a previous owner's open transaction is resolved);
#: a timeout is retriable: the thread tries again after its backoff, within task.timeout.ms
COMMITTED_METADATA_TIMEOUT_S = 15.0


def _no_lag(tp: tuple[str, int]) -> int | None:
    return None


@dataclasses.dataclass
class ActiveTaskCreator:
    """What a stream thread's active tasks need of it (Kafka's ``ActiveTaskCreator``): the
    client's services, the thread's record collector, cache, clock and counters, and its
    main consumer (replaced when the group fences it)."""

    services: ClientServices
    collector: RecordCollector
    cache: ThreadCache | None
    clock: Callable[[], int]
    metrics: ThreadMetrics
    consumer: Consumer

    def create(
        self,
        task_id: str,
        sub: Subtopology,
        partition: int,
        input_partitions: list[tuple[str, int]],
    ) -> ActiveTask:
        """A new task of ``sub`` for ``partition``, reading ``input_partitions``."""
        return ActiveTask(task_id, sub, partition, input_partitions, self)


class ActiveTask:
    """One (sub-topology, partition) task owned by a stream thread."""

    def __init__(
        self,
        task_id: str,
        sub: Subtopology,
        partition: int,
        input_partitions: list[tuple[str, int]],
        creator: ActiveTaskCreator,
    ) -> None:
        self.id = task_id
        self.sub = sub
        self.partition = partition
        self.input_partitions = sorted(input_partitions)
        #: the input partitions of source topics, not repartition topics (what event-time
        #: alignment holds back)
        self.source_partitions = [
            tp for tp in self.input_partitions if tp[0] not in sub.internal_sources
        ]
        self.reads_sources = bool(self.source_partitions)
        self._creator = creator
        services = creator.services
        config = services.config
        self.eos = config.exactly_once
        self.task_dir: Path = services.state_directory.task_dir(task_id)
        self._dir_lock: TaskLock | None = None
        self.changelogs = {store: spec.topic for store, spec in sub.changelogs.items()}
        #: stores whose changelog is their source topic (``reuse.ktable.source.topics``)
        self.source_changelogs = {s for s, spec in sub.changelogs.items() if spec.source}
        self.state = CREATED
        self._deser_handler = config.deserialization_handler
        self._proc_handler = config.processing_handler
        self._collector = creator.collector
        self.dropped = 0
        self.pending_restore: list[RestoreRequest] = []
        #: changelog records written since the last checkpoint (at-least-once)
        self.logged_since_checkpoint = 0
        #: exactly-once: the transactional stores by name (once open)
        self.transactional: dict[str, TransactionalStore] = {}
        #: exactly-once: the offsets the next commit of each transactional store records
        self._prepared: dict[str, dict[tuple[str, int], int]] = {}
        #: the offset commit metadata last handed out (see ``commit_metadata``)
        self._metadata_cache: tuple[int, str] | None = None
        self._offsets_known = False
        self.stream_task = StreamTask(
            task_id,
            services.topology,
            sub.nodes,
            application_id=config.application_id,
            config=services.app_configs,
            send=creator.collector.send,
            clock=creator.clock,
            state_dir=self.task_dir,
            cache=creator.cache,
            partition=partition,
            caching_enabled=config.cache_max_bytes > 0,
            deserialization_handler=self._on_deserialization_error,
            on_skipped=self._on_skipped,
            on_dropped=self._on_dropped,
        )
        self.stream_task.context.changelog_writer = self._log_change
        self.stream_task.context.global_stores = services.global_stores
        self.stream_task.context.transactional_state = self.eos
        self.partition_group = self.stream_task.partition_group
        self.partition_group.input_partitions = self.input_partitions
        self.partition_group.max_idle_ms = config.max_task_idle_ms

    # -- state ----------------------------------------------------------------------------

    def initialize(self) -> list[RestoreRequest]:
        """Open the stores (deleting those nothing vouches for, see ``store_offsets``) and
        list what to restore."""
        # the task's previous owner may still be closing it (it closes tasks it lost at its
        # own next assignment)
        self._dir_lock = self._creator.services.state_directory.lock_task(
            self.id, timeout_s=TASK_LOCK_TIMEOUT_S
        )
        try:
            return self._initialize()
        except BaseException:
            self._dir_lock.release()
            raise

    def _initialize(self) -> list[RestoreRequest]:
        checkpoint = read_checkpoint(self.task_dir)
        if self.eos:
            # exactly-once: the checkpoint is only valid until the task writes again
            delete_checkpoint(self.task_dir)
        task = self.stream_task
        prepare_task_dir(self.task_dir, task.build_stores(), checkpoint, transactional=self.eos)
        # the processors are initialized once the task is about to run (``_complete``)
        task.initialize_stores()
        context = task.context
        stores = context.stores
        self.transactional = {
            name: layer
            for name, store in stores.items()
            if (layer := transactional_layer(store)) is not None
        }
        callbacks = context.restore_callbacks
        requests = []
        for store, topic in self.changelogs.items():
            callback = callbacks.get(store)
            if callback is None:
                continue
            tp = (topic, self.partition)
            layer = self.transactional.get(store)
            limit = self._committed_offset(topic) if store in self.source_changelogs else None
            requests.append(
                RestoreRequest(
                    store,
                    topic,
                    self.partition,
                    restore_start(stores.get(store), tp, checkpoint),
                    callback,
                    limit=limit,
                    on_batch=None if layer is None else partial(commit_restored, layer, tp),
                )
            )
        resumed = [
            f"{r.store} at {'the start' if r.start is None else r.start}"
            for r in requests
            if r.store in self.transactional
        ]
        if resumed:
            log.info(
                "Task %s resumes its transactional stores from their committed changelog "
                "offsets: %s",
                self.id,
                ", ".join(resumed),
            )
        self.pending_restore = requests
        self.state = RESTORING if requests else RUNNING
        return requests

    def _committed_offset(self, topic: str) -> int:
        """The group's committed offset of this task's partition of a source topic that
        serves as a changelog: restoring goes no further (Kafka's StoreChangelogReader);
        nothing committed yet means nothing to restore."""
        consumer = self._creator.consumer
        what = f"reading the committed offset of {topic}-{self.partition}"
        with calling(what):
            (tp,) = consumer.committed(
                [TopicPartition(topic, self.partition)], timeout=COMMITTED_METADATA_TIMEOUT_S
            )
        if tp.error is not None:
            raise translate(KafkaException(tp.error), what)
        return max(0, tp.offset)

    def _complete(self) -> None:
        """Kafka's ``completeRestoration``: read the task's committed metadata, then
        ``init`` the processors (which read it). Runs when the task is first used after
        its restoration, not while it is created: when a thread rebuilds its tasks after
        a failure, the rolled-back transaction (whose offsets would make the committed
        offsets unstable) is aborted first."""
        if self.stream_task.initialized:
            return
        self._initialize_metadata()
        self.stream_task.initialize_topology()

    def _initialize_metadata(self) -> None:
        """Read the stream time and processor metadata committed with the input offsets
        (Kafka's ``StreamTask.initializeMetadata``); the largest value per key wins."""
        consumer = self._creator.consumer
        if not self.input_partitions:
            return
        partitions = [TopicPartition(t, p) for t, p in self.input_partitions]
        what = f"reading the committed offsets and metadata of task {self.id}"
        with calling(what):
            committed = consumer.committed(partitions, timeout=COMMITTED_METADATA_TIMEOUT_S)
        for tp in committed:
            if tp.error is not None:
                raise translate(KafkaException(tp.error), what)
        stream_time, metadata = processor_metadata.merge(tp.metadata for tp in committed)
        self.stream_task.initialize_metadata(stream_time, metadata)

    def _log_change(
        self, store: str, key: bytes, value: bytes | None, timestamp: int, headers: Any = ()
    ) -> None:
        self.logged_since_checkpoint += 1
        self._collector.send_to_partition(
            self.changelogs[store], self.partition, key, value, timestamp, headers
        )

    def _store_offsets(
        self, end_offset: Callable[[str, int], int | None], only: Collection[str] | None = None
    ) -> dict[str, tuple[tuple[str, int], int]]:
        """The changelog partition and offset each persistent store's content (of the
        stores named in ``only``, if given) reaches once the task's writes so far are
        committed: ``end_offset`` of its changelog partition (None: unknown, the store is
        left out), or, for a store whose changelog is a source topic, after the task's
        last processed offset."""
        stores = self.stream_task.context.stores
        processed = self.partition_group.processed_offsets
        out = {}
        for store, topic in self.changelogs.items():
            if only is not None and store not in only:
                continue
            if not getattr(stores.get(store), "persistent", True):
                continue  # like Kafka: an in-memory store always replays its whole changelog
            tp = (topic, self.partition)
            if store in self.source_changelogs:
                # a source topic serving as changelog: the store holds what was processed
                if tp in processed:
                    out[store] = (tp, processed[tp] + 1)
            else:
                offset = end_offset(topic, self.partition)
                if offset is not None:
                    out[store] = (tp, offset)
        return out

    def checkpoint(self, end_offset: Callable[[str, int], int]) -> None:
        """Write every store to disk, then the changelog offsets they correspond to: in the
        checkpoint file, and in each transactional store, which holds nothing uncommitted
        at a clean close (one that does is left at its last commit, and out of the file)."""
        if not self.changelogs:
            return
        for store in self.stream_task.context.stores.values():
            inner = store.inner() if hasattr(store, "inner") else store
            force = getattr(inner, "force_flush", None)
            if force is not None:
                force()
        offsets = {}
        for store, (tp, offset) in self._store_offsets(end_offset).items():
            layer = self.transactional.get(store)
            if layer is not None:
                if layer.uncommitted_bytes:
                    continue
                layer.commit({tp: offset})
            offsets[tp] = offset
        write_checkpoint(self.task_dir, offsets)
        self.logged_since_checkpoint = 0

    # -- exactly-once: the transactional stores --------------------------------------------

    def prepare_offsets(self, acked: Mapping[tuple[str, int], int]) -> None:
        """Once the transaction's records are acknowledged, before it commits: the offsets
        its commit brings the transactional stores to (``commit_stores``). ``acked``: the
        offset of the last record acknowledged per partition in this transaction; a store
        whose changelog got records is at the offset after the last one (restoring reads
        from there: the transaction's marker, then what later transactions wrote). A store
        whose changelog got none keeps its offsets, which still hold. A store whose
        changelog is a source topic is at the task's processed offset."""
        if not self.transactional:
            return

        def after_acked(topic: str, partition: int) -> int | None:
            last = acked.get((topic, partition))
            return None if last is None else last + 1

        prepared = self._prepared
        for store, (tp, offset) in self._store_offsets(after_acked, self.transactional).items():
            prepared[store] = {tp: offset}

    def commit_stores(self) -> None:
        """The transaction committed: write each transactional store's uncommitted writes
        with the offsets prepared for it, in one batch per store."""
        prepared, self._prepared = self._prepared, {}
        for store, layer in self.transactional.items():
            offsets = prepared.get(store)
            if offsets or layer.uncommitted_bytes:
                layer.commit(offsets or {})

    @property
    def uncommitted_bytes(self) -> int:
        """What the transactional stores hold uncommitted (key and value bytes)."""
        return sum(layer.uncommitted_bytes for layer in self.transactional.values())

    def close(self, *, clean: bool) -> None:
        """Close the stores (transactional ones drop what is uncommitted); a dirty close
        (failure, lost partitions) drops the checkpoint."""
        if self.state == CLOSED:
            return
        try:
            self.stream_task.close(flush=clean)
        except Exception:
            if clean:
                raise
            log.exception("Error closing task %s dirty", self.id)
        finally:
            self.state = CLOSED
            self.transactional = {}
            self._prepared = {}
            if not clean:
                delete_checkpoint(self.task_dir)
            if self._dir_lock is not None:
                self._dir_lock.release()

    # -- input ----------------------------------------------------------------------------

    def add_records(self, records: list[ConsumerRecord]) -> None:
        self.stream_task.add_records(records)

    def add_messages(self, topic: str, partition: int, msgs: list[Any]) -> None:
        """Queue confluent-kafka messages of one partition (see ``StreamTask.add_messages``),
        but none at or below the last one queued or processed: a poll can return records
        fetched before a rebalance callback it served (queued once the poll returns), and
        the new assignment fetches a kept partition again from its committed offset."""
        msgs = self.partition_group.unseen((topic, partition), msgs)
        if msgs:
            self.stream_task.add_messages(topic, partition, msgs)

    # -- processing -----------------------------------------------------------------------

    def process(
        self,
        limit: int,
        now_ms: int = 0,
        lag: Callable[[tuple[str, int]], int | None] = _no_lag,
        until: int | None = None,
    ) -> int:
        """Process up to ``limit`` buffered records (handlers applied) while the partition
        group is ready (``max.task.idle.ms``; a task of one input partition is ready while
        it has records) and, given ``until``, none later than that; returns how many were
        processed."""
        task = self.stream_task
        if not task.initialized:
            self._complete()
        group = self.partition_group
        ready = None if len(self.input_partitions) == 1 else partial(group.ready, now_ms, lag)
        return task.process(limit, on_error=self._on_processing_error, ready=ready, until=until)

    def waits_beyond(self, until: int) -> bool:
        """Whether the task's next record lies past ``until`` (it waits for alignment)."""
        head = self.partition_group.head_timestamp()
        return head is not None and head > until

    def _context_for(self, rec: StampedRecord | ConsumerRecord, node: str | None) -> Any:
        return errors.ErrorHandlerContext(
            rec.topic, rec.partition, rec.offset, rec.timestamp, rec.headers, node, self.id
        )

    def _on_processing_error(self, rec: StampedRecord, exc: Exception) -> None:
        if isinstance(exc, RUNTIME_FAILURES):
            raise exc  # the client failed, not the record: the thread rolls back and retries
        ctx = self._context_for(rec, None)
        cause = exc.__cause__ if isinstance(exc, StreamsException) and exc.__cause__ else exc
        # a StreamsException raised while processing wraps the processor's Exception
        decision = errors.decide(self._proc_handler, ctx, rec, cause)  # type: ignore[arg-type]
        self._dead_letter_processed(rec, ctx, cause)
        if decision is errors.Response.FAIL:
            raise exc
        self.dropped += 1
        self._creator.metrics.dropped_records += 1

    def _dead_letter_processed(self, rec: StampedRecord, ctx: Any, exc: BaseException) -> None:
        """The source record's bytes as consumed, with the failure in headers (KIP-1034's
        ``sourceRawKey`` / ``sourceRawValue``)."""
        if self._collector.dead_letter_topic:
            self._collector.send_dead_letter(ctx, rec.raw_key, rec.raw_value, exc)

    def _on_deserialization_error(self, raw: ConsumerRecord, exc: Exception) -> str:
        source = self.stream_task.source_for(raw.topic)
        ctx = self._context_for(raw, source.name if source is not None else "")
        decision = errors.decide(self._deser_handler, ctx, raw, exc)
        self._collector.send_dead_letter(ctx, raw.key, raw.value, exc)
        return decision.value

    def _on_skipped(self, reason: str, rec: Any) -> None:
        self.dropped += 1
        self._creator.metrics.dropped_records += 1

    def _on_dropped(self, reason: str) -> None:
        """A processor dropped a record (a late one, say)."""
        self.dropped += 1
        metrics = self._creator.metrics
        metrics.dropped_records += 1
        if reason == "late":
            metrics.late_records_dropped += 1

    def punctuate_wall_clock(self, now_ms: int) -> bool:
        if not self.stream_task.initialized:
            self._complete()
        return self.stream_task.maybe_punctuate_system_time(now_ms)

    # -- commit ---------------------------------------------------------------------------

    @property
    def commit_needed(self) -> bool:
        return self.stream_task.commit_needed

    def flush(self) -> None:
        """Flush stores (caches forward dirty entries; changelog records are sent)."""
        if not self.stream_task.initialized:
            self._complete()
        self.stream_task.commit()

    def committable_offsets(
        self, position: Callable[[tuple[str, int]], int | None]
    ) -> dict[tuple[str, int], int]:
        """Offsets to commit: the consumer position when a partition's buffer is empty
        (it covers skipped records and transaction markers), else last processed + 1.

        Every offset is committed with ``commit_metadata()[0][tp]`` as its metadata."""
        out = {}
        processed = self.partition_group.processed_offsets
        for tp in self.input_partitions:
            queue = self.partition_group.queues.get(tp)
            if not queue:
                pos = position(tp)
                if pos is not None and pos >= 0:
                    out[tp] = pos
                    continue
            last = processed.get(tp)
            if last is not None:
                out[tp] = last + 1
        self._offsets_known = bool(out)
        return out

    def commit_metadata(self) -> tuple[dict[tuple[str, int], str], bool]:
        """The offset commit metadata of each input partition, and whether the processor
        metadata changed since the last commit (Kafka's ``needsCommit``: the partitions are
        then committed even if their offsets did not move).

        The string is Kafka's ``TopicPartitionMetadata``: the partition time (here the task's
        stream time, the maximum of its partition times) and the processor metadata. The
        changed flag is reset once ``committable_offsets`` found an offset to commit it with:
        the caller commits, and if that fails the task is closed and rebuilt from what was
        committed."""
        task = self.stream_task
        if not task.initialized:
            self._complete()  # never commit before the committed metadata is read
        metadata = task.context.processor_metadata
        changed = metadata.needs_commit
        cached = self._metadata_cache
        if changed or cached is None or cached[0] != task.stream_time:
            cached = self._metadata_cache = (
                task.stream_time,
                processor_metadata.encode(task.stream_time, metadata),
            )
        if changed and self._offsets_known:
            metadata.needs_commit = False
        return dict.fromkeys(self.input_partitions, cached[1]), changed
