"""``KTable.suppress``: hold table updates back until a window closes or a time limit passes.

Ports of Kafka Streams 4.1 ``KTableSuppressProcessorSupplier`` (and its
``KTableSuppressProcessor``), ``FinalResultsSuppressionBuilder``/``SuppressedInternal``
(time definitions, tombstone rule), and the buffer ``InMemoryTimeOrderedKeyValueChangeBuffer``
(with ``BufferKey``, ``BufferValue`` and ``ProcessorRecordContext`` sizing/serialization).

Semantics:

* ``until_window_closes``: buffer time = the key's ``window.end``; the suppression duration is the
  grace period Kafka finds upstream (``GraphGraceSearchUtil``): ``grace`` for time/sliding
  windows, ``grace + gap`` for session windows. It is derived here by walking the ``parent``
  chain of table suppliers to the windowed aggregation (a supplier with ``windows``); when none
  is found, ``suppressed.time_to_wait_ms`` (>= 0, set by the DSL) is used; otherwise the topology
  is invalid. Buffered tombstones are dropped on eviction (``safeToDropTombstones``).
* ``until_time_limit``: buffer time = the record's timestamp; duration = ``time_to_wait_ms``;
  tombstones are forwarded.
* each record advances the processor's observed stream time, is buffered (an existing key keeps
  its place in the time order: "non-resetting"), then every entry with
  ``time <= streamTime - duration`` is evicted in ``(time, serialized key bytes)`` order; then,
  over capacity (``records > max_records or bytes > max_bytes``), ``emit_early`` evicts in the
  same order until under capacity and ``shut_down`` raises ``StreamsException``.
* an eviction forwards ``Change(new, old)`` of the latest buffered update, with the record
  context (timestamp, headers) of the record that last updated the entry.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from sortedcontainers import SortedDict

from streaming.dsl.change import Change
from streaming.dsl.processors.quiet_close import schedule_quiet_close
from streaming.dsl.processors.table import TableSupplier
from streaming.dsl.processors.table_getters import SuppressedValueGetterSupplier
from streaming.dsl.suppressed import Suppressed
from streaming.errors import StreamsException, TopologyException
from streaming.serdes import SessionWindowedSerde, TimeWindowedSerde, resolve
from streaming.state.api import changelog_topic
from streaming.state.java_hash_set import JavaHashSetOrder
from streaming.topology.processor import Processor, Record, RecordContext
from streaming.windowed import SessionWindow, Windowed

if TYPE_CHECKING:
    from streaming.runtime.context import TaskContext

LONG_MAX = (1 << 63) - 1
NO_TIMESTAMP = -1
#: Kafka's ``InMemoryTimeOrderedKeyValueChangeBuffer.CHANGELOG_HEADERS``: the value format
_CHANGELOG_HEADERS = (("v", b"\x03"),)

WINDOW_CLOSE = "window_close"
TIME_LIMIT = "time_limit"


#: the attributes that make a table supplier a windowed aggregation for the grace search
_AGGREGATION_MARKS = ("grace_for_suppression_ms", "windows")


def find_windowed_aggregation(supplier: Any) -> Any:
    """The nearest windowed aggregation up the ``parent`` chain (a supplier with ``windows``
    or its own suppression grace), or None."""
    seen = 0
    while supplier is not None and seen < 1000:
        if any(getattr(supplier, mark, None) is not None for mark in _AGGREGATION_MARKS):
            return supplier
        supplier = getattr(supplier, "parent", None)
        seen += 1
    return None


def find_window_grace_ms(supplier: Any) -> int | None:
    """Kafka's ``GraphGraceSearchUtil.findAndVerifyWindowGrace`` over the ``parent`` chain:
    the grace of the nearest windowed aggregation upstream (session windows: grace + gap)."""
    aggregation = find_windowed_aggregation(supplier)
    if aggregation is None:
        return None
    grace = getattr(aggregation, "grace_for_suppression_ms", None)
    if grace is not None:
        return grace()
    windows = aggregation.windows
    gap = getattr(windows, "gap_ms", None)
    grace_ms = windows.grace_period_ms()
    return grace_ms + gap if gap is not None else grace_ms


def find_close_quiet_ms(supplier: Any) -> int | None:
    """The quiet time of the nearest windowed aggregation upstream (``close_when_quiet``),
    which its window-close suppression shares; None: the application's setting."""
    return getattr(find_windowed_aggregation(supplier), "close_quiet_ms", None)


