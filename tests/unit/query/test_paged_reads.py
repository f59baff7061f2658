"""Paged store reads of the query service over real stores (RocksDB and in-memory, cached):
pages hold every entry once and in the store's own order, reads take the lock chunk by
chunk, and a writer holding the same lock makes progress while a scan runs."""

from __future__ import annotations

import threading

import pytest

from streaming import serdes
from streaming.query.server import default_bind_host
from streaming.query.service import Cursor, read_page
from streaming.state import InMemoryStateStoreContext, Stores
from streaming.state.value_and_timestamp import ValueAndTimestamp

T0 = 1_700_000_000_000
RETENTION = 600_000  # 5-minute segments


class CountingLock:
    """A real re-entrant lock that counts how often it was taken."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.holds = 0

    def __enter__(self) -> CountingLock:
        self._lock.acquire()
        self.holds += 1
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def _init(store, tmp_path):
    store.init(InMemoryStateStoreContext(state_dir=tmp_path), store)
    return store


def _kv_store(tmp_path, persistent: bool):
    supplier = (
        Stores.persistent_key_value_store("kv")
        if persistent
        else Stores.in_memory_key_value_store("kv")
    )
    builder = Stores.key_value_store_builder(supplier, serdes.String(), serdes.Long())
    return _init(builder.with_caching_enabled().build(), tmp_path)


def _window_store(tmp_path, kind: str):
    if kind == "time-ordered":
        supplier = Stores.persistent_time_ordered_window_store("w", RETENTION, 1_000)
        builder = Stores.timestamped_window_store_builder(supplier, serdes.String(), serdes.Long())
    else:
        supplier = (
            Stores.persistent_window_store("w", RETENTION, 1_000)
            if kind == "rocksdb"
            else Stores.in_memory_window_store("w", RETENTION, 1_000)
        )
        builder = Stores.window_store_builder(supplier, serdes.String(), serdes.Long())
    return _init(builder.with_caching_enabled().build(), tmp_path)


def _pages(scan_chunk, lock, store, kind, bounds, limit):
    """Every page of one partition: (entries, number of pages)."""
    entries, after = [], None
    for pages in range(1, 10_000):
        got, more, last = read_page(lock, store, kind, bounds, after, limit, scan_chunk)
        assert len(got) <= limit
        entries.extend(got)
        if not more:
            return entries, pages
        after = last
    raise AssertionError("endless paging")


@pytest.mark.parametrize("persistent", [True, False])
def test_key_value_pages_hold_every_entry_once_in_store_order(tmp_path, persistent):
    store = _kv_store(tmp_path, persistent)
    keys = [f"k{i}" for i in range(203)]
    for i, key in enumerate(keys[:120]):
        store.put(key, i)
    store.flush()  # these are in the store, the rest only in the cache
    for i, key in enumerate(keys[120:], 120):
        store.put(key, i)
    expected = [{"key": k, "value": v} for k, v in store.all()]
    chunk = 3
    for limit in (1, 7, 203, 500):
        lock = CountingLock()
        got, pages = _pages(chunk, lock, store, "keyvalue", (None, None), limit)
        assert got == expected, limit
        assert pages == -(-len(keys) // limit)  # the last page says it is the last
        # three raw entries per hold of the lock at most
        assert lock.holds >= len(keys) // 3
    # a key range: from <= key <= to
    got, _ = _pages(chunk, CountingLock(), store, "keyvalue", ("k10", "k15"), 4)
    assert [e["key"] for e in got] == sorted(k for k in keys if "k10" <= k <= "k15")
    store.close()


@pytest.mark.parametrize("kind", ["rocksdb", "in-memory", "time-ordered"])
def test_window_pages_follow_the_store_order_across_segments(tmp_path, kind):
    store = _window_store(tmp_path, kind)
    keys = [f"w{i:03d}" for i in range(60)]
    # 3 windows a key, spread over ~9 minutes: two or three 5-minute segments
    times = sorted(
        (T0 + ((i * 7 + j * 200) % 540) * 1_000, key)
        for i, key in enumerate(keys)
        for j in range(3)
    )
    for n, (ts, key) in enumerate(times):
        store.put(key, ValueAndTimestamp(n, ts) if kind == "time-ordered" else n, ts)
        if n == len(times) // 2:
            store.flush()
    expected = [
        {
            "key": w.key,
            "start": w.window.start,
            "end": w.window.end,
            "value": getattr(v, "value", v),
        }
        for w, v in store.all()
    ]
    assert len(expected) == len({(e["key"], e["start"]) for e in expected}) > 100
    chunk = 2
    for limit in (1, 5, 64, 1000):
        got, _ = _pages(chunk, CountingLock(), store, "window", (0, (1 << 63) - 1), limit)
        assert got == expected, limit
    lo, hi = T0 + 100_000, T0 + 400_000
    got, _ = _pages(chunk, CountingLock(), store, "window", (lo, hi), 6)
    assert got == [e for e in expected if lo <= e["start"] <= hi]
    store.close()


def test_a_writer_makes_progress_during_a_scan_and_keys_appear_once(tmp_path):
    store = _kv_store(tmp_path, True)
    keys = [f"k{i:05d}" for i in range(3000)]
    for i, key in enumerate(keys):
        store.put(key, i)
    lock = CountingLock()
    chunk = 50
    stop = threading.Event()
    writes = []

    def writer():  # the "stream thread": updates and inserts under the same lock
        n = 0
        while not stop.is_set() and n < 20_000:
            with lock:
                store.put(keys[n % len(keys)], -n)
                store.put(f"a-new-{n:06d}", n)  # before the scan position
            writes.append(n)
            n += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        got, pages = _pages(chunk, lock, store, "keyvalue", (None, None), 100)
        writes_during_scan = len(writes)
    finally:
        stop.set()
        thread.join(10)
    old = [e["key"] for e in got if not e["key"].startswith("a-new-")]
    assert old == keys  # every original key exactly once, in order
    assert pages >= 30
    print(f"\nwriter made {writes_during_scan} writes during a {pages}-page scan")
    assert writes_during_scan > 0
    store.close()


def test_cursor_round_trip_and_garbage():
    for cursor in (Cursor(0), Cursor(7, b""), Cursor(3, b"\x00\xffkey/+="), Cursor(2**31, b"x")):
        text = cursor.encode()
        assert text.isascii() and "/" not in text and "+" not in text and "=" not in text
        assert Cursor.decode(text) == cursor
    for bad in ("", "!!", "AA", Cursor(1, b"k").encode()[:-6] + "@@@@"):
        with pytest.raises(ValueError, match="not a cursor"):
            Cursor.decode(bad)


def test_default_bind_host():
    assert default_bind_host("localhost") == "127.0.0.1"
    assert default_bind_host("127.0.1.1") == "127.0.0.1"
    assert default_bind_host("LOCALHOST") == "127.0.0.1"
    assert default_bind_host("10.1.2.3") == "10.1.2.3"
    assert default_bind_host("app-0.app.svc") == "app-0.app.svc"
