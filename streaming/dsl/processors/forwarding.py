"""Forwarding of table updates, directly or through a caching store's flush.

Kafka's ``TimestampedTupleForwarder``: with a caching store, updates are forwarded
when the cache flushes or evicts (deduplicated per key); without, immediately.
"""

from __future__ import annotations

from typing import Any

from streaming.dsl.change import Change
from streaming.topology.processor import Record


def value_of(vat: Any) -> Any:
    """The plain value of a ``ValueAndTimestamp`` (or None)."""
    return None if vat is None else vat.value


class TupleForwarder:
    """Forward ``Change`` records now, or leave it to the store's cache flush."""

    def __init__(self, store: Any, context: Any, send_old_values: bool) -> None:
        self.context = context
        self.node = context.current_node
        self.caching = bool(
            store is not None and store.set_flush_listener(self._flushed, send_old_values)
        )

    def maybe_forward(self, record: Record) -> None:
        if not self.caching:
            self.context.forward(record)

    def _flushed(self, key: Any, new_vat: Any, old_vat: Any, record_context: Any) -> None:
        context = self.context
        previous_node = context.current_node
        previous_rc = context.record_context()
        context.current_node = self.node
        context.set_record_context(record_context)
        timestamp = new_vat.timestamp if new_vat is not None else record_context.timestamp
        try:
            context.forward(
                Record(
                    key,
                    Change(value_of(new_vat), value_of(old_vat)),
                    timestamp,
                    record_context.headers,
                )
            )
        finally:
            context.current_node = previous_node
            context.set_record_context(previous_rc)