class KTableSuppressSupplier(TableSupplier):
    """``KTable.suppress(...)``: needs the parent's old values (for the buffer's prior value)."""

    store_name: str
    parent: TableSupplier

    def __init__(self, suppressed: Suppressed, store_name: str, parent: TableSupplier) -> None:
        self.suppressed = suppressed
        self.store_name = store_name
        self.parent = parent
        buffer = suppressed.buffer_config
        self.max_records = LONG_MAX if buffer.record_limit is None else buffer.record_limit
        self.max_bytes = LONG_MAX if buffer.byte_limit is None else buffer.byte_limit
        self.emit_when_full = buffer.on_full != "shut_down"
        #: the upstream aggregation's own quiet time (None: the application's setting)
        self.close_quiet_ms: int | None = None
        if suppressed.kind == WINDOW_CLOSE:
            self.close_quiet_ms = find_close_quiet_ms(parent)
            grace = find_window_grace_ms(parent)
            if grace is None:
                if suppressed.time_to_wait_ms is None or suppressed.time_to_wait_ms < 0:
                    raise TopologyException(
                        "Window close time is only defined for windowed computations. "
                        f"Got [{type(parent).__name__}]."
                    )
                grace = suppressed.time_to_wait_ms
            self.suppress_duration_ms = grace
            self.window_end_time = True
            self.safe_to_drop_tombstones = True
        elif suppressed.kind == TIME_LIMIT:
            self.suppress_duration_ms = suppressed.time_to_wait_ms
            self.window_end_time = False
            self.safe_to_drop_tombstones = False
        else:
            raise ValueError(f"unknown suppression kind {suppressed.kind!r}")
        # The suppress buffer requires seeing the old values, to support the prior value view.
        parent.enable_sending_old_values(True)

    def enable_sending_old_values(self, force_materialization: bool) -> bool:
        ok = self.parent.enable_sending_old_values(force_materialization)
        if ok:
            self.send_old_values = True
        return ok

    def __call__(self) -> Processor:
        return KTableSuppressProcessor(self)

    def view(self) -> SuppressedValueGetterSupplier:
        return SuppressedValueGetterSupplier(self.parent.view(), self.store_name)


class KTableSuppressProcessor(Processor):
    context: TaskContext  # the runtime context: record context and current node

    def __init__(self, supplier: KTableSuppressSupplier) -> None:
        self.s = supplier
        self.max_records = supplier.max_records
        self.max_bytes = supplier.max_bytes
        self.duration = supplier.suppress_duration_ms
        self.window_end_time = supplier.window_end_time
        self.safe_to_drop_tombstones = supplier.safe_to_drop_tombstones
        self.observed_stream_time = NO_TIMESTAMP

    def init(self, context: Any) -> None:
        super().init(context)
        buffer = context.get_state_store(self.s.store_name)
        if buffer is None:
            raise StreamsException(f"suppression buffer {self.s.store_name} not found")
        buffer.set_serdes_if_null(
            getattr(context, "default_key_serde", None),
            getattr(context, "default_value_serde", None),
        )
        self.buffer = buffer
        if self.window_end_time:  # until_window_closes: final results
            schedule_quiet_close(
                context,
                lambda: self.observed_stream_time,
                self._quiet_advance,
                self.s.close_quiet_ms,
            )

    def _quiet_advance(self, stream_time: int) -> None:
        """The input went quiet (the aggregation's ``close_when_quiet``, else
        ``window.close.quiet.ms``): stream time follows the wall clock, and the windows it
        closed leave the buffer now."""
        self.observed_stream_time = stream_time
        self._enforce_constraints()

    def process(self, record: Record) -> None:
        timestamp = record.timestamp
        if timestamp > self.observed_stream_time:
            self.observed_stream_time = timestamp
        rc = self.context.record_context()
        if rc is None:
            rc = RecordContext(timestamp, headers=record.headers)
        buffer_time = record.key.window.end if self.window_end_time else timestamp
        self.buffer.put(buffer_time, record.key, record.value, rc)
        self._enforce_constraints()

    def _enforce_constraints(self) -> None:
        buffer = self.buffer
        expiry_time = self.observed_stream_time - self.duration
        if buffer.min_timestamp <= expiry_time:
            buffer.evict_while(lambda: buffer.min_timestamp <= expiry_time, self._emit)
        if self._over_capacity():
            if self.s.emit_when_full:
                buffer.evict_while(self._over_capacity, self._emit)
                return
            raise StreamsException(
                f"{self._node_name()} buffer exceeded its max capacity. Currently "
                f"[{buffer.num_records()}/{self.max_records}] records and "
                f"[{buffer.buffer_size}/{self.max_bytes}] bytes."
            )

    def _over_capacity(self) -> bool:
        buffer = self.buffer
        return buffer.num_records() > self.max_records or buffer.buffer_size > self.max_bytes

    def _node_name(self) -> str | None:
        node = getattr(self.context, "current_node", None)
        return getattr(node, "name", None)

    def _emit(self, key: Any, change: Change, record_context: RecordContext) -> None:
        if change.new_value is None and self.safe_to_drop_tombstones:
            return
        context = self.context
        previous = context.record_context()
        context.set_record_context(record_context)
        try:
            context.forward(Record(key, change, record_context.timestamp, record_context.headers))
        finally:
            context.set_record_context(previous)


