"""Time-ordered window store ordering, changelog restore, and RocksDB persistence."""

from __future__ import annotations

import gc

import pytest
from state_test_support import IntSerde, LongSerde, StrSerde, make_context

from streaming.state import (
    InMemoryStateStoreContext,
    SessionWindow,
    Stores,
    TimeWindow,
    ValueAndTimestamp,
    Windowed,
)
from streaming.state.key_schema import MAX_LONG, TimeFirstWindowKeySchema, WindowKeySchema


@pytest.mark.parametrize("kind", ["memory", "rocksdb"])
@pytest.mark.parametrize("caching", [False, True])
def test_time_ordered_fetch_all_by_start_then_key(tmp_path, kind, caching):
    ctx = make_context(tmp_path)
    # Kafka's InMemoryWindowStore is ordered by window start as well
    factory = (
        Stores.persistent_time_ordered_window_store
        if kind == "rocksdb"
        else Stores.in_memory_window_store
    )
    builder = Stores.timestamped_window_store_builder(
        factory("to", 120_000, 10), StrSerde(), StrSerde()
    )
    if caching:
        builder.with_caching_enabled()
    store = builder.build()
    store.init(ctx, store)
    store.put("b", ValueAndTimestamp("b0", 1), 0)
    store.put("a", ValueAndTimestamp("a10", 2), 10)
    store.put("c", ValueAndTimestamp("c0", 3), 0)
    store.put("a", ValueAndTimestamp("a0", 4), 0)
    if caching:
        store.flush()
        store.put("bb", ValueAndTimestamp("bb0", 5), 0)
    got = [(w.key, w.window.start) for w, _ in store.fetch_all(0, 100)]
    expected = [("a", 0), ("b", 0), ("c", 0), ("a", 10)]
    if caching:
        expected.insert(2, ("bb", 0))
    assert got == expected
    assert [(w.key, w.window.start) for w, _ in store.backward_fetch_all(0, 100)] == expected[::-1]
    assert [(w.key, w.window.start) for w, _ in store.fetch_all(5, 100)] == [("a", 10)]
    assert list(store.fetch_range("a", 0, 100)) == [
        (0, ValueAndTimestamp("a0", 4)),
        (10, ValueAndTimestamp("a10", 2)),
    ]
    assert [(w.key, w.window.start) for w, _ in store.fetch_key_range("a", "b", 0, 100)] == [
        ("a", 0),
        ("b", 0),
        ("a", 10),
    ]
    assert store.fetch("c", 0) == ValueAndTimestamp("c0", 3)
    store.flush()
    # changelog keys are key-first even for the time-ordered store (Kafka)
    keys = {k for (_n, k, _v, _t) in ctx.logged}
    assert WindowKeySchema.store_key(b"a", 10, 0) in keys
    store.close()


def test_time_first_schema_changelog_key_roundtrip():
    tf = TimeFirstWindowKeySchema()
    k = tf.store_key(b"key", 123, 7)
    assert k == (123).to_bytes(8, "big") + b"key" + (7).to_bytes(4, "big")
    assert tf.from_changelog_key(tf.to_changelog_key(k)) == k
    assert tf.to_changelog_key(k) == WindowKeySchema.store_key(b"key", 123, 7)


def _kv_store(ctx, timestamped=False):
    if timestamped:
        b = Stores.timestamped_key_value_store_builder(
            Stores.persistent_timestamped_key_value_store("pkv"), IntSerde(), StrSerde()
        )
    else:
        b = Stores.key_value_store_builder(
            Stores.persistent_key_value_store("pkv"), IntSerde(), StrSerde()
        )
    store = b.with_caching_enabled().build()
    store.init(ctx, store)
    return store


def test_rocksdb_key_value_survives_close_and_reopen(tmp_path):
    ctx = make_context(tmp_path)
    store = _kv_store(ctx)
    for i in range(100):
        store.put(i, f"v{i}")
    store.delete(7)
    store.close()
    gc.collect()
    assert (tmp_path / "pkv").is_dir()
    store = _kv_store(make_context(tmp_path))
    assert store.get(5) == "v5"
    assert store.get(7) is None
    assert len(list(store.all())) == 99
    store.close()


