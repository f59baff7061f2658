"""Versioned key-value store: ports of Kafka Streams 4.1's ``RocksDBVersionedStoreTest`` cases,
run against the RocksDB store and the in-memory variant (same code over other segments)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from streaming import serdes
from streaming.state import InMemoryStateStoreContext, Stores
from streaming.state.versioned import (
    PUT_RETURN_CODE_NOT_PUT,
    PUT_RETURN_CODE_VALID_TO_UNDEFINED,
    VersionedRecord,
)

HISTORY_RETENTION = 300_000
SEGMENT_INTERVAL = HISTORY_RETENTION // 3
SI = SEGMENT_INTERVAL
UNDEFINED = PUT_RETURN_CODE_VALID_TO_UNDEFINED


@pytest.fixture(params=["rocksdb", "in_memory"])
def store(request: Any) -> Iterator[Any]:
    factory = (
        Stores.persistent_versioned_key_value_store
        if request.param == "rocksdb"
        else Stores.in_memory_versioned_key_value_store
    )
    supplier = factory("versioned-store", HISTORY_RETENTION, SEGMENT_INTERVAL)
    s = Stores.versioned_key_value_store_builder(supplier, serdes.String(), serdes.String()).build()
    ctx = InMemoryStateStoreContext(capture_changelog=True)
    s.init(ctx, s)
    s.test_context = ctx
    yield s
    s.close()


def put(store: Any, key: str, value: str | None, ts: int, expected: int) -> None:
    assert store.put(key, value, ts) == expected


def at(store: Any, key: str, ts: int, value: str, valid_from: int, valid_to: int) -> None:
    record = store.get(key, ts)
    assert record is not None, f"nothing for {key}@{ts}"
    assert (record.value, record.timestamp) == (value, valid_from)
    assert (record.valid_to if record.valid_to is not None else UNDEFINED) == valid_to


def test_put_latest(store: Any) -> None:
    put(store, "k", "v", 10, UNDEFINED)
    put(store, "k", "v2", 11, UNDEFINED)
    assert store.get("k") == VersionedRecord("v2", 11)
    at(store, "k", 10, "v", 10, 11)
    assert store.get("k", 9) is None


def test_put_into_multiple_segments(store: Any) -> None:
    put(store, "k", None, SI - 20, UNDEFINED)
    put(store, "k", "vn10", SI - 10, UNDEFINED)
    put(store, "k", None, SI - 1, UNDEFINED)
    put(store, "k", None, SI + 1, UNDEFINED)
    put(store, "k", "vp10", SI + 10, UNDEFINED)
    put(store, "k", None, SI + 20, UNDEFINED)
    assert store.get("k") is None
    assert store.get("k", SI + 30) is None
    at(store, "k", SI + 15, "vp10", SI + 10, SI + 20)
    for ts in (SI + 5, SI + 2, SI, SI - 1, SI - 15):
        assert store.get("k", ts) is None
    at(store, "k", SI - 5, "vn10", SI - 10, SI - 1)


def test_put_repeat_timestamps(store: Any) -> None:
    put(store, "k", "to_be_replaced", SI + 20, UNDEFINED)
    put(store, "k", None, SI - 10, SI + 20)
    put(store, "k", "to_be_replaced", SI - 10, SI + 20)
    put(store, "k", None, SI - 10, SI + 20)
    put(store, "k", "to_be_replaced", SI - 1, SI + 20)
    put(store, "k", "to_be_replaced", SI + 1, SI + 20)
    put(store, "k", None, SI - 1, SI + 1)
    put(store, "k", None, SI + 1, SI + 20)
    put(store, "k", None, SI + 10, SI + 20)
    put(store, "k", None, SI + 5, SI + 10)
    put(store, "k", "vp5", SI + 5, SI + 10)
    put(store, "k", "to_be_replaced", SI - 5, SI - 1)
    put(store, "k", "vn5", SI - 5, SI - 1)
    put(store, "k", None, SI + 20, UNDEFINED)
    put(store, "k", None, SI + 20, UNDEFINED)
    put(store, "k", "vn6", SI - 6, SI - 5)
    assert store.get("k") is None
    for ts in (SI + 30, SI + 15, SI + 2, SI, SI - 1, SI - 8):
        assert store.get("k", ts) is None
    at(store, "k", SI + 6, "vp5", SI + 5, SI + 10)
    at(store, "k", SI - 5, "vn5", SI - 5, SI - 1)
    at(store, "k", SI - 6, "vn6", SI - 6, SI - 5)


def test_move_record_to_older_segment_during_put(store: Any) -> None:
    put(store, "k", "vp20", SI + 20, UNDEFINED)
    put(store, "k", "vp10", SI + 10, SI + 20)
    put(store, "k", "vn10", SI - 10, SI + 10)
    put(store, "k", "vn2", SI - 2, SI + 10)
    put(store, "k", "vn1", SI - 1, SI + 10)
    put(store, "k", "vp1", SI + 1, SI + 10)
    assert store.get("k") == VersionedRecord("vp20", SI + 20)
    at(store, "k", SI + 30, "vp20", SI + 20, UNDEFINED)
    at(store, "k", SI + 15, "vp10", SI + 10, SI + 20)
    at(store, "k", SI + 5, "vp1", SI + 1, SI + 10)
    at(store, "k", SI, "vn1", SI - 1, SI + 1)
    at(store, "k", SI - 1, "vn1", SI - 1, SI + 1)
    at(store, "k", SI - 2, "vn2", SI - 2, SI - 1)
    at(store, "k", SI - 5, "vn10", SI - 10, SI - 2)


def test_get_from_older_segments(store: Any) -> None:
    for i in (1, 2, 3):
        put(store, "ko", None, i * SI - 10, UNDEFINED)
    assert store.get("k", SI - 20) is None
    put(store, "k", "v", SI - 20, UNDEFINED)
    put(store, "k", None, SI - 10, UNDEFINED)
    assert store.get("k", SI - 30) is None
    at(store, "k", SI - 15, "v", SI - 20, SI - 10)
    assert store.get("k", SI - 5) is None
    put(store, "k", "v2", 3 * SI - 20, UNDEFINED)
    put(store, "k", None, 3 * SI - 10, UNDEFINED)
    assert store.get("k", SI - 30) is None
    at(store, "k", SI - 15, "v", SI - 20, SI - 10)
    assert store.get("k", SI - 5) is None


def test_not_put_expired(store: Any) -> None:
    put(store, "k", "v", HISTORY_RETENTION + 10, UNDEFINED)
    put(store, "k1", "v1", 10, UNDEFINED)  # grace period (= history retention) not elapsed
    assert store.get("k1") == VersionedRecord("v1", 10)
    put(store, "k2", "v2", 9, PUT_RETURN_CODE_NOT_PUT)
    assert store.get("k2") is None


def test_get_expired_only_if_latest_value(store: Any) -> None:
    put(store, "k", "v_old", 0, UNDEFINED)
    put(store, "k", "v", 100, UNDEFINED)
    put(store, "ko", "vo", HISTORY_RETENTION + 101, UNDEFINED)  # advances stream time
    assert store.get("k", 50) is None  # history retention elapsed
    at(store, "k", HISTORY_RETENTION, "v", 100, UNDEFINED)  # the latest version never expires


def test_delete_returns_previous_version(store: Any) -> None:
    put(store, "k", "v", 10, UNDEFINED)
    put(store, "k", "v2", 20, UNDEFINED)
    assert store.delete("k", 15) == VersionedRecord("v", 10, 20)
    assert store.get("k", 16) is None
    at(store, "k", 20, "v2", 20, UNDEFINED)
    assert store.delete("k", 30) == VersionedRecord("v2", 20)
    assert store.get("k") is None


def test_changelog_and_restore_with_nulls(store: Any) -> None:
    records = [
        ("k", None, SI + 20),
        ("k", None, SI - 1),
        ("k", None, SI + 1),
        ("k", None, SI - 10),
        ("k", None, SI + 10),
        ("k", "vp5", SI + 5),
        ("k", "vn5", SI - 5),
        ("k", "vn6", SI - 6),
    ]
    for key, value, ts in records:
        store.put(key, value, ts)
    logged = [(k, v, ts) for _name, k, v, ts in store.test_context.logged]
    assert logged == [(b"k", None if v is None else v.encode(), ts) for _k, v, ts in records]
    # restoring the changelog into a fresh store gives the same history (Kafka's
    # shouldRestoreWithNulls expectations)
    supplier = Stores.in_memory_versioned_key_value_store("restored", HISTORY_RETENTION, SI)
    restored = Stores.versioned_key_value_store_builder(
        supplier, serdes.String(), serdes.String()
    ).build()
    ctx = InMemoryStateStoreContext()
    restored.init(ctx, restored)
    ctx.registered["restored"](logged)
    for s in (store, restored):
        assert s.get("k") is None
        for ts in (SI + 30, SI + 15, SI + 2, SI, SI - 1, SI - 8):
            assert s.get("k", ts) is None
        at(s, "k", SI + 6, "vp5", SI + 5, SI + 10)
        at(s, "k", SI - 5, "vn5", SI - 5, SI - 1)
        at(s, "k", SI - 6, "vn6", SI - 6, SI - 5)
    restored.close()


def test_versioned_builder_rejects_caching() -> None:
    builder = Stores.versioned_key_value_store_builder(
        Stores.persistent_versioned_key_value_store("v", 10)
    )
    with pytest.raises(ValueError, match="do not support caching"):
        builder.with_caching_enabled()


def test_default_segment_interval() -> None:
    from streaming.state.versioned import default_segment_interval

    assert default_segment_interval(0) == 2_000
    assert default_segment_interval(60_000) == 20_000
    assert default_segment_interval(300_000) == 60_000
    assert default_segment_interval(3_600_000) == 300_000
    assert default_segment_interval(48 * 3_600_000) == 7_200_000