# ====================================================================== the buffer

_LONG = struct.Struct(">q")
_INT = struct.Struct(">i")
_NULL_VALUE_SENTINEL = -1
_OLD_PREV_DUPLICATE_VALUE_SENTINEL = -2


def _record_context_size(rc: RecordContext) -> int:
    """Kafka's ``ProcessorRecordContext.residentMemorySizeEstimate``."""
    size = 8 + 8 + 4  # timestamp, offset, partition
    if rc.topic is not None:
        size += len(rc.topic.encode("utf-16-be")) // 2
    for hkey, hvalue in rc.headers or ():
        size += len(hkey.encode("utf-16-be")) // 2
        if hvalue is not None:
            size += len(hvalue)
    return size


def _serialize_record_context(rc: RecordContext) -> bytes:
    """Kafka's ``ProcessorRecordContext.serialize``."""
    topic = (rc.topic or "").encode()
    parts = [_LONG.pack(rc.timestamp), _LONG.pack(rc.offset), _INT.pack(len(topic)), topic]
    parts.append(_INT.pack(rc.partition))
    headers = rc.headers or ()
    parts.append(_INT.pack(len(headers)))
    for hkey, hvalue in headers:
        kb = hkey.encode()
        parts.append(_INT.pack(len(kb)))
        parts.append(kb)
        if hvalue is None:
            parts.append(_INT.pack(-1))
        else:
            parts.append(_INT.pack(len(hvalue)))
            parts.append(hvalue)
    return b"".join(parts)


class BufferValue:
    """Kafka's ``BufferValue``: prior (first old value seen), old and new value bytes."""

    __slots__ = ("context", "new_value", "old_value", "prior_is_old", "prior_value")

    def __init__(
        self,
        prior_value: bytes | None,
        old_value: bytes | None,
        new_value: bytes | None,
        context: RecordContext,
    ) -> None:
        self.old_value = old_value
        self.new_value = new_value
        self.context = context
        # Kafka shares the reference when prior and old are equal (affects the size estimate)
        self.prior_is_old = prior_value == old_value
        self.prior_value = old_value if self.prior_is_old else prior_value

    def resident_memory_size_estimate(self) -> int:
        prior, old, new = self.prior_value, self.old_value, self.new_value
        return (
            (0 if prior is None else len(prior))
            + (0 if old is None or self.prior_is_old else len(old))
            + (0 if new is None else len(new))
            + _record_context_size(self.context)
        )

    def serialize(self, end_padding: bytes = b"") -> bytes:
        def add(value: bytes | None) -> bytes:
            return (
                _INT.pack(_NULL_VALUE_SENTINEL) if value is None else _INT.pack(len(value)) + value
            )

        if self.old_value is None:
            old = _INT.pack(_NULL_VALUE_SENTINEL)
        elif self.prior_is_old:
            old = _INT.pack(_OLD_PREV_DUPLICATE_VALUE_SENTINEL)
        else:
            old = _INT.pack(len(self.old_value)) + self.old_value
        return (
            _serialize_record_context(self.context)
            + add(self.prior_value)
            + old
            + add(self.new_value)
            + end_padding
        )


def _deserialize_buffer_value(data: bytes) -> tuple[BufferValue, int]:
    """Kafka's V3 changelog value: record context, prior, old, new, then the buffer time."""
    value, pos = read_buffer_value(data)
    (time,) = _LONG.unpack_from(data, pos)
    return value, time


