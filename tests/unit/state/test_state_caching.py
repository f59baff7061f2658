"""Record cache and caching-store semantics (ports of Kafka's NamedCacheTest, ThreadCacheTest,
CachingPersistentWindowStoreTest and CachingKeyValueStore behaviour)."""

from __future__ import annotations

import pytest
from state_test_support import IntSerde, StrSerde, make_context, session_supplier, window_supplier

from streaming.state import (
    LRUCacheEntry,
    RecordContext,
    SessionWindow,
    Stores,
    ThreadCache,
    TimeWindow,
    ValueAndTimestamp,
    Windowed,
)

HEADERS = [("k", b"v")]


def dirty(value, **rc):
    return LRUCacheEntry(value, RecordContext(**rc) if rc else RecordContext(0, 0, 0, ""), True)


@pytest.fixture
def named():
    tc = ThreadCache(10_000_000)
    return tc, tc.named_cache("0_0-store")


# ------------------------------------------------------------------------- NamedCache


def test_keep_track_of_size(named):
    tc, cache = named
    value = LRUCacheEntry(b"\x00")
    cache.put(b"\x00", value)
    cache.put(b"\x01", value)
    cache.put(b"\x02", value)
    # 1 byte key + 24 bytes overhead per node
    assert cache.size_bytes == (value.size + 25) * 3
    assert tc.size_bytes == cache.size_bytes
    # value 1 byte + dirty flag 1 + context estimate 20 (empty topic, no headers)
    assert value.size == 22


def test_evict_eldest_entry(named):
    _tc, cache = named
    cache.put(b"\x00", LRUCacheEntry(b"\x0a"))
    cache.put(b"\x01", LRUCacheEntry(b"\x14"))
    cache.put(b"\x02", LRUCacheEntry(b"\x1e"))
    cache.evict()
    assert cache.get(b"\x00") is None
    assert len(cache) == 2


def test_flush_dirty_entries_on_eviction(named):
    _tc, cache = named
    flushed = []
    cache.put(b"\x00", LRUCacheEntry(b"\x0a", RecordContext(0, 0, 0, "", HEADERS), True))
    cache.put(b"\x01", LRUCacheEntry(b"\x14"))
    cache.put(b"\x02", LRUCacheEntry(b"\x1e", RecordContext(0, 0, 0, "", HEADERS), True))
    cache.listener = flushed.extend
    cache.evict()
    assert len(flushed) == 2
    assert flushed[0][0] == b"\x00"
    assert flushed[0][2].context.headers == HEADERS
    assert flushed[0][1] == b"\x0a"
    assert flushed[1][0] == b"\x02"
    assert flushed[1][1] == b"\x1e"


def test_reentrant_listener_does_not_break_lru(named):
    _tc, cache = named
    key, key1, key2 = b"\x00", b"\x01", b"\x02"
    clean = LRUCacheEntry(b"\x03")
    cache.put(key, dirty(b"\x03"))
    cache.listener = lambda entries: cache.put(key, clean)
    cache.put(key1, clean)
    cache.put(key2, clean)
    cache.evict()  # evicts key (dirty): the listener re-puts it as most recently used
    cache.evict()  # key1 is now the least recently used
    assert cache.get(key1) is None
    assert cache.get(key) is not None
    assert cache.get(key2) is not None


def test_evict_dirty_then_put_same_key_clean(named):
    _tc, cache = named
    key = b"\x03"
    cache.listener = lambda entries: cache.put(key, LRUCacheEntry(b"\x03"))
    cache.put(key, dirty(b"\x03"))
    cache.evict()
    assert cache.get(key).value == b"\x03"


def test_remove_deleted_values_on_flush(named):
    _tc, cache = named
    cache.listener = lambda entries: None
    cache.put(b"\x00", dirty(None))
    cache.put(b"\x01", dirty(b"\x14"))
    cache.flush()
    assert len(cache) == 1
    assert cache.get(b"\x01") is not None


