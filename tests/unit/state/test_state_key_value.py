"""Key-value store suite over in-memory/RocksDB x caching off/on (port of Kafka's
AbstractKeyValueStoreTest cases)."""

from __future__ import annotations

import pytest
from state_test_support import IntSerde, StrSerde, kv_supplier, make_context

from streaming.state import Stores, ValueAndTimestamp

PARAMS = [
    ("memory", False),
    ("memory", True),
    ("rocksdb", False),
    ("rocksdb", True),
]


@pytest.fixture(params=PARAMS, ids=lambda p: f"{p[0]}-{'cached' if p[1] else 'uncached'}")
def setup(request, tmp_path):
    kind, caching = request.param
    ctx = make_context(tmp_path)

    def build(key_serde=None, value_serde=None, timestamped=False, name="kv"):
        sup = kv_supplier(kind, name, timestamped)
        fn = (
            Stores.timestamped_key_value_store_builder
            if timestamped
            else Stores.key_value_store_builder
        )
        builder = fn(sup, key_serde or IntSerde(), value_serde or StrSerde())
        if caching:
            builder.with_caching_enabled()
        store = builder.build()
        store.init(ctx, store)
        opened.append(store)
        return store

    opened = []
    yield build, ctx, caching
    for s in opened:
        if s.is_open:
            s.close()


def test_put_get_range(setup):
    build, ctx, _ = setup
    store = build()
    store.put(0, "zero")
    store.put(1, "one")
    store.put(2, "two")
    store.put(4, "four")
    store.put(5, "five")
    assert store.get(0) == "zero"
    assert store.get(1) == "one"
    assert store.get(2) == "two"
    assert store.get(3) is None
    assert store.get(4) == "four"
    assert store.get(5) == "five"
    store.flush()
    store.delete(5)
    store.flush()
    assert store.get(5) is None
    assert dict(store.range(2, 4)) == {2: "two", 4: "four"}
    assert dict(store.range(2, 6)) == {2: "two", 4: "four"}
    assert list(store.all()) == [(0, "zero"), (1, "one"), (2, "two"), (4, "four")]
    assert list(store.reverse_all()) == [(4, "four"), (2, "two"), (1, "one"), (0, "zero")]
    assert list(store.reverse_range(1, 4)) == [(4, "four"), (2, "two"), (1, "one")]
    # changelog: 5 puts then a delete (tombstone) of 5
    logged = [(k, v) for (_n, k, v, _t) in ctx.logged]
    assert (IntSerde().serialize(None, 5), None) in logged


def test_put_get_range_with_default_serdes_and_none_bounds(setup):
    build, _ctx, _ = setup
    store = build(StrSerde(), StrSerde())
    for k in ["b", "a", "c", "aa", "ab"]:
        store.put(k, k.upper())
    assert [k for k, _ in store.range(None, "ab")] == ["a", "aa", "ab"]
    assert [k for k, _ in store.range("ab", None)] == ["ab", "b", "c"]
    assert [k for k, _ in store.reverse_range(None, "ab")] == ["ab", "aa", "a"]
    assert [k for k, _ in store.range(None, None)] == ["a", "aa", "ab", "b", "c"]


def test_ordering_is_unsigned_key_bytes(setup):
    build, _ctx, _ = setup
    store = build()
    for k in [-1, 1, 256, 0, -256, 2**31 - 1]:
        store.put(k, str(k))
    # big-endian two's complement: negatives sort after positives
    assert [k for k, _ in store.all()] == [0, 1, 256, 2**31 - 1, -256, -1]


def test_invalid_range_returns_empty(setup):
    build, _ctx, _ = setup
    store = build()
    store.put(-1, "minus one")
    store.put(1, "one")
    # serialized -1 (0xffffffff) > serialized 1: from > to -> empty (Kafka warns)
    assert list(store.range(-1, 1)) == []
    assert list(store.reverse_range(-1, 1)) == []


def test_put_if_absent(setup):
    build, _ctx, _ = setup
    store = build()
    assert store.put_if_absent(0, "zero") is None
    assert store.put_if_absent(1, "one") is None
    assert store.put_if_absent(2, "two") is None
    assert store.put_if_absent(4, "four") is None
    assert store.put_if_absent(5, "five") is None
    assert store.put_if_absent(2, "two2") == "two"
    assert store.get(2) == "two"


def test_put_all_and_delete(setup):
    build, _ctx, _ = setup
    store = build()
    store.put_all([(1, "one"), (2, "two"), (3, "three")])
    assert store.get(2) == "two"
    assert store.delete(2) == "two"
    assert store.delete(2) is None
    assert store.get(2) is None
    store.put(3, None)
    assert list(store.all()) == [(1, "one")]
    store.put_all([(1, None), (4, "four")])
    assert list(store.all()) == [(4, "four")]


def test_prefix_scan(setup):
    build, _ctx, _ = setup
    store = build(StrSerde(), StrSerde())
    store.put("k1", "a")
    store.put("k2", "b")
    store.put("k", "c")
    store.put("j1", "d")
    store.put("k\xff", "e")
    store.put("l", "f")
    result = list(store.prefix_scan("k", StrSerde()))
    assert result == [("k", "c"), ("k1", "a"), ("k2", "b"), ("k\xff", "e")]
    assert list(store.prefix_scan("z", StrSerde())) == []


def test_modify_while_iterating(setup):
    build, _ctx, _ = setup
    store = build()
    for i in range(10):
        store.put(i, str(i))
    seen = []
    for k, _v in store.all():
        seen.append(k)
        store.delete(k)
        store.put(k + 100, "x")
    assert seen == list(range(10))
    assert [k for k, _ in store.all()] == list(range(100, 110))


def test_approximate_num_entries(setup):
    build, _ctx, _ = setup
    store = build()
    for i in range(5):
        store.put(i, str(i))
    store.flush()
    assert store.approximate_num_entries() == 5


def test_timestamped_store(setup):
    build, ctx, caching = setup
    store = build(timestamped=True)
    ctx.set_time(42)
    store.put(1, ValueAndTimestamp("one", 10))
    store.put(2, ValueAndTimestamp.make("two", 20))
    assert ValueAndTimestamp.make(None, 5) is None
    got = store.get(1)
    assert got == ValueAndTimestamp("one", 10)
    assert got.value == "one" and got.timestamp == 10
    assert list(store.all()) == [
        (1, ValueAndTimestamp("one", 10)),
        (2, ValueAndTimestamp("two", 20)),
    ]
    store.put(1, None)
    store.flush()
    assert store.get(1) is None
    # changelog carries the plain value and the value's timestamp (tombstone: record time)
    k1 = IntSerde().serialize(None, 1)
    k2 = IntSerde().serialize(None, 2)
    logged = [(k, v, t) for (_n, k, v, t) in ctx.logged]
    assert (k2, b"two", 20) in logged
    if not caching:  # the cache dedups: key 1's put is overwritten before the flush
        assert (k1, b"one", 10) in logged
    assert (k1, None, 42) in logged


def test_none_value_put_is_delete(setup):
    build, _ctx, _ = setup
    store = build()
    store.put(1, "one")
    store.put(1, None)
    assert store.get(1) is None
    assert list(store.all()) == []


def test_restore_callback(setup, tmp_path):
    build, ctx, _ = setup
    store = build(timestamped=True, name="restored")
    callback = ctx.registered["restored"]
    k = IntSerde().serialize
    callback([(k(None, 1), b"one", 7), (k(None, 2), b"two", 8), (k(None, 1), None, 9)])
    assert store.get(1) is None
    assert store.get(2) == ValueAndTimestamp("two", 8)
