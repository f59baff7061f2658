"""RocksDB segmented stores (session and window schemas) with their write buffer and bounded
iterators answer exactly like the in-memory segmented store: random puts, deletes (of live,
absent and just-buffered keys), segment drops and buffer writes of every size, then every
kind of query, forward and backward, across segment boundaries and after a reopen."""

from __future__ import annotations

import random

import pytest
from state_test_support import make_context

import streaming.state.segments as segments_module
from streaming.state.key_schema import MAX_LONG, SESSION_KEY_SCHEMA, WINDOW_KEY_SCHEMA
from streaming.state.segmented_bytes_store import SegmentedBytesStore

RETENTION = 200_000
SEGMENT_INTERVAL = 100_000
KEYS = [b"a", b"a\x00", b"ab", b"b", b"ba", b"\x7f", b"\x80", b"\xff", b"\xff\xff"]


def _stores(tmp_path, schema):
    ctx = make_context(tmp_path)
    memory = SegmentedBytesStore("m", RETENTION, SEGMENT_INTERVAL, schema, persistent=False)
    rocks = SegmentedBytesStore("r", RETENTION, SEGMENT_INTERVAL, schema, persistent=True)
    memory.init(ctx, None)
    rocks.init(ctx, None)
    return ctx, memory, rocks


def _store_key(schema, rng: random.Random, key: bytes, time: int) -> bytes:
    if schema is SESSION_KEY_SCHEMA:
        return schema.store_key(key, max(0, time - rng.choice((0, 1, 500, 30_000))), time)
    return schema.store_key(key, time, rng.randrange(3))


def _contents(store: SegmentedBytesStore) -> list[tuple[int, list[tuple[bytes, bytes]]]]:
    return [(s.id, list(s.range(None, None, True))) for s in store.segments.all_segments(True)]


def _answers(s, key, key_from, key_to, t1, t2, forward) -> list[list[tuple[bytes, bytes]]]:
    return [
        list(s.fetch(key, t1, t2, forward)),
        list(s.fetch_range(key_from, key_to, t1, t2, forward)),
        list(s.fetch_range(None, key_to, t1, t2, forward)),
        list(s.fetch_all(t1, t2, forward)),
        list(s.all(forward)),
    ]


def _queries(rng: random.Random, memory, rocks) -> None:
    for _ in range(6):
        key = rng.choice(KEYS)
        key_from, key_to = sorted(rng.sample(KEYS, 2))
        t1 = rng.randrange(-1_000, 700_000)
        t2 = rng.choice((t1 + rng.randrange(0, 40_000), MAX_LONG))
        for forward in (True, False):
            args = (key, key_from, key_to, t1, t2, forward)
            assert _answers(rocks, *args) == _answers(memory, *args)
    assert _contents(rocks) == _contents(memory)


@pytest.mark.parametrize(
    "schema", [SESSION_KEY_SCHEMA, WINDOW_KEY_SCHEMA], ids=["session", "window"]
)
@pytest.mark.parametrize("buffer_entries", [1, 5, 50, 10_000])
@pytest.mark.parametrize("seed", range(4))
def test_rocksdb_segments_answer_like_memory(tmp_path, monkeypatch, schema, buffer_entries, seed):
    monkeypatch.setattr(segments_module, "WRITE_BUFFER_ENTRIES", buffer_entries)
    rng = random.Random(seed)
    ctx, memory, rocks = _stores(tmp_path, schema)
    written: list[bytes] = []
    time = 0
    for step in range(600):
        time += rng.choice((0, 0, 1, 100, 2_000, 9_000))
        op = rng.random()
        if op < 0.45 or not written:
            sk = _store_key(schema, rng, rng.choice(KEYS), time - rng.randrange(0, 60_000))
            value = rng.randbytes(rng.randrange(1, 6))
            memory.put(sk, value)
            rocks.put(sk, value)
            written.append(sk)
        elif op < 0.75:  # delete something written, often the latest (a session merge)
            sk = written[-1] if rng.random() < 0.5 else rng.choice(written)
            memory.remove(sk)
            rocks.remove(sk)
        elif op < 0.8:  # delete a key never written, or put None
            sk = _store_key(schema, rng, rng.choice(KEYS), time - rng.randrange(0, 60_000))
            memory.put(sk, None)
            rocks.put(sk, None)
        elif op < 0.83:
            memory.flush()
            rocks.force_flush() if rng.random() < 0.5 else rocks.flush()
        if step % 25 == 0:
            sk = rng.choice(written)
            assert rocks.get(sk) == memory.get(sk)
            _queries(rng, memory, rocks)
    _queries(rng, memory, rocks)
    expected = _contents(memory)
    rocks.close()
    reopened = SegmentedBytesStore("r", RETENTION, SEGMENT_INTERVAL, schema, persistent=True)
    reopened.init(ctx, None)
    assert _contents(reopened) == expected
    reopened.close()
    memory.close()


def test_delete_of_a_buffered_new_key_leaves_no_marker(tmp_path):
    """A session put and merged away before the buffer is written never reaches RocksDB; nor
    does a delete of a key RocksDB does not hold. A delete of a written key does."""
    _ctx, _memory, rocks = _stores(tmp_path, SESSION_KEY_SCHEMA)
    db = rocks.segments.db  # type: ignore[attr-defined]

    def deletes() -> int:
        return int(db.property_int_value("rocksdb.num-deletes-active-mem-table") or 0)

    rocks.put(SESSION_KEY_SCHEMA.store_key(b"hot", 1_000, 999), None)
    for end in range(1_000, 2_000):
        rocks.put(SESSION_KEY_SCHEMA.store_key(b"hot", 1_000, end - 1), None)
        rocks.put(SESSION_KEY_SCHEMA.store_key(b"hot", 1_000, end), b"v")
    rocks.segments.write_pending()  # type: ignore[attr-defined]
    prefix = segments_module._SEG_ID.pack(segments_module._OFFSET)
    last = SESSION_KEY_SCHEMA.store_key(b"hot", 1_000, 1_999)
    assert [k for k, _v in db.items()] == [prefix + last]
    assert deletes() == 0
    rocks.put(last, None)
    rocks.put(SESSION_KEY_SCHEMA.store_key(b"hot", 1_000, 2_000), b"v")
    assert rocks.get(last) is None
    rocks.segments.write_pending()  # type: ignore[attr-defined]
    assert deletes() == 1
    assert db.get(prefix + last) is None
    rocks.close()
