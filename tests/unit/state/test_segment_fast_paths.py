"""The shortcuts of the segmented stores against their general forms: ``SortedKeys`` (the
write buffer's key order) against a sorted list, each key schema's ``entry_condition``
against its ``condition``, and a RocksDB segment's buffered scan against ``overlay`` of the
buffer over what RocksDB holds, on random keys, bounds and directions."""

from __future__ import annotations

import random
import struct

import pytest
from state_test_support import make_context

import streaming.state.segments as segments_module
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


# -- the per-segment index of what a segment wrote to RocksDB ---------------------------------

INDEX_KEYS = [b"a", b"a\x00", b"ab", b"b", b"ba", b"\x7f", b"\x80", b"\xff", b"\xff\xff"]
INDEX_RETENTION = 250_000
INDEX_SEGMENT = 100_000


def _index_store(tmp_path, name: str, schema, transactional: bool, indexed: bool):
    ctx = make_context(tmp_path)
    ctx.transactional_state = transactional
    store = SegmentedBytesStore(name, INDEX_RETENTION, INDEX_SEGMENT, schema, persistent=True)
    if not indexed:
        store.segments.key_suffix = 0  # type: ignore[attr-defined]
    store.init(ctx, None)
    return store


def _index_store_key(schema, rng: random.Random, key: bytes, time: int) -> bytes:
    if schema is SESSION_KEY_SCHEMA:
        return schema.store_key(key, max(0, time - rng.choice((0, 1, 500, 30_000))), time)
    return schema.store_key(key, time, rng.randrange(3))


def _check_index_matches_rocksdb(store: SegmentedBytesStore) -> tuple[int, int]:
    """Every index lists exactly what RocksDB holds of its segment (or, keys only, at least
    its record keys); returns how many exact and keys-only indexes there were."""
    exact = keys_only = 0
    for segment in store.segments.all_segments(True):
        assert isinstance(segment, BufferedRocksDBSegment)
        index = segment.index
        if index is None:
            continue
        prefix = segment.prefix
        stored = sorted(k[8:] for k, _ in segment.db.items() if k.startswith(prefix))
        by_key: dict[bytes, list[bytes]] = {}
        for k in stored:
            by_key.setdefault(k[: -segment.suffix], []).append(k)
        if segment.index_exact:
            exact += 1
            assert index == by_key
            assert segment.index_entries == len(stored)
        else:
            keys_only += 1
            assert set(by_key) <= set(index)
    return exact, keys_only


def _fetches(rng: random.Random, stores) -> int:
    """The same random fetches of every store agree (as iterators and, forward, as lists);
    returns how many entries they found."""
    found = 0
    for _ in range(8):
        key = rng.choice(INDEX_KEYS)
        t1 = rng.randrange(-1_000, 1_300_000)
        t2 = rng.choice((t1 + rng.randrange(0, 250_000), MAX_LONG))
        for forward in (True, False):
            answers = [list(store.fetch(key, t1, t2, forward)) for store in stores]
            if forward:
                answers += [store.fetch_list(key, t1, t2) for store in stores]
            assert all(a == answers[0] for a in answers), (key, t1, t2, forward)
            found += len(answers[0])
    return found


@pytest.mark.parametrize(
    "schema", [WINDOW_KEY_SCHEMA, SESSION_KEY_SCHEMA], ids=["window", "session"]
)
@pytest.mark.parametrize("transactional", [False, True], ids=["plain", "transactional"])
@pytest.mark.parametrize("limits", [(50_000, 50_000, 4), (8, 50_000, 1), (4, 3, 0)])
@pytest.mark.parametrize("seed", range(3))
def test_indexed_fetch_is_the_scan(tmp_path, monkeypatch, schema, transactional, limits, seed):
    """A fetch through the index of what each segment wrote to RocksDB (point lookups, or
    nothing for a record key RocksDB holds none of) returns what a scan of RocksDB does
    and what the in-memory store does: random keys (some a prefix of others), duplicates,
    deletes, times out of order across several segments, retention dropping segments,
    buffer writes or commits at random, a reopen (segments found on disk have no index)
    and a restore into a new segment; forward and backward."""
    max_entries, max_keys, max_gets = limits
    monkeypatch.setattr(segments_module, "INDEX_MAX_ENTRIES", max_entries)
    monkeypatch.setattr(segments_module, "INDEX_MAX_KEYS", max_keys)
    monkeypatch.setattr(segments_module, "INDEX_MAX_GETS", max_gets)
    monkeypatch.setattr(segments_module, "WRITE_BUFFER_ENTRIES", 1 + seed * 7)
    rng = random.Random(seed)
    ctx = make_context(tmp_path)
    memory = SegmentedBytesStore("m", INDEX_RETENTION, INDEX_SEGMENT, schema, persistent=False)
    memory.init(ctx, None)
    indexed = _index_store(tmp_path, "indexed", schema, transactional, True)
    scanned = _index_store(tmp_path, "scanned", schema, transactional, False)
    stores = [memory, indexed, scanned]
    tp = ("changelog", 0)
    written: list[bytes] = []
    time = 0
    found = exact = keys_only = 0
    for step in range(700):
        time += rng.choice((0, 0, 1, 100, 2_000, 9_000))
        op = rng.random()
        if op < 0.5 or not written:
            sk = _index_store_key(
                schema, rng, rng.choice(INDEX_KEYS), max(0, time - rng.randrange(0, 120_000))
            )
            value = rng.randbytes(rng.randrange(1, 4))
            for store in stores:
                store.put(sk, value)
            written.append(sk)
        elif op < 0.75:
            sk = written[-1] if rng.random() < 0.5 else rng.choice(written)
            for store in stores:
                store.remove(sk)
        elif op < 0.85:
            if transactional:
                indexed.commit({tp: step})
                scanned.commit({tp: step})
            else:
                indexed.segments.write_pending()  # type: ignore[attr-defined]
                scanned.segments.write_pending()  # type: ignore[attr-defined]
        if step % 20 == 0:
            found += _fetches(rng, stores)
            e, k = _check_index_matches_rocksdb(indexed)
            exact += e
            keys_only += k
        if step == 350:
            # reopen: the segments found in RocksDB have no index, new ones do
            for store in (indexed, scanned):
                if transactional:
                    store.commit({tp: step})
                store.close()
            indexed = _index_store(tmp_path, "indexed", schema, transactional, True)
            scanned = _index_store(tmp_path, "scanned", schema, transactional, False)
            for store in (indexed, scanned):
                store.observed_stream_time = memory.observed_stream_time
            assert all(s.index is None for s in indexed.segments.all_segments(True))
            stores = [memory, indexed, scanned]
            found += _fetches(rng, stores)
    # a restore far ahead: new segments, written through the buffer
    batch = []
    for _ in range(60):
        sk = _index_store_key(schema, rng, rng.choice(INDEX_KEYS), time + rng.randrange(0, 90_000))
        batch.append((sk, rng.randbytes(2), 0))
    for store in stores:
        store.restore_batch(batch)
    if transactional:
        indexed.commit({tp: 999})
        scanned.commit({tp: 999})
    else:
        indexed.segments.write_pending()  # type: ignore[attr-defined]
        scanned.segments.write_pending()  # type: ignore[attr-defined]
    e, k = _check_index_matches_rocksdb(indexed)
    exact += e
    keys_only += k
    for _ in range(10):
        found += _fetches(rng, stores)
    assert found > 200
    assert exact > 0
    if max_entries < 50_000 and max_keys == 50_000:
        assert keys_only > 0
    for store in stores:
        store.close()
