"""Opening rocksdict databases the way Kafka configures RocksDB stores (raw bytes), each with
the column family that holds its committed changelog offsets (``OFFSETS_CF``, see
``committed_offsets``).

The write-ahead log is off where the changelog is the log (Kafka's choice): a crash loses
the memtables, and the store is rebuilt from the changelog. A transactional store (exactly
once) keeps it on: its writes reach RocksDB once per commit, as one batch together with
their offsets, and the log makes that batch survive a killed process, so that the store
reopens at its last commit."""

from __future__ import annotations

import gc
import pathlib
import time
from collections.abc import Iterator
from typing import Any, cast

from rocksdict import BlockBasedOptions, Cache, Options, Rdict, ReadOptions, WriteOptions

#: The column family of a store's committed changelog offsets (``committed_offsets``).
OFFSETS_CF = "changelog-offsets"

#: How long opening a store waits for another handle of this process to release its lock.
LOCK_WAIT_S = 30.0

#: The block cache every RocksDB store of the process shares. Without one, each RocksDB
#: instance (one per store and task) creates its own 32 MiB cache, and the caches slowly
#: fill with blocks of the SST files that memtable flushes and compactions keep replacing:
#: RSS climbed for hours towards 32 MiB x stores x partitions while the state stayed tiny.
BLOCK_CACHE_BYTES = 32 * 1024 * 1024
_block_cache: Cache | None = None

#: RocksDB's ``uncache_aggressiveness``: how hard it tries to erase the cached blocks of an
#: SST file that a compaction made obsolete (100: while about a third of the attempts find
#: a block). A store reads the files of its latest memtable flushes, which the next
#: compaction replaces; without it their blocks stay in the shared cache until its LRU
#: pushes them out, and RSS climbs (~0.3 MB a minute with 100 ms exactly-once commits)
#: until the cache is full.
UNCACHE_AGGRESSIVENESS = 100


def _table_options() -> BlockBasedOptions:
    """Kafka's table config: a bloom filter (reads of absent keys, e.g. every new window,
    load no data blocks) and the shared block cache."""
    global _block_cache
    if _block_cache is None:
        _block_cache = Cache(BLOCK_CACHE_BYTES)
    table = BlockBasedOptions()
    table.set_bloom_filter(10, False)
    table.set_block_cache(_block_cache)
    return table


def open_db(path: pathlib.Path, *, wal: bool = False) -> Rdict:
    """Open (creating if missing) a raw-bytes RocksDB with its offsets column family; the
    write-ahead log only with ``wal`` (transactional stores)."""
    path.mkdir(parents=True, exist_ok=True)
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.create_missing_column_families(True)
    column_families = {OFFSETS_CF: Options(raw_mode=True)}
    options.set_block_based_table_factory(_table_options())
    # RocksDB starts 16 threads at every open to open SST files in parallel: half the cost
    # of opening a store (a task's few files gain nothing from them)
    options.set_max_file_opening_threads(1)
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            db = Rdict(str(path), options, column_families=column_families)
            break
        except Exception as exc:
            # A previous handle of this process may still be open: waiting for garbage
            # collection (live iterators keep the DB open), or another stream thread of this
            # process still closing the task a rebalance moved here (Kafka's task-directory
            # lock makes the new owner retry the same way).
            gc.collect()
            if "lock" not in str(exc).lower() or time.monotonic() >= deadline:
                # last try: raises the real error
                db = Rdict(str(path), options, column_families=column_families)
                break
            time.sleep(0.05)
    # rocksdict has no setter for this column family option: set at runtime (it is mutable)
    db.set_options({"uncache_aggressiveness": str(UNCACHE_AGGRESSIVENESS)})
    write_options = WriteOptions()
    # rocksdict's stub declares disable_wal as a method; at runtime it is a settable attribute
    write_options.disable_wal = not wal  # type: ignore[method-assign,assignment]
    db.set_write_options(write_options)
    return db


def flush_memtables(db: Rdict) -> None:
    """Write the memtables of both column families (data and offsets) to disk."""
    db.flush()
    db.get_column_family(OFFSETS_CF).flush()


