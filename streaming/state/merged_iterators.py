"""Merging cache and store iterators (Kafka's AbstractMergedSortedCacheStoreIterator family).

The cache wins when both hold a key; cached tombstones hide the store's entry and are skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from streaming.state.cache import LRUCacheEntry

CacheItem = tuple[bytes, LRUCacheEntry]
StoreItem = tuple[bytes, bytes]


def merge_key_value(
    cache_it: Iterator[CacheItem], store_it: Iterator[StoreItem], forward: bool = True
) -> Iterator[StoreItem]:
    """Merge two iterators sorted by key (ascending when forward, else descending)."""
    nxt_c = next
    c = nxt_c(cache_it, None)
    s = nxt_c(store_it, None)
    while c is not None:
        if s is None:
            value = c[1].value
            if value is not None:
                yield c[0], value
            c = nxt_c(cache_it, None)
            continue
        ck = c[0]
        sk = s[0]
        if ck == sk:
            value = c[1].value
            if value is not None:
                yield ck, value
            c = nxt_c(cache_it, None)
            s = nxt_c(store_it, None)
        elif (ck < sk) == forward:
            value = c[1].value
            if value is not None:
                yield ck, value
            c = nxt_c(cache_it, None)
        else:
            yield s
            s = nxt_c(store_it, None)
    if s is not None:
        yield s
        yield from store_it


def merge_segmented(
    cache_it: Iterator[CacheItem],
    store_it: Iterator[StoreItem],
    store_cache_key: Callable[[bytes], bytes],
    forward: bool = True,
) -> Iterator[StoreItem]:
    """Merge a cache iterator keyed by ``[segment id][schema key]`` with a store iterator of
    schema keys; yields ``(schema key, value)`` (Kafka's MergedSortedCacheWindowStore*Iterator,
    comparing with SegmentedCacheFunction.compareSegmentedKeys)."""
    nxt = next
    c = nxt(cache_it, None)
    s = nxt(store_it, None)
    sk = None if s is None else store_cache_key(s[0])
    while c is not None:
        if s is None:
            value = c[1].value
            if value is not None:
                yield c[0][8:], value
            c = nxt(cache_it, None)
            continue
        ck = c[0]
        if ck == sk:
            value = c[1].value
            if value is not None:
                yield ck[8:], value
            c = nxt(cache_it, None)
            s = nxt(store_it, None)
            sk = None if s is None else store_cache_key(s[0])
        # s is not None here, so sk is its cache key (no assert in the per-entry loop)
        elif (ck < sk) == forward:  # type: ignore[operator]
            value = c[1].value
            if value is not None:
                yield ck[8:], value
            c = nxt(cache_it, None)
        else:
            yield s
            s = nxt(store_it, None)
            sk = None if s is None else store_cache_key(s[0])
    if s is not None:
        yield s
        yield from store_it
