"""The bytes-level key-value store contract shared by inner, logging and caching layers."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from streaming.state.api import StateStore

BytesKV = tuple[bytes, bytes]


class KeyValueBytesStore(StateStore):
    """Key-value store over bytes, ordered by unsigned lexicographic key order (Kafka's Bytes)."""

    def get(self, key: bytes) -> bytes | None:
        raise NotImplementedError

    def put(self, key: bytes, value: bytes | None) -> None:
        raise NotImplementedError

    def put_if_absent(self, key: bytes, value: bytes | None) -> bytes | None:
        raise NotImplementedError

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        for key, value in entries:
            self.put(key, value)

    def delete(self, key: bytes) -> bytes | None:
        raise NotImplementedError

    def range(self, from_key: bytes | None, to_key: bytes | None) -> Iterator[BytesKV]:
        raise NotImplementedError

    def reverse_range(self, from_key: bytes | None, to_key: bytes | None) -> Iterator[BytesKV]:
        raise NotImplementedError

    def all(self) -> Iterator[BytesKV]:
        return self.range(None, None)

    def reverse_all(self) -> Iterator[BytesKV]:
        return self.reverse_range(None, None)

    def prefix_scan(self, prefix: bytes) -> Iterator[BytesKV]:
        raise NotImplementedError

    def approximate_num_entries(self) -> int:
        raise NotImplementedError


def invalid_range(from_key: bytes | None, to_key: bytes | None) -> bool:
    """Kafka returns an empty iterator (and warns) when from > to."""
    return from_key is not None and to_key is not None and from_key > to_key


def increment(data: bytes) -> bytes | None:
    """Kafka's Bytes.increment: the next byte string of the same length, None on overflow."""
    buf = bytearray(data)
    i = len(buf) - 1
    while i >= 0:
        if buf[i] != 0xFF:
            buf[i] += 1
            return bytes(buf)
        buf[i] = 0
        i -= 1
    return None
