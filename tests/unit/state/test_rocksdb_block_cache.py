"""The shared RocksDB block cache holds blocks of live SST files only: a store that keeps
flushing, reading its newest files and compacting them away leaves no blocks of the
replaced files behind (``rocksdb_util.UNCACHE_AGGRESSIVENESS``)."""

from __future__ import annotations

from pathlib import Path

import pytest

import streaming.state.rocksdb_util as rocksdb_util
from streaming.state.rocksdb_util import close_db, flush_memtables, open_db

KEYS = 500
ROUNDS = 40


def _cache_after_churn(path: Path) -> tuple[int, int]:
    """Rounds of: write every key, flush, read every key (their blocks come from the newest
    file), compact. Returns the block cache's usage and the live SST bytes at the end."""
    db = open_db(path)
    try:
        for round_ in range(ROUNDS):
            value = round_.to_bytes(4, "big") * 25
            for i in range(KEYS):
                db.put(b"key-%05d" % i, value)
            flush_memtables(db)
            for i in range(KEYS):
                assert db.get(b"key-%05d" % i) == value
            db.compact_range(None, None)
        usage = db.property_int_value("rocksdb.block-cache-usage")
        live = db.property_int_value("rocksdb.live-sst-files-size")
        assert usage is not None and live is not None
        return usage, live
    finally:
        close_db(db)


@pytest.fixture
def own_block_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """A block cache of this test's database alone (the process shares one)."""
    monkeypatch.setattr(rocksdb_util, "_block_cache", None)


def test_block_cache_keeps_no_blocks_of_compacted_files(
    tmp_path: Path, own_block_cache: None
) -> None:
    usage, live = _cache_after_churn(tmp_path / "db")
    # every round cached about one file's worth of blocks: 40 files' worth without erasing
    assert live > 0
    assert usage <= 2 * live, f"block cache {usage} B for {live} B of live SST files"


def test_without_uncaching_the_blocks_of_compacted_files_stay(
    tmp_path: Path, own_block_cache: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check above can fail: RocksDB's default (0) keeps the replaced files' blocks."""
    monkeypatch.setattr(rocksdb_util, "UNCACHE_AGGRESSIVENESS", 0)
    usage, live = _cache_after_churn(tmp_path / "db")
    assert usage > 10 * live
