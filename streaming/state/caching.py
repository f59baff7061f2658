"""Caching layers over bytes stores (Kafka's CachingKeyValueStore, CachingWindowStore,
CachingSessionStore).

Writes go to the shared ThreadCache as dirty entries remembering the current record context.
When the cache is flushed (commit, ``flush()``) or a dirty entry is evicted, each dirty entry is
written to the wrapped store with its own record context set on the context and handed to the
flush listener as ``listener(key bytes, new bytes, old bytes, record_context)`` (old bytes read
from the wrapped store before writing, None unless ``send_old_values``); entries whose key is
absent both in the store and the cache with a None value are skipped entirely (Kafka's
optimisation). Reads merge cache and store. Window and session caches key entries by
``[8-byte segment id][schema key]`` (Kafka's SegmentedCacheFunction) so merged iteration has
the store's segment-major order.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from streaming.state.api import StateStore, StateStoreContext, WrappedStateStore, cache_max_bytes
from streaming.state.cache import LRUCacheEntry, NamedCache, ThreadCache
from streaming.state.key_schema import MAX_LONG, SESSION_KEY_SCHEMA
from streaming.state.key_value_bytes import KeyValueBytesStore, increment, invalid_range
from streaming.state.merged_iterators import merge_key_value, merge_segmented
from streaming.state.segments import java_div
from streaming.state.session_bytes import WrappedSessionBytesStore
from streaming.state.window_bytes import WrappedWindowBytesStore

#: listener(key bytes, new value bytes, old value bytes or None, record context)
BytesFlushListener = Callable[[bytes, bytes | None, bytes | None, Any], None]

_SEG = struct.Struct(">Q")
_OFFSET = 1 << 63


class _CachingMixin:
    """Cache wiring shared by the three caching stores."""

    name: str
    wrapped: Any
    flush_listener: BytesFlushListener | None = None
    send_old_values: bool = False
    context: Any = None
    # set by _init_cache() (store init); None before, and ``named`` again after close()
    cache: ThreadCache = None  # type: ignore[assignment]
    named: NamedCache = None  # type: ignore[assignment]
    cache_name: str = ""

    def _init_cache(self, context: StateStoreContext) -> None:
        self.context = context
        cache = getattr(context, "cache", None)
        if cache is None:
            cache = ThreadCache(cache_max_bytes(getattr(context, "app_configs", None)))
        self.cache = cache
        self.cache_name = ThreadCache.namespace(context.task_id, self.name)
        self.named = cache.named_cache(self.cache_name)
        self.named.listener = self._apply_dirty

    def set_flush_listener(
        self, listener: BytesFlushListener | None, send_old_values: bool
    ) -> bool:
        self.flush_listener = listener
        self.send_old_values = send_old_values
        return True

    def _dirty_entry(self, value: bytes | None) -> LRUCacheEntry:
        return LRUCacheEntry(value, self.context.record_context(), True)

    def _apply_dirty(self, entries: list) -> None:
        for key, value, entry in entries:
            self._put_and_maybe_forward(key, value, entry)

    def _put_and_maybe_forward(self, key: bytes, value: bytes | None, entry: LRUCacheEntry):
        raise NotImplementedError

    def _forward(
        self,
        entry: LRUCacheEntry,
        write: Callable[[], None],
        key: bytes,
        new: bytes | None,
        old: bytes | None,
    ) -> None:
        ctx = self.context
        current = ctx.record_context()
        ctx.set_record_context(entry.context)
        try:
            write()
            if self.flush_listener is not None:
                self.flush_listener(key, new, old, entry.context)
        finally:
            ctx.set_record_context(current)

    def flush(self) -> None:
        if self.named is not None:
            self.named.flush()
        self.wrapped.flush()

    def flush_cache(self) -> None:
        """Flush only the cache (Kafka's flushCache, used before commit)."""
        if self.named is not None:
            self.named.flush()

    def close(self) -> None:
        # the cache goes and the store closes even when the flush fails (a dirty close of a
        # task whose producer refuses writes): a rebuilt task must not find the old dirty
        # entries, nor the store still open (RocksDB's lock)
        try:
            if self.named is not None:
                self.named.flush()
        finally:
            try:
                if self.named is not None:
                    self.cache.close(self.cache_name)
                    self.named = None  # type: ignore[assignment]
            finally:
                self.wrapped.close()


class CachingKeyValueStore(_CachingMixin, WrappedStateStore, KeyValueBytesStore):
    """Write-back cache in front of a bytes key-value store."""

    def __init__(self, wrapped: KeyValueBytesStore) -> None:
        super().__init__(wrapped)

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._init_cache(context)
        self.wrapped.init(context, root)

    def _put_and_maybe_forward(self, key: bytes, value: bytes | None, entry: LRUCacheEntry):
        wrapped = self.wrapped
        if self.flush_listener is not None:
            send_old = self.send_old_values
            old = wrapped.get(key) if (value is None or send_old) else None
            # if the key is in neither the store nor the cache, skip store and downstream
            if value is not None or old is not None:
                self._forward(
                    entry, lambda: wrapped.put(key, value), key, value, old if send_old else None
                )
        else:
            ctx = self.context
            current = ctx.record_context()
            ctx.set_record_context(entry.context)
            try:
                wrapped.put(key, value)
            finally:
                ctx.set_record_context(current)

    def _get_internal(self, key: bytes) -> bytes | None:
        entry = self.named.get(key)
        if entry is None:
            raw = self.wrapped.get(key)
            if raw is None:
                return None
            self.cache.put_into(self.named, key, LRUCacheEntry(raw))
            return raw
        return entry.value

    def get(self, key: bytes) -> bytes | None:
        return self._get_internal(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        # None values go into the cache too: they are tombstones
        self.cache.put_into(
            self.named, key, LRUCacheEntry(value, self.context.record_context(), True)
        )

    def put_if_absent(self, key: bytes, value: bytes | None) -> bytes | None:
        v = self._get_internal(key)
        if v is None:
            self.put(key, value)
        return v

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        for key, value in entries:
            self.put(key, value)

    def delete(self, key: bytes) -> bytes | None:
        v = self._get_internal(key)
        self.put(key, None)
        return v

    def range(self, from_key: bytes | None, to_key: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        if invalid_range(from_key, to_key):
            return iter(())
        store_it = self.wrapped.range(from_key, to_key)
        cache_it = self.named.range(from_key, to_key, True)
        return merge_key_value(cache_it, store_it, True)

    def reverse_range(self, from_key, to_key) -> Iterator[tuple[bytes, bytes]]:
        if invalid_range(from_key, to_key):
            return iter(())
        store_it = self.wrapped.reverse_range(from_key, to_key)
        cache_it = self.named.range(from_key, to_key, False)
        return merge_key_value(cache_it, store_it, False)

    def all(self) -> Iterator[tuple[bytes, bytes]]:
        store_it = self.wrapped.all()
        return merge_key_value(self.named.all(True), store_it, True)

    def reverse_all(self) -> Iterator[tuple[bytes, bytes]]:
        store_it = self.wrapped.reverse_all()
        return merge_key_value(self.named.all(False), store_it, False)

    def prefix_scan(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        store_it = self.wrapped.prefix_scan(prefix)
        upper = increment(prefix)
        cache_it = self.named.range(prefix, upper, True, to_inclusive=False)
        return merge_key_value(cache_it, store_it, True)

    def approximate_num_entries(self) -> int:
        return self.wrapped.approximate_num_entries()


class _SegmentedCacheKeys:
    """Kafka's SegmentedCacheFunction: cache key = [8-byte segment id][schema key]."""

    segment_interval: int
    retention_period: int
    named: NamedCache
    context: Any
    #: per writing processor node: the largest segment timestamp it has put
    _writer_max_timestamp: dict[Any, int]

    def _observe_put(self, timestamp: int) -> None:
        """Remember how far the processor putting now has written (its stream time bound)."""
        writer = getattr(self.context, "current_node", None)
        if timestamp > self._writer_max_timestamp.get(writer, -1):
            self._writer_max_timestamp[writer] = timestamp

    def _seg_prefix(self, timestamp: int) -> bytes:
        return _SEG.pack(java_div(timestamp, self.segment_interval) + _OFFSET)

    def _seg_prefix_id(self, segment_id: int) -> bytes:
        return _SEG.pack(segment_id + _OFFSET)

    def _purge_dropped_segments(self) -> None:
        """Drop cached entries of segments the wrapped store dropped a retention period ago.

        The store drops segments older than ``segment_id(stream time - retention)``. Kafka
        keeps such entries until the LRU evicts them, so with windows moving on, the cache
        fills up to ``statestore.cache.max.bytes`` with windows nothing reads or writes any
        more (a Python entry costs several times the bytes the budget counts).

        Entries the store no longer has can still be read through the cache, as in Kafka:
        a session aggregate looks ``gap`` back from a record that is up to ``gap + grace``
        (the retention) behind its stream time, and merges a session the store expired
        but the cache still holds. No DSL processor reads further back than two retention
        periods of its own stream time, so entries are kept that long behind the slowest
        processor writing this store: a cogroup's aggregates share one store and each
        keeps its own stream time, so one input running ahead must not purge what the
        other still merges into. A processor's own stream time is never behind the
        largest timestamp it has put."""
        named = self.named
        if named is None or not self._writer_max_timestamp:
            return
        slowest = min(self._writer_max_timestamp.values())
        min_live = java_div(slowest - 2 * self.retention_period, self.segment_interval)
        named.purge_before(self._seg_prefix_id(min_live))

    def _cached_range(
        self,
        time_from: int,
        time_to: int,
        matches: Callable[[bytes], bool],
        forward: bool,
        lower: bytes | None = None,
        upper: bytes | None = None,
    ) -> Iterator[tuple[bytes, LRUCacheEntry]]:
        """Matching cache entries of the segments covering [time_from, time_to].

        Only segments present in the cache are visited; inside each one the scan is bounded
        by the schema keys ``lower``/``upper`` (None = whole segment), like Kafka's
        CacheIteratorWrapper. The key snapshot is taken now (Kafka's cache iterators copy
        their key set on creation)."""
        named = self.named
        keys = named._keys
        interval = self.segment_interval
        lo_id = java_div(max(0, time_from), interval)
        hi_id = MAX_LONG if time_to >= MAX_LONG else java_div(time_to, interval)
        selected: list[bytes] = []
        n = len(keys)
        pos = keys.bisect_left(_SEG.pack(lo_id + _OFFSET))
        while pos < n:
            prefix = keys[pos][:8]
            seg_id = _SEG.unpack(prefix)[0] - _OFFSET
            if seg_id > hi_id:
                break
            lo = prefix if lower is None else prefix + lower
            nxt = _SEG.pack(seg_id + _OFFSET + 1)
            if upper is None:
                part = keys.irange(lo, nxt, (True, False))
            else:
                part = keys.irange(lo, prefix + upper)
            segment_keys = [k for k in part if matches(k[8:])]
            if forward:
                selected.extend(segment_keys)
            else:
                segment_keys.reverse()
                selected[:0] = segment_keys
            pos = keys.bisect_left(nxt)
        return named._iterate(selected)


class CachingWindowStore(_CachingMixin, _SegmentedCacheKeys, WrappedWindowBytesStore):
    """Write-back cache in front of a bytes window store (not used with retain_duplicates)."""

    def __init__(self, wrapped) -> None:
        super().__init__(wrapped)
        self._writer_max_timestamp = {}
        schema = self.key_schema
        self._store_key = schema.store_key
        self._segment_ts = schema.segment_timestamp
        #: (key, window start, cache key) of the last fetch
        self._last_fetched: tuple[bytes, int, bytes] | None = None

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._init_cache(context)
        self.wrapped.init(context, root)

    def flush(self) -> None:
        super().flush()
        self._purge_dropped_segments()

    def _store_cache_key(self, schema_key: bytes) -> bytes:
        return self._seg_prefix(self._segment_ts(schema_key)) + schema_key

    def _put_and_maybe_forward(self, cache_key: bytes, value: bytes | None, entry):
        schema_key = cache_key[8:]
        key, window_start = self.key_schema.split(schema_key)
        wrapped = self.wrapped
        if self.flush_listener is not None:
            send_old = self.send_old_values
            old = wrapped.fetch(key, window_start) if (value is None or send_old) else None
            if value is not None or old is not None:
                self._forward(
                    entry,
                    lambda: wrapped.put(key, value, window_start),
                    schema_key,
                    value,
                    old if send_old else None,
                )
        else:
            ctx = self.context
            current = ctx.record_context()
            ctx.set_record_context(entry.context)
            try:
                wrapped.put(key, value, window_start)
            finally:
                ctx.set_record_context(current)

    def put(self, key: bytes, value: bytes | None, window_start: int) -> None:
        last = self._last_fetched
        if last is not None and last[0] == key and last[1] == window_start:
            cache_key = last[2]  # an aggregation puts the window it has just fetched
        else:
            cache_key = self._seg_prefix(window_start) + self._store_key(key, window_start, 0)
        self.cache.put_into(
            self.named, cache_key, LRUCacheEntry(value, self.context.record_context(), True)
        )
        self._observe_put(window_start)

    def fetch(self, key: bytes, window_start: int) -> bytes | None:
        cache_key = self._seg_prefix(window_start) + self._store_key(key, window_start, 0)
        self._last_fetched = (key, window_start, cache_key)
        entry = self.named.get(cache_key)
        if entry is None:
            return self.wrapped.fetch(key, window_start)
        return entry.value

    def fetch_range(self, key, time_from, time_to, forward=True):
        store_it = self.wrapped.fetch_range(key, time_from, time_to, forward)
        schema = self.key_schema
        matches = schema.condition(key, key, time_from, time_to)
        cache_it = self._cached_range(
            time_from,
            time_to,
            matches,
            forward,
            schema.lower_range_fixed(key, time_from),
            schema.upper_range_fixed(key, time_to),
        )
        return merge_segmented(cache_it, store_it, self._store_cache_key, forward)

    def fetch_key_range(self, key_from, key_to, time_from, time_to, forward=True):
        if key_from is not None and key_to is not None and key_from > key_to:
            return iter(())
        store_it = self.wrapped.fetch_key_range(key_from, key_to, time_from, time_to, forward)
        schema = self.key_schema
        matches = schema.condition(key_from, key_to, time_from, time_to)
        lower = upper = None
        if key_from is not None and key_to is not None:
            lower = schema.lower_range(key_from, time_from)
            upper = schema.upper_range(key_to, time_to)
        cache_it = self._cached_range(time_from, time_to, matches, forward, lower, upper)
        return merge_segmented(cache_it, store_it, self._store_cache_key, forward)

    def fetch_all(self, time_from, time_to, forward=True):
        store_it = self.wrapped.fetch_all(time_from, time_to, forward)
        matches = self.key_schema.condition(None, None, time_from, time_to)
        cache_it = (kv for kv in self.named.all(forward) if matches(kv[0][8:]))
        return merge_segmented(cache_it, store_it, self._store_cache_key, forward)

    def all(self, forward=True):
        store_it = self.wrapped.all(forward)
        return merge_segmented(self.named.all(forward), store_it, self._store_cache_key, forward)


_session_store_key = SESSION_KEY_SCHEMA.store_key
_session_end = SESSION_KEY_SCHEMA.extract_end


class CachingSessionStore(_CachingMixin, _SegmentedCacheKeys, WrappedSessionBytesStore):
    """Write-back cache in front of a bytes session store."""

    def __init__(self, wrapped) -> None:
        super().__init__(wrapped)
        self._writer_max_timestamp = {}

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._init_cache(context)
        self.wrapped.init(context, root)

    def flush(self) -> None:
        super().flush()
        self._purge_dropped_segments()

    def _store_cache_key(self, schema_key: bytes) -> bytes:
        return self._seg_prefix(_session_end(schema_key)) + schema_key

    def _put_and_maybe_forward(self, cache_key: bytes, value: bytes | None, entry):
        schema_key = cache_key[8:]
        key, start, end = SESSION_KEY_SCHEMA.split(schema_key)
        wrapped = self.wrapped
        if self.flush_listener is not None:
            send_old = self.send_old_values
            old = wrapped.fetch_session(key, start, end) if (value is None or send_old) else None
            if value is not None or old is not None:
                self._forward(
                    entry,
                    lambda: wrapped.put(key, start, end, value),
                    schema_key,
                    value,
                    old if send_old else None,
                )
        else:
            ctx = self.context
            current = ctx.record_context()
            ctx.set_record_context(entry.context)
            try:
                wrapped.put(key, start, end, value)
            finally:
                ctx.set_record_context(current)

    def put(self, key: bytes, start: int, end: int, value: bytes | None) -> None:
        cache_key = self._seg_prefix(end) + _session_store_key(key, start, end)
        self.cache.put_into(
            self.named, cache_key, LRUCacheEntry(value, self.context.record_context(), True)
        )
        self._observe_put(end)

    def remove(self, key: bytes, start: int, end: int) -> None:
        self.put(key, start, end, None)

    def fetch_session(self, key: bytes, start: int, end: int) -> bytes | None:
        cache_key = self._seg_prefix(end) + _session_store_key(key, start, end)
        entry = self.named.get(cache_key)
        if entry is None:
            return self.wrapped.fetch_session(key, start, end)
        return entry.value

    def find_sessions(self, key_from, key_to, earliest, latest, forward=True, single_key=False):
        if key_from is not None and key_to is not None and key_from > key_to:
            return iter(())
        store_it = self.wrapped.find_sessions(
            key_from, key_to, earliest, latest, forward, single_key
        )
        schema = SESSION_KEY_SCHEMA
        matches = schema.condition(key_from, key_to, earliest, latest)
        lower = upper = None
        if single_key:
            lower = schema.lower_range_fixed(key_from, earliest)
            upper = schema.upper_range_fixed(key_from, latest)
        elif key_from is not None and key_to is not None:
            lower = schema.lower_range(key_from, earliest)
            upper = schema.upper_range(key_to, latest)
        cache_it = self._cached_range(earliest, MAX_LONG, matches, forward, lower, upper)
        return merge_segmented(cache_it, store_it, self._store_cache_key, forward)
