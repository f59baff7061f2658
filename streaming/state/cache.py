"""The record cache shared by caching stores (Kafka's ThreadCache, NamedCache, LRUCacheEntry).

One ThreadCache per stream thread holds a NamedCache per (task, store). Its byte budget
(``statestore.cache.max.bytes``) is global: when a put pushes the total over budget, least
recently used entries of the cache being written are evicted; evicting a dirty entry flushes
that named cache (the evicted entry first, then every dirty entry in dirty order). A dirty key
re-put moves to the end of the dirty order (Kafka's NamedCache: "first remove and then add").
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

from sortedcontainers import SortedList

from streaming.state.api import DEFAULT_CACHE_MAX_BYTES, EMPTY_RECORD_CONTEXT

# Kafka: LRUNode.size = key length + 8 (entry ref) + 8 (previous) + 8 (next) + entry.size
_NODE_OVERHEAD = 24


def context_size(rc: Any) -> int:
    """Kafka's ProcessorRecordContext.residentMemorySizeEstimate."""
    if rc is None:
        return 20
    size = 20  # timestamp + offset + partition
    topic = rc.topic
    if topic:
        size += len(topic)
    headers = rc.headers
    if headers:
        for header in headers:
            if isinstance(header, tuple):
                key, value = header
            else:
                key, value = header.key, header.value
            size += len(key)
            if value is not None:
                size += len(value)
    return size


class LRUCacheEntry:
    """A cached value (None = tombstone) with its dirty flag and the record context of the put."""

    __slots__ = ("context", "is_dirty", "size", "value")

    def __init__(self, value: bytes | None, context: Any = None, is_dirty: bool = False) -> None:
        self.value = value
        self.is_dirty = is_dirty
        if context is None:
            context = EMPTY_RECORD_CONTEXT
        self.context = context
        self.size = (0 if value is None else len(value)) + 1 + context_size(context)


#: (key, new value, entry) handed to a dirty-entry flush listener
DirtyEntry = tuple[bytes, bytes | None, LRUCacheEntry]
DirtyEntryFlushListener = Callable[[list[DirtyEntry]], None]


class NamedCache:
    """The cache of one store in one task: LRU order, sorted keys, dirty keys in arrival order."""

    __slots__ = ("_dirty", "_entries", "_keys", "_owner", "listener", "name", "size_bytes")

    def __init__(self, name: str, owner: ThreadCache) -> None:
        self.name = name
        self._owner = owner
        self._entries: OrderedDict[bytes, LRUCacheEntry] = OrderedDict()  # LRU first
        self._keys = SortedList()
        self._dirty: dict[bytes, None] = {}
        self.listener: DirtyEntryFlushListener | None = None
        self.size_bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def _resize(self, delta: int) -> None:
        self.size_bytes += delta
        self._owner.size_bytes += delta

    def get(self, key: bytes) -> LRUCacheEntry | None:
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def put(self, key: bytes, entry: LRUCacheEntry) -> None:
        dirty = self._dirty
        if not entry.is_dirty and key in dirty:
            raise RuntimeError(
                f"Attempting to put a clean entry for key [{key!r}] into NamedCache "
                f"[{self.name}] when it already contains a dirty entry for the same key"
            )
        entries = self._entries
        old = entries.get(key)
        if old is not None:
            delta = entry.size - old.size
            entries[key] = entry
            entries.move_to_end(key)
        else:
            delta = len(key) + _NODE_OVERHEAD + entry.size
            entries[key] = entry
            self._keys.add(key)
        if entry.is_dirty:
            # first remove and then add so we keep the arrival order of the records
            dirty.pop(key, None)
            dirty[key] = None
        self.size_bytes += delta
        self._owner.size_bytes += delta

    def delete(self, key: bytes) -> LRUCacheEntry | None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return None
        self._keys.remove(key)
        self._dirty.pop(key, None)
        self._resize(-(len(key) + _NODE_OVERHEAD + entry.size))
        return entry

    def evict(self) -> None:
        """Remove the least recently used entry; flush the cache if it was dirty."""
        if not self._entries:
            return
        key, entry = self._entries.popitem(last=False)
        self._keys.remove(key)
        self._resize(-(len(key) + _NODE_OVERHEAD + entry.size))
        if entry.is_dirty:
            self.flush((key, entry))

    def flush(self, evicted: tuple[bytes, LRUCacheEntry] | None = None) -> None:
        if self.listener is None:
            raise ValueError(f"No listener for namespace {self.name} registered with cache")
        dirty = self._dirty
        if not dirty:
            return
        out: list[DirtyEntry] = []
        deleted: list[bytes] = []
        if evicted is not None:
            key, entry = evicted
            out.append((key, entry.value, entry))
            dirty.pop(key, None)
        entries = self._entries
        for key in dirty:
            entry = entries[key]
            out.append((key, entry.value, entry))
            entry.is_dirty = False
            if entry.value is None:
                deleted.append(key)
        # clear the dirty keys before calling the listener as it may be re-entrant
        dirty.clear()
        self.listener(out)
        for key in deleted:
            self.delete(key)

    def purge_before(self, bound: bytes) -> int:
        """Drop the clean entries whose key sorts before ``bound``; returns how many.

        Window and session caches call it with the segment-id prefix of their oldest live
        segment: entries of segments the store below has dropped are never read or written
        again (they would otherwise stay until evicted, keeping the cache full)."""
        keys = self._keys
        end = keys.bisect_left(bound)
        if not end:
            return 0
        entries = self._entries
        dirty = self._dirty
        kept = []
        freed = 0
        for key in keys.islice(0, end):
            if key in dirty:  # not written to the store yet: leave it to the next flush
                kept.append(key)
                continue
            freed += len(key) + _NODE_OVERHEAD + entries.pop(key).size
        del keys[:end]
        keys.update(kept)
        self._resize(-freed)
        return end - len(kept)

    def _iterate(self, keys: list[bytes]) -> Iterator[tuple[bytes, LRUCacheEntry]]:
        get = self.get  # reading through the iterator refreshes LRU order, like Kafka
        for key in keys:
            entry = get(key)
            if entry is not None:
                yield key, entry

    def range(
        self,
        from_key: bytes | None,
        to_key: bytes | None,
        forward: bool = True,
        to_inclusive: bool = True,
    ) -> Iterator[tuple[bytes, LRUCacheEntry]]:
        """Snapshot of the keys in range (taken now), entries looked up while iterating."""
        keys = list(self._keys.irange(from_key, to_key, (True, to_inclusive), not forward))
        return self._iterate(keys)

    def all(self, forward: bool = True) -> Iterator[tuple[bytes, LRUCacheEntry]]:
        keys = list(self._keys) if forward else list(reversed(self._keys))
        return self._iterate(keys)

    def close(self) -> None:
        self._resize(-self.size_bytes)
        self.listener = None
        self._dirty.clear()
        self._entries.clear()
        self._keys.clear()