def test_overwrite_dirty_with_clean_raises(named):
    _tc, cache = named
    cache.put(b"\x00", dirty(b"\x01"))
    with pytest.raises(RuntimeError):
        cache.put(b"\x00", LRUCacheEntry(b"\x01"))


def test_dirty_order_moves_reput_key_to_end(named):
    _tc, cache = named
    flushed = []
    cache.listener = lambda entries: flushed.extend(k for k, _v, _e in entries)
    cache.put(b"a", dirty(b"1"))
    cache.put(b"b", dirty(b"2"))
    cache.put(b"c", dirty(b"3"))
    cache.put(b"a", dirty(b"4"))
    cache.flush()
    assert flushed == [b"b", b"c", b"a"]
    flushed.clear()
    cache.flush()
    assert flushed == []  # entries are clean now


def test_range_reads_refresh_lru(named):
    _tc, cache = named
    for k in (b"a", b"b", b"c"):
        cache.put(k, LRUCacheEntry(b"x"))
    assert [k for k, _ in cache.range(b"a", b"b")] == [b"a", b"b"]
    cache.evict()  # c is now least recently used
    assert cache.get(b"c") is None


# ------------------------------------------------------------------------- ThreadCache


def test_thread_cache_evicts_from_cache_being_written():
    entry_size = len(b"k0") + 24 + LRUCacheEntry(b"v", RecordContext(0, 0, 0, ""), True).size
    tc = ThreadCache(entry_size * 3)
    flushed = []
    tc.add_dirty_entry_flush_listener("ns", lambda es: flushed.append([k for k, _v, _e in es]))
    tc.add_dirty_entry_flush_listener("other", lambda es: None)
    tc.put("other", b"o0", LRUCacheEntry(b"v"))
    for i in range(3):
        tc.put("ns", f"k{i}".encode(), dirty(b"v"))
    # 4 entries of one size with room for 3: the eldest of "ns" (dirty) is evicted, which
    # flushes every dirty entry of "ns" (the evicted one first)
    assert flushed == [[b"k0", b"k1", b"k2"]]
    assert tc.get("ns", b"k0") is None
    assert tc.get("other", b"o0") is not None
    assert tc.size_bytes <= tc.max_bytes


def test_thread_cache_zero_size_flushes_every_put():
    tc = ThreadCache(0)
    flushed = []
    tc.add_dirty_entry_flush_listener("ns", lambda es: flushed.extend(k for k, _v, _e in es))
    tc.put("ns", b"a", dirty(b"1"))
    tc.put("ns", b"b", dirty(b"2"))
    assert flushed == [b"a", b"b"]
    assert tc.size() == 0


# --------------------------------------------------------------------- caching stores


class Listener:
    def __init__(self):
        self.calls = []

    def __call__(self, key, new, old, rc):
        self.calls.append((key, new, old, rc))

    @property
    def forwarded(self):
        return {k: (n, o) for k, n, o, _rc in self.calls}