def test_rocksdb_window_and_session_survive_reopen(tmp_path):
    def build():
        ctx = make_context(tmp_path)
        ws = Stores.window_store_builder(
            Stores.persistent_window_store("pws", 200_000, 10), IntSerde(), StrSerde()
        ).build()
        ws.init(ctx, ws)
        ss = Stores.session_store_builder(
            Stores.persistent_session_store("pss", 200_000), StrSerde(), LongSerde()
        ).build()
        ss.init(ctx, ss)
        return ws, ss

    ws, ss = build()
    ws.put(1, "a", 0)
    ws.put(1, "b", 100_000)  # second segment
    ws.put(2, "c", 100_000)
    ss.put(Windowed("k", SessionWindow(0, 5)), 3)
    ss.put(Windowed("k", SessionWindow(100_000, 100_010)), 4)
    ws.close()
    ss.close()
    gc.collect()
    ws, ss = build()
    assert list(ws.fetch_range(1, 0, MAX_LONG)) == [(0, "a"), (100_000, "b")]
    assert [w.key for w, _ in ws.all()] == [1, 1, 2]
    assert [v for _w, v in ss.fetch("k")] == [3, 4]
    ws.close()
    ss.close()


def test_state_dir_none_uses_temp_dir(tmp_path):
    ctx = InMemoryStateStoreContext(default_key_serde=StrSerde(), default_value_serde=StrSerde())
    store = Stores.key_value_store_builder(Stores.persistent_key_value_store("tmp")).build()
    store.init(ctx, store)
    store.put("a", "b")
    assert store.get("a") == "b"
    assert store.persistent
    store.close()
    assert not store.is_open


def test_restore_window_store_from_changelog(tmp_path):
    ctx = make_context(tmp_path)
    src = Stores.timestamped_window_store_builder(
        Stores.in_memory_window_store("w", 120_000, 10), IntSerde(), StrSerde()
    ).build()
    src.init(ctx, src)
    ctx.set_time(3)
    src.put(1, ValueAndTimestamp("x", 3), 0)
    src.put(2, ValueAndTimestamp("y", 4), 20)
    src.put(1, None, 0)
    records = [(k, v, t) for (_n, k, v, t) in ctx.logged]
    # restore into a fresh time-ordered RocksDB store
    ctx2 = make_context(tmp_path / "other")
    dst = Stores.timestamped_window_store_builder(
        Stores.persistent_time_ordered_window_store("w2", 120_000, 10), IntSerde(), StrSerde()
    ).build()
    dst.init(ctx2, dst)
    ctx2.registered["w2"](records)
    assert list(dst.all()) == [(Windowed(2, TimeWindow(20, 30)), ValueAndTimestamp("y", 4))]
    dst.close()


def test_builder_flags_and_durations():
    import datetime

    sup = Stores.persistent_window_store("w", datetime.timedelta(minutes=2), 1000, False)
    assert sup.retention_period == 120_000
    assert sup.segment_interval == 60_000
    b = Stores.window_store_builder(sup, IntSerde(), StrSerde())
    assert b.name == "w"
    assert b.logging_enabled and b.log_config == {}
    b.with_logging_enabled({"retention.ms": "100"})
    assert b.log_config == {"retention.ms": "100"}
    b.with_logging_disabled()
    assert not b.logging_enabled and b.log_config == {}
    with pytest.raises(ValueError):
        Stores.persistent_window_store("w", 10, 100, False)


def test_time_ordered_retention_has_no_plus_one(tmp_path):
    """Kafka's dual-schema store: actualFrom = observed - retention for time-first keys, so
    with retention == size + grace the closing window is still fetchable; the key-first
    RocksDB store and the in-memory store (Kafka's InMemoryWindowStore) return only windows
    starting after observed - retention."""
    ctx = make_context(tmp_path)
    stores = []
    for name, factory in (
        ("to", Stores.persistent_time_ordered_window_store),
        ("kf", Stores.persistent_timestamped_window_store),
        ("mem", Stores.in_memory_window_store),
    ):
        s = Stores.timestamped_window_store_builder(factory(name, 15, 10), StrSerde(), StrSerde())
        s = s.build()
        s.init(ctx, s)
        s.put("A", ValueAndTimestamp("a0", 0), 0)
        s.put("A", ValueAndTimestamp("a15", 15), 15)
        stores.append(s)
    to_store, kf_store, mem_store = stores
    assert [w.window.start for w, _ in to_store.fetch_all(0, 0)] == [0]
    assert to_store.fetch("A", 0) == ValueAndTimestamp("a0", 0)
    for s in (kf_store, mem_store):
        assert list(s.fetch_all(0, 0)) == []
        assert s.fetch("A", 0) is None
        assert [w.window.start for w, _ in s.fetch_all(0, 15)] == [15]
    for s in stores:
        s.close()
