"""Writes a transactional store holds in memory until its commit, and reads that see them
over what RocksDB holds (KIP-892's write batch with index).

``UncommittedWrites`` is a sorted map of key to value (``None``: a delete); ``overlay``
lays a snapshot of it over a RocksDB iterator in the same key order.
"""

from __future__ import annotations

from collections.abc import Iterator

from rocksdict import ColumnFamily, WriteBatch
from sortedcontainers import SortedDict

BytesKV = tuple[bytes, bytes]
Buffered = tuple[bytes, bytes | None]


class UncommittedWrites:
    """A store's writes since its last commit; ``size`` counts the key and value bytes of
    every write (overwrites included), which is what the uncommitted-bytes limit bounds."""

    __slots__ = ("entries", "size")

    def __init__(self) -> None:
        self.entries: SortedDict = SortedDict()
        self.size = 0

    def __len__(self) -> int:
        return len(self.entries)

    def put(self, key: bytes, value: bytes | None) -> None:
        self.entries[key] = value
        self.size += len(key) + (len(value) if value is not None else 0)

    def snapshot(
        self,
        lower: bytes | None,
        upper: bytes | None,
        forward: bool,
        upper_inclusive: bool = True,
    ) -> list[Buffered]:
        """The buffered entries with ``lower <= key <= upper`` (None: unbounded; the upper
        end exclusive unless ``upper_inclusive``), in iteration order."""
        entries = self.entries
        keys = entries.irange(lower, upper, (True, upper_inclusive), reverse=not forward)
        return [(k, entries[k]) for k in keys]

    def add_to(self, batch: WriteBatch, column_family: ColumnFamily | None = None) -> None:
        """Put every write into ``batch``."""
        for key, value in self.entries.items():
            if value is None:
                batch.delete(key, column_family)
            else:
                batch.put(key, value, column_family)

    def clear(self) -> None:
        self.entries.clear()
        self.size = 0


def overlay(
    buffered: list[Buffered], stored: Iterator[BytesKV], forward: bool
) -> Iterator[BytesKV]:
    """``stored`` with ``buffered`` laid over it, both in the same key order: a buffered
    key wins, and its ``None`` hides the stored entry."""
    if not buffered:
        yield from stored
        return
    i = 0
    n = len(buffered)
    bk, bv = buffered[0]
    for kv in stored:
        k = kv[0]
        while i < n and (bk < k if forward else bk > k):
            if bv is not None:
                yield bk, bv
            i += 1
            if i < n:
                bk, bv = buffered[i]
        if i < n and bk == k:
            if bv is not None:
                yield bk, bv
            i += 1
            if i < n:
                bk, bv = buffered[i]
        else:
            yield kv
    while i < n:
        bk, bv = buffered[i]
        if bv is not None:
            yield bk, bv
        i += 1
