"""Session store suite over in-memory/RocksDB x caching off/on (port of Kafka's
AbstractSessionBytesStoreTest cases)."""

from __future__ import annotations

import pytest
from state_test_support import IntSerde, LongSerde, StrSerde, make_context, session_supplier

from streaming.state import SessionWindow, Stores, Windowed
from streaming.state.key_schema import MAX_LONG

RETENTION_PERIOD = 10_000
SEGMENT_INTERVAL = 60_000

PARAMS = [("memory", False), ("memory", True), ("rocksdb", False), ("rocksdb", True)]


def sw(key, start, end):
    return Windowed(key, SessionWindow(start, end))


@pytest.fixture(params=PARAMS, ids=lambda p: f"{p[0]}-{'cached' if p[1] else 'uncached'}")
def setup(request, tmp_path):
    kind, caching = request.param
    ctx = make_context(tmp_path)
    opened = []

    def build(retention=RETENTION_PERIOD, key_serde=None, value_serde=None, name="ss"):
        builder = Stores.session_store_builder(
            session_supplier(kind, retention, name),
            key_serde or StrSerde(),
            value_serde or LongSerde(),
        )
        if caching:
            builder.with_caching_enabled()
        store = builder.build()
        store.init(ctx, store)
        opened.append(store)
        return store

    yield build, ctx, caching
    for s in opened:
        if s.is_open:
            s.close()


def test_put_and_find_sessions_in_range(setup):
    build, _ctx, _ = setup
    store = build()
    a1 = sw("a", 10, 10)
    a2 = sw("a", 500, 1000)
    store.put(a1, 1)
    store.put(a2, 2)
    store.put(sw("a", 1500, 2000), 1)
    store.put(sw("a", 2500, 3000), 2)
    assert list(store.find_sessions("a", 0, 1000)) == [(a1, 1), (a2, 2)]
    assert list(store.find_sessions("a", 400, 600)) == [(a2, 2)]
    assert list(store.backward_find_sessions("a", 0, 1000)) == [(a2, 2), (a1, 1)]


def test_fetch_all_sessions_with_same_record_key(setup):
    build, _ctx, _ = setup
    store = build()
    expected = [
        (sw("a", 0, 0), 1),
        (sw("a", 10, 10), 2),
        (sw("a", 100, 100), 3),
        (sw("a", 1000, 1000), 4),
    ]
    for k, v in expected:
        store.put(k, v)
    store.put(sw("aa", 0, 0), 5)
    assert list(store.fetch("a")) == expected
    assert list(store.backward_fetch("a")) == expected[::-1]


def test_fetch_all_sessions_within_key_range(setup):
    build, _ctx, _ = setup
    store = build()
    expected = [
        (sw("aa", 10, 10), 2),
        (sw("aaa", 100, 100), 3),
        (sw("aaaa", 100, 100), 6),
        (sw("b", 1000, 1000), 4),
        (sw("bb", 1500, 2000), 5),
    ]
    for k, v in expected:
        store.put(k, v)
    store.put(sw("a", 0, 0), 1)
    store.put(sw("bbb", 2500, 3000), 6)
    # one segment: ordered by [key][end][start] bytes (Kafka's RocksDB order)
    assert list(store.fetch_range("aa", "bb")) == expected
    assert list(store.find_sessions_range("aa", "bb", 0, MAX_LONG)) == expected
    assert list(store.backward_fetch_range("aa", "bb")) == expected[::-1]
    assert [w.key for w, _ in store.fetch_range(None, "aa")] == ["a", "aa"]
    assert [w.key for w, _ in store.fetch_range("bb", None)] == ["bb", "bbb"]


def test_order_across_segments_is_by_end_segment(setup):
    build, _ctx, _ = setup
    store = build(retention=10 * SEGMENT_INTERVAL)  # segment interval 5 * 60s
    seg = 5 * SEGMENT_INTERVAL
    store.put(sw("b", 0, 10), 1)
    store.put(sw("a", seg + 1, seg + 5), 2)  # later segment
    store.put(sw("a", 0, 20), 3)
    store.put(sw("a", 5, 20), 4)
    assert list(store.fetch_range("a", "b")) == [
        (sw("a", 0, 20), 3),
        (sw("a", 5, 20), 4),
        (sw("b", 0, 10), 1),
        (sw("a", seg + 1, seg + 5), 2),
    ]


def test_find_values_within_merging_session_window_range(setup):
    build, _ctx, _ = setup
    store = build()
    store.put(sw("a", 0, 0), 1)
    store.put(sw("a", 1000, 1000), 2)
    assert list(store.find_sessions("a", -1, 1000)) == [
        (sw("a", 0, 0), 1),
        (sw("a", 1000, 1000), 2),
    ]


