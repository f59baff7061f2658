"""A stream task: one instance of (part of) a topology, with its stores and record queues.

Records are deserialised and time-stamped when they enter the task's ``PartitionGroup``
(one queue per input partition); ``process()`` takes the queued record with the smallest
timestamp from it and runs it through the processor graph: the one processing loop of the
runtime and of the test driver.
"""

from __future__ import annotations

import collections
import logging
import re
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from streaming import serdes as serdes_mod
from streaming.errors import SerializationError, StreamsException
from streaming.runtime.batch import BatchPlan, batch_enabled
from streaming.runtime.context import TaskContext
from streaming.runtime.nodes import FixedKeyNode, ProcessorNode, SinkNode, SourceNode
from streaming.runtime.partition_group import (
    TIMESTAMP,
    UNKNOWN,
    PartitionGroup,
    Queued,
    StampedRecord,
    as_stamped,
)
from streaming.runtime.processor_metadata import ProcessorMetadata
from streaming.runtime.punctuation import PunctuationSchedule
from streaming.serdes import fast as fast_serdes
from streaming.time import RecordTimestampExtractor, as_extractor
from streaming.topology import graph, nodes
from streaming.topology.processor import NO_HEADERS, Headers, Record, RecordContext

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ConsumerRecord:
    """A record as read from a topic: raw key/value bytes and its coordinates."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers = NO_HEADERS


class _Consumed:
    """What a timestamp extractor sees: the coordinates plus the deserialised key/value."""

    __slots__ = ("headers", "key", "offset", "partition", "timestamp", "topic", "value")

    def __init__(self, raw: ConsumerRecord, key: Any, value: Any) -> None:
        self.topic = raw.topic
        self.partition = raw.partition
        self.offset = raw.offset
        self.timestamp = raw.timestamp
        self.headers = raw.headers
        self.key = key
        self.value = value


class _Input:
    """How one input partition's records are decoded and stamped: its serdes'
    ``deserialize``, its timestamp extractor (None: the record's own timestamp), the
    serdes' one-argument equivalents (None unless both have one) and its queue's
    ``append`` (None until a record of it is queued)."""

    __slots__ = ("append", "extractor", "fast", "key_de", "tp", "value_de")

    def __init__(
        self,
        tp: tuple[str, int],
        key_de: Callable[[str, Any], Any],
        value_de: Callable[[str, Any], Any],
        extractor: Any,
        fast: tuple[Callable[[Any], Any], Callable[[Any], Any]] | None,
    ) -> None:
        self.tp = tp
        self.key_de = key_de
        self.value_de = value_de
        self.extractor = extractor
        self.fast = fast
        self.append: Callable[[Queued], None] | None = None


DeserializationHandler = Callable[[ConsumerRecord, Exception], str]


def default_deserialization_handler(raw: ConsumerRecord, exc: Exception) -> str:
    """Kafka's ``LogAndFailExceptionHandler``: stop processing."""
    return "fail"


class StreamTask:
    """Runs the nodes of one sub-topology (or, in the test driver, all of them)."""

    def __init__(
        self,
        task_id: str,
        topology: graph.Topology,
        node_names: Iterable[str],
        *,
        application_id: str,
        config: dict[str, Any],
        send: Callable[..., None],
        clock: Callable[[], int],
        state_dir: Path | None = None,
        cache: Any = None,
        partition: int = 0,
        caching_enabled: bool = True,
        deserialization_handler: DeserializationHandler = default_deserialization_handler,
        on_skipped: Callable[[str, StampedRecord | ConsumerRecord], None] | None = None,
        on_dropped: Callable[[str], None] | None = None,
    ) -> None:
        self.id = task_id
        self.topology = topology
        self.partition = partition
        self.application_id = application_id
        self.partition_group = PartitionGroup()
        self.commit_requested = False
        self.commit_needed = False
        self.processed = 0
        self._deserialization_handler = deserialization_handler
        self._on_skipped = on_skipped
        self._on_dropped = on_dropped
        #: records its processors dropped (Kafka's dropped-records sensor), by reason
        self.dropped_by_processors: collections.Counter[str] = collections.Counter()
        names = set(node_names)
        key_serde = serdes_mod.from_config(config.get("default.key.serde", serdes_mod.Json))
        value_serde = serdes_mod.from_config(config.get("default.value.serde", serdes_mod.Json))
        default_extractor = as_extractor(
            config.get("default.timestamp.extractor") or RecordTimestampExtractor()
        )
        assert default_extractor is not None  # as_extractor keeps a non-None extractor
        self._default_extractor = default_extractor
        self.context = TaskContext(
            self,
            application_id,
            task_id,
            config,
            key_serde,
            value_serde,
            state_dir,
            cache,
            send,
            clock,
        )
        self.nodes: dict[str, ProcessorNode] = {}
        self.sources: dict[str, SourceNode] = {}
        for name, node_def in topology.nodes.items():
            if name not in names:
                continue
            self.nodes[name] = self._build_node(node_def, application_id)
        for name, node in self.nodes.items():
            for child in topology.nodes[name].children:
                if child in self.nodes:
                    child_def = topology.nodes[child]
                    node.add_child(
                        self.nodes[child],
                        side_output=getattr(child_def, "side_output", False),
                    )
        #: (pattern, source) of pattern-subscribed sources, matched on first sight of a topic
        self._pattern_sources: list[tuple[re.Pattern[str], SourceNode]] = []
        for name, node in self.nodes.items():
            if isinstance(node, SourceNode):
                for topic in node.topics:
                    self.sources[topic] = node
                pattern = getattr(topology.nodes[name], "pattern", None)
                if pattern is not None:
                    self._pattern_sources.append((pattern, node))
        self.store_builders = self._stores_in_order(names)
        if not caching_enabled:
            for builder in self.store_builders:
                builder.with_caching_disabled()
        self._stores_open = False
        self._built: dict[str, Any] | None = None
        self._initialized = False
        self._batch_enabled = batch_enabled(config)
        #: the batch entries (``streaming.runtime.batch``), once the processors are initialized
        self.batch_plan: BatchPlan | None = None

    @property
    def stream_time(self) -> int:
        """The largest timestamp processed so far (``UNKNOWN`` before the first record)."""
        return self.partition_group.stream_time

    @stream_time.setter
    def stream_time(self, value: int) -> None:
        self.partition_group.stream_time = value

    # -- construction -----------------------------------------------------------------

    def _build_node(self, node_def: nodes.NodeDef, application_id: str) -> ProcessorNode:
        if isinstance(node_def, nodes.SourceNode):
            topics = [self.topology.decorate(t, application_id) for t in node_def.topics]
            return SourceNode(
                node_def.name,
                topics,
                node_def.key_serde,
                node_def.value_serde,
                node_def.timestamp_extractor,
            )
        if isinstance(node_def, nodes.SinkNode):
            topic = (
                self.topology.decorate(node_def.topic, application_id)
                if node_def.topic is not None
                else None
            )
            return SinkNode(
                node_def.name,
                topic,
                node_def.topic_extractor,
                node_def.key_serde,
                node_def.value_serde,
                node_def.partitioner,
            )
        cls = FixedKeyNode if node_def.fixed_key else ProcessorNode
        return cls(node_def.name, node_def.supplier(), node_def.stores)

    def _stores_in_order(self, names: set[str]) -> list[Any]:
        order: list[Any] = []
        seen: set[str] = set()
        for name, node_def in self.topology.nodes.items():
            if name in names and isinstance(node_def, nodes.ProcessorNodeDef):
                for store in node_def.stores:
                    if store not in seen:
                        seen.add(store)
                        order.append(self.topology.store_builders[store])
        return order

    def initialize_metadata(self, stream_time: int, metadata: ProcessorMetadata) -> None:
        """Before ``initialize_topology``: the stream time and processor metadata committed
        with the input offsets (Kafka's ``initializeTaskTimeAndProcessorMetadata``);
        processors read the metadata in ``init``."""
        if self._initialized:
            raise StreamsException(f"task {self.id} is already initialized")
        if stream_time > self.stream_time:
            self.stream_time = stream_time
        self.context.processor_metadata = metadata

    @property
    def initialized(self) -> bool:
        """True once the processors are initialized (``initialize_topology``)."""
        return self._initialized

    def record_dropped(self, reason: str) -> None:
        """A processor dropped the record it processes (``reason``: "late" for a closed
        window): Kafka's task-level dropped-records sensor."""
        self.dropped_by_processors[reason] += 1
        if self._on_dropped is not None:
            self._on_dropped(reason)

    def initialize(self) -> None:
        """Build and open the stores, then ``init`` every processor (in topology order)."""
        self.initialize_stores()
        self.initialize_topology()

    def build_stores(self) -> dict[str, Any]:
        """The task's stores, built but not yet open (once; ``initialize_stores`` opens
        them): what a store keeps on disk can be looked at before it opens."""
        if self._built is None:
            self._built = {builder.name: builder.build() for builder in self.store_builders}
        return self._built

    def initialize_stores(self) -> None:
        """Build and open the stores (they register their changelog restore callbacks)."""
        if self._stores_open:
            return
        context = self.context
        for name, store in self.build_stores().items():
            context.current_node = None
            store.init(context, store)
            context.stores[name] = store
        # the sources decode records as soon as they are fetched, before the processors are
        # initialized: their serdes (defaults filled in) are resolved now
        sources = [*self.sources.values(), *(node for _, node in self._pattern_sources)]
        for source in {id(s): s for s in sources}.values():
            context.current_node = source
            source.init(context)
        context.current_node = None
        self._stores_open = True

    def initialize_topology(self) -> None:
        """``init`` every processor in topology order (Kafka does it once the stores are
        restored and the task's metadata is read: ``completeRestoration``)."""
        if self._initialized:
            return
        self.initialize_stores()
        context = self.context
        for node in self.nodes.values():
            context.current_node = node
            node.init(context)
        context.current_node = None
        if self._batch_enabled:
            self.batch_plan = BatchPlan(self)
        self._initialized = True

    # -- input ------------------------------------------------------------------------

    def _input(self, tp: tuple[str, int]) -> _Input:
        """How records of ``tp`` are decoded and stamped (looked up once per call)."""
        source = self.source_for(tp[0])
        if source is None:
            raise StreamsException(f"task {self.id} does not consume topic {tp[0]}")
        extractor = source.timestamp_extractor or self._default_extractor
        if extractor.__class__ is RecordTimestampExtractor:
            extractor = None
        key_serde, value_serde = source.key_serde, source.value_serde
        fast_key, fast_value = (
            fast_serdes.deserializer(key_serde),
            fast_serdes.deserializer(value_serde),
        )
        fast = None if fast_key is None or fast_value is None else (fast_key, fast_value)
        found = _Input(tp, key_serde.deserialize, value_serde.deserialize, extractor, fast)
        queue = self.partition_group.queues.get(tp)
        if queue is not None:
            found.append = queue.append
        return found

    def add_records(self, records: Iterable[ConsumerRecord]) -> None:
        """Deserialise, time-stamp and queue consumed records (the source, its serdes and
        extractor looked up once per partition and call).

        A record of a built-in pure key and value serde and the record-time extractor
        (the common case) is decoded by the serdes' one-argument equivalents
        (``streaming.serdes.fast``) and queued at once; any other record, or one they
        refuse, goes through ``_add_record``, the serdes, the extractor and the handlers."""
        inputs: dict[tuple[str, int], _Input] = {}
        topic: Any = None
        partition = -1
        found: Any = None
        fast: Any = None
        append: Any = None
        for raw in records:
            if raw.topic is not topic or raw.partition != partition:
                topic, partition = raw.topic, raw.partition
                tp = (topic, partition)
                found = inputs.get(tp)
                if found is None:
                    found = inputs[tp] = self._input(tp)
                fast = found.fast if found.extractor is None else None
                append = found.append
            if fast is not None and append is not None:
                timestamp = raw.timestamp
                if timestamp >= 0:
                    raw_key = raw.key
                    raw_value = raw.value
                    try:
                        key = fast[0](raw_key)
                        value = fast[1](raw_value)
                    except fast_serdes.FALLBACK_ERRORS:
                        pass
                    else:
                        append(
                            (
                                topic,
                                partition,
                                raw.offset,
                                timestamp,
                                key,
                                value,
                                raw.headers,
                                raw_key,
                                raw_value,
                            )
                        )
                        continue
            self._add_record(raw, found)
            append = found.append

    def _add_record(self, raw: ConsumerRecord, found: _Input) -> None:
        """Deserialise, time-stamp and queue one record through its serdes, extractor and
        the handlers (a failure's handler may skip it)."""
        try:
            key = found.key_de(raw.topic, raw.key)
            value = found.value_de(raw.topic, raw.value)
        except (SerializationError, ValueError, TypeError) as exc:
            if self._deserialization_handler(raw, exc) == "continue":
                # the handler tells the user (log_and_continue: a WARNING per record)
                log.debug(
                    "Skipping record %s-%s@%s: deserialization failed: %s",
                    raw.topic,
                    raw.partition,
                    raw.offset,
                    exc,
                )
                if self._on_skipped is not None:
                    self._on_skipped("deserialization-error", raw)
                return
            raise StreamsException(
                f"Deserialization exception handler is set to fail upon a deserialization "
                f"error. A deserialization error occurred for {raw.topic}-{raw.partition} at "
                f"offset {raw.offset}: {exc}"
            ) from exc
        extractor = found.extractor
        if extractor is None:
            timestamp = raw.timestamp
        else:
            partition_time = self.partition_group.partition_time(found.tp)
            timestamp = extractor.extract(_Consumed(raw, key, value), partition_time)
        stamped = StampedRecord(
            raw.topic,
            raw.partition,
            raw.offset,
            timestamp,
            key,
            value,
            raw.headers,
            raw.key,
            raw.value,
        )
        if timestamp < 0:
            log.warning(
                "Skipping record %s-%s@%s due to invalid (negative) timestamp %s",
                raw.topic,
                raw.partition,
                raw.offset,
                timestamp,
            )
            if self._on_skipped is not None:
                self._on_skipped("negative-timestamp", stamped)
            return
        if found.append is None:
            # the queue exists once a record of its partition is queued
            found.append = self.partition_group.queue(found.tp).append
        found.append(stamped)

    def add_messages(self, topic: str, partition: int, msgs: Iterable[Any]) -> None:
        """``add_records`` straight from confluent-kafka ``Message`` objects of one input
        partition (the hot path).

        The common case (key and value deserialise, timestamp >= 0) queues the stamped
        record directly, decoded by the serdes' one-argument equivalents where they have
        them (``streaming.serdes.fast``), its timestamp the record's own or, from an
        extractor with a ``timestamp_of_value(value)`` (None: the record's own), the
        decoded value's; anything else goes through ``add_records``."""
        source = self.source_for(topic)
        if source is None:
            raise StreamsException(f"task {self.id} does not consume topic {topic}")
        key_de = fast_serdes.deserializer(source.key_serde)
        if key_de is None:
            key_de = partial(source.key_serde.deserialize, topic)
        value_de = fast_serdes.deserializer(source.value_serde)
        if value_de is None:
            value_de = partial(source.value_serde.deserialize, topic)
        extractor = source.timestamp_extractor or self._default_extractor
        plain = extractor.__class__ is RecordTimestampExtractor
        of_value = None if plain else getattr(extractor, "timestamp_of_value", None)
        fast = plain or of_value is not None
        append = self.partition_group.queue((topic, partition)).append
        for msg in msgs:
            headers = msg.headers()
            headers = tuple(headers) if headers else NO_HEADERS
            record_time = msg.timestamp()[1]
            raw_key = msg.key()
            raw_value = msg.value()
            if fast:
                try:
                    key = key_de(raw_key)
                    value = value_de(raw_value)
                except (SerializationError, ValueError, TypeError):
                    pass  # the handlers run in add_records
                else:
                    timestamp = record_time
                    if of_value is not None:
                        extracted = of_value(value)
                        if extracted is not None:
                            timestamp = extracted
                    if timestamp >= 0:
                        append(
                            (
                                topic,
                                partition,
                                msg.offset(),
                                timestamp,
                                key,
                                value,
                                headers,
                                raw_key,
                                raw_value,
                            )
                        )
                        continue
            self.add_records(
                (
                    ConsumerRecord(
                        topic, partition, msg.offset(), record_time, raw_key, raw_value, headers
                    ),
                )
            )

    def has_records(self) -> bool:
        return self.partition_group.has_records()

    # -- processing -------------------------------------------------------------------

    def process(
        self,
        limit: int = 1,
        *,
        on_error: Callable[[StampedRecord, Exception], None] | None = None,
        ready: Callable[[], bool] | None = None,
        until: int | None = None,
    ) -> int:
        """Process up to ``limit`` queued records, the smallest timestamp first, each
        followed by the stream-time punctuations it makes due; returns how many.

        ``ready`` (asked before each record) ends the batch early when it says no (a task
        idling for an empty partition); ``until`` ends it at the first record with a later
        timestamp (event-time alignment); ``on_error`` handles a record's processing failure
        instead of raising it (the exception handlers of a running application)."""
        group = self.partition_group
        queues = group.queues
        if ready is None and len(queues) == 1:
            ((tp, queue),) = queues.items()
            plan = self.batch_plan
            entry = None if plan is None else plan.entry(self.sources[tp[0]])
            if entry is not None:
                return entry(tp, queue, limit, on_error, until)
            return self._process_queue(tp, queue, limit, on_error, until)
        next_record = group.next_record
        process_stamped = self.process_stamped
        context = self.context
        n = 0
        while n < limit:
            if ready is not None and not ready():
                break
            rec = next_record(until)
            if rec is None:
                break
            if on_error is None:
                process_stamped(rec)
            else:
                try:
                    process_stamped(rec)
                except Exception as exc:
                    on_error(rec, exc)
            if context.stream_time_punctuations:
                self.maybe_punctuate_stream_time()
            n += 1
        return n

    def _process_queue(
        self,
        tp: tuple[str, int],
        queue: deque[Queued],
        limit: int,
        on_error: Callable[[StampedRecord, Exception], None] | None,
        until: int | None = None,
    ) -> int:
        """``process`` of a task with one input partition (the common case), ``queue``: the
        same steps without choosing a partition per record, and the processed offset
        recorded once, for the last record taken."""
        group = self.partition_group
        process_stamped = self.process_stamped
        punctuations = self.context.stream_time_punctuations.heap
        n = 0
        rec = None
        try:
            while n < limit and queue:
                if until is not None and queue[0][TIMESTAMP] > until:
                    break
                rec = as_stamped(queue.popleft())
                if rec.timestamp > group.stream_time:
                    group.stream_time = rec.timestamp
                if on_error is None:
                    process_stamped(rec)
                else:
                    try:
                        process_stamped(rec)
                    except Exception as exc:
                        on_error(rec, exc)
                if punctuations:
                    self.maybe_punctuate_stream_time()
                n += 1
        finally:
            if rec is not None:
                group.processed_offsets[tp] = rec.offset
        return n

    def source_for(self, topic: str) -> SourceNode | None:
        """The source node reading ``topic``: by name, else the first pattern that matches it
        in full (Java's ``Pattern.matcher(topic).matches()``), remembered for next time."""
        source = self.sources.get(topic)
        if source is None:
            for pattern, node in self._pattern_sources:
                if pattern.fullmatch(topic):
                    self.sources[topic] = source = node
                    break
        return source

    def process_stamped(self, rec: StampedRecord) -> None:
        """Run one queued record through the sub-topology (through its source's batch entry
        when the task has one)."""
        context = self.context
        source = self.sources[rec.topic]
        plan = self.batch_plan
        if plan is not None:
            run_one = plan.run_one(source)
            if run_one is not None:
                run_one(rec)
                return
        context._record_context = RecordContext(
            rec.timestamp, rec.offset, rec.partition, rec.topic, rec.headers
        )
        context.current_node = source
        try:
            source.process(Record(rec.key, rec.value, rec.timestamp, rec.headers))
        except StreamsException:
            raise
        except Exception as exc:
            raise StreamsException(
                f"Exception caught in process. taskId={self.id}, processor={source.name}, "
                f"topic={rec.topic}, partition={rec.partition}, offset={rec.offset}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        finally:
            context.current_node = None
            context._record_context = None
        self.processed += 1
        self.commit_needed = True

    def _fire(self, sched: PunctuationSchedule, now: int) -> None:
        context = self.context
        if self.batch_plan is not None:
            # a punctuator may read the stores: the windows a batch folds are written first
            self.batch_plan.flush_folds()
        context.current_node = sched.node
        context._record_context = RecordContext(now)
        try:
            sched.punctuator(now)
        finally:
            context.current_node = None
            context._record_context = None
        self.commit_needed = True

    def maybe_punctuate_stream_time(self) -> bool:
        if self.stream_time == UNKNOWN or not self.context.stream_time_punctuations:
            return False
        return self.context.stream_time_punctuations.maybe_punctuate(self.stream_time, self._fire)

    def maybe_punctuate_system_time(self, now: int) -> bool:
        if not self.context.system_time_punctuations:
            return False
        return self.context.system_time_punctuations.maybe_punctuate(now, self._fire)

    # -- commit / close ---------------------------------------------------------------

    def flush(self) -> None:
        """Flush every store (caches forward their dirty entries) in registration order."""
        for builder in self.store_builders:
            self.context.stores[builder.name].flush()

    def commit(self) -> None:
        self.flush()
        self.commit_needed = False
        self.commit_requested = False

    def close(self, *, flush: bool = True) -> None:
        if not self._stores_open:
            return
        try:
            if flush:
                self.flush()
            if self._initialized:
                for node in self.nodes.values():
                    node.close()
        finally:
            # every store is closed, whatever one of them raises (like Kafka's closeDirty):
            # a store left open keeps its RocksDB lock and the rebuilt task cannot open it
            failure: BaseException | None = None
            for store in self.context.stores.values():
                try:
                    store.close()
                except Exception as exc:
                    failure = failure or exc
            self._initialized = False
            self.batch_plan = None
            self._stores_open = False
            self._built = None
            if failure is not None:
                raise failure
