"""A key-value store whose puts append to a list per key (Kafka's ListValueStore,
ChangeLoggingListValueBytesStore and ListValueStoreBuilder).

It backs the stream-stream outer-join store: ``put(key, value)`` appends ``value`` to the list of
``key``, ``put(key, None)`` drops the whole list, ``put_if_absent(key, None)`` drops it only if
present, and ``all()`` yields one entry per list element (keys in byte order, elements in
insertion order). Lists are stored in Kafka's ``Serdes.ListSerde(ArrayList, ByteArray)`` layout:
``[1 (variable-size strategy)][count: int32]([length: int32][bytes])*``; the changelog holds the
whole list of a key.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from typing import Any

from streaming.state.api import StateStore, StateStoreContext, WrappedStateStore
from streaming.state.change_logging import ChangeLoggingKeyValueBytesStore
from streaming.state.key_value_bytes import BytesKV, KeyValueBytesStore
from streaming.state.key_value_store import KeyValueStore
from streaming.state.stores import StoreBuilder

_INT = struct.Struct(">i")
_VARIABLE_SIZE = b"\x01"


def serialize_list(items: list[bytes]) -> bytes:
    """Kafka's ListSerializer for byte arrays (variable-size strategy)."""
    parts = [_VARIABLE_SIZE, _INT.pack(len(items))]
    for item in items:
        parts.append(_INT.pack(len(item)))
        parts.append(item)
    return b"".join(parts)


def deserialize_list(data: bytes) -> list[bytes]:
    """Kafka's ListDeserializer for byte arrays (variable-size strategy)."""
    if data[0] != 1:
        raise ValueError("only the variable-size list layout is supported")
    (count,) = _INT.unpack_from(data, 1)
    pos = 5
    items = []
    for _ in range(count):
        (length,) = _INT.unpack_from(data, pos)
        pos += 4
        items.append(data[pos : pos + length])
        pos += length
    return items


class ListValueStore(WrappedStateStore, KeyValueBytesStore):
    """Appends values to a per-key list in the wrapped bytes store."""

    wrapped: KeyValueBytesStore

    def get(self, key: bytes) -> bytes | None:
        return self.wrapped.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        if value is None:  # blind delete of the whole list
            self.wrapped.put(key, None)
        else:
            self._append(key, value, self.wrapped.get(key))

    def put_if_absent(self, key: bytes, value: bytes | None) -> bytes | None:
        old = self.wrapped.get(key)
        if old is not None:
            if value is None:
                self.wrapped.put(key, None)
            else:
                self._append(key, value, old)
        # like Kafka: always None (the only caller, the join processor, ignores it)
        return None

    def _append(self, key: bytes, value: bytes, old: bytes | None) -> None:
        items = [] if old is None else deserialize_list(old)
        items.append(value)
        self.wrapped.put(key, serialize_list(items))

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        raise NotImplementedError("putAll not supported")

    def delete(self, key: bytes) -> bytes | None:
        raise NotImplementedError("delete not supported")

    def range(self, from_key: bytes | None, to_key: bytes | None) -> Iterator[BytesKV]:
        raise NotImplementedError("range not supported")

    def reverse_range(self, from_key: bytes | None, to_key: bytes | None) -> Iterator[BytesKV]:
        raise NotImplementedError("reverse range not supported")

    def all(self) -> Iterator[BytesKV]:
        for key, value in self.wrapped.all():
            for item in deserialize_list(value):
                yield key, item

    def reverse_all(self) -> Iterator[BytesKV]:
        raise NotImplementedError("reverse all not supported")

    def prefix_scan(self, prefix: bytes) -> Iterator[BytesKV]:
        raise NotImplementedError("prefix scan not supported")

    def approximate_num_entries(self) -> int:
        return self.wrapped.approximate_num_entries()


class ChangeLoggingListValueBytesStore(ChangeLoggingKeyValueBytesStore):
    """Logs the whole new list of a key after every append (a tombstone when it is dropped)."""

    def put(self, key: bytes, value: bytes | None) -> None:
        self.wrapped.put(key, value)
        self._log(key, None if value is None else self.wrapped.get(key))

    def put_if_absent(self, key: bytes, value: bytes | None) -> bytes | None:
        if self.wrapped.get(key) is not None:
            self.put(key, value)
        return None


class ListValueKeyValueStore(KeyValueStore):
    """The typed outer-join store: keys ``TimestampedKeyAndJoinSide``, values ``LeftOrRightValue``.

    The record key serde and the two value serdes may be None: the context's default serdes
    are used then (Kafka's ``setIfUnset``)."""

    def __init__(
        self,
        wrapped: KeyValueBytesStore,
        key_serde: Any,
        left_value_serde: Any,
        right_value_serde: Any,
    ) -> None:
        super().__init__(wrapped, None, None)
        self._record_key_serde = key_serde
        self._left_value_serde = left_value_serde
        self._right_value_serde = right_value_serde

    def init(self, context: StateStoreContext, root: StateStore | None = None) -> None:
        from streaming.state.join_side import LeftOrRightValueSerde, TimestampedKeyAndJoinSideSerde

        key = self._record_key_serde or context.default_key_serde
        left = self._left_value_serde or context.default_value_serde
        right = self._right_value_serde or context.default_value_serde
        self.key_serde = TimestampedKeyAndJoinSideSerde(key)
        self.value_serde = LeftOrRightValueSerde(left, right)
        super().init(context, root)


class ListValueStoreBuilder(StoreBuilder):
    """Builds the outer-join store: typed -> [change logging] -> list values -> bytes store.

    ``key_serde`` is the record key serde; ``value_serde`` / ``other_value_serde`` those of
    the left and right values. Caching is never used (Kafka's builder would allow it, the join
    never enables it)."""

    def __init__(
        self, supplier: Any, key_serde: Any, value_serde: Any, other_value_serde: Any
    ) -> None:
        super().__init__(supplier, key_serde, value_serde)
        self.other_value_serde = other_value_serde

    def build(self) -> ListValueKeyValueStore:
        store: KeyValueBytesStore = ListValueStore(self.supplier.get())
        if self.logging_enabled:
            store = ChangeLoggingListValueBytesStore(store)
        return ListValueKeyValueStore(
            store, self.key_serde, self.value_serde, self.other_value_serde
        )
