"""The stream-stream outer-join store: TimestampedKeyAndJoinSide / LeftOrRightValue serdes and
the list-valued key-value store (ports of Kafka's TimestampedKeyAndJoinSideSerializerTest,
LeftOrRightValueSerializerTest and ListValueStoreTest)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streaming import serdes
from streaming.state import Stores
from streaming.state.api import InMemoryStateStoreContext
from streaming.state.join_side import (
    LeftOrRightValue,
    LeftOrRightValueSerde,
    TimestampedKeyAndJoinSide,
    TimestampedKeyAndJoinSideSerde,
)
from streaming.state.list_value_store import (
    ListValueKeyValueStore,
    ListValueStoreBuilder,
    deserialize_list,
    serialize_list,
)

KEY_SERDE = TimestampedKeyAndJoinSideSerde(serdes.String())
VALUE_SERDE = LeftOrRightValueSerde(serdes.String(), serdes.Long())


# ---------------------------------------------------------------------------- serdes


def test_timestamped_key_and_join_side_layout() -> None:
    left = TimestampedKeyAndJoinSide.make_left("k", 10)
    raw = KEY_SERDE.serialize("t", left)
    assert raw == (10).to_bytes(8, "big") + b"\x01" + b"k"
    assert KEY_SERDE.deserialize("t", raw) == left
    right = TimestampedKeyAndJoinSide.make_right("k", 10)
    assert KEY_SERDE.serialize("t", right)[8] == 0
    assert KEY_SERDE.deserialize("t", KEY_SERDE.serialize("t", right)) == right
    assert KEY_SERDE.serialize("t", None) is None


def test_timestamped_key_and_join_side_requires_a_key() -> None:
    with pytest.raises(ValueError, match="key cannot be null"):
        TimestampedKeyAndJoinSide.make_left(None, 1)


def test_left_or_right_value_layout() -> None:
    left = LeftOrRightValue.make_left_value("v")
    assert VALUE_SERDE.serialize("t", left) == b"\x01v"
    assert VALUE_SERDE.deserialize("t", b"\x01v") == left
    right = LeftOrRightValue.make_right_value(7)
    raw = VALUE_SERDE.serialize("t", right)
    assert raw == b"\x00" + (7).to_bytes(8, "big")
    assert VALUE_SERDE.deserialize("t", raw) == right
    assert VALUE_SERDE.deserialize("t", b"") is None


def test_left_or_right_value_holds_exactly_one_side() -> None:
    with pytest.raises(ValueError):
        LeftOrRightValue("a", 1)
    with pytest.raises(ValueError):
        LeftOrRightValue(None, None)


def test_list_layout_is_kafkas_list_serde_for_byte_arrays() -> None:
    raw = serialize_list([b"ab", b""])
    assert raw == b"\x01" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x02ab" + b"\x00\x00\x00\x00"
    assert deserialize_list(raw) == [b"ab", b""]


# ---------------------------------------------------------------------------- the store


@pytest.fixture(params=["in_memory", "rocksdb"])
def store(request: pytest.FixtureRequest, tmp_path) -> Iterator[ListValueKeyValueStore]:
    supplier = (
        Stores.in_memory_key_value_store("outer")
        if request.param == "in_memory"
        else Stores.persistent_key_value_store("outer")
    )
    builder = ListValueStoreBuilder(supplier, serdes.String(), serdes.String(), serdes.Long())
    s = builder.build()
    ctx = InMemoryStateStoreContext(state_dir=tmp_path, capture_changelog=True)
    ctx.set_time(5)
    s.init(ctx, s)
    s.ctx = ctx  # type: ignore[attr-defined]
    yield s
    s.close()


def _left(key: str, ts: int) -> TimestampedKeyAndJoinSide:
    return TimestampedKeyAndJoinSide.make_left(key, ts)


def _right(key: str, ts: int) -> TimestampedKeyAndJoinSide:
    return TimestampedKeyAndJoinSide.make_right(key, ts)


def test_puts_append_and_all_yields_one_entry_per_value(store: ListValueKeyValueStore) -> None:
    store.put(_left("a", 2), LeftOrRightValue.make_left_value("x"))
    store.put(_left("a", 2), LeftOrRightValue.make_left_value("y"))
    store.put(_right("b", 2), LeftOrRightValue.make_right_value(3))
    store.put(_left("a", 1), LeftOrRightValue.make_left_value("z"))
    # by timestamp, then right (0) before left (1), then key; duplicates in insertion order
    assert list(store.all()) == [
        (_left("a", 1), LeftOrRightValue.make_left_value("z")),
        (_right("b", 2), LeftOrRightValue.make_right_value(3)),
        (_left("a", 2), LeftOrRightValue.make_left_value("x")),
        (_left("a", 2), LeftOrRightValue.make_left_value("y")),
    ]


def test_put_none_drops_the_whole_list(store: ListValueKeyValueStore) -> None:
    store.put(_left("a", 2), LeftOrRightValue.make_left_value("x"))
    store.put(_left("a", 2), LeftOrRightValue.make_left_value("y"))
    store.put(_left("a", 2), None)
    assert list(store.all()) == []


def test_put_if_absent_none_deletes_only_existing_keys(store: ListValueKeyValueStore) -> None:
    store.put(_left("a", 2), LeftOrRightValue.make_left_value("x"))
    assert store.put_if_absent(_left("a", 2), None) is None
    assert store.put_if_absent(_right("a", 2), None) is None
    assert list(store.all()) == []
    # nothing was written for the absent key: only the put and its deletion were logged
    logged = [(k, v is None) for _, k, v, _ in store.ctx.logged]  # type: ignore[attr-defined]
    raw = KEY_SERDE.serialize(None, _left("a", 2))
    assert logged == [(raw, False), (raw, True)]


def test_changelog_holds_the_whole_list(store: ListValueKeyValueStore) -> None:
    store.put(_left("a", 2), LeftOrRightValue.make_left_value("x"))
    store.put(_left("a", 2), LeftOrRightValue.make_left_value("y"))
    _, key, value, ts = store.ctx.logged[-1]  # type: ignore[attr-defined]
    assert key == KEY_SERDE.serialize(None, _left("a", 2))
    assert deserialize_list(value) == [b"\x01x", b"\x01y"]
    assert ts == 5


def test_deleting_while_iterating_is_safe(store: ListValueKeyValueStore) -> None:
    for ts in range(5):
        store.put(_left("a", ts), LeftOrRightValue.make_left_value(str(ts)))
    seen = []
    prev = None
    for key, value in store.all():
        seen.append(value.left_value)
        if prev is not None:
            store.put(prev, None)
        prev = key
    store.put(prev, None)
    assert seen == ["0", "1", "2", "3", "4"]
    assert list(store.all()) == []


def test_default_serdes_come_from_the_context(tmp_path) -> None:
    builder = ListValueStoreBuilder(Stores.in_memory_key_value_store("o"), None, None, None)
    s = builder.build()
    ctx = InMemoryStateStoreContext(
        default_key_serde=serdes.String(), default_value_serde=serdes.String()
    )
    s.init(ctx, s)
    s.put(_right("k", 1), LeftOrRightValue.make_right_value("v"))
    assert list(s.all()) == [(_right("k", 1), LeftOrRightValue.make_right_value("v"))]
