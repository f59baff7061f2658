"""Dedup: drop repeated orders (same ``order_id``) within a time window.

A Processor API application (Kafka's event-deduplication pattern): a window store
``orders-dedup-store`` remembers each forwarded order id at its event time; an order whose id
was already seen with an event time within ``dedup_window_ms`` either side is dropped. The
first occurrence (in processing order) wins. Output: ``orders-deduped``, key and value as
read from ``orders``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipelines.streams.common import (
    EVENT_TIME,
    KEY_SERDE,
    VALUE_SERDE,
    dead_letter_gate,
    order_problem,
)
from pipelines.streams.config import StreamAppConfig
from streaming import FixedKeyProcessor, Produced, Record, StreamsBuilder, Topology
from streaming.state.stores import Stores

APP = "orders-dedup"
STORE = "orders-dedup-store"


class DedupProcessor(FixedKeyProcessor):
    """Forward a record unless its id was seen within ``window_ms`` of its timestamp."""

    def __init__(self, window_ms: int) -> None:
        self.window_ms = window_ms

    def init(self, context: Any) -> None:
        self.context = context
        self.store = context.get_state_store(STORE)

    def process(self, record: Record) -> None:
        order_id = record.value["order_id"]
        ts = record.timestamp
        for _ in self.store.fetch_range(order_id, ts - self.window_ms, ts + self.window_ms):
            return  # a duplicate
        self.store.put(order_id, ts, ts)
        self.context.forward(record)


def build_orders_dedup(config: StreamAppConfig | Mapping[str, Any] | None = None) -> Topology:
    """orders -> drop repeated order ids within the window -> orders-deduped."""
    cfg = StreamAppConfig.of(config)
    window = cfg.dedup_window_ms
    builder = StreamsBuilder()
    builder.add_state_store(
        Stores.window_store_builder(
            Stores.persistent_window_store(
                STORE, retention_period=2 * window, window_size=window, retain_duplicates=False
            ),
            KEY_SERDE,
            VALUE_SERDE,
        ).with_caching_disabled()
    )
    orders = builder.stream(
        cfg.orders_topic,
        key_serde=KEY_SERDE,
        value_serde=VALUE_SERDE,
        timestamp_extractor=EVENT_TIME,
    )
    usable = dead_letter_gate(
        orders, order_problem, cfg.dead_letter_topic(APP), cfg.max_event_time_ahead_ms
    )
    usable.process_values(lambda: DedupProcessor(window), STORE).to(
        cfg.dedup_topic, Produced(key_serde=KEY_SERDE, value_serde=VALUE_SERDE)
    )
    return builder.build()