@pytest.mark.parametrize("kind", ["memory", "rocksdb"])
def test_kv_flush_listener_with_old_values_and_record_context(tmp_path, kind):
    ctx = make_context(tmp_path)
    sup = Stores.in_memory_key_value_store("kv") if kind == "memory" else None
    sup = sup or Stores.persistent_key_value_store("kv")
    store = Stores.key_value_store_builder(sup, StrSerde(), StrSerde()).with_caching_enabled()
    store = store.build()
    store.init(ctx, store)
    listener = Listener()
    assert store.set_flush_listener(listener, True) is True
    seen_ctx = []
    listener_fn = listener

    def spying(key, new, old, rc):
        seen_ctx.append(ctx.record_context())
        listener_fn(key, new, old, rc)

    store.set_flush_listener(spying, True)
    ctx.set_time(10, topic="t", partition=1, offset=5)
    store.put("a", "1")
    ctx.set_time(11, topic="t", partition=1, offset=6)
    store.put("b", "2")
    ctx.set_time(12, topic="t", partition=1, offset=7)
    store.put("a", "3")  # re-put moves "a" to the end of the dirty order
    assert listener.calls == []
    assert store.get("a") == "3"
    current = ctx.record_context()
    store.flush()
    assert ctx.record_context() is current
    assert [(k, n, o) for k, n, o, _ in listener.calls] == [("b", "2", None), ("a", "3", None)]
    assert [rc.timestamp for *_x, rc in listener.calls] == [11, 12]
    assert [rc.offset for rc in seen_ctx] == [6, 7]  # context swapped during forwarding
    # changelog written during flush with the entry's timestamp
    assert [(k, v, t) for (_n, k, v, t) in ctx.logged] == [(b"b", b"2", 11), (b"a", b"3", 12)]
    listener.calls.clear()
    ctx.set_time(20)
    store.put("a", "4")
    store.delete("b")
    store.put("c", "x")
    store.delete("c")  # never reached the store: skipped entirely
    store.flush()
    assert [(k, n, o) for k, n, o, _ in listener.calls] == [("a", "4", "3"), ("b", None, "2")]
    assert store.get("b") is None
    store.close()


def test_kv_flush_listener_without_old_values(tmp_path):
    ctx = make_context(tmp_path)
    builder = Stores.key_value_store_builder(
        Stores.in_memory_key_value_store("kv"), StrSerde(), StrSerde()
    )
    store = builder.with_caching_enabled().build()
    store.init(ctx, store)
    listener = Listener()
    store.set_flush_listener(listener, False)
    store.put("a", "1")
    store.flush()
    store.put("a", "2")
    store.flush()
    store.delete("a")
    store.flush()
    assert [(k, n, o) for k, n, o, _ in listener.calls] == [
        ("a", "1", None),
        ("a", "2", None),
        ("a", None, None),
    ]


def test_set_flush_listener_on_uncached_store_returns_false(tmp_path):
    ctx = make_context(tmp_path)
    store = Stores.key_value_store_builder(
        Stores.in_memory_key_value_store("kv"), StrSerde(), StrSerde()
    ).build()
    store.init(ctx, store)
    assert store.set_flush_listener(Listener(), True) is False


def test_kv_eviction_forwards_when_over_max_bytes(tmp_path):
    # budget for ~3 entries: the 4th put evicts the eldest (dirty) -> flush of all dirty
    one = len(b"k0") + 24 + LRUCacheEntry(b"v0", RecordContext(1)).size
    ctx = make_context(tmp_path, cache_bytes=3 * one)
    store = (
        Stores.key_value_store_builder(
            Stores.in_memory_key_value_store("kv"), StrSerde(), StrSerde()
        )
        .with_caching_enabled()
        .build()
    )
    store.init(ctx, store)
    listener = Listener()
    store.set_flush_listener(listener, False)
    for i in range(3):
        store.put(f"k{i}", f"v{i}")
    assert listener.calls == []
    store.put("k3", "v3")
    assert [k for k, *_ in listener.calls] == ["k0", "k1", "k2", "k3"]
    # merged reads still see everything
    assert list(store.all()) == [(f"k{i}", f"v{i}") for i in range(4)]


def test_kv_merged_reads_cache_and_store(tmp_path):
    ctx = make_context(tmp_path)
    store = (
        Stores.key_value_store_builder(
            Stores.persistent_key_value_store("kv"), IntSerde(), StrSerde()
        )
        .with_caching_enabled()
        .build()
    )
    store.init(ctx, store)
    for i in (1, 3, 5):
        store.put(i, f"store{i}")
    store.flush()
    store.put(2, "cache2")
    store.put(3, "cache3")
    store.delete(5)
    store.put(6, "cache6")
    assert list(store.all()) == [(1, "store1"), (2, "cache2"), (3, "cache3"), (6, "cache6")]
    assert list(store.reverse_range(2, 5)) == [(3, "cache3"), (2, "cache2")]
    assert list(store.range(3, None)) == [(3, "cache3"), (6, "cache6")]
    assert store.get(5) is None
    assert store.approximate_num_entries() == 3  # underlying only (Kafka)
    store.close()


