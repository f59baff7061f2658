"""Byte layouts of window and session store keys (Kafka's WindowKeySchema, SessionKeySchema,
PrefixedWindowKeySchemas.TimeFirstWindowKeySchema and OrderedBytes).

Each schema knows how to build a store key, decode it, give the byte range to scan for a query
and the predicate (Kafka's HasNextCondition) that filters what the scan returns.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

MAX_LONG = (1 << 63) - 1
MAX_INT = (1 << 31) - 1

_LONG = struct.Struct(">q")
_INT = struct.Struct(">i")
_LONG_INT = struct.Struct(">qi")
_LONG_LONG = struct.Struct(">qq")

Predicate = Callable[[bytes], bool]
#: a ``Predicate`` of a (key, value) entry's key
EntryPredicate = Callable[[tuple[bytes, bytes]], bool]


def ordered_upper_range(key: bytes, max_suffix: bytes) -> bytes:
    """Kafka's OrderedBytes.upperRange (assumes keys are at least one byte long)."""
    first = max_suffix[0]
    i = 0
    n = len(key)
    while i < n and (i < 1 or key[i] >= first):
        i += 1
    return key[:i] + max_suffix


class WindowKeySchema:
    """Key-first window key: ``[key][8-byte BE window start][4-byte BE seqnum]``."""

    __slots__ = ()
    IS_WINDOW = True
    #: a store key is the record key followed by ``SUFFIX_SIZE`` bytes
    KEY_FIRST = True
    #: fetches return records with time >= observed_stream_time - retention + RETENTION_SLACK
    RETENTION_SLACK = 1
    SUFFIX_SIZE = 12
    _MIN_SUFFIX = bytes(12)

    @staticmethod
    def store_key(key: bytes, timestamp: int, seqnum: int) -> bytes:
        return key + _LONG_INT.pack(timestamp, seqnum)

    @staticmethod
    def extract_key(binary: bytes) -> bytes:
        return binary[:-12]

    @staticmethod
    def extract_timestamp(binary: bytes) -> int:
        return _LONG.unpack_from(binary, len(binary) - 12)[0]

    segment_timestamp = extract_timestamp

    @staticmethod
    def extract_seqnum(binary: bytes) -> int:
        return _INT.unpack_from(binary, len(binary) - 4)[0]

    @staticmethod
    def split(binary: bytes) -> tuple[bytes, int]:
        """(key bytes, window start)."""
        n = len(binary) - 12
        return binary[:n], _LONG.unpack_from(binary, n)[0]

    def lower_range(self, key: bytes, time_from: int) -> bytes:
        return key + self._MIN_SUFFIX

    def upper_range(self, key: bytes, time_to: int) -> bytes:
        return ordered_upper_range(key, _LONG_INT.pack(time_to, MAX_INT))

    def lower_range_fixed(self, key: bytes, time_from: int) -> bytes:
        return key + _LONG_INT.pack(max(0, time_from), 0)

    def upper_range_fixed(self, key: bytes, time_to: int) -> bytes:
        return key + _LONG_INT.pack(time_to, MAX_INT)

    @staticmethod
    def condition(
        key_from: bytes | None, key_to: bytes | None, time_from: int, time_to: int
    ) -> Predicate:
        unpack = _LONG.unpack_from

        def matches(binary: bytes) -> bool:
            n = len(binary) - 12
            t = unpack(binary, n)[0]
            if t < time_from or t > time_to:
                return False
            k = binary[:n]
            return (key_from is None or k >= key_from) and (key_to is None or k <= key_to)

        return matches

    @staticmethod
    def entry_condition(
        key_from: bytes | None, key_to: bytes | None, time_from: int, time_to: int
    ) -> EntryPredicate:
        """``condition`` of an entry's key (one closure per case, no per-entry branches)."""
        unpack = _LONG.unpack_from
        if key_from is not None and key_from == key_to:
            key = key_from

            def one_key(kv: tuple[bytes, bytes]) -> bool:
                binary = kv[0]
                n = len(binary) - 12
                return time_from <= unpack(binary, n)[0] <= time_to and binary[:n] == key

            return one_key
        if key_from is None and key_to is None:

            def any_key(kv: tuple[bytes, bytes]) -> bool:
                binary = kv[0]
                return time_from <= unpack(binary, len(binary) - 12)[0] <= time_to

            return any_key
        matches = WindowKeySchema.condition(key_from, key_to, time_from, time_to)
        return lambda kv: matches(kv[0])

    @staticmethod
    def time_bounds(time_from: int, time_to: int) -> tuple[bytes | None, bytes | None]:
        """Byte bounds for a time-only scan of a segment (key-first: whole segment)."""
        return None, None

    @staticmethod
    def search_bounds(time_from: int, time_to: int) -> tuple[int, int]:
        """Time bounds of the segments to search (Kafka's segmentsToSearch)."""
        return time_from, time_to

    @staticmethod
    def to_changelog_key(binary: bytes) -> bytes:
        return binary

    @staticmethod
    def from_changelog_key(binary: bytes) -> bytes:
        return binary


