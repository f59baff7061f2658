"""KStream-KTable join processor (Kafka's KStreamKTableJoin / KStreamKTableJoinProcessor).

Only stream records trigger the join; the table side is read through the table's value getter:
its current row, or, for a versioned table, the row as of the stream record's timestamp. Stream
records with a null value are dropped; so are null keys, except in a left join (KIP-962), which
joins them with a null table value. The result keeps the stream record's key and timestamp.

With a grace period (versioned tables only) stream records wait in a time-ordered buffer
(Kafka's RocksDBTimeOrderedKeyValueBuffer) until the buffer's stream time passes their timestamp
plus the grace period; they are then joined in (timestamp, serialized key, arrival) order. A
record already older than that is joined at once. The buffer is logged (Kafka's changelog
layout: the time-first store key, and a ``BufferValue`` holding the record context and the
serialized value) and restored from its changelog, so a buffered record survives a crash or
a task migration.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sortedcontainers import SortedDict

from streaming.dsl.processors.suppress import BufferValue, read_buffer_value
from streaming.errors import StreamsException
from streaming.state.api import StateStore, StateStoreContext, changelog_topic
from streaming.topology.processor import Processor, Record, RecordContext

if TYPE_CHECKING:
    from streaming.runtime.context import TaskContext

log = logging.getLogger(__name__)

GRACE_NEEDS_VERSIONED = "KTable must be versioned to use a grace period in a stream table join."


class KStreamKTableJoinSupplier:
    """Creates join processors reading the table through ``getter_supplier``."""

    def __init__(
        self,
        getter_supplier: Any,
        joiner: Callable[[Any, Any, Any], Any],
        left_join: bool,
        grace_period_ms: int | None,
        buffer_store_name: str | None,
    ) -> None:
        self.getter_supplier = getter_supplier
        self.joiner = joiner
        self.left_join = left_join
        self.grace_period_ms = grace_period_ms
        self.buffer_store_name = buffer_store_name

    def __call__(self) -> Processor:
        return KStreamKTableJoinProcessor(self)


class KStreamKTableJoinProcessor(Processor):
    context: TaskContext  # the runtime context: record context and current node

    def __init__(self, supplier: KStreamKTableJoinSupplier) -> None:
        self.s = supplier
        self.getter = supplier.getter_supplier.get()
        self.joiner = supplier.joiner
        self.left_join = supplier.left_join
        self.buffer: TimeOrderedJoinBuffer | None = None

    def init(self, context: Any) -> None:
        super().init(context)
        self.getter.init(context)
        self.versioned = self.getter.is_versioned()
        if self.s.grace_period_ms is not None:
            if not self.versioned:
                raise ValueError(GRACE_NEEDS_VERSIONED)
            self.buffer = context.get_state_store(self.s.buffer_store_name)

    def process(self, record: Record) -> None:
        key = record.key
        value = record.value
        if value is None or (key is None and not self.left_join):
            log.warning(
                "Skipping record due to null join key or value. topic=%s",
                self.context.record_metadata(),
            )
            return
        buffer = self.buffer
        if buffer is None or not buffer.put(record, self.context.record_context()):
            self._join(record)
        else:
            buffer.evict(self._emit)

    def _emit(self, record: Record, record_context: Any) -> None:
        context = self.context
        previous = context.record_context()
        context.set_record_context(record_context)
        try:
            self._join(record)
        finally:
            context.set_record_context(previous)

    def _join(self, record: Record) -> None:
        key = record.key
        table_value = None
        if key is not None:
            getter = self.getter
            vat = getter.get_as_of(key, record.timestamp) if self.versioned else getter.get(key)
            if vat is not None:
                table_value = vat.value
        if table_value is not None or self.left_join:
            self.context.forward(record.with_value(self.joiner(key, record.value, table_value)))

    def close(self) -> None:
        self.getter.close()


# ------------------------------------------------------------------------------ the buffer

#: Kafka's ``PrefixedWindowKeySchemas.TimeFirstWindowKeySchema`` prefix of a store key
_TIME_FIRST_PREFIX = b"\x00"
#: the buffer time Kafka's ``RocksDBTimeOrderedKeyValueBuffer.logValue`` appends (always 0)
_BUFFER_TIME = bytes(8)


class TimeOrderedJoinBuffer(StateStore):
    """Stream records waiting for the grace period, ordered by (timestamp, key bytes, seqnum).

    ``put`` refuses a record older than the buffer's stream time (the highest buffered
    timestamp) minus the grace period; ``evict`` hands over, in order, every record at or before
    that bound. Each put and eviction is written to the changelog (key: the time-first store
    key ``timestamp | serialized key | seqnum``; value: Kafka's ``BufferValue`` with the record
    context and the serialized stream value; an eviction is a tombstone) and restored from it.
    The changelog records are Kafka's ``RocksDBTimeOrderedKeyValueBuffer``'s byte for byte: the
    key has the time-first prefix byte, the value ends with an 8-byte buffer time (0), and
    neither carries a timestamp (the producer's clock) nor headers.
    """

    def __init__(
        self, name: str, key_serde: Any, value_serde: Any, grace_ms: int, logging_enabled: bool
    ) -> None:
        self.name = name
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.grace_ms = grace_ms
        self.logging_enabled = logging_enabled
        self.observed_stream_time = -1
        self.seqnum = 0
        self._entries: SortedDict = SortedDict()
        self._open = False

    @property
    def persistent(self) -> bool:
        return False

    @property
    def is_open(self) -> bool:
        return self._open

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self.context = context
        self.topic = changelog_topic(context.application_id, self.name)
        key_serde = self.key_serde or context.default_key_serde
        value_serde = self.value_serde or context.default_value_serde
        self._kser = key_serde.serialize
        self._vser = value_serde.serialize
        self._kdes = key_serde.deserialize
        self._vdes = value_serde.deserialize
        register = getattr(context, "register", None)
        if register is not None:
            register(root if root is not None else self, self._restore_batch)
        self._open = True

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self._entries.clear()
        self._open = False

    def _restore_batch(self, records: Any) -> None:
        """Replay changelog records ``(key, value, timestamp)``: puts and evictions."""
        entries = self._entries
        topic = self.topic
        for record in records:
            store_key, value = record[0], record[1]
            if store_key is None or len(store_key) < 13:
                continue
            timestamp = int.from_bytes(store_key[1:9], "big", signed=True)
            raw_key = store_key[9:-4]
            seqnum = int.from_bytes(store_key[-4:], "big")
            sort_key = (timestamp, raw_key, seqnum)
            # the stream time and sequence number go on from where the changelog ends
            if timestamp > self.observed_stream_time:
                self.observed_stream_time = timestamp
            if seqnum > self.seqnum:
                self.seqnum = seqnum
            if value is None:
                entries.pop(sort_key, None)
                continue
            buffered, _end = read_buffer_value(value)
            rc = buffered.context
            new = buffered.new_value
            restored = Record(
                self._kdes(topic, raw_key),
                None if new is None else self._vdes(topic, new),
                timestamp,
                rc.headers,
            )
            entries[sort_key] = (restored, rc)

    def num_records(self) -> int:
        return len(self._entries)

    def put(self, record: Record, record_context: Any) -> bool:
        """Buffer ``record``; False (not buffered) when it is already past the grace period."""
        if record.key is None:
            raise StreamsException("key cannot be null")
        timestamp = record.timestamp
        if self.observed_stream_time - self.grace_ms > timestamp:
            return False
        self.seqnum = (self.seqnum + 1) & 0x7FFFFFFF
        raw_key = self._kser(self.topic, record.key)
        sort_key = (timestamp, raw_key, self.seqnum)
        self._entries[sort_key] = (record, record_context)
        self.observed_stream_time = max(self.observed_stream_time, timestamp)
        if self.logging_enabled:
            rc = record_context
            if rc is None:
                rc = RecordContext(timestamp, headers=record.headers)
            value = BufferValue(None, None, self._vser(self.topic, record.value), rc)
            self.context.log_change(
                self.name, self._store_key(sort_key), value.serialize() + _BUFFER_TIME, -1
            )
        return True

    def evict(self, callback: Callable[[Record, Any], None]) -> None:
        """Call ``callback(record, record_context)`` for each record whose time has come."""
        bound = self.observed_stream_time - self.grace_ms
        entries = self._entries
        while entries:
            sort_key = entries.keys()[0]
            if sort_key[0] > bound:
                return
            record, record_context = entries.pop(sort_key)
            callback(record, record_context)
            if self.logging_enabled:
                self.context.log_change(self.name, self._store_key(sort_key), None, -1)

    @staticmethod
    def _store_key(sort_key: tuple[int, bytes, int]) -> bytes:
        timestamp, raw_key, seqnum = sort_key
        return (
            _TIME_FIRST_PREFIX
            + timestamp.to_bytes(8, "big", signed=True)
            + raw_key
            + seqnum.to_bytes(4, "big")
        )


class TimeOrderedJoinBufferBuilder:
    """Store builder of the join buffer (``<join name>-Buffer``); caching is a no-op."""

    persistent = False

    def __init__(self, name: str, key_serde: Any, value_serde: Any, grace_ms: int) -> None:
        self.name = name
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.grace_ms = grace_ms
        self.logging_enabled = True
        self.log_config: dict = {}

    def with_caching_enabled(self) -> TimeOrderedJoinBufferBuilder:
        return self

    def with_caching_disabled(self) -> TimeOrderedJoinBufferBuilder:
        return self

    def with_logging_enabled(self, config: dict | None = None) -> TimeOrderedJoinBufferBuilder:
        self.logging_enabled = True
        self.log_config = dict(config or {})
        return self

    def with_logging_disabled(self) -> TimeOrderedJoinBufferBuilder:
        self.logging_enabled = False
        return self

    def build(self) -> TimeOrderedJoinBuffer:
        return TimeOrderedJoinBuffer(
            self.name, self.key_serde, self.value_serde, self.grace_ms, self.logging_enabled
        )
