"""The row format of a versioned store's segments (Kafka's RocksDBVersionedStoreSegmentValueFormatter).

All versions of one key that fall in one segment live in one row::

    <next_timestamp> <min_timestamp> <(timestamp, value_size) newest first> <values oldest first>

``next_timestamp`` is the validTo of the newest version in the row, ``min_timestamp`` the
validFrom of the oldest; a value size of -1 marks a tombstone. A "degenerate" row holds a single
tombstone whose validFrom and validTo are both its own timestamp (a tombstone put while the key
had no relevant versions). The byte layout is Kafka's; rows are decoded whole here.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

_TS = struct.Struct(">q")
_HEADER = struct.Struct(">qq")
_ENTRY = struct.Struct(">qi")


def next_timestamp(raw: bytes) -> int:
    """validTo of the newest version in the row."""
    return _TS.unpack_from(raw, 0)[0]


def min_timestamp(raw: bytes) -> int:
    """validFrom of the oldest version in the row."""
    return _TS.unpack_from(raw, 8)[0]


class SearchResult(NamedTuple):
    """A version found in a row: its index (0 = newest), validity interval and value."""

    # shadows tuple.index (the method) on purpose: the field is the version's position
    index: int  # type: ignore[assignment]
    valid_from: int
    valid_to: int
    value: bytes | None


class SegmentValue:
    """A decoded row: ``records`` is a list of ``[timestamp, value | None]``, newest first."""

    __slots__ = ("min_ts", "next_ts", "records")

    def __init__(self, next_ts: int, min_ts: int, records: list[list]) -> None:
        self.next_ts = next_ts
        self.min_ts = min_ts
        self.records = records

    @classmethod
    def with_record(cls, value: bytes | None, valid_from: int, valid_to: int) -> SegmentValue:
        """A row holding one version (degenerate when ``valid_from == valid_to``)."""
        return cls(valid_to, valid_from, [[valid_from, value]])

    @classmethod
    def deserialize(cls, raw: bytes) -> SegmentValue:
        next_ts, min_ts = _HEADER.unpack_from(raw, 0)
        entries = []
        offset = 16
        while True:
            ts, size = _ENTRY.unpack_from(raw, offset)
            offset += 12
            entries.append((ts, size))
            if ts == min_ts:
                break
        records: list[list] = [[ts, None] for ts, _ in entries]
        end = len(raw)
        for i, (_ts, size) in enumerate(entries):  # newest value is stored last
            if size >= 0:
                records[i][1] = raw[end - size : end]
                end -= size
        return cls(next_ts, min_ts, records)

    def serialize(self) -> bytes:
        parts = [_HEADER.pack(self.next_ts, self.min_ts)]
        values = []
        for ts, value in self.records:
            parts.append(_ENTRY.pack(ts, -1 if value is None else len(value)))
            if value is not None:
                values.append(value)
        values.reverse()
        return b"".join(parts) + b"".join(values)

    @property
    def is_degenerate(self) -> bool:
        return self.next_ts == self.min_ts

    def find(self, timestamp: int) -> SearchResult:
        """The newest version with validFrom <= timestamp; needs min_ts <= timestamp < next_ts."""
        if timestamp < self.min_ts:
            raise ValueError("Timestamp is too small to be found in this segment.")
        if timestamp >= self.next_ts:
            raise ValueError("Timestamp is too large to be found in this segment.")
        valid_to = self.next_ts
        for index, (ts, value) in enumerate(self.records):
            if ts <= timestamp:
                return SearchResult(index, ts, valid_to, value)
            valid_to = ts
        raise RuntimeError("Search in segment expected to find result but did not.")

    def find_all(self, from_time: int, to_time: int) -> list[SearchResult]:
        """Non-tombstone versions whose validity overlaps [from_time, to_time], newest first."""
        out = []
        valid_to = self.next_ts
        for index, (ts, value) in enumerate(self.records):
            if value is not None and ts <= to_time and valid_to > from_time:
                out.append(SearchResult(index, ts, valid_to, value))
            valid_to = ts
        return out

    def insert_as_latest(self, valid_from: int, valid_to: int, value: bytes | None) -> None:
        """Add a version newer than every version in the row (truncating on inconsistency)."""
        if valid_from < self.next_ts:
            # only after a partial write failure: drop what the new version overlaps
            self._truncate_to(valid_from)
        if self.next_ts == valid_from:
            if self.is_degenerate:
                self._init(value, valid_from, valid_to)
            else:
                self.records.insert(0, [valid_from, value])
        else:
            # the gap [next_ts, valid_from) becomes a tombstone version
            if self.is_degenerate:
                self._init(None, self.next_ts, valid_from)
            else:
                self.records.insert(0, [self.next_ts, None])
            self.records.insert(0, [valid_from, value])
        self.next_ts = valid_to

    def insert_as_earliest(self, timestamp: int, value: bytes | None) -> None:
        """Add a version older than every version in the row."""
        if self.is_degenerate:
            self._init(value, timestamp, self.next_ts)
        else:
            self.records.append([timestamp, value])
            self.min_ts = timestamp

    def insert(self, timestamp: int, value: bytes | None, index: int) -> None:
        """Add a version at ``index`` (as found by ``find``)."""
        if self.is_degenerate or index < 0 or index > len(self.records):
            raise ValueError("Cannot insert at this index or into a degenerate segment.")
        self.records.insert(index, [timestamp, value])
        if index == len(self.records) - 1:
            self.min_ts = timestamp

    def update_record(self, timestamp: int, value: bytes | None, index: int) -> None:
        """Replace the version at ``index`` (as found by ``find``)."""
        self.records[index] = [timestamp, value]
        if index == len(self.records) - 1:
            self.min_ts = timestamp

    def _init(self, value: bytes | None, valid_from: int, valid_to: int) -> None:
        self.next_ts = valid_to
        self.min_ts = valid_from
        self.records = [[valid_from, value]]

    def _truncate_to(self, timestamp: int) -> None:
        """Drop versions at or after ``timestamp``; afterwards next_ts == timestamp."""
        if timestamp <= self.min_ts:
            self._init(None, timestamp, timestamp)
            return
        self.records = [r for r in self.records if r[0] < timestamp]
        self.next_ts = timestamp
