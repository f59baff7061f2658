"""Typed key-value stores (Kafka's MeteredKeyValueStore / MeteredTimestampedKeyValueStore)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from streaming.state.key_value_bytes import KeyValueBytesStore
from streaming.state.metered import MeteredStore
from streaming.state.value_and_timestamp import ValueAndTimestamp, ValueAndTimestampSerde


class KeyValueStore(MeteredStore):
    """Key-value store of objects, serialized with the key/value serdes over a bytes store.

    Iteration order is the unsigned lexicographic order of the serialized keys.
    """

    wrapped: KeyValueBytesStore

    def __init__(self, wrapped: KeyValueBytesStore, key_serde: Any, value_serde: Any) -> None:
        super().__init__(wrapped, key_serde, value_serde)

    def _decode(self, it: Iterator[tuple[bytes, bytes]]) -> Iterator[tuple[Any, Any]]:
        topic = self.topic
        kdes = self._kdes
        vdes = self._vdes
        for k, v in it:
            yield kdes(topic, k), vdes(topic, v)

    def get(self, key: Any) -> Any:
        topic = self.topic
        raw = self.wrapped.get(self._kser(topic, key))
        return None if raw is None else self._vdes(topic, raw)

    def put(self, key: Any, value: Any) -> None:
        """Put a value; None deletes."""
        topic = self.topic
        self.wrapped.put(
            self._kser(topic, key), None if value is None else self._vser(topic, value)
        )

    def put_if_absent(self, key: Any, value: Any) -> Any:
        """Put only if no value exists; returns the existing value (None if it was absent)."""
        topic = self.topic
        raw = self.wrapped.put_if_absent(
            self._kser(topic, key), None if value is None else self._vser(topic, value)
        )
        return None if raw is None else self._vdes(topic, raw)

    def put_all(self, entries: Iterable[tuple[Any, Any]]) -> None:
        topic = self.topic
        kser = self._kser
        vser = self._vser
        self.wrapped.put_all(
            [(kser(topic, k), None if v is None else vser(topic, v)) for k, v in entries]
        )

    def delete(self, key: Any) -> Any:
        """Delete a key; returns the old value."""
        topic = self.topic
        raw = self.wrapped.delete(self._kser(topic, key))
        return None if raw is None else self._vdes(topic, raw)

    def _raw_or_none(self, key: Any) -> bytes | None:
        return None if key is None else self._kser(self.topic, key)

    def range(self, from_key: Any, to_key: Any) -> Iterator[tuple[Any, Any]]:
        """Entries with from_key <= key <= to_key (None = unbounded), ascending key bytes."""
        return self._decode(
            self.wrapped.range(self._raw_or_none(from_key), self._raw_or_none(to_key))
        )

    def reverse_range(self, from_key: Any, to_key: Any) -> Iterator[tuple[Any, Any]]:
        return self._decode(
            self.wrapped.reverse_range(self._raw_or_none(from_key), self._raw_or_none(to_key))
        )

    def all(self) -> Iterator[tuple[Any, Any]]:
        return self._decode(self.wrapped.all())

    def reverse_all(self) -> Iterator[tuple[Any, Any]]:
        return self._decode(self.wrapped.reverse_all())

    def prefix_scan(self, prefix: Any, prefix_serializer: Any) -> Iterator[tuple[Any, Any]]:
        """Entries whose serialized key starts with ``prefix_serializer.serialize(None, prefix)``."""
        raw = prefix_serializer.serialize(None, prefix)
        return self._decode(self.wrapped.prefix_scan(raw))

    def approximate_num_entries(self) -> int:
        return self.wrapped.approximate_num_entries()


class TimestampedKeyValueStore(KeyValueStore):
    """Key-value store whose values are ValueAndTimestamp (bytes: 8-byte BE ts + value)."""

    def _wrap_value_serde(self, value_serde: Any) -> Any:
        if isinstance(value_serde, ValueAndTimestampSerde):
            return value_serde
        return ValueAndTimestampSerde(value_serde)

    def put(self, key: Any, value: ValueAndTimestamp | None) -> None:
        super().put(key, value)