def test_timestamped_kv_listener_gets_value_and_timestamp(tmp_path):
    ctx = make_context(tmp_path)
    store = (
        Stores.timestamped_key_value_store_builder(
            Stores.persistent_timestamped_key_value_store("tkv"), StrSerde(), StrSerde()
        )
        .with_caching_enabled()
        .build()
    )
    store.init(ctx, store)
    listener = Listener()
    store.set_flush_listener(listener, True)
    store.put("a", ValueAndTimestamp("x", 5))
    store.flush()
    store.put("a", ValueAndTimestamp("y", 6))
    store.flush()
    assert [(k, n, o) for k, n, o, _ in listener.calls] == [
        ("a", ValueAndTimestamp("x", 5), None),
        ("a", ValueAndTimestamp("y", 6), ValueAndTimestamp("x", 5)),
    ]
    store.close()


@pytest.mark.parametrize("kind", ["memory", "rocksdb"])
def test_window_forward_old_values_when_enabled(tmp_path, kind):
    """CachingPersistentWindowStoreTest.shouldForwardOldValuesWhenEnabled."""
    ctx = make_context(tmp_path)
    store = (
        Stores.window_store_builder(window_supplier(kind, 1000, 10), StrSerde(), StrSerde())
        .with_caching_enabled()
        .build()
    )
    store.init(ctx, store)
    listener = Listener()
    store.set_flush_listener(listener, True)
    wk = Windowed("1", TimeWindow(0, 10))
    store.put("1", "a", 0)
    store.put("1", "b", 0)
    store.flush()
    assert listener.forwarded[wk] == ("b", None)
    listener.calls.clear()
    store.put("1", "c", 0)
    store.flush()
    assert listener.forwarded[wk] == ("c", "b")
    listener.calls.clear()
    store.put("1", None, 0)
    store.flush()
    assert listener.forwarded[wk] == (None, "c")
    listener.calls.clear()
    store.put("1", "a", 0)
    store.put("1", "b", 0)
    store.put("1", None, 0)
    store.flush()
    assert wk not in listener.forwarded
    store.close()


@pytest.mark.parametrize("kind", ["memory", "rocksdb"])
def test_window_forward_old_values_when_disabled(tmp_path, kind):
    ctx = make_context(tmp_path)
    store = (
        Stores.window_store_builder(window_supplier(kind, 1000, 10), StrSerde(), StrSerde())
        .with_caching_enabled()
        .build()
    )
    store.init(ctx, store)
    listener = Listener()
    store.set_flush_listener(listener, False)
    wk = Windowed("1", TimeWindow(0, 10))
    store.put("1", "a", 0)
    store.put("1", "b", 0)
    store.flush()
    assert listener.forwarded[wk] == ("b", None)
    store.put("1", "c", 0)
    store.flush()
    assert listener.forwarded[wk] == ("c", None)
    store.put("1", None, 0)
    store.flush()
    assert listener.forwarded[wk] == (None, None)
    listener.calls.clear()
    store.put("1", "a", 0)
    store.put("1", "b", 0)
    store.put("1", None, 0)
    store.flush()
    assert wk not in listener.forwarded
    store.close()


