"""Segmented bytes store with retention (Kafka's AbstractRocksDBSegmentedBytesStore).

Stores schema keys (see key_schema) in time segments. Iteration is segment by segment (in
segment-id order, reversed for backward queries) and in key-byte order inside a segment, exactly
like Kafka's SegmentIterator over RocksDB segments; the scan of each segment is bounded by the
schema's byte range and filtered by its condition. Records older than
``observed_stream_time - retention_period + 1`` are never returned (``+ 0`` for the time-first
schema, like Kafka's AbstractDualSchemaRocksDBSegmentedBytesStore).

A persistent store opened in transactional mode (``context.transactional_state``) is a
``TransactionalStore`` through its ``RocksDBSegments``: the segments hold every write until
the commit, which writes all of them and the changelog offsets in one batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from itertools import chain

from streaming.state.api import StateDirHandle, StateStore, StateStoreContext
from streaming.state.key_schema import MAX_LONG, EntryPredicate
from streaming.state.segments import InMemorySegments, RocksDBSegments, Segment, Segments

BytesKV = tuple[bytes, bytes]
NO_TIMESTAMP = -1


def _segment_iterator(
    segments: list[Segment],
    lower: bytes | None,
    upper: bytes | None,
    forward: bool,
    matches: EntryPredicate,
) -> Iterator[BytesKV]:
    """The entries of ``segments`` in ``[lower, upper]`` that ``matches``, segment by
    segment; each segment's scan starts when the one before it is done."""
    return filter(
        matches,
        chain.from_iterable(segment.range(lower, upper, forward) for segment in segments),
    )


