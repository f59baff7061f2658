"""The changelog offsets a RocksDB store's content corresponds to, kept in the store's own
database (KIP-892): the column family ``OFFSETS_CF``, written in the same ``WriteBatch`` as
the writes it covers, so that the files and the offsets can never disagree.

Keys are ``<topic>:<partition>`` (8-byte big-endian offset: where restoring continues) and
``COMMITTED`` (no topic name can hold ``:``), which says that everything in the store was
written by commits. A transactional store that finds content without it (written outside a
transaction, e.g. under at-least-once) cannot tell what that content corresponds to and
clears it; a store opened outside a transaction drops the offsets, which stop describing
its content with its first write.
"""

from __future__ import annotations

import logging
import pathlib
from collections.abc import Mapping

from rocksdict import AccessType, ColumnFamily, Options, Rdict, WriteBatch

from streaming.state.rocksdb_util import OFFSETS_CF, clear_db, raw_items

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

COMMITTED = b":committed"


def _key(tp: TopicPartition) -> bytes:
    return f"{tp[0]}:{tp[1]}".encode()


def _decode(items: list[tuple[bytes, bytes]]) -> tuple[bool, dict[TopicPartition, int]]:
    committed = False
    offsets = {}
    for key, value in items:
        if key == COMMITTED:
            committed = True
            continue
        topic, _, partition = key.decode().rpartition(":")
        offsets[(topic, int(partition))] = int.from_bytes(value, "big", signed=True)
    return committed, offsets


class CommittedOffsets:
    """The offsets column family of one open store database."""

    __slots__ = ("_db", "_handle", "committed", "offsets")

    def __init__(self, db: Rdict) -> None:
        self._db: Rdict | None = db
        # rocksdict's column family objects hold the database open: dropped on release()
        self._handle: ColumnFamily | None = db.get_column_family_handle(OFFSETS_CF)
        family = db.get_column_family(OFFSETS_CF)
        try:
            #: whether the store's content was written by commits only, and the offsets
            self.committed, self.offsets = _decode(list(raw_items(family.items())))
        finally:
            del family

    @classmethod
    def open(cls, db: Rdict, *, transactional: bool) -> CommittedOffsets:
        """The offsets of ``db``, made to fit how the store writes from now on: outside a
        transaction they are dropped; in one, content no commit wrote is cleared."""
        offsets = cls(db)
        if not transactional:
            offsets.drop()
        elif not offsets.committed and clear_db(db):
            log.info("Cleared %s: no commit wrote its content", db.path())
        return offsets

    def add_to(self, batch: WriteBatch, offsets: Mapping[TopicPartition, int]) -> None:
        """Put the commit mark and ``offsets`` into ``batch`` (written by the caller)."""
        batch.put(COMMITTED, b"", self._handle)
        for tp, offset in offsets.items():
            batch.put(_key(tp), offset.to_bytes(8, "big", signed=True), self._handle)

    def written(self, offsets: Mapping[TopicPartition, int]) -> None:
        """A batch from ``add_to`` was written."""
        self.committed = True
        self.offsets.update(offsets)

    def drop(self) -> None:
        """Delete the commit mark and every offset."""
        if not self.committed and not self.offsets:
            return
        assert self._db is not None  # only while the store is open
        batch = WriteBatch(raw_mode=True)
        batch.delete(COMMITTED, self._handle)
        for tp in self.offsets:
            batch.delete(_key(tp), self._handle)
        self._db.write(batch)
        self.committed = False
        self.offsets = {}

    def release(self) -> None:
        """Let go of the database (before it closes)."""
        self._handle = None
        self._db = None


def read_committed_offsets(path: pathlib.Path) -> dict[TopicPartition, int]:
    """The offsets stored in the closed store database at ``path`` (opened read-only)."""
    options = Options(raw_mode=True)
    db = Rdict(
        str(path),
        options,
        column_families={OFFSETS_CF: Options(raw_mode=True)},
        access_type=AccessType.read_only(),
    )
    try:
        family = db.get_column_family(OFFSETS_CF)
        try:
            return _decode(list(raw_items(family.items())))[1]
        finally:
            del family
    finally:
        db.close()