def read_buffer_value(data: bytes) -> tuple[BufferValue, int]:
    """Kafka's ``BufferValue.deserialize``: the value and the position after it."""
    pos = 0
    timestamp, offset = struct.unpack_from(">qq", data, pos)
    pos += 16
    (n,) = _INT.unpack_from(data, pos)
    pos += 4
    topic = data[pos : pos + n].decode()
    pos += n
    partition, nheaders = struct.unpack_from(">ii", data, pos)
    pos += 8
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(max(nheaders, 0)):
        (n,) = _INT.unpack_from(data, pos)
        pos += 4
        hkey = data[pos : pos + n].decode()
        pos += n
        (n,) = _INT.unpack_from(data, pos)
        pos += 4
        if n < 0:
            headers.append((hkey, None))
        else:
            headers.append((hkey, data[pos : pos + n]))
            pos += n
    rc = RecordContext(timestamp, offset, partition, topic or None, tuple(headers))

    def take() -> bytes | None:
        nonlocal pos
        (n,) = _INT.unpack_from(data, pos)
        pos += 4
        if n < 0:
            return None
        value = data[pos : pos + n]
        pos += n
        return value

    prior = take()
    (n,) = _INT.unpack_from(data, pos)
    if n == _OLD_PREV_DUPLICATE_VALUE_SENTINEL:
        pos += 4
        old = prior
    else:
        old = take()
    new = take()
    return BufferValue(prior, old, new, rc), pos


def _record_size(key: bytes, value: BufferValue) -> int:
    return 8 + len(key) + value.resident_memory_size_estimate()


class InMemoryTimeOrderedKeyValueChangeBuffer:
    """Kafka's in-memory suppression buffer, ordered by ``(buffer time, key bytes)``."""

    persistent = False

    def __init__(
        self, name: str, key_serde: Any, value_serde: Any, logging_enabled: bool = True
    ) -> None:
        self.name = name
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.logging_enabled = logging_enabled
        self._index: dict[bytes, tuple[int, bytes]] = {}
        self._sorted: SortedDict = SortedDict()
        # logged in the order Kafka's HashSet<Bytes> of dirty keys iterates
        self._dirty = JavaHashSetOrder()
        self.buffer_size = 0
        self.min_timestamp = LONG_MAX
        self._open = False
        self.context: Any = None
        self.topic: str | None = None
        self._windowed_key_fallback = False

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self._open

    def init(self, context: Any, root: Any = None) -> None:
        self.context = context
        self.topic = changelog_topic(getattr(context, "application_id", ""), self.name)
        register = getattr(context, "register", None)
        if register is not None:
            register(root if root is not None else self, self._restore_batch)
        self._open = True

    def set_serdes_if_null(self, key_serde: Any, value_serde: Any) -> None:
        if self.key_serde is None:
            self.key_serde = key_serde
            # a windowed table with no key serde: Kafka would fail to serialize the Windowed
            # key with the plain default serde; we wrap it on the first windowed key instead
            self._windowed_key_fallback = True
        else:
            self.key_serde = resolve(self.key_serde, key_serde)
        self.value_serde = resolve(self.value_serde, value_serde)

    def flush(self) -> None:
        """Kafka logs the dirty keys on commit (before the record collector flushes)."""
        if not self.logging_enabled or not self._dirty:
            self._dirty.clear()
            return
        log_change = getattr(self.context, "log_change", None)
        if log_change is not None:
            # like Kafka: no record timestamp (the producer's clock), a version header on values
            for key in self._dirty:
                buffer_key = self._index.get(key)
                if buffer_key is None:
                    log_change(self.name, key, None, NO_TIMESTAMP)  # evicted: a tombstone
                else:
                    value = self._sorted[buffer_key]
                    log_change(
                        self.name,
                        key,
                        value.serialize(_LONG.pack(buffer_key[0])),
                        NO_TIMESTAMP,
                        _CHANGELOG_HEADERS,
                    )
        self._dirty.clear()

    def close(self) -> None:
        self._open = False
        self._index.clear()
        self._sorted.clear()
        self._dirty.clear()
        self.buffer_size = 0
        self.min_timestamp = LONG_MAX

    def _restore_batch(self, records: Any) -> None:
        """Restore from V3 changelog records ``(key, value, timestamp)``."""
        for record in records:
            key, value = record[0], record[1]
            if value is None:
                buffer_key = self._index.pop(key, None)
                if buffer_key is not None:
                    removed = self._sorted.pop(buffer_key, None)
                    if removed is not None:
                        self.buffer_size -= _record_size(key, removed)
                    if buffer_key[0] == self.min_timestamp:
                        self.min_timestamp = (
                            self._sorted.peekitem(0)[0][0] if self._sorted else LONG_MAX
                        )
            else:
                buffer_value, time = _deserialize_buffer_value(value)
                self._clean_put(time, key, buffer_value)

    # -- buffer API -----------------------------------------------------------------------

    def num_records(self) -> int:
        return len(self._index)

    def _serialize_key(self, key: Any) -> bytes:
        if self._windowed_key_fallback:
            self._windowed_key_fallback = False
            serde = self.key_serde
            if isinstance(key, Windowed) and not hasattr(serde, "with_default"):
                self.key_serde = (
                    SessionWindowedSerde(serde)
                    if isinstance(key.window, SessionWindow)
                    else TimeWindowedSerde(serde)
                )
        return self.key_serde.serialize(self.topic, key)

    def put(self, time: int, key: Any, change: Change, record_context: RecordContext) -> bool:
        if change is None:
            raise ValueError("value cannot be null")
        if record_context is None:
            raise ValueError("recordContext cannot be null")
        topic = self.topic
        key_bytes = self._serialize_key(key)
        vser = self.value_serde.serialize
        old = change.old_value
        new = change.new_value
        old_bytes = None if old is None else vser(topic, old)
        new_bytes = None if new is None else vser(topic, new)
        buffer_key = self._index.get(key_bytes)
        prior = old_bytes if buffer_key is None else self._sorted[buffer_key].prior_value
        self._clean_put(time, key_bytes, BufferValue(prior, old_bytes, new_bytes, record_context))
        if self.logging_enabled:
            self._dirty.add(key_bytes)
        return True

    def _clean_put(self, time: int, key: bytes, value: BufferValue) -> None:
        # non-resetting semantics: an already buffered key keeps its place in the time order
        previous_key = self._index.get(key)
        if previous_key is None:
            buffer_key = (time, key)
            self._index[key] = buffer_key
            self._sorted[buffer_key] = value
            if time < self.min_timestamp:
                self.min_timestamp = time
            self.buffer_size += _record_size(key, value)
        else:
            removed = self._sorted.get(previous_key)
            self._sorted[previous_key] = value
            self.buffer_size += _record_size(key, value) - (
                0 if removed is None else _record_size(key, removed)
            )

    def evict_while(self, predicate: Any, callback: Any) -> None:
        """Evict the oldest entries while ``predicate()`` holds: ``callback(key, Change, rc)``."""
        if not predicate():
            return
        sorted_map = self._sorted
        index = self._index
        topic = self.topic
        kdes = self.key_serde.deserialize
        vdes = self.value_serde.deserialize
        while sorted_map and predicate():
            buffer_key, value = sorted_map.peekitem(0)
            if buffer_key[0] != self.min_timestamp:
                raise RuntimeError(
                    f"minTimestamp [{self.min_timestamp}] did not match the actual min timestamp "
                    f"[{buffer_key[0]}]"
                )
            key_bytes = buffer_key[1]
            new, old = value.new_value, value.old_value
            callback(
                kdes(topic, key_bytes),
                Change(
                    None if new is None else vdes(topic, new),
                    None if old is None else vdes(topic, old),
                ),
                value.context,
            )
            del sorted_map[buffer_key]
            del index[key_bytes]
            if self.logging_enabled:
                self._dirty.add(key_bytes)
            self.buffer_size -= _record_size(key_bytes, value)
            self.min_timestamp = sorted_map.peekitem(0)[0][0] if sorted_map else LONG_MAX

    def prior_value_for_buffered(self, key: Any) -> tuple[bool, Any]:
        """Kafka's ``priorValueForBuffered``: (defined, prior value) for a buffered key."""
        buffer_key = self._index.get(self._serialize_key(key))
        if buffer_key is None:
            return False, None
        prior = self._sorted[buffer_key].prior_value
        return True, None if prior is None else self.value_serde.deserialize(self.topic, prior)


