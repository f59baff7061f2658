"""``KeyValueStoreWrapper``: one face for the DSL's timestamped or versioned key-value stores.

Kafka's KeyValueStoreWrapper: ``get`` answers a ``ValueAndTimestamp`` for both kinds, ``put``
returns ``PUT_RETURN_CODE_IS_LATEST`` for timestamped stores and the versioned put code otherwise.
"""

from __future__ import annotations

from typing import Any

from streaming.state.value_and_timestamp import ValueAndTimestamp
from streaming.state.versioned_bytes import PUT_RETURN_CODE_NOT_PUT as PUT_RETURN_CODE_NOT_PUT
from streaming.state.versioned_bytes import PUT_RETURN_CODE_VALID_TO_UNDEFINED

#: A put that made the latest version of its key.
PUT_RETURN_CODE_IS_LATEST = PUT_RETURN_CODE_VALID_TO_UNDEFINED


class KeyValueStoreWrapper:
    """Reads and writes a timestamped or a versioned key-value store alike."""

    __slots__ = ("store", "versioned")

    def __init__(self, store: Any) -> None:
        self.store = store
        self.versioned = bool(getattr(store, "versioned", False))

    @property
    def name(self) -> str:
        return self.store.name

    def get(self, key: Any) -> ValueAndTimestamp | None:
        """The latest row of ``key``."""
        if self.versioned:
            record = self.store.get(key)
            return None if record is None else ValueAndTimestamp(record.value, record.timestamp)
        return self.store.get(key)

    def get_as_of(self, key: Any, as_of_timestamp: int) -> ValueAndTimestamp | None:
        """The row of ``key`` as of a time (versioned stores only)."""
        if not self.versioned:
            raise TypeError("get(key, timestamp) is only supported for versioned stores")
        record = self.store.get_as_of(key, as_of_timestamp)
        return None if record is None else ValueAndTimestamp(record.value, record.timestamp)

    def put(self, key: Any, value: Any, timestamp: int) -> int:
        """Write ``value`` (None deletes) at ``timestamp``; returns a put code."""
        if self.versioned:
            return self.store.put(key, value, timestamp)
        self.store.put(key, None if value is None else ValueAndTimestamp(value, timestamp))
        return PUT_RETURN_CODE_IS_LATEST