def clear_db(db: Rdict) -> bool:
    """Delete every key of the default column family (one range delete); False when it
    held none."""
    it = db.iter()
    it.seek_to_first()
    if not it.valid():
        return False
    first = it.key()
    it.seek_to_last()
    last = it.key()
    del it
    db.delete_range(first, last + b"\x00")
    return True


#: How often a commit really flushes memtables to disk. Kafka flushes on every commit; with
#: a 100 ms EOS commit interval that writes ten tiny SST files a second per store. Without
#: the write-ahead log local state is rebuilt from the changelog after a crash, so flushing
#: less often loses nothing (the runtime's checkpoint calls ``MemtableFlusher.force`` before
#: recording offsets in the checkpoint file); with it (transactional stores) a flush only
#: bounds the log RocksDB replays when it reopens.
FLUSH_INTERVAL_S = 10.0


class MemtableFlusher:
    """Rate-limits ``Rdict.flush()`` calls made on commit (always flushes on close)."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last = time.monotonic()

    def due(self) -> bool:
        return time.monotonic() - self._last >= FLUSH_INTERVAL_S

    def maybe(self, db: Rdict) -> None:
        now = time.monotonic()
        if now - self._last >= FLUSH_INTERVAL_S:
            flush_memtables(db)
            self._last = now

    def force(self, db: Rdict) -> None:
        flush_memtables(db)
        self._last = time.monotonic()


def close_db(db: Rdict) -> None:
    """Flush memtables and close (the data survives without the write-ahead log)."""
    try:
        flush_memtables(db)
    finally:
        db.close()


def scan(
    db: Rdict,
    lower: bytes | None,
    upper_inclusive: bytes | None,
    forward: bool,
) -> Iterator[tuple[bytes, bytes]]:
    """Iterate keys in [lower, upper_inclusive] (None = unbounded) in byte order.

    A forward scan gives its upper end to RocksDB as ``iterate_upper_bound`` as well, so the
    iterator stops there instead of stepping over every delete marker up to the next live
    key beyond the range (a session store had thousands there). rocksdict keeps only a
    pointer to the bound of its ``ReadOptions``: the generator holds the options alive as
    long as the iterator exists (the bound of a collected ``ReadOptions`` is garbage). The
    bounds are checked in Python too. Backward scans check their lower end in Python only:
    rocksdict's backward iteration with ``iterate_lower_bound`` returned nothing.
    """
    if forward:
        if upper_inclusive is None:
            return raw_items(db.items(from_key=lower) if lower is not None else db.items())
        options = ReadOptions()
        options.set_iterate_upper_bound(upper_inclusive + b"\x00")  # the next key: exclusive
        return _until(db.items(from_key=lower, read_opt=options), upper_inclusive, options)
    it = raw_items(
        db.items(backwards=True, from_key=upper_inclusive)
        if upper_inclusive is not None
        else db.items(backwards=True)
    )
    if lower is None:
        return it
    return _down_to(it, lower)


def raw_items(items: Iterator[Any]) -> Iterator[tuple[bytes, bytes]]:
    """The databases are opened in raw mode: keys and values are bytes (rocksdict's stub
    types items as any key type and Any value)."""
    return cast(Iterator[tuple[bytes, bytes]], items)


def _until(items: Any, upper: bytes, options: ReadOptions) -> Iterator[tuple[bytes, bytes]]:
    # options: held by this frame while the iterator lives
    for kv in raw_items(items):
        if kv[0] > upper:
            return
        yield kv


def _down_to(it: Iterator[tuple[bytes, bytes]], lower: bytes) -> Iterator[tuple[bytes, bytes]]:
    for kv in it:
        if kv[0] < lower:
            return
        yield kv


def scan_prefix(db: Rdict, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
    """Iterate all keys starting with prefix in byte order."""
    for kv in raw_items(db.items(from_key=prefix)):
        if not kv[0].startswith(prefix):
            return
        yield kv