class TimeFirstWindowKeySchema:
    """Time-first window key: ``[8-byte BE window start][key][4-byte BE seqnum]``.

    Kafka prefixes these keys with one marker byte (to share a DB with a key-first index);
    a constant prefix does not change any order, so it is left out here.
    """

    __slots__ = ()
    IS_WINDOW = True
    KEY_FIRST = False
    #: Kafka's dual-schema store uses ``observed - retention`` (no +1) for time-first keys so
    #: that emit-on-window-close still sees windows when retention == size + grace
    #: (AbstractDualSchemaRocksDBSegmentedBytesStore.getActualFrom)
    RETENTION_SLACK = 0

    @staticmethod
    def store_key(key: bytes, timestamp: int, seqnum: int) -> bytes:
        return _LONG.pack(timestamp) + key + _INT.pack(seqnum)

    @staticmethod
    def extract_key(binary: bytes) -> bytes:
        return binary[8:-4]

    @staticmethod
    def extract_timestamp(binary: bytes) -> int:
        return _LONG.unpack_from(binary, 0)[0]

    segment_timestamp = extract_timestamp

    @staticmethod
    def extract_seqnum(binary: bytes) -> int:
        return _INT.unpack_from(binary, len(binary) - 4)[0]

    @staticmethod
    def split(binary: bytes) -> tuple[bytes, int]:
        return binary[8:-4], _LONG.unpack_from(binary, 0)[0]

    def lower_range(self, key: bytes | None, time_from: int) -> bytes:
        # clamped at 0: negative longs would sort after positive ones
        if key is None:
            return _LONG.pack(max(0, time_from))
        return _LONG.pack(max(0, time_from)) + key

    def upper_range(self, key: bytes | None, time_to: int) -> bytes | None:
        if key is None:
            return None
        return _LONG.pack(time_to) + b"\xff" * len(key) + _INT.pack(MAX_INT)

    def lower_range_fixed(self, key: bytes, time_from: int) -> bytes:
        return _LONG.pack(max(0, time_from)) + key + _INT.pack(0)

    def upper_range_fixed(self, key: bytes, time_to: int) -> bytes:
        return _LONG.pack(time_to) + key + _INT.pack(MAX_INT)

    @staticmethod
    def condition(
        key_from: bytes | None, key_to: bytes | None, time_from: int, time_to: int
    ) -> Predicate:
        unpack = _LONG.unpack_from

        def matches(binary: bytes) -> bool:
            t = unpack(binary, 0)[0]
            if t < time_from or t > time_to:
                return False
            k = binary[8:-4]
            return (key_from is None or k >= key_from) and (key_to is None or k <= key_to)

        return matches

    @staticmethod
    def entry_condition(
        key_from: bytes | None, key_to: bytes | None, time_from: int, time_to: int
    ) -> EntryPredicate:
        """``condition`` of an entry's key."""
        matches = TimeFirstWindowKeySchema.condition(key_from, key_to, time_from, time_to)
        return lambda kv: matches(kv[0])

    @staticmethod
    def time_bounds(time_from: int, time_to: int) -> tuple[bytes | None, bytes | None]:
        """Time-first keys: scan only [from, to] (upper bound inclusive of every key at to)."""
        return (
            _LONG.pack(max(0, time_from)),
            None if time_to >= MAX_LONG else _LONG.pack(time_to + 1),
        )

    @staticmethod
    def search_bounds(time_from: int, time_to: int) -> tuple[int, int]:
        return time_from, time_to

    @staticmethod
    def to_changelog_key(binary: bytes) -> bytes:
        """The changelog always carries key-first window keys (Kafka)."""
        return binary[8:-4] + binary[:8] + binary[-4:]

    @staticmethod
    def from_changelog_key(binary: bytes) -> bytes:
        """Kafka's TimeFirstWindowKeySchema.fromNonPrefixWindowKey (without the marker byte)."""
        n = len(binary)
        return binary[n - 12 : n - 4] + binary[: n - 12] + binary[n - 4 :]


