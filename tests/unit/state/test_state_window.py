"""Window store suite over in-memory/RocksDB x caching off/on (port of Kafka's
AbstractWindowBytesStoreTest and CachingPersistentWindowStoreTest cases)."""

from __future__ import annotations

import pytest
from state_test_support import BytesSerde, IntSerde, StrSerde, make_context, window_supplier

from streaming.state import (
    Stores,
    TimeWindow,
    ValueAndTimestamp,
    Windowed,
)
from streaming.state.key_schema import MAX_LONG

WINDOW_SIZE = 3
SEGMENT_INTERVAL = 60_000
RETENTION_PERIOD = 2 * SEGMENT_INTERVAL
START = SEGMENT_INTERVAL - 4  # defaultStartTime

PARAMS = [("memory", False), ("memory", True), ("rocksdb", False), ("rocksdb", True)]


def wp(key, value, start, size=WINDOW_SIZE):
    """Kafka test's windowedPair."""
    return (Windowed(key, TimeWindow.for_size(start, size)), value)


@pytest.fixture(params=PARAMS, ids=lambda p: f"{p[0]}-{'cached' if p[1] else 'uncached'}")
def setup(request, tmp_path):
    kind, caching = request.param
    ctx = make_context(tmp_path)
    opened = []

    def build(
        retention=RETENTION_PERIOD,
        size=WINDOW_SIZE,
        dups=False,
        key_serde=None,
        value_serde=None,
        name="ws",
        timestamped=False,
    ):
        sup = window_supplier(kind, retention, size, dups, name, timestamped)
        fn = Stores.timestamped_window_store_builder if timestamped else Stores.window_store_builder
        builder = fn(sup, key_serde or IntSerde(), value_serde or StrSerde())
        if caching:
            builder.with_caching_enabled()
        store = builder.build()
        store.init(ctx, store)
        opened.append(store)
        return store

    build.kind = kind
    yield build, ctx, caching
    for s in opened:
        if s.is_open:
            s.close()


def put_first_batch(store, start=START):
    store.put(0, "zero", start)
    store.put(1, "one", start + 1)
    store.put(2, "two", start + 2)
    store.put(3, "three", start + 2)
    store.put(4, "four", start + 4)
    store.put(5, "five", start + 5)


def put_second_batch(store, start=START):
    for i in range(1, 7):
        store.put(2, f"two+{i}", start + 2 + i)


def values(it):
    return {v for _t, v in it}


zero = wp(0, "zero", START)
one = wp(1, "one", START + 1)
two = wp(2, "two", START + 2)
three = wp(3, "three", START + 2)
four = wp(4, "four", START + 4)
five = wp(5, "five", START + 5)


def test_range_and_single_point_fetch(setup):
    build, ctx, _ = setup
    store = build()
    put_first_batch(store)
    assert values(store.fetch_range(0, START - WINDOW_SIZE, START + WINDOW_SIZE)) == {"zero"}
    put_second_batch(store)
    for i in range(1, 7):
        assert store.fetch(2, START + 2 + i) == f"two+{i}"
    expected = {
        -2: set(),
        -1: {"two"},
        0: {"two", "two+1"},
        1: {"two", "two+1", "two+2"},
        2: {"two", "two+1", "two+2", "two+3"},
        3: {"two", "two+1", "two+2", "two+3", "two+4"},
        4: {"two", "two+1", "two+2", "two+3", "two+4", "two+5"},
        5: {"two", "two+1", "two+2", "two+3", "two+4", "two+5", "two+6"},
        6: {"two+1", "two+2", "two+3", "two+4", "two+5", "two+6"},
        7: {"two+2", "two+3", "two+4", "two+5", "two+6"},
        8: {"two+3", "two+4", "two+5", "two+6"},
        9: {"two+4", "two+5", "two+6"},
        10: {"two+5", "two+6"},
        11: {"two+6"},
        12: set(),
    }
    for d, exp in expected.items():
        t = START + d
        assert values(store.fetch_range(2, t - WINDOW_SIZE, t + WINDOW_SIZE)) == exp, d
    store.flush()
    # changelog: every put logged with key-first window key [key][start][seqnum=0]
    by_key: dict[int, set[str]] = {}
    for _name, k, v, _ts in ctx.logged:
        key = IntSerde().deserialize(None, k[:-12])
        start = int.from_bytes(k[-12:-4], "big", signed=True)
        assert k[-4:] == b"\x00\x00\x00\x00"
        by_key.setdefault(key, set()).add(f"{v.decode()}@{start - START}")
    assert by_key[0] == {"zero@0"}
    assert by_key[1] == {"one@1"}
    assert by_key[2] == {"two@2", "two+1@3", "two+2@4", "two+3@5", "two+4@6", "two+5@7", "two+6@8"}
    assert by_key[3] == {"three@2"}
    assert 6 not in by_key


