"""The shortcuts of the segmented stores against their general forms: ``SortedKeys`` (the
write buffer's key order) against a sorted list, each key schema's ``entry_condition``
against its ``condition``, and a RocksDB segment's buffered scan against ``overlay`` of the
buffer over what RocksDB holds, on random keys, bounds and directions."""

from __future__ import annotations

import random
import struct

import pytest
from state_test_support import make_context

import streaming.state.sorted_keys as sorted_keys_module
from streaming.state.key_schema import (
    MAX_LONG,
    SESSION_KEY_SCHEMA,
    TIME_FIRST_WINDOW_KEY_SCHEMA,
    WINDOW_KEY_SCHEMA,
)
from streaming.state.segmented_bytes_store import SegmentedBytesStore
from streaming.state.segments import BufferedRocksDBSegment
from streaming.state.sorted_keys import SortedKeys
from streaming.state.uncommitted import overlay

KEYS = [b"a", b"a\x00", b"ab", b"b", b"ba", b"\x7f", b"\x80", b"\xff", b"\xff\xff"]


def _random_key(rng: random.Random) -> bytes:
    return bytes(rng.choice(b"\x00\x01ab\x7f\x80\xff") for _ in range(rng.randrange(0, 4)))


def _bound(rng: random.Random) -> bytes | None:
    return None if rng.random() < 0.15 else _random_key(rng)


@pytest.mark.parametrize("load", [1, 2, 7, 512])
@pytest.mark.parametrize("seed", range(3))
def test_sorted_keys_match_a_sorted_list(monkeypatch, load: int, seed: int) -> None:
    monkeypatch.setattr(sorted_keys_module, "LOAD", load)
    rng = random.Random(seed)
    keys = SortedKeys()
    model: set[bytes] = set()
    for step in range(3_000):
        key = _random_key(rng)
        if key in model:
            keys.remove(key)
            model.discard(key)
        else:
            keys.add(key)
            model.add(key)
        if step % 7 == 0:
            lower, upper = _bound(rng), _bound(rng)
            expected = [
                k
                for k in sorted(model)
                if (lower is None or k >= lower) and (upper is None or k <= upper)
            ]
            assert keys.range(lower, upper) == expected
        if step % 101 == 0:
            assert list(keys) == sorted(model)
            assert len(keys) == len(model)
        if step == 2_000:
            keys.clear()
            model.clear()
            assert keys.range(None, None) == []


@pytest.mark.parametrize(
    "schema",
    [SESSION_KEY_SCHEMA, WINDOW_KEY_SCHEMA, TIME_FIRST_WINDOW_KEY_SCHEMA],
    ids=["session", "window", "time-first"],
)
def test_entry_condition_is_condition(schema) -> None:
    rng = random.Random(5)
    times = [0, 1, 5, 6, 10, 11, MAX_LONG]
    store_keys = [
        schema.store_key(key, a, b)
        if schema is not SESSION_KEY_SCHEMA
        else schema.store_key(key, min(a, b), max(a, b))
        for key in KEYS
        for a in times
        for b in (0, 3, 7, 12)
    ]
    checked = 0
    for _ in range(400):
        key_from = rng.choice([None, *KEYS])
        key_to = key_from if rng.random() < 0.4 else rng.choice([None, *KEYS])
        time_from = rng.choice(times)
        time_to = rng.choice(times)
        general = schema.condition(key_from, key_to, time_from, time_to)
        fast = schema.entry_condition(key_from, key_to, time_from, time_to)
        for sk in store_keys:
            assert fast((sk, b"v")) == general(sk), (key_from, key_to, time_from, time_to, sk)
            checked += general(sk)
    assert checked > 1_000  # both answers occur


@pytest.mark.parametrize("seed", range(6))
def test_buffered_scan_is_overlay_of_buffer_and_rocksdb(tmp_path, seed: int) -> None:
    """Keys in RocksDB, in the buffer (values and deletes) or both; every range, either way."""
    rng = random.Random(seed)
    store = SegmentedBytesStore("r", 1_000_000, 100_000, SESSION_KEY_SCHEMA, persistent=True)
    store.init(make_context(tmp_path), None)
    segments = store.segments
    segment = segments.get_or_create_segment_if_live(0, 0)  # type: ignore[attr-defined]
    assert isinstance(segment, BufferedRocksDBSegment)
    prefix = segment.prefix
    db = segment.db
    # a neighbour segment's keys must never show up
    db.put(struct.pack(">Q", struct.unpack(">Q", prefix)[0] + 1) + b"a", b"next")
    db.put(struct.pack(">Q", struct.unpack(">Q", prefix)[0] + 1), b"next-empty")
    for _round in range(8):
        for _ in range(rng.randrange(0, 40)):
            key = _random_key(rng)
            if rng.random() < 0.7:
                segment.put(key, rng.randbytes(2))
            else:
                segment.put(key, None)
        stored = {k[8:]: v for k, v in db.items() if k.startswith(prefix)}
        buffer = dict(segment.pending)
        for _ in range(60):
            lower, upper = _bound(rng), _bound(rng)
            forward = rng.random() < 0.5

            def within(k: bytes, lower=lower, upper=upper) -> bool:
                return (lower is None or k >= lower) and (upper is None or k <= upper)

            stored_part = sorted(
                ((k, v) for k, v in stored.items() if within(k)), reverse=not forward
            )
            buffered = sorted(((k, v) for k, v in buffer.items() if within(k)), reverse=not forward)
            expected = list(overlay(buffered, iter(stored_part), forward))
            assert list(segment.range(lower, upper, forward)) == expected
        if rng.random() < 0.6:
            segments.write_pending()  # type: ignore[attr-defined]
    store.close()