class SessionKeySchema:
    """Session key: ``[key][8-byte BE session end][8-byte BE session start]``, segmented by end."""

    __slots__ = ()
    IS_WINDOW = False
    KEY_FIRST = True
    RETENTION_SLACK = 1
    SUFFIX_SIZE = 16
    _MIN_SUFFIX = bytes(16)

    @staticmethod
    def store_key(key: bytes, start: int, end: int) -> bytes:
        return key + _LONG_LONG.pack(end, start)

    @staticmethod
    def extract_key(binary: bytes) -> bytes:
        return binary[:-16]

    @staticmethod
    def extract_end(binary: bytes) -> int:
        return _LONG.unpack_from(binary, len(binary) - 16)[0]

    segment_timestamp = extract_end

    @staticmethod
    def extract_start(binary: bytes) -> int:
        return _LONG.unpack_from(binary, len(binary) - 8)[0]

    @staticmethod
    def split(binary: bytes) -> tuple[bytes, int, int]:
        """(key bytes, start, end)."""
        n = len(binary) - 16
        end, start = _LONG_LONG.unpack_from(binary, n)
        return binary[:n], start, end

    def lower_range(self, key: bytes, time_from: int) -> bytes:
        return key + self._MIN_SUFFIX

    def upper_range(self, key: bytes, time_to: int) -> bytes:
        return ordered_upper_range(key, _LONG_LONG.pack(MAX_LONG, time_to))

    def lower_range_fixed(self, key: bytes, time_from: int) -> bytes:
        # SessionWindow(0, max(0, from)) -> [key][end=from][start=0]
        return key + _LONG_LONG.pack(max(0, time_from), 0)

    def upper_range_fixed(self, key: bytes, time_to: int) -> bytes:
        # SessionWindow(to, MAX) -> [key][end=MAX][start=to]
        return key + _LONG_LONG.pack(MAX_LONG, time_to)

    @staticmethod
    def condition(
        key_from: bytes | None, key_to: bytes | None, time_from: int, time_to: int
    ) -> Predicate:
        """Sessions with end >= time_from and start <= time_to, key within range."""
        unpack = _LONG_LONG.unpack_from

        def matches(binary: bytes) -> bool:
            n = len(binary) - 16
            end, start = unpack(binary, n)
            if end < time_from or start > time_to:
                return False
            k = binary[:n]
            return (key_from is None or k >= key_from) and (key_to is None or k <= key_to)

        return matches

    @staticmethod
    def entry_condition(
        key_from: bytes | None, key_to: bytes | None, time_from: int, time_to: int
    ) -> EntryPredicate:
        """``condition`` of an entry's key (one closure per case, no per-entry branches)."""
        unpack = _LONG_LONG.unpack_from
        if key_from is not None and key_from == key_to:
            key = key_from

            def one_key(kv: tuple[bytes, bytes]) -> bool:
                binary = kv[0]
                n = len(binary) - 16
                end, start = unpack(binary, n)
                return end >= time_from and start <= time_to and binary[:n] == key

            return one_key
        if key_from is None and key_to is None:

            def any_key(kv: tuple[bytes, bytes]) -> bool:
                binary = kv[0]
                end, start = unpack(binary, len(binary) - 16)
                return end >= time_from and start <= time_to

            return any_key
        matches = SessionKeySchema.condition(key_from, key_to, time_from, time_to)
        return lambda kv: matches(kv[0])

    @staticmethod
    def time_bounds(time_from: int, time_to: int) -> tuple[bytes | None, bytes | None]:
        return None, None

    @staticmethod
    def search_bounds(time_from: int, time_to: int) -> tuple[int, int]:
        """Sessions are segmented by end time, which can be anything >= earliest end."""
        return time_from, MAX_LONG

    @staticmethod
    def to_changelog_key(binary: bytes) -> bytes:
        return binary

    @staticmethod
    def from_changelog_key(binary: bytes) -> bytes:
        return binary


WINDOW_KEY_SCHEMA = WindowKeySchema()
TIME_FIRST_WINDOW_KEY_SCHEMA = TimeFirstWindowKeySchema()
SESSION_KEY_SCHEMA = SessionKeySchema()