def test_get_all(setup):
    build, _ctx, _ = setup
    store = build()
    put_first_batch(store)
    assert list(store.all()) == [zero, one, two, three, four, five]
    assert list(store.backward_all()) == [five, four, three, two, one, zero]


def test_get_all_non_deleted(setup):
    build, _ctx, _ = setup
    store = build()
    for i, name in enumerate(["zero", "one", "two", "three", "four"]):
        store.put(i, name, START + i)
    store.put(1, None, START + 1)
    store.put(3, None, START + 3)
    assert list(store.all()) == [zero, two, four]


def test_fetch_all_in_time_range(setup):
    build, _ctx, _ = setup
    store = build()
    put_first_batch(store)
    assert list(store.fetch_all(START + 1, START + 4)) == [one, two, three, four]
    assert list(store.fetch_all(START + 0, START + 3)) == [zero, one, two, three]
    assert list(store.fetch_all(START + 1, START + 5)) == [one, two, three, four, five]
    assert list(store.backward_fetch_all(START + 1, START + 4)) == [four, three, two, one]
    assert list(store.backward_fetch_all(START + 0, START + 3)) == [three, two, one, zero]


def test_fetch_key_range(setup):
    build, _ctx, _ = setup
    store = build()
    put_first_batch(store)
    W = WINDOW_SIZE
    assert list(store.fetch_key_range(0, 1, START - W, START + W)) == [zero, one]
    assert list(store.fetch_key_range(1, 1, START - W, START + W)) == [one]
    assert list(store.fetch_key_range(1, 3, START - W, START + W)) == [one, two, three]
    assert list(store.fetch_key_range(0, 5, START - W, START + W)) == [zero, one, two, three]
    assert list(store.fetch_key_range(0, 5, START - W, START + W + 5)) == [
        zero,
        one,
        two,
        three,
        four,
        five,
    ]
    assert list(store.fetch_key_range(0, 5, START + 2, START + W + 5)) == [two, three, four, five]
    assert list(store.fetch_key_range(4, 5, START + 2, START + W)) == []
    assert list(store.fetch_key_range(0, 3, START + 3, START + W + 5)) == []
    assert list(store.backward_fetch_key_range(0, 5, START - W, START + W + 5)) == [
        five,
        four,
        three,
        two,
        one,
        zero,
    ]
    assert list(store.backward_fetch_key_range(1, 3, START - W, START + W)) == [three, two, one]
    # None bounds are unbounded
    assert list(store.fetch_key_range(None, 1, START - W, START + W)) == [zero, one]
    assert list(store.fetch_key_range(4, None, START, START + 10)) == [four, five]
    # invalid range (serialized -1 > serialized 1) -> empty
    assert list(store.fetch_key_range(-1, 1, 0, 10)) == []


def test_fetch_all_orders_by_segment_then_key_bytes(setup):
    """RocksDB: segment-major, key bytes inside a segment; in-memory (Kafka's
    InMemoryWindowStore): by window start, then key bytes."""
    build, _ctx, _ = setup
    if build.kind == "memory":
        store = build()
        store.put(2, "a", 100)
        store.put(1, "b", 200)
        store.put(1, "c", 150)
        store.put(0, "d", 150)
        expected = [wp(2, "a", 100), wp(0, "d", 150), wp(1, "c", 150), wp(1, "b", 200)]
        assert list(store.fetch_all(0, MAX_LONG)) == expected
        assert list(store.all()) == expected
        assert list(store.backward_all()) == expected[::-1]
        return
    store = build()  # segment interval = max(retention / 2, 60s) = 60s
    store.put(2, "a", 100)
    store.put(1, "b", 200)
    store.put(1, "c", 150)
    store.put(0, "d", SEGMENT_INTERVAL + 5)  # next segment
    expected = [wp(1, "c", 150), wp(1, "b", 200), wp(2, "a", 100), wp(0, "d", SEGMENT_INTERVAL + 5)]
    assert list(store.fetch_all(0, MAX_LONG)) == expected
    assert list(store.all()) == expected
    assert list(store.backward_all()) == expected[::-1]
    assert list(store.fetch_key_range(0, 2, 0, SEGMENT_INTERVAL * 2)) == expected