class SuppressBufferStoreBuilder:
    """Kafka's ``InMemoryTimeOrderedKeyValueChangeBuffer.Builder`` (caching calls are no-ops)."""

    def __init__(self, name: str, key_serde: Any, value_serde: Any, logging_enabled: bool) -> None:
        self.name = name
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.logging_enabled = logging_enabled
        self.caching_enabled = False
        self.log_config: dict[str, str] = {}

    def with_caching_enabled(self) -> SuppressBufferStoreBuilder:
        return self

    def with_caching_disabled(self) -> SuppressBufferStoreBuilder:
        return self

    def with_logging_enabled(
        self, config: dict[str, str] | None = None
    ) -> SuppressBufferStoreBuilder:
        self.logging_enabled = True
        self.log_config = dict(config or {})
        return self

    def with_logging_disabled(self) -> SuppressBufferStoreBuilder:
        self.logging_enabled = False
        return self

    def build(self) -> InMemoryTimeOrderedKeyValueChangeBuffer:
        return InMemoryTimeOrderedKeyValueChangeBuffer(
            self.name, self.key_serde, self.value_serde, self.logging_enabled
        )


def suppress_buffer_store_builder(
    name: str, key_serde: Any, value_serde: Any, logging_enabled: bool
) -> SuppressBufferStoreBuilder:
    return SuppressBufferStoreBuilder(name, key_serde, value_serde, logging_enabled)
