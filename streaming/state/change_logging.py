"""Change-logging layers: every write also goes to ``context.log_change`` (Kafka's
ChangeLoggingKeyValueBytesStore, ChangeLoggingTimestampedKeyValueBytesStore,
ChangeLoggingWindowBytesStore, ChangeLoggingTimestampedWindowBytesStore,
ChangeLoggingSessionBytesStore).

Plain stores log the value with the current record's timestamp. Timestamped stores log the
plain value (timestamp stripped) with the timestamp stored in the value, and the record
timestamp for deletes. Window stores log key-first window keys ``[key][start][seqnum]``, session
stores ``[key][end][start]``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from streaming.state.api import StateStore, StateStoreContext, WrappedStateStore
from streaming.state.key_schema import SESSION_KEY_SCHEMA, WINDOW_KEY_SCHEMA
from streaming.state.key_value_bytes import KeyValueBytesStore
from streaming.state.session_bytes import (
    SegmentedSessionStore,
    SessionBytesStore,
    WrappedSessionBytesStore,
)
from streaming.state.value_and_timestamp import raw_timestamp
from streaming.state.window_bytes import WrappedWindowBytesStore

_window_changelog_key = WINDOW_KEY_SCHEMA.store_key
_session_key = SESSION_KEY_SCHEMA.store_key
_timestamp_of = int.from_bytes


class _Logger:
    """Mixin holding the context and computing what to log.

    With the runtime's ``TaskContext`` (its class says ``LOG_CHANGE_CALLS_WRITER``) the record
    goes straight to its ``changelog_writer``, what its ``log_change`` does, one call less;
    any other context gets ``log_change``."""

    name: str
    context: StateStoreContext
    timestamped = False
    #: the context when it is the runtime's TaskContext, else None
    _task_context: Any = None

    def _set_context(self, context: StateStoreContext) -> None:
        self.context = context
        direct = getattr(type(context), "LOG_CHANGE_CALLS_WRITER", False)
        self._task_context = context if direct else None

    def _log(self, key: bytes, value: bytes | None) -> None:
        task_context = self._task_context
        if task_context is not None:
            writer = task_context.changelog_writer
            if writer is None:
                return
            if self.timestamped and value is not None:
                writer(self.name, key, value[8:], _timestamp_of(value[:8], "big", signed=True), ())
                return
            rc = task_context._record_context
            if rc is None:
                rc = task_context.record_context()
            writer(self.name, key, value, -1 if rc is None else rc.timestamp, ())
            return
        ctx = self.context
        if self.timestamped and value is not None:
            ctx.log_change(self.name, key, value[8:], raw_timestamp(value))
        else:
            rc = ctx.record_context()
            ctx.log_change(self.name, key, value, -1 if rc is None else rc.timestamp)


class ChangeLoggingKeyValueBytesStore(_Logger, WrappedStateStore, KeyValueBytesStore):
    """Logs every key-value write to the store's changelog."""

    wrapped: KeyValueBytesStore

    def __init__(self, wrapped: KeyValueBytesStore) -> None:
        super().__init__(wrapped)

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._set_context(context)
        self.wrapped.init(context, root)

    def get(self, key):
        return self.wrapped.get(key)

    def put(self, key: bytes, value: bytes | None) -> None:
        self.wrapped.put(key, value)
        self._log(key, value)

    def put_if_absent(self, key: bytes, value: bytes | None) -> bytes | None:
        previous = self.wrapped.put_if_absent(key, value)
        if previous is None:
            # then it was absent
            self._log(key, value)
        return previous

    def put_all(self, entries: Iterable[tuple[bytes, bytes | None]]) -> None:
        entries = list(entries)
        self.wrapped.put_all(entries)
        for key, value in entries:
            self._log(key, value)

    def delete(self, key: bytes) -> bytes | None:
        old = self.wrapped.delete(key)
        self._log(key, None)
        return old

    def range(self, from_key, to_key):
        return self.wrapped.range(from_key, to_key)

    def reverse_range(self, from_key, to_key):
        return self.wrapped.reverse_range(from_key, to_key)

    def all(self):
        return self.wrapped.all()

    def reverse_all(self):
        return self.wrapped.reverse_all()

    def prefix_scan(self, prefix):
        return self.wrapped.prefix_scan(prefix)

    def approximate_num_entries(self) -> int:
        return self.wrapped.approximate_num_entries()


class ChangeLoggingTimestampedKeyValueBytesStore(ChangeLoggingKeyValueBytesStore):
    """Logs plain values with the timestamp carried in the timestamped value."""

    timestamped = True


class ChangeLoggingWindowBytesStore(_Logger, WrappedWindowBytesStore):
    """Logs window writes under ``[key][window start][seqnum]`` keys."""

    def __init__(self, wrapped) -> None:
        super().__init__(wrapped)
        self.seqnum = 0

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._set_context(context)
        self.wrapped.init(context, root)

    def put(self, key: bytes, value: bytes | None, window_start: int) -> None:
        self.wrapped.put(key, value, window_start)
        if self.retain_duplicates:
            self.seqnum = (self.seqnum + 1) & 0x7FFFFFFF
        self._log(_window_changelog_key(key, window_start, self.seqnum), value)


class ChangeLoggingTimestampedWindowBytesStore(ChangeLoggingWindowBytesStore):
    """Window change logger for timestamped values."""

    timestamped = True


class ChangeLoggingSessionBytesStore(_Logger, WrappedSessionBytesStore):
    """Logs session writes under ``[key][end][start]`` keys."""

    def __init__(self, wrapped: SessionBytesStore) -> None:
        super().__init__(wrapped)
        #: ``put_schema_key``/``remove_schema_key`` of the wrapped store, or the segmented
        #: store's ``put``/``remove`` under a SegmentedSessionStore (which is all those do)
        #: (bound by ``init``)
        self._put_key: Callable[[bytes, bytes | None], None] = wrapped.put_schema_key
        self._remove_key: Callable[[bytes], Any] = wrapped.remove_schema_key

    def init(self, context: StateStoreContext, root: StateStore) -> None:
        self._set_context(context)
        wrapped = self.wrapped
        wrapped.init(context, root)
        if type(wrapped) is SegmentedSessionStore:
            self._put_key = wrapped.segmented.put
            self._remove_key = wrapped.segmented.remove

    def put(self, key: bytes, start: int, end: int, value: bytes | None) -> None:
        self.wrapped.put(key, start, end, value)
        self._log(_session_key(key, start, end), value)

    def remove(self, key: bytes, start: int, end: int) -> None:
        self.wrapped.remove(key, start, end)
        self._log(_session_key(key, start, end), None)

    # the changelog key of a session is its store key
    def put_schema_key(self, schema_key: bytes, value: bytes | None) -> None:
        self._put_key(schema_key, value)
        self._log(schema_key, value)

    def remove_schema_key(self, schema_key: bytes) -> None:
        self._remove_key(schema_key)
        self._log(schema_key, None)