def test_retention_drops_expired_windows(setup):
    build, _ctx, caching = setup
    store = build()
    store.put(1, "one", 0)
    store.put(1, "two", 4 * RETENTION_PERIOD)
    # shouldNotThrowExceptionWhenFetchRangeIsExpired
    if caching:
        # Kafka's CachingWindowStore does not apply retention to entries still in the cache
        assert list(store.fetch_range(1, 0, 10)) == [(0, "one")]
    else:
        assert list(store.fetch_range(1, 0, 10)) == []
        assert store.fetch(1, 0) is None


def test_retention_boundary_is_stream_time_minus_retention_plus_one(setup):
    build, _ctx, caching = setup
    retention = 1000
    store = build(retention=retention, size=10)
    store.put(1, "a", 0)
    store.put(1, "b", 500)
    store.put(1, "c", 1500)
    if caching:
        store.flush()
        # flushed clean entries stay cached and are still returned (Kafka); evict them
        store.wrapped.cache.resize(0)
    # observed stream time 1500 -> visible from 1500 - 1000 + 1 = 501
    assert [t for t, _ in store.fetch_range(1, 0, 2000)] == [1500]
    store.put(1, "c", 1499)  # stream time stays 1500
    assert [t for t, _ in store.fetch_range(1, 0, 2000)] == [1499, 1500]
    store.put(2, "x", 1500 - 1000 + 1)
    assert store.fetch(2, 501) == "x"
    store.put(3, "late", 500)  # expired on arrival
    if caching:
        store.flush()
        store.wrapped.cache.resize(0)
    assert store.fetch(3, 500) is None
    # key-first in RocksDB, time-first in memory (Kafka's InMemoryWindowStore)
    assert [w.key for w, _ in store.all()] == ([2, 1, 1] if build.kind == "memory" else [1, 1, 2])


def test_late_record_dropped_after_stream_time_advanced(setup):
    build, _ctx, caching = setup
    store = build()
    store.put(1, "initial record", 2 * RETENTION_PERIOD)
    store.put(1, "late record", 0)
    store.put(1, "another on-time record", RETENTION_PERIOD + 1)
    if caching:
        store.flush()
        store.wrapped.cache.resize(0)
    assert [v for _t, v in store.fetch_range(1, 0, MAX_LONG)] == [
        "another on-time record",
        "initial record",
    ]


def test_fetch_and_iterate_over_exact_keys(setup):
    build, _ctx, _ = setup
    size = 0x7A00000000000000
    store = build(retention=size, size=size, key_serde=StrSerde(), name="exact")
    store.put("a", "0001", 0)
    store.put("aa", "0002", 0)
    store.put("a", "0003", 1)
    store.put("aa", "0004", 1)
    store.put("a", "0005", size - 1)
    assert values(store.fetch_range("a", 0, MAX_LONG)) == {"0001", "0003", "0005"}
    assert set(store.fetch_key_range("a", "a", 0, MAX_LONG)) == {
        wp("a", "0001", 0, size),
        wp("a", "0003", 1, size),
        wp("a", "0005", size - 1, size),
    }
    assert set(store.fetch_key_range("aa", "aa", 0, MAX_LONG)) == {
        wp("aa", "0002", 0, size),
        wp("aa", "0004", 1, size),
    }


def test_delete_and_update(setup):
    build, _ctx, _ = setup
    store = build()
    store.put(1, "one", 0)
    store.put(1, "one v2", 0)
    assert list(store.fetch_range(1, 0, 0)) == [(0, "one v2")]
    store.put(1, None, 0)
    assert list(store.fetch_range(1, 0, 0)) == []
    assert store.fetch(1, 0) is None


def test_records_added_after_iterator_creation_in_later_segment_visible(setup):
    """shouldNotThrowConcurrentModificationException: segments are opened lazily."""
    build, _ctx, caching = setup
    store = build()
    store.put(1, "one", 0)
    store.put(1, "two", WINDOW_SIZE * 10)
    it = store.all()
    store.put(1, "three", WINDOW_SIZE * 20)
    store.put(2, "four", WINDOW_SIZE * 30)
    got = list(it)
    if caching:
        # the cache iterator snapshots its keys when created (Kafka's ThreadCache iterator)
        assert got == [wp(1, "one", 0), wp(1, "two", WINDOW_SIZE * 10)]
    else:
        assert got == [
            wp(1, "one", 0),
            wp(1, "two", WINDOW_SIZE * 10),
            wp(1, "three", WINDOW_SIZE * 20),
            wp(2, "four", WINDOW_SIZE * 30),
        ]