def test_remove(setup):
    build, _ctx, _ = setup
    store = build()
    store.put(sw("a", 0, 1000), 1)
    store.put(sw("a", 1500, 2500), 2)
    store.remove(sw("a", 0, 1000))
    assert list(store.find_sessions("a", 0, 1000)) == []
    assert list(store.find_sessions("a", 1500, 2500)) == [(sw("a", 1500, 2500), 2)]


def test_remove_on_none_agg_value(setup):
    build, _ctx, _ = setup
    store = build()
    store.put(sw("a", 0, 1000), 1)
    store.put(sw("a", 1500, 2500), 2)
    store.put(sw("a", 0, 1000), None)
    assert list(store.find_sessions("a", 0, 1000)) == []
    assert store.fetch_session("a", 0, 1000) is None
    assert store.fetch_session("a", 1500, 2500) == 2


def test_find_sessions_to_merge(setup):
    build, _ctx, _ = setup
    store = build()
    sessions = [sw("a", 0, 100), sw("a", 101, 200), sw("a", 201, 300), sw("a", 301, 400)]
    sessions.append(sw("a", 401, 500))
    for i, s in enumerate(sessions, 1):
        store.put(s, i)
    assert list(store.find_sessions("a", 150, 300)) == [(sessions[1], 2), (sessions[2], 3)]


def test_fetch_exact_keys(setup):
    build, _ctx, _ = setup
    big = 0x7A00000000000000
    store = build(retention=big, name="exact")
    store.put(sw("a", 0, 0), 1)
    store.put(sw("aa", 0, 10), 2)
    store.put(sw("a", 10, 20), 3)
    store.put(sw("aa", 10, 20), 4)
    store.put(sw("a", big - 2, big - 1), 5)
    assert {v for _, v in store.find_sessions("a", 0, MAX_LONG)} == {1, 3, 5}
    assert {v for _, v in store.find_sessions("aa", 0, MAX_LONG)} == {2, 4}
    assert {v for _, v in store.find_sessions_range("a", "aa", 0, MAX_LONG)} == {1, 2, 3, 4, 5}
    assert {v for _, v in store.find_sessions_range("a", "aa", 10, 0)} == {2}


def test_invalid_key_range_is_empty(setup):
    build, _ctx, _ = setup
    store = build(key_serde=IntSerde(), name="ints")
    store.put(sw(1, 0, 0), 1)
    assert list(store.find_sessions_range(-1, 1, 0, 10)) == []


# Uncached only: Kafka's caching session store does not apply retention to cached entries.
@pytest.mark.parametrize(
    "setup", [p for p in PARAMS if not p[1]], indirect=True, ids=["memory", "rocksdb"]
)
def test_not_fetch_expired_sessions(setup):
    build, _ctx, _caching = setup
    store = build()
    now = 10_000_000
    R = RETENTION_PERIOD
    store.put(sw("p", now - 3 * R, now - 2 * R), 1)
    store.put(sw("q", now - 2 * R, now - R), 4)
    store.put(sw("r", now - R, now - R // 2), 3)
    store.put(sw("p", now - R, now - R // 2), 2)
    assert {v for _, v in store.find_sessions("p", now - 2 * R, now - R)} == {2}
    assert list(store.backward_find_sessions("p", now - 5 * R, now - 4 * R)) == []
    assert list(store.find_sessions_range("p", "r", now - 5 * R, now - 4 * R)) == []
    assert {v for _, v in store.find_sessions_range("p", "r", now - R, now - R // 2)} == {2, 3, 4}
    assert store.fetch_session("p", now - 3 * R, now - 2 * R) is None


def test_expired_session_dropped_on_put(setup):
    build, _ctx, caching = setup
    store = build(retention=RETENTION_PERIOD)
    store.put(sw("initial record", 0, 2 * SEGMENT_INTERVAL), 0)
    store.put(sw("late record", 0, 0), 0)
    store.put(sw("another on-time record", 0, 2 * SEGMENT_INTERVAL), 0)
    if caching:
        store.flush()
        store.wrapped.cache.resize(0)
    assert [w.key for w, _ in store.fetch_range(None, None)] == [
        "another on-time record",
        "initial record",
    ]


def test_changelog_keys(setup):
    build, ctx, _ = setup
    store = build()
    ctx.set_time(33)
    store.put(sw("a", 5, 10), 7)
    store.remove(sw("a", 5, 10))
    store.flush()
    key = b"a" + (10).to_bytes(8, "big") + (5).to_bytes(8, "big")
    logged = [(k, v, t) for (n, k, v, t) in ctx.logged if n == "ss"]
    assert (key, None, 33) in logged
