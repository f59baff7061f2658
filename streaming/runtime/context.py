"""The processor context of one task: forwarding, scheduling, stores, record metadata.

One object serves both as the processors' ``ProcessorContext`` and as the stores'
``StateStoreContext``, like Kafka Streams' ``ProcessorContextImpl``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from streaming.errors import StreamsException
from streaming.runtime.nodes import FixedKeyNode, ProcessorNode
from streaming.runtime.processor_metadata import ProcessorMetadata
from streaming.runtime.punctuation import PunctuationQueue, PunctuationSchedule
from streaming.time import to_millis
from streaming.topology.processor import PunctuationType, Record, RecordContext, context_of

if TYPE_CHECKING:
    from streaming.runtime.partition_group import Queued
    from streaming.runtime.task import StreamTask


class TaskContext:
    """Per-task context: the current node and record, stores, punctuation, output."""

    #: ``log_change(...)`` is ``changelog_writer(...)`` when one is set, else nothing: the
    #: change-logging store layers call the writer themselves (and read ``_record_context``)
    LOG_CHANGE_CALLS_WRITER: ClassVar[bool] = True

    def __init__(
        self,
        task: StreamTask,
        application_id: str,
        task_id: str,
        config: dict[str, Any],
        default_key_serde: Any,
        default_value_serde: Any,
        state_dir: Path | None,
        cache: Any,
        send: Callable[..., None],
        clock: Callable[[], int],
    ) -> None:
        self._task = task
        self.application_id = application_id
        self.task_id = task_id
        self.config = config
        self.app_configs = config
        self.default_key_serde = default_key_serde
        self.default_value_serde = default_value_serde
        self.state_dir = state_dir
        self.cache = cache
        self.send = send
        self._clock = clock
        self.current_node: ProcessorNode | None = None
        self._record_context: RecordContext | None = None
        #: the queued record being processed, while a batch entry leaves its record context
        #: unbuilt (``record_context()`` builds it when asked); None otherwise
        self.stamped: Queued | None = None
        self.stores: dict[str, Any] = {}
        #: name -> global store, set by whoever runs the global state (driver or runtime)
        self.global_stores: dict[str, Any] = {}
        self.stream_time_punctuations = PunctuationQueue()
        self.system_time_punctuations = PunctuationQueue()
        self.changelog_writer: Callable[[str, bytes, bytes | None, int, Any], None] | None = None
        #: exactly-once: persistent stores hold their writes until the runtime commits them
        #: (``streaming.state.api.TransactionalStore``)
        self.transactional_state = False
        self.restore_callbacks: dict[str, Callable[..., None]] = {}
        #: Kafka's per-task ``ProcessorMetadata`` (KIP-825): committed with the input offsets
        #: by the runtime, read back when the task is created
        self.processor_metadata = ProcessorMetadata()

    # -- ProcessorContext -------------------------------------------------------------

    def forward(self, record: Record, child_name: str | None = None) -> None:
        """Send ``record`` to every child of the current node (or only to ``child_name``)."""
        node = self.current_node
        previous_rc = self._record_context
        if previous_rc is not None and (
            record.timestamp != previous_rc.timestamp or record.headers is not previous_rc.headers
        ):
            self._record_context = RecordContext(
                record.timestamp,
                previous_rc.offset,
                previous_rc.partition,
                previous_rc.topic,
                record.headers,
            )
        try:
            if type(node) is FixedKeyNode and record.key is not node.current_key:
                record = record.with_key(node.current_key)
            if child_name is None:
                for child in node.children:  # type: ignore[union-attr]
                    self.current_node = child
                    child.handle(record)
            else:
                child = node.children_by_name.get(child_name)  # type: ignore[union-attr]
                if child is None:
                    raise StreamsException(
                        f"Unknown downstream node: {child_name} either does not exist or is "
                        f"not connected to this processor ({node.name})."  # type: ignore[union-attr]
                    )
                self.current_node = child
                child.handle(record)
        finally:
            self.current_node = node
            self._record_context = previous_rc

    def record_dropped(self, reason: str) -> None:
        """The current node dropped the record it processes, for ``reason`` ("late": a
        closed window): counted on the task's dropped-records sensor."""
        self._task.record_dropped(reason)

    def schedule(
        self,
        interval: int | timedelta,
        punctuation_type: PunctuationType,
        punctuator: Callable[[int], None],
    ) -> PunctuationSchedule:
        """Call ``punctuator(timestamp)`` every ``interval`` of stream or wall-clock time."""
        ms = to_millis(interval, "punctuation interval")
        if ms < 1:
            raise ValueError("The minimum supported scheduling interval is 1 millisecond.")
        node = self.current_node
        if punctuation_type is PunctuationType.STREAM_TIME:
            # aligned to 0: punctuates as soon as there is data
            return self.stream_time_punctuations.schedule(
                PunctuationSchedule(node, 0, ms, punctuator)
            )
        if punctuation_type is PunctuationType.WALL_CLOCK_TIME:
            return self.system_time_punctuations.schedule(
                PunctuationSchedule(node, self._clock() + ms, ms, punctuator)
            )
        raise ValueError(f"unknown punctuation type {punctuation_type!r}")

    def get_state_store(self, name: str) -> Any:
        node = self.current_node
        store = self.stores.get(name)
        if store is None:
            # global stores are readable from every processor (Kafka's ProcessorContextImpl)
            global_store = self.global_stores.get(name)
            if global_store is not None:
                return global_store
        if store is None or (node is not None and name not in node.stores):
            raise StreamsException(
                f"Processor {node.name if node else None} has no access to StateStore {name} as "
                "the store is not connected to the processor. If you add stores manually via "
                "add_state_store(), make sure to connect the added store to the processor by "
                "providing the processor name to add_state_store() or connect them via "
                "connect_processor_and_state_stores()."
            )
        return store

    def record_metadata(self) -> RecordContext | None:
        rc = self.record_context()
        if rc is None or rc.topic is None:
            return None
        return rc

    def current_stream_time_ms(self) -> int:
        return self._task.stream_time

    def current_system_time_ms(self) -> int:
        return self._clock()

    def commit(self) -> None:
        self._task.commit_requested = True

    def set_current_node(self, node: ProcessorNode | None) -> None:
        self.current_node = node

    def processor_metadata_for_key(self, key: str) -> int | None:
        """Kafka's ``processorMetadataForKey``: a value committed with the input offsets."""
        return self.processor_metadata.get(key)

    def add_processor_metadata_key_value(self, key: str, value: int) -> None:
        """Kafka's ``addProcessorMetadataKeyValue``: the next commit carries ``key``."""
        self.processor_metadata.add(key, value)

    # -- StateStoreContext ------------------------------------------------------------

    def record_context(self) -> RecordContext | None:
        """The current record's context: the one set, else that of the queued record a
        batch entry runs without building one (``stamped``), built now and kept as set."""
        rc = self._record_context
        if rc is None and self.stamped is not None:
            rc = self._record_context = context_of(self.stamped)
        return rc

    def set_record_context(self, rc: RecordContext | None) -> None:
        self._record_context = rc

    def register(self, store: Any, restore_callback: Callable[..., None] | None = None) -> None:
        if restore_callback is not None:
            self.restore_callbacks[store.name] = restore_callback

    def log_change(
        self,
        store_name: str,
        key: bytes,
        value: bytes | None,
        timestamp: int,
        headers: Any = (),
    ) -> None:
        """Write one changelog record (see ``LOG_CHANGE_CALLS_WRITER``: keep the two in step)."""
        writer = self.changelog_writer
        if writer is not None:
            writer(store_name, key, value, timestamp, headers)