class SegmentedBytesStore(StateStore):
    """Segmented, retention-bounded bytes store over a key schema; in-memory or RocksDB."""

    def __init__(
        self,
        name: str,
        retention_period: int,
        segment_interval: int,
        key_schema,
        persistent: bool,
        retention_slack: int | None = None,
    ) -> None:
        self.name = name
        self.retention_period = retention_period
        self.segment_interval = segment_interval
        self.key_schema = key_schema
        self._persistent = persistent
        self.segments: Segments = (
            RocksDBSegments(
                name,
                retention_period,
                segment_interval,
                write_buffer=True,
                key_suffix=key_schema.SUFFIX_SIZE if key_schema.KEY_FIRST else 0,
            )
            if persistent
            else InMemorySegments(name, retention_period, segment_interval)
        )
        self.observed_stream_time = NO_TIMESTAMP
        self._open = False
        self._dir: StateDirHandle | None = None
        self._is_window_schema = key_schema.IS_WINDOW
        self._slack = key_schema.RETENTION_SLACK if retention_slack is None else retention_slack
        #: set by timestamped builders: converts (plain changelog value, timestamp) on restore
        self.restore_value_converter = None

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
            segments: RocksDBSegments = self.segments  # type: ignore[assignment]
            segments.open(
                self._dir.path,
                transactional=bool(getattr(context, "transactional_state", False)),
            )
        self.segments.cleanup_expired(self.observed_stream_time)
        if root is not None:
            context.register(root, self.restore_batch)
        self._open = True

    def flush(self) -> None:
        self.segments.flush()

    def force_flush(self) -> None:
        """Write persistent segments to disk now (the runtime calls it before a checkpoint)."""
        force = getattr(self.segments, "force_flush", None)
        if force is not None:
            force()

    def close(self) -> None:
        self._open = False
        self.segments.close()
        if self._dir is not None:
            self._dir.release()
            self._dir = None

    # -- writes ---------------------------------------------------------------------------

    def put(self, key: bytes, value: bytes | None) -> None:
        self.put_at(key, self.key_schema.segment_timestamp(key), value)

    def put_at(self, key: bytes, timestamp: int, value: bytes | None) -> None:
        """``put`` of a key whose segment timestamp the caller knows (``timestamp``)."""
        stream_time = self.observed_stream_time
        if timestamp > stream_time:
            self.observed_stream_time = stream_time = timestamp
        segments = self.segments
        interval = segments.segment_interval
        segment = segments.get_or_create_segment_if_live(
            timestamp // interval if timestamp >= 0 else -((-timestamp) // interval),
            stream_time,
        )
        if segment is not None:
            segment.put(key, value)
        # else: expired record, dropped (Kafka records the dropped-records sensor)

    def remove(self, key: bytes) -> None:
        timestamp = self.key_schema.segment_timestamp(key)
        if timestamp > self.observed_stream_time:
            self.observed_stream_time = timestamp
        segment = self.segments.segment_for_timestamp(timestamp)
        if segment is not None:
            segment.put(key, None)

    def restore_batch(self, records: Iterable[tuple[bytes, bytes | None, int]]) -> None:
        """Apply changelog records; stream time first advances to the batch maximum (Kafka)."""
        schema = self.key_schema
        conv = self.restore_value_converter
        batch = [
            (schema.from_changelog_key(k), v if conv is None or v is None else conv(v, ts))
            for k, v, ts in records
        ]
        for key, _ in batch:
            ts = schema.segment_timestamp(key)
            if ts > self.observed_stream_time:
                self.observed_stream_time = ts
        segments = self.segments
        for key, value in batch:
            segment = segments.get_or_create_segment_if_live(
                segments.segment_id(schema.segment_timestamp(key)), self.observed_stream_time
            )
            if segment is not None:
                segment.put(key, value)

    # -- horizons -------------------------------------------------------------------------

    def readable_until(self, timestamp: int) -> int:
        """The last stream time of the store at which a time-bounded read still returns a
        record of segment timestamp ``timestamp`` (reads skip what retention has passed)."""
        return timestamp + self.retention_period - self._slack

    def kept_until(self, timestamp: int) -> int:
        """The last stream time of the store at which a record of segment timestamp
        ``timestamp`` is still held (older segments are dropped whole)."""
        segments = self.segments
        next_segment = (segments.segment_id(timestamp) + 1) * segments.segment_interval
        return next_segment + self.retention_period - 1

    # -- reads ----------------------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        timestamp = self.key_schema.segment_timestamp(key)
        if timestamp < self.observed_stream_time - self.retention_period + self._slack:
            return None
        segment = self.segments.segment_for_timestamp(timestamp)
        if segment is None:
            return None
        return segment.get(key)

    def _actual_from(self, time_from: int) -> int:
        return max(time_from, self.observed_stream_time - self.retention_period + self._slack)

    def fetch(self, key: bytes, time_from: int, time_to: int, forward: bool = True):
        """Records of one key with segment timestamp in range (fixed-size key bounds)."""
        actual_from = self._actual_from(time_from)
        schema = self.key_schema
        if self._is_window_schema and time_to < actual_from:
            return iter(())
        lo, hi = schema.search_bounds(actual_from, time_to)
        lower = schema.lower_range_fixed(key, actual_from)
        upper = schema.upper_range_fixed(key, time_to)
        # the condition keeps the entries of ``key`` alone: ``key_range`` may skip others
        return filter(
            schema.entry_condition(key, key, actual_from, time_to),
            chain.from_iterable(
                segment.key_range(key, lower, upper, forward)
                for segment in self.segments.segments(lo, hi, forward)
            ),
        )

    def fetch_list(self, key: bytes, time_from: int, time_to: int) -> list[BytesKV]:
        """``list(fetch(key, time_from, time_to))``."""
        actual_from = self.observed_stream_time - self.retention_period + self._slack
        if time_from > actual_from:
            actual_from = time_from
        schema = self.key_schema
        if self._is_window_schema and time_to < actual_from:
            return []
        lo, hi = schema.search_bounds(actual_from, time_to)
        segments = self.segments.segments(lo, hi, True)
        if not segments:
            return []
        lower = schema.lower_range_fixed(key, actual_from)
        upper = schema.upper_range_fixed(key, time_to)
        found = segments[0].key_range_list(key, lower, upper)
        for segment in segments[1:]:
            found += segment.key_range_list(key, lower, upper)
        if not found:
            return found
        # the condition keeps the entries of ``key`` alone: ``key_range_list`` may skip others
        return list(filter(schema.entry_condition(key, key, actual_from, time_to), found))

    def fetch_range(
        self,
        key_from: bytes | None,
        key_to: bytes | None,
        time_from: int,
        time_to: int,
        forward: bool = True,
    ):
        """Records of a key range (None = unbounded) with time in range."""
        if key_from is not None and key_to is not None and key_from > key_to:
            return iter(())
        actual_from = self._actual_from(time_from)
        schema = self.key_schema
        if self._is_window_schema and time_to < actual_from:
            return iter(())
        lo, hi = schema.search_bounds(actual_from, time_to)
        lower = None if key_from is None else schema.lower_range(key_from, actual_from)
        upper = None if key_to is None else schema.upper_range(key_to, time_to)
        if lower is None or upper is None:
            # Kafka's SegmentIterator scans whole segments when either bound is missing
            lower = upper = None
        return _segment_iterator(
            self.segments.segments(lo, hi, forward),
            lower,
            upper,
            forward,
            schema.entry_condition(key_from, key_to, actual_from, time_to),
        )

    def all(self, forward: bool = True):
        actual_from = self._actual_from(0)
        schema = self.key_schema
        lo, hi = schema.search_bounds(actual_from, MAX_LONG)
        return _segment_iterator(
            self.segments.segments(lo, hi, forward),
            None,
            None,
            forward,
            schema.entry_condition(None, None, actual_from, MAX_LONG),
        )

    def fetch_all(self, time_from: int, time_to: int, forward: bool = True):
        actual_from = self._actual_from(time_from)
        if self._is_window_schema and time_to < actual_from:
            return iter(())
        schema = self.key_schema
        lower, upper = schema.time_bounds(actual_from, time_to)
        return _segment_iterator(
            self.segments.segments(actual_from, time_to, forward),
            lower,
            upper,
            forward,
            schema.entry_condition(None, None, actual_from, time_to),
        )