def test_window_cache_range_fetches(tmp_path):
    """CachingPersistentWindowStoreTest.shouldPutFetchRangeFromCacheForNullKeyFrom/To."""
    ctx = make_context(tmp_path)
    size = 10
    ts = 10
    store = (
        Stores.window_store_builder(window_supplier("rocksdb", 1000, size), StrSerde(), StrSerde())
        .with_caching_enabled()
        .build()
    )
    store.init(ctx, store)
    store.put("a", "a", ts)
    store.put("b", "b", ts)
    store.put("c", "c", ts + 10)
    store.put("d", "d", ts + 20)
    store.put("e", "e", ts + 20)

    def w(k, t):
        return (Windowed(k, TimeWindow(t, t + size)), k)

    assert list(store.fetch_key_range(None, "d", ts, ts + 20)) == [
        w("a", ts),
        w("b", ts),
        w("c", ts + 10),
        w("d", ts + 20),
    ]
    assert list(store.fetch_key_range("b", None, ts, ts + 20)) == [
        w("b", ts),
        w("c", ts + 10),
        w("d", ts + 20),
        w("e", ts + 20),
    ]
    assert list(store.backward_fetch_key_range(None, "c", ts, ts + 20)) == [
        w("c", ts + 10),
        w("b", ts),
        w("a", ts),
    ]
    assert list(store.backward_fetch_key_range(None, None, ts, ts + 20)) == [
        w("e", ts + 20),
        w("d", ts + 20),
        w("c", ts + 10),
        w("b", ts),
        w("a", ts),
    ]
    assert store.fetch("a", ts) == "a"
    assert store.fetch("a", 0) is None
    assert store.fetch("z", ts) is None
    # half flushed: merged order is still the store order
    store.flush()
    store.put("bb", "bb", ts)
    assert [x[1] for x in store.fetch_all(ts, ts + 20)] == ["a", "b", "bb", "c", "d", "e"]
    store.close()


@pytest.mark.parametrize("kind", ["memory", "rocksdb"])
def test_session_cache_flush_listener(tmp_path, kind):
    ctx = make_context(tmp_path)
    store = (
        Stores.session_store_builder(session_supplier(kind, 10_000), StrSerde(), StrSerde())
        .with_caching_enabled()
        .build()
    )
    store.init(ctx, store)
    listener = Listener()
    store.set_flush_listener(listener, True)
    k = Windowed("a", SessionWindow(0, 5))
    store.put(k, "1")
    store.flush()
    store.remove(k)
    store.put(Windowed("a", SessionWindow(0, 9)), "2")
    store.flush()
    assert [(key, n, o) for key, n, o, _ in listener.calls] == [
        (k, "1", None),
        (k, None, "1"),
        (Windowed("a", SessionWindow(0, 9)), "2", None),
    ]
    assert list(store.find_sessions("a", 0, 100)) == [(Windowed("a", SessionWindow(0, 9)), "2")]
    store.close()


def test_window_caching_disabled_with_retain_duplicates(tmp_path):
    ctx = make_context(tmp_path)
    store = (
        Stores.window_store_builder(
            window_supplier("memory", 1000, 10, dups=True), StrSerde(), StrSerde()
        )
        .with_caching_enabled()
        .build()
    )
    store.init(ctx, store)
    assert store.set_flush_listener(Listener(), False) is False


# ------------------------------------------------- dropped segments leave the cache


def test_purge_before_keeps_dirty_and_live_entries(named):
    tc, cache = named
    cache.listener = lambda entries: None
    for key in (b"\x01a", b"\x01b", b"\x02a", b"\x03a"):
        cache.put(key, LRUCacheEntry(b"v"))
    cache.put(b"\x01c", dirty(b"d"))
    assert cache.purge_before(b"\x02") == 2  # \x01a, \x01b; the dirty \x01c stays
    assert [k for k, _ in cache.all()] == [b"\x01c", b"\x02a", b"\x03a"]
    assert (
        cache.size_bytes
        == tc.size_bytes
        == sum(len(k) + 24 + e.size for k, e in cache._entries.items())
    )
    assert cache.purge_before(b"\x00") == 0