def test_retain_duplicates(setup):
    build, ctx, _ = setup
    store = build(dups=True, name="dups")
    t = 0
    store.put(1, "one", t)
    store.put(1, "one-2", t)
    t += WINDOW_SIZE * 10
    store.put(1, "two", t)
    store.put(1, "two-2", t)
    t += WINDOW_SIZE * 10
    store.put(1, "three", t)
    store.put(1, "three-2", t)
    assert list(store.fetch_range(1, 0, WINDOW_SIZE * 10)) == [
        (0, "one"),
        (0, "one-2"),
        (30, "two"),
        (30, "two-2"),
    ]
    # deletes are no-ops with duplicates
    store.put(1, None, 0)
    assert len(list(store.fetch_range(1, 0, 0))) == 2
    # changelog keys carry increasing sequence numbers
    seqs = [int.from_bytes(k[-4:], "big") for (n, k, _v, _t) in ctx.logged if n == "dups"]
    assert seqs[:6] == [1, 2, 3, 4, 5, 6]


def test_put_same_key_timestamp_with_duplicates(setup):
    build, _ctx, _ = setup
    store = build(dups=True, name="dups2")
    store.put(0, "zero", START)
    assert values(store.fetch_range(0, START - WINDOW_SIZE, START + WINDOW_SIZE)) == {"zero"}
    store.put(0, "zero", START)
    store.put(0, "zero+", START)
    store.put(0, "zero++", START)
    got = [v for _t, v in store.fetch_range(0, START - WINDOW_SIZE, START + WINDOW_SIZE)]
    assert got == ["zero", "zero", "zero+", "zero++"]
    assert [v for _t, v in store.fetch_range(0, START + 4 - WINDOW_SIZE, START + 4 + 3)] == []


def test_exact_binary_keys_with_duplicates(setup):
    build, _ctx, _ = setup
    store = build(dups=True, key_serde=BytesSerde(), name="bin")
    k1, k2, k3 = b"\x00", b"\x00\x00", b"\x00\x00\x00"
    store.put(k1, "1", 0)
    store.put(k2, "2", 0)
    store.put(k3, "3", 0)
    store.put(k1, "4", 1)
    store.put(k2, "5", 1)
    store.put(k3, "6", 59999)
    store.put(k1, "7", 59999)
    store.put(k2, "8", 59999)
    store.put(k3, "9", 59999)
    assert values(store.fetch_range(k1, 0, MAX_LONG)) == {"1", "4", "7"}
    assert values(store.fetch_range(k2, 0, MAX_LONG)) == {"2", "5", "8"}
    assert values(store.fetch_range(k3, 0, MAX_LONG)) == {"3", "6", "9"}


def test_single_key_fetch_equals_key_range_fetch(setup):
    build, _ctx, _ = setup
    store = build()
    store.put(1, "one", 0)
    store.put(2, "two", 1)
    store.put(2, "two", 2)
    store.put(3, "three", 3)
    single = [v for _t, v in store.fetch_range(2, 0, 5)]
    ranged = [v for _w, v in store.fetch_key_range(2, 2, 0, 5)]
    assert single == ranged == ["two", "two"]
    assert [t for t, _ in store.backward_fetch_range(2, 0, 5)] == [2, 1]


def test_timestamped_window_store(setup):
    build, ctx, _ = setup
    store = build(timestamped=True, name="tws")
    ctx.set_time(77)
    store.put(1, ValueAndTimestamp("a", 5), 0)
    assert store.fetch(1, 0) == ValueAndTimestamp("a", 5)
    assert list(store.fetch_all(0, 10)) == [
        (Windowed(1, TimeWindow(0, WINDOW_SIZE)), ValueAndTimestamp("a", 5))
    ]
    store.flush()
    assert ("tws", IntSerde().serialize(None, 1) + bytes(12), b"a", 5) in ctx.logged


def test_windowed_str():
    w = Windowed("k", TimeWindow(0, 10))
    assert str(w) == "[k@0/10]"
    assert w == Windowed("k", TimeWindow(0, 10))
    assert hash(w) == hash(Windowed("k", TimeWindow(0, 10)))
    with pytest.raises(ValueError):
        TimeWindow(5, 5)


@pytest.mark.parametrize("kind", ["memory", "rocksdb"])
def test_null_put_with_duplicates_advances_stream_time_in_memory_only(tmp_path, kind):
    """Kafka's InMemoryWindowStore observes the time of a no-op delete (retainDuplicates);
    RocksDBWindowStore skips it before the segmented store sees it."""
    ctx = make_context(tmp_path)
    store = Stores.window_store_builder(
        window_supplier(kind, 10, 5, True, "dups", False), IntSerde(), StrSerde()
    ).build()
    store.init(ctx, store)
    try:
        store.put(1, "a", 0)
        store.put(1, None, 100)
        visible = [v for _, v in store.fetch_range(1, 0, 100)]
        assert visible == ([] if kind == "memory" else ["a"])
    finally:
        store.close()
