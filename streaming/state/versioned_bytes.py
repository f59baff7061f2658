"""The versioned bytes store (Kafka's RocksDBVersionedStore, KIP-889), on RocksDB or in memory.

A "latest value store" holds the newest version of each key (``[8-byte timestamp][value]``);
older versions live in time segments, placed by their validTo timestamp, one row per key and
segment (see ``versioned_segment_value``). Segments older than the history retention are
dropped as the store's observed stream time advances. The history retention doubles as the
grace period: a put older than ``observed stream time - history retention`` is dropped
(``PUT_RETURN_CODE_NOT_PUT``). A put returns the validTo of the version it wrote, or
``PUT_RETURN_CODE_VALID_TO_UNDEFINED`` when it is now the latest version of its key.
Tombstones never enter the latest value store; they are kept in segments.

Kafka keeps both in one RocksDB (the latest value store is a "reserved segment"); so does the
persistent variant here. The in-memory variant (not in Kafka 4.1) uses the same code over
sorted in-memory segments. Opened in transactional mode (``context.transactional_state``),
the persistent variant is a ``TransactionalStore`` through its segments (see ``segments``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from streaming.errors import StreamsException
from streaming.state.api import StateDirHandle, StateStore, StateStoreContext
from streaming.state.segments import (
    InMemorySegment,
    InMemorySegments,
    RocksDBSegments,
    Segment,
    Segments,
)
from streaming.state.versioned_segment_value import SegmentValue, min_timestamp, next_timestamp

log = logging.getLogger(__name__)

#: ``VersionedKeyValueStore.PUT_RETURN_CODE_VALID_TO_UNDEFINED``: the put is the latest version.
PUT_RETURN_CODE_VALID_TO_UNDEFINED = -1
#: ``VersionedKeyValueStore.PUT_RETURN_CODE_NOT_PUT`` (Long.MIN_VALUE): the put was dropped.
PUT_RETURN_CODE_NOT_PUT = -(2**63)

_SENTINEL = -(2**63)
_LONG_MAX = 2**63 - 1
_LATEST_SEGMENT_ID = -1


class VersionedRecord(NamedTuple):
    """A value with its validFrom ``timestamp`` and, when known, its ``valid_to``."""

    value: Any
    timestamp: int
    valid_to: int | None = None


def default_segment_interval(history_retention_ms: int) -> int:
    """Kafka's RocksDbVersionedKeyValueBytesStoreSupplier.defaultSegmentInterval."""
    if history_retention_ms <= 60_000:
        return max(history_retention_ms // 3, 2_000)
    if history_retention_ms <= 300_000:
        return max(history_retention_ms // 5, 20_000)
    if history_retention_ms <= 3_600_000:
        return max(history_retention_ms // 12, 60_000)
    return max(history_retention_ms // 24, 300_000)


def _latest_value(raw: bytes) -> bytes:
    return raw[8:]


def _latest_timestamp(raw: bytes) -> int:
    return int.from_bytes(raw[:8], "big", signed=True)


def _latest_from(value: bytes, timestamp: int) -> bytes:
    return timestamp.to_bytes(8, "big", signed=True) + value


class _VersionedRocksDBSegments(RocksDBSegments):
    """RocksDB segments that leave the reserved (negative id) latest-value prefix alone."""

    def open(self, directory: Any, *, transactional: bool = False) -> None:
        super().open(directory, transactional=transactional)
        for segment_id in [i for i in self._segments if i < 0]:
            del self._segments[segment_id]


class VersionedBytesStore(StateStore):
    """Versioned key-value store of bytes: ``put(key, value, ts)``, ``get(key[, as_of])``,
    ``delete(key, ts)``."""

    def __init__(
        self, name: str, history_retention: int, segment_interval: int, persistent: bool
    ) -> None:
        self.name = name
        self.history_retention = history_retention
        # history retention doubles as grace period, as in Kafka
        self.grace_period = history_retention
        self.segment_interval = segment_interval
        self._persistent = persistent
        self.observed_stream_time = -1  # ConsumerRecord.NO_TIMESTAMP
        self.segments: Segments | None = None
        self.latest: Segment | None = None
        self._dir: StateDirHandle | None = None
        self._open = False

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def persistent(self) -> bool:
        return self._persistent

    @property
    def is_open(self) -> bool:
        return self._open

    @property
    def keeps_offsets(self) -> bool:
        """Whether opened in transactional mode it keeps its changelog offsets."""
        return self._persistent

    @property
    def transactional(self) -> bool:
        return getattr(self.segments, "transactional", False)

    def committed_offset(self, topic: str, partition: int) -> int | None:
        segments: RocksDBSegments = self.segments  # type: ignore[assignment]
        return segments.committed_offset(topic, partition)

    def commit(self, offsets: Mapping[tuple[str, int], int]) -> None:
        segments: RocksDBSegments = self.segments  # type: ignore[assignment]
        segments.commit(offsets)

    @property
    def uncommitted_bytes(self) -> int:
        return getattr(self.segments, "uncommitted_bytes", 0)

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        if self._persistent:
            self._dir = StateDirHandle(context, self.name)
            rocks = _VersionedRocksDBSegments(
                self.name, self.history_retention, self.segment_interval
            )
            rocks.open(
                self._dir.path,
                transactional=bool(getattr(context, "transactional_state", False)),
            )
            self.latest = rocks.reserved_segment(_LATEST_SEGMENT_ID)
            segments: Segments = rocks
        else:
            segments = InMemorySegments(self.name, self.history_retention, self.segment_interval)
            self.latest = InMemorySegment(_LATEST_SEGMENT_ID)
        self.segments = segments
        self._open = True
        if root is not None:
            context.register(root, self.restore_batch)

    def flush(self) -> None:
        if self.segments is not None:
            self.segments.flush()

    def close(self) -> None:
        self._open = False
        if self.segments is not None:
            self.segments.close()
            self.segments = None
        self.latest = None
        if self._dir is not None:
            self._dir.release()
            self._dir = None

    def _check_open(self) -> None:
        if not self._open:
            raise StreamsException(f"Store {self.name} is currently closed")

    # -- reads ----------------------------------------------------------------------------

    def get(self, key: bytes) -> VersionedRecord | None:
        """The latest version of ``key`` (value bytes and timestamp), or None."""
        self._check_open()
        raw = self.latest.get(key)  # type: ignore[union-attr]
        if raw is None:
            return None
        return VersionedRecord(_latest_value(raw), _latest_timestamp(raw))

    def get_as_of(self, key: bytes, as_of_timestamp: int) -> VersionedRecord | None:
        """The version of ``key`` valid at ``as_of_timestamp`` (validFrom <= it < validTo)."""
        self._check_open()
        raw_latest = self.latest.get(key)  # type: ignore[union-attr]
        if raw_latest is not None:
            latest_ts = _latest_timestamp(raw_latest)
            if latest_ts <= as_of_timestamp:
                return VersionedRecord(_latest_value(raw_latest), latest_ts)
        if as_of_timestamp < self.observed_stream_time - self.history_retention:
            # history retention exceeded: only the latest version (checked above) may answer
            log.warning("Returning null for expired get.")
            return None
        for segment in self.segments.segments(as_of_timestamp, _LONG_MAX, False):  # type: ignore[union-attr]
            raw = segment.get(key)
            if raw is None:
                continue
            if next_timestamp(raw) <= as_of_timestamp:
                # this segment has no data for the queried time, nor do earlier ones
                return None
            if min_timestamp(raw) > as_of_timestamp:
                continue  # only later data here: keep looking in earlier segments
            found = SegmentValue.deserialize(raw).find(as_of_timestamp)
            if found.value is None:
                return None
            return VersionedRecord(found.value, found.valid_from, found.valid_to)
        return None

    # -- writes ---------------------------------------------------------------------------

    def put(self, key: bytes, value: bytes | None, timestamp: int) -> int:
        """Insert a version (None = tombstone); returns its validTo, or a PUT_RETURN_CODE."""
        self._check_open()
        if timestamp < self.observed_stream_time - self.grace_period:
            log.warning("Skipping record for expired put.")
            return PUT_RETURN_CODE_NOT_PUT
        self.observed_stream_time = max(self.observed_stream_time, timestamp)
        return self._do_put(self.observed_stream_time, key, value, timestamp)

    def delete(self, key: bytes, timestamp: int) -> VersionedRecord | None:
        """Insert a tombstone at ``timestamp``; returns the version it ends (or None)."""
        self._check_open()
        if timestamp < self.observed_stream_time - self.grace_period:
            log.warning("Skipping record for expired delete.")
            return None
        existing = self.get_as_of(key, timestamp)
        self.observed_stream_time = max(self.observed_stream_time, timestamp)
        self._do_put(self.observed_stream_time, key, None, timestamp)
        return existing

    def restore_batch(self, records: Iterable[tuple[bytes, bytes | None, int]]) -> None:
        """Apply changelog records ``(key, value, timestamp)`` (Kafka's restoreBatch)."""
        records = list(records)
        end_of_batch = self.observed_stream_time
        for _key, _value, ts in records:
            end_of_batch = max(end_of_batch, ts)
        for key, value, ts in records:
            if ts < self.observed_stream_time - self.grace_period:
                continue  # never written to the store
            self.observed_stream_time = max(self.observed_stream_time, ts)
            self._do_put(end_of_batch, key, value, ts)

    def _segment_if_live(self, timestamp: int, stream_time: int) -> Segment | None:
        segments = self.segments
        return segments.get_or_create_segment_if_live(  # type: ignore[union-attr]
            segments.segment_id(timestamp),  # type: ignore[union-attr]
            stream_time,
        )

    def _do_put(self, stream_time: int, key: bytes, value: bytes | None, timestamp: int) -> int:
        self.segments.cleanup_expired(stream_time)  # type: ignore[union-attr]
        complete, found_ts = self._put_to_latest(stream_time, key, value, timestamp)
        if not complete:
            complete, found_ts = self._put_to_segments(stream_time, key, value, timestamp, found_ts)
            if not complete:
                found_ts = self._finish_put(stream_time, key, value, timestamp, found_ts)
        return PUT_RETURN_CODE_VALID_TO_UNDEFINED if found_ts == _SENTINEL else found_ts

    def _put_to_latest(
        self, stream_time: int, key: bytes, value: bytes | None, timestamp: int
    ) -> tuple[bool, int]:
        latest = self.latest
        raw = latest.get(key)  # type: ignore[union-attr]
        if raw is None:
            return False, _SENTINEL
        latest_ts = _latest_timestamp(raw)
        if timestamp < latest_ts:
            return False, latest_ts
        if timestamp > latest_ts:
            # move the current latest version into the segment of its new validTo
            segment = self._segment_if_live(timestamp, stream_time)
            if segment is not None:
                moved = _latest_value(raw)
                raw_segment = segment.get(key)
                if raw_segment is None:
                    row = SegmentValue.with_record(moved, latest_ts, timestamp)
                else:
                    row = SegmentValue.deserialize(raw_segment)
                    row.insert_as_latest(latest_ts, timestamp, moved)
                segment.put(key, row.serialize())
        if value is not None:
            latest.put(key, _latest_from(value, timestamp))  # type: ignore[union-attr]
        else:
            latest.put(key, None)  # type: ignore[union-attr]
        return True, _SENTINEL

    def _put_to_segments(
        self, stream_time: int, key: bytes, value: bytes | None, timestamp: int, found_ts: int
    ) -> tuple[bool, int]:
        for segment in self.segments.segments(timestamp, _LONG_MAX, False):  # type: ignore[union-attr]
            raw = segment.get(key)
            if raw is None:
                continue
            if next_timestamp(raw) <= timestamp:
                # this and earlier segments hold nothing this put affects
                return False, found_ts
            found_min = min_timestamp(raw)
            if found_min <= timestamp:
                return True, self._put_to_segment(stream_time, segment, raw, key, value, timestamp)
            if found_min < stream_time - self.history_retention:
                # does not affect the retained history (restore fast-forwards stream time)
                return True, PUT_RETURN_CODE_NOT_PUT
            found_ts = found_min
        return False, found_ts

    def _put_to_segment(
        self,
        stream_time: int,
        segment: Segment,
        raw: bytes,
        key: bytes,
        value: bytes | None,
        timestamp: int,
    ) -> int:
        segments = self.segments
        older_segment_needed = segments.segment_id(timestamp) != segment.id  # type: ignore[union-attr]
        row = SegmentValue.deserialize(raw)
        found = row.find(timestamp)
        if found.valid_from == timestamp:
            # replaces an existing version
            row.update_record(timestamp, value, found.index)
            segment.put(key, row.serialize())
            return found.valid_to
        if older_segment_needed:
            # the found version's validTo becomes ``timestamp``: it moves to an older segment
            older = self._segment_if_live(timestamp, stream_time)
            if older is not None:
                raw_older = older.get(key)
                if raw_older is None:
                    older_row = SegmentValue.with_record(found.value, found.valid_from, timestamp)
                else:
                    older_row = SegmentValue.deserialize(raw_older)
                    older_row.insert_as_latest(found.valid_from, timestamp, found.value)
                older.put(key, older_row.serialize())
            row.update_record(timestamp, value, found.index)
            segment.put(key, row.serialize())
            return found.valid_to
        row.insert(timestamp, value, found.index)
        segment.put(key, row.serialize())
        return found.valid_to

    def _finish_put(
        self, stream_time: int, key: bytes, value: bytes | None, timestamp: int, found_ts: int
    ) -> int:
        if found_ts == _SENTINEL:
            if value is not None:
                self.latest.put(key, _latest_from(value, timestamp))  # type: ignore[union-attr]
                return found_ts
            # tombstones go to the segment of their own timestamp
            segment = self._segment_if_live(timestamp, stream_time)
            if segment is None:
                return PUT_RETURN_CODE_NOT_PUT
            raw = segment.get(key)
            if raw is None:
                segment.put(key, SegmentValue.with_record(None, timestamp, timestamp).serialize())
            else:
                found_next = next_timestamp(raw)
                if found_next == timestamp:
                    return found_ts  # already ends in a tombstone at this time
                row = SegmentValue.deserialize(raw)
                row.insert_as_latest(found_next, timestamp, None)
                segment.put(key, row.serialize())
            return found_ts
        # the new version's validTo is found_ts: it goes to that segment, newest or oldest
        segment = self._segment_if_live(found_ts, stream_time)
        if segment is None:
            return PUT_RETURN_CODE_NOT_PUT
        raw = segment.get(key)
        if raw is None:
            segment.put(key, SegmentValue.with_record(value, timestamp, found_ts).serialize())
        else:
            row = SegmentValue.deserialize(raw)
            if next_timestamp(raw) <= timestamp:
                row.insert_as_latest(timestamp, found_ts, value)
            else:
                row.insert_as_earliest(timestamp, value)
            segment.put(key, row.serialize())
        return found_ts