@pytest.mark.parametrize("kind", ["memory", "rocksdb"])
def test_window_cache_drops_entries_of_dropped_segments(tmp_path, kind):
    """Windows moving on must not fill the cache with windows the store has dropped."""
    ctx = make_context(tmp_path, cache_bytes=10_000_000)
    retention, size = 10_000, 10_000  # segment interval max(retention / 2, 60 s) = 60 s
    store = (
        Stores.window_store_builder(window_supplier(kind, retention, size), StrSerde(), StrSerde())
        .with_caching_enabled()
        .build()
    )
    store.init(ctx, store)
    listener = Listener()
    store.set_flush_listener(listener, False)
    sizes = []
    for window in range(200):  # 2000 s of 10 s windows, 20 keys each
        for k in range(20):
            store.put(f"k{k}", f"v{window}", window * size)
        store.flush()
        sizes.append(ctx.cache.size())
    # at most the live segments (two 60 s segments of six windows) of 20 keys stay cached
    assert max(sizes[20:]) <= 2 * 6 * 20
    assert len(listener.calls) == 200 * 20  # every window was forwarded once
    last = 199 * size
    assert store.fetch("k3", last) == "v199"  # live windows still read through the cache
    assert store.fetch("k3", 0) is None  # dropped with its segment, no stale cached copy
    store.close()


@pytest.mark.parametrize("kind", ["memory", "rocksdb"])
def test_session_cache_drops_entries_of_dropped_segments(tmp_path, kind):
    ctx = make_context(tmp_path, cache_bytes=10_000_000)
    store = (
        Stores.session_store_builder(session_supplier(kind, 10_000), StrSerde(), StrSerde())
        .with_caching_enabled()
        .build()
    )
    store.init(ctx, store)
    store.set_flush_listener(Listener(), False)
    sizes = []
    for n in range(200):
        for k in range(20):
            store.put(Windowed(f"k{k}", SessionWindow(n * 10_000, n * 10_000 + 5)), "x")
        store.flush()
        sizes.append(ctx.cache.size())
    assert max(sizes[20:]) <= 2 * 6 * 20
    assert list(store.find_sessions("k1", 199 * 10_000, 199 * 10_000 + 5)) == [
        (Windowed("k1", SessionWindow(199 * 10_000, 199 * 10_000 + 5)), "x")
    ]
    store.close()


def test_kv_close_whose_flush_fails_drops_the_cache_and_closes_the_store(tmp_path):
    # a dirty close of a task whose producer refuses writes: the flush of the cache fails,
    # yet the store must close (RocksDB's lock) and its dirty entries must not reach the
    # task rebuilt in its place (the thread's cache outlives its tasks)
    ctx = make_context(tmp_path, cache_bytes=10_000_000)

    def build():
        store = (
            Stores.key_value_store_builder(
                Stores.persistent_key_value_store("kv"), StrSerde(), StrSerde()
            )
            .with_caching_enabled()
            .build()
        )
        store.init(ctx, store)
        return store

    store = build()

    def refuse(*_args):
        raise RuntimeError("the producer refuses writes")

    store.set_flush_listener(refuse, False)
    store.put("a", "uncommitted")
    store.put("b", "uncommitted")  # flushed after "a": never reaches the store
    with pytest.raises(RuntimeError):
        store.close()
    again = build()  # opens the same RocksDB directory
    assert again.get("b") is None
    again.close()


def test_window_cache_put_after_fetch_of_another_window(tmp_path):
    """A put reuses the cache key of the window fetched just before it only when it is the
    same key and window start: an aggregation fetches and puts each window in turn."""
    ctx = make_context(tmp_path)
    store = (
        Stores.window_store_builder(window_supplier("rocksdb", 1000, 10), StrSerde(), StrSerde())
        .with_caching_enabled()
        .build()
    )
    store.init(ctx, store)
    assert store.fetch("a", 10) is None
    store.put("b", "b1", 10)  # another key, same start
    assert store.fetch("a", 20) is None
    store.put("a", "a1", 10)  # same key, another start
    assert store.fetch("a", 10) == "a1"
    store.put("a", "a2", 10)  # the window just fetched
    assert (store.fetch("a", 10), store.fetch("b", 10), store.fetch("a", 20)) == ("a2", "b1", None)
    store.flush()
    assert sorted((w.key, w.window.start, v) for w, v in store.all()) == [
        ("a", 10, "a2"),
        ("b", 10, "b1"),
    ]
