"""Transactional RocksDB stores (exactly-once, KIP-892), without a broker: reads see the
uncommitted writes (gets, ranges, prefix scans, window and session fetches); closing without
a commit drops them; a commit writes the writes and the changelog offsets in one batch; a
process killed at any point reopens at its last commit, with that commit's offsets."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from state_test_support import make_context

from streaming.state import InMemoryStateStoreContext
from streaming.state.api import transactional_layer
from streaming.state.committed_offsets import read_committed_offsets
from streaming.state.key_schema import MAX_LONG, SESSION_KEY_SCHEMA, WINDOW_KEY_SCHEMA
from streaming.state.rocksdb_key_value import RocksDBKeyValueStore
from streaming.state.segmented_bytes_store import SegmentedBytesStore
from streaming.state.versioned_bytes import VersionedBytesStore

REPO = Path(__file__).resolve().parents[3]
TP = ("app-kv-changelog", 0)
KEYS = [b"a", b"a\x00", b"ab", b"abc", b"b", b"ba", b"\x7f", b"\x80", b"\xff", b"\xff\xff"]
RETENTION = 200_000
SEGMENT_INTERVAL = 100_000


def _context(tmp_path, transactional=True):
    return InMemoryStateStoreContext(state_dir=tmp_path, transactional_state=transactional)


def _kv(tmp_path, transactional=True) -> RocksDBKeyValueStore:
    store = RocksDBKeyValueStore("kv")
    store.init(_context(tmp_path, transactional), store)
    return store


def _kv_reads(store, model: dict[bytes, bytes], rng: random.Random) -> None:
    """Every kind of read answers from ``model`` (the committed and uncommitted writes)."""
    ordered = sorted(model.items())
    for key in KEYS:
        assert store.get(key) == model.get(key)
    assert list(store.all()) == ordered
    assert list(store.reverse_all()) == ordered[::-1]
    lo, hi = sorted(rng.sample(KEYS, 2))
    inside = [kv for kv in ordered if lo <= kv[0] <= hi]
    assert list(store.range(lo, hi)) == inside
    assert list(store.reverse_range(lo, hi)) == inside[::-1]
    assert list(store.range(None, hi)) == [kv for kv in ordered if kv[0] <= hi]
    assert list(store.reverse_range(lo, None)) == [kv for kv in ordered if kv[0] >= lo][::-1]
    for prefix in (b"a", b"ab", b"\xff", b"z"):
        assert list(store.prefix_scan(prefix)) == [kv for kv in ordered if kv[0].startswith(prefix)]


def test_reads_see_uncommitted_writes_and_commit_writes_them_with_the_offsets(tmp_path):
    rng = random.Random(7)
    store = _kv(tmp_path)
    assert transactional_layer(store) is store
    model: dict[bytes, bytes] = {}
    offset = 0
    for round_ in range(30):
        for _ in range(rng.randrange(1, 12)):
            key = rng.choice(KEYS)
            if rng.random() < 0.3:
                store.delete(key)
                model.pop(key, None)
            else:
                value = f"{round_}-{rng.randrange(1000)}".encode()
                store.put(key, value)
                model[key] = value
        store.put(b"b", b"each round")
        model[b"b"] = b"each round"
        assert store.uncommitted_bytes > 0
        _kv_reads(store, model, rng)  # uncommitted writes over committed ones
        offset += rng.randrange(1, 50)
        store.commit({TP: offset})
        assert store.uncommitted_bytes == 0
        assert store.committed_offset(*TP) == offset
        _kv_reads(store, model, rng)
    store.close()
    assert read_committed_offsets(tmp_path / "kv") == {TP: offset}
    reopened = _kv(tmp_path)
    assert dict(reopened.all()) == model
    assert reopened.committed_offset(*TP) == offset
    reopened.close()


def test_closing_without_a_commit_drops_the_uncommitted_writes(tmp_path):
    store = _kv(tmp_path)
    store.put(b"a", b"1")
    store.put(b"b", b"1")
    store.commit({TP: 10})
    store.put(b"a", b"2")
    store.delete(b"b")
    store.put(b"c", b"2")
    assert dict(store.all()) == {b"a": b"2", b"c": b"2"}
    store.close()  # an aborted transaction: the task is closed dirty
    store = _kv(tmp_path)
    assert dict(store.all()) == {b"a": b"1", b"b": b"1"}
    assert store.committed_offset(*TP) == 10
    store.close()


def test_restored_records_wait_for_their_commit(tmp_path):
    store = _kv(tmp_path)
    store.restore_batch([(b"a", b"1", 0), (b"b", b"1", 0)])
    store.commit({TP: 2})
    store.restore_batch([(b"a", None, 0), (b"c", b"1", 0)])
    store.close()  # the restore stopped before committing its second batch
    store = _kv(tmp_path)
    assert dict(store.all()) == {b"a": b"1", b"b": b"1"}
    assert store.committed_offset(*TP) == 2
    store.close()


def test_outside_a_transaction_writes_go_straight_to_rocksdb_and_offsets_are_dropped(tmp_path):
    store = _kv(tmp_path)
    store.put(b"a", b"1")
    store.commit({TP: 5})
    store.close()
    store = _kv(tmp_path, transactional=False)  # at-least-once: the offsets stop holding
    assert transactional_layer(store) is None
    assert store.committed_offset(*TP) is None
    store.put(b"b", b"1")
    assert store.uncommitted_bytes == 0
    store.close()
    # content no commit wrote cannot be vouched for: a transactional store clears it
    store = _kv(tmp_path)
    assert list(store.all()) == []
    assert store.committed_offset(*TP) is None
    store.close()


# -- a killed process ---------------------------------------------------------------------

_CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from streaming.state import InMemoryStateStoreContext
    from streaming.state.rocksdb_key_value import RocksDBKeyValueStore

    path, commits, uncommitted = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
    store = RocksDBKeyValueStore("kv")
    store.init(InMemoryStateStoreContext(state_dir=path, transactional_state=True), store)
    for i in range(1, commits + 1):
        # commit i: every key holds i, the offset is i
        for k in range(200):
            store.put(b"k%03d" % k, str(i).encode())
        store.commit({("app-kv-changelog", 0): i})
    if uncommitted:
        for k in range(200):
            store.put(b"k%03d" % k, b"never")
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


@pytest.mark.parametrize("uncommitted", [False, True])
def test_a_killed_process_reopens_at_its_last_commit(tmp_path, uncommitted):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path), "25", "1" if uncommitted else "0"],
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    store = _kv(tmp_path)
    values = {v for _, v in store.all()}
    # the content and the offsets come from the same (the last) commit
    assert values == {b"25"}
    assert len(list(store.all())) == 200
    assert store.committed_offset(*TP) == 25
    store.close()


# -- window and session stores ----------------------------------------------------------------


def _segmented(tmp_path, schema, transactional=True):
    ctx = make_context(tmp_path)
    ctx.transactional_state = transactional
    memory = SegmentedBytesStore("m", RETENTION, SEGMENT_INTERVAL, schema, persistent=False)
    rocks = SegmentedBytesStore("r", RETENTION, SEGMENT_INTERVAL, schema, persistent=True)
    memory.init(ctx, None)
    rocks.init(ctx, None)
    return ctx, memory, rocks


def _store_key(schema, rng: random.Random, key: bytes, time: int) -> bytes:
    if schema is SESSION_KEY_SCHEMA:
        return schema.store_key(key, max(0, time - rng.choice((0, 1, 500))), time)
    return schema.store_key(key, time, 0)


def _answers(s, key, key_from, key_to, t1, t2, forward):
    return [
        list(s.fetch(key, t1, t2, forward)),
        list(s.fetch_range(key_from, key_to, t1, t2, forward)),
        list(s.fetch_all(t1, t2, forward)),
        list(s.all(forward)),
    ]


def _same_answers(rng, memory, rocks) -> None:
    for _ in range(5):
        key = rng.choice(KEYS)
        key_from, key_to = sorted(rng.sample(KEYS, 2))
        t1 = rng.randrange(0, 700_000)
        t2 = rng.choice((t1 + rng.randrange(0, 150_000), MAX_LONG))
        for forward in (True, False):
            args = (key, key_from, key_to, t1, t2, forward)
            assert _answers(rocks, *args) == _answers(memory, *args)


@pytest.mark.parametrize(
    "schema", [WINDOW_KEY_SCHEMA, SESSION_KEY_SCHEMA], ids=["window", "session"]
)
def test_segmented_reads_see_uncommitted_writes_and_segments_commit_together(tmp_path, schema):
    """Writes across several segments, retention dropping old ones, every fetch compared
    with an in-memory store; a close without commit goes back to the last commit, whose
    segments (created and dropped) and offsets come back together."""
    rng = random.Random(11)
    _, memory, rocks = _segmented(tmp_path, schema)
    layer = transactional_layer(rocks)
    assert layer is rocks
    tp = ("app-r-changelog", 0)
    time = 0
    committed_answers = None
    for round_ in range(12):
        for _ in range(rng.randrange(5, 40)):
            time += rng.randrange(0, 9_000)
            key = _store_key(
                schema, rng, rng.choice(KEYS), max(0, time - rng.randrange(0, 150_000))
            )
            value = None if rng.random() < 0.2 else f"{round_}".encode()
            for store in (memory, rocks):
                if value is None:
                    store.remove(key)
                else:
                    store.put(key, value)
        _same_answers(rng, memory, rocks)
        rocks.commit({tp: round_ + 1})
        _same_answers(rng, memory, rocks)
        committed_answers = [
            list(rocks.all(True)),
            [s.id for s in rocks.segments.all_segments(True)],
        ]
    assert rocks.segments.segment_id(time) > 2  # retention dropped segments on the way
    stream_time = rocks.observed_stream_time
    # uncommitted: move far ahead (drops every segment) and write
    far = time + 10 * RETENTION
    rocks.put(_store_key(schema, rng, b"x", far), b"late")
    assert [s.id for s in rocks.segments.all_segments(True)] == [rocks.segments.segment_id(far)]
    rocks.close()
    ctx = make_context(tmp_path)
    ctx.transactional_state = True
    reopened = SegmentedBytesStore("r", RETENTION, SEGMENT_INTERVAL, schema, persistent=True)
    reopened.init(ctx, None)
    reopened.observed_stream_time = stream_time
    assert [list(reopened.all(True)), [s.id for s in reopened.segments.all_segments(True)]] == (
        committed_answers
    )
    assert reopened.committed_offset(*tp) == 12
    # a commit writes the drops too
    reopened.put(_store_key(schema, rng, b"x", far), b"late")
    reopened.commit({tp: 13})
    reopened.close()
    again = SegmentedBytesStore("r", RETENTION, SEGMENT_INTERVAL, schema, persistent=True)
    again.init(ctx, None)
    assert [s.id for s in again.segments.all_segments(True)] == [again.segments.segment_id(far)]
    assert again.committed_offset(*tp) == 13
    again.close()


def test_versioned_store_holds_its_writes_until_the_commit(tmp_path):
    ctx = _context(tmp_path)
    store = VersionedBytesStore("v", 600_000, 60_000, persistent=True)
    store.init(ctx, None)
    tp = ("app-v-changelog", 0)
    store.put(b"k", b"1", 1_000)
    store.put(b"k", b"2", 2_000)
    store.commit({tp: 2})
    store.put(b"k", b"3", 3_000)
    assert store.get(b"k").value == b"3"
    assert store.get_as_of(b"k", 1_500).value == b"1"
    assert store.uncommitted_bytes > 0
    store.close()
    store = VersionedBytesStore("v", 600_000, 60_000, persistent=True)
    store.init(ctx, None)
    assert store.get(b"k").value == b"2"
    assert store.get_as_of(b"k", 1_500).value == b"1"
    assert store.committed_offset(*tp) == 2
    store.close()
