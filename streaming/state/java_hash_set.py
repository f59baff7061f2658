"""The iteration order of Java's ``HashSet<Bytes>``, for byte-for-byte changelog parity.

Kafka's suppression buffer logs its dirty keys by iterating a ``HashSet<Bytes>``: the order
is by bucket (``Arrays.hashCode`` of the bytes, spread as ``HashMap.hash`` does, masked by
the table size), then by insertion within a bucket. The table starts at 16 buckets, doubles
whenever the set holds more than three quarters of that, and keeps its size on ``clear()``.
(Buckets of eight or more keys in tables of 64 or more become trees in Java, whose order is
not modelled: that needs eight keys with the same masked hash at once.)
"""

from __future__ import annotations

from collections.abc import Iterator

_INITIAL_CAPACITY = 16


def bytes_hash_code(data: bytes) -> int:
    """Kafka's ``Bytes.hashCode()`` (``Arrays.hashCode(byte[])``), as a signed 32-bit int."""
    h = 1
    for b in data:
        h = (31 * h + (b - 256 if b > 127 else b)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _spread(h: int) -> int:
    u = h & 0xFFFFFFFF
    return u ^ (u >> 16)


class JavaHashSetOrder:
    """A set of byte strings that iterates in the order Java's ``HashSet<Bytes>`` would."""

    __slots__ = ("_capacity", "_next", "_seq")

    def __init__(self) -> None:
        self._seq: dict[bytes, int] = {}
        self._next = 0
        self._capacity = 0  # Java allocates the table on the first add

    def add(self, key: bytes) -> None:
        if key in self._seq:
            return
        self._seq[key] = self._next
        self._next += 1
        if not self._capacity:
            self._capacity = _INITIAL_CAPACITY
        while len(self._seq) > self._capacity * 3 // 4:
            self._capacity *= 2

    def clear(self) -> None:
        self._seq.clear()

    def __len__(self) -> int:
        return len(self._seq)

    def __contains__(self, key: object) -> bool:
        return key in self._seq

    def __iter__(self) -> Iterator[bytes]:
        mask = self._capacity - 1
        seq = self._seq
        return iter(sorted(seq, key=lambda k: (_spread(bytes_hash_code(k)) & mask, seq[k])))