class ThreadCache:
    """Byte-bounded cache shared by the caching stores of one stream thread."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.size_bytes = 0
        self._caches: dict[str, NamedCache] = {}

    @staticmethod
    def namespace(task_id: str, store_name: str) -> str:
        """Kafka's ThreadCache.nameSpaceFromTaskIdAndStore."""
        return f"{task_id}-{store_name}"

    def named_cache(self, namespace: str) -> NamedCache:
        cache = self._caches.get(namespace)
        if cache is None:
            cache = self._caches[namespace] = NamedCache(namespace, self)
        return cache

    def add_dirty_entry_flush_listener(
        self, namespace: str, listener: DirtyEntryFlushListener
    ) -> None:
        self.named_cache(namespace).listener = listener

    def flush(self, namespace: str) -> None:
        cache = self._caches.get(namespace)
        if cache is not None:
            cache.flush()

    def get(self, namespace: str, key: bytes) -> LRUCacheEntry | None:
        cache = self._caches.get(namespace)
        return None if cache is None else cache.get(key)

    def put(self, namespace: str, key: bytes, entry: LRUCacheEntry) -> None:
        self.put_into(self.named_cache(namespace), key, entry)

    def put_into(self, cache: NamedCache, key: bytes, entry: LRUCacheEntry) -> None:
        """Put into a NamedCache of this ThreadCache, then evict while over budget."""
        cache.put(key, entry)
        if self.size_bytes > self.max_bytes:
            self._maybe_evict(cache)

    def put_if_absent(
        self, namespace: str, key: bytes, entry: LRUCacheEntry
    ) -> LRUCacheEntry | None:
        cache = self.named_cache(namespace)
        original = cache.get(key)
        if original is None:
            self.put_into(cache, key, entry)
        return original

    def put_all(self, namespace: str, entries: list[tuple[bytes, LRUCacheEntry]]) -> None:
        for key, entry in entries:
            self.put(namespace, key, entry)

    def delete(self, namespace: str, key: bytes) -> LRUCacheEntry | None:
        cache = self._caches.get(namespace)
        return None if cache is None else cache.delete(key)

    def _maybe_evict(self, cache: NamedCache) -> None:
        while self.size_bytes > self.max_bytes:
            # the put on this cache may have triggered puts on other caches: stop when
            # there is nothing left to evict here even if still over budget (Kafka)
            if not len(cache):
                return
            cache.evict()

    def range(
        self,
        namespace: str,
        from_key: bytes | None,
        to_key: bytes | None,
        to_inclusive: bool = True,
    ) -> Iterator[tuple[bytes, LRUCacheEntry]]:
        cache = self._caches.get(namespace)
        return iter(()) if cache is None else cache.range(from_key, to_key, True, to_inclusive)

    def reverse_range(
        self, namespace: str, from_key: bytes | None, to_key: bytes | None
    ) -> Iterator[tuple[bytes, LRUCacheEntry]]:
        cache = self._caches.get(namespace)
        return iter(()) if cache is None else cache.range(from_key, to_key, False)

    def all(self, namespace: str) -> Iterator[tuple[bytes, LRUCacheEntry]]:
        cache = self._caches.get(namespace)
        return iter(()) if cache is None else cache.all(True)

    def reverse_all(self, namespace: str) -> Iterator[tuple[bytes, LRUCacheEntry]]:
        cache = self._caches.get(namespace)
        return iter(()) if cache is None else cache.all(False)

    def size(self) -> int:
        """Number of cached entries over all named caches."""
        return sum(len(c) for c in self._caches.values())

    def close(self, namespace: str) -> None:
        cache = self._caches.pop(namespace, None)
        if cache is not None:
            cache.close()

    def resize(self, max_bytes: int) -> None:
        """Change the budget; evicts round-robin over the named caches when shrinking."""
        self.max_bytes = max_bytes
        caches = list(self._caches.values())
        while self.size_bytes > self.max_bytes and any(len(c) for c in caches):
            for cache in caches:
                if self.size_bytes <= self.max_bytes:
                    break
                cache.evict()
