"""Dedup: drop repeated orders (same ``order_id``) within a time window.

A Processor API application (Kafka's event-deduplication pattern): a window store
``orders-dedup-store`` remembers each forwarded order id at its event time; an order whose id
was already seen with an event time within ``dedup_window_ms`` either side is dropped. The
first occurrence (in processing order) wins. Output: ``orders-deduped``, key and value as
read from ``orders``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from pipelines import domain
from pipelines.streams.common import (
    EVENT_TIME,
    KEY_SERDE,
    VALUE_SERDE,
    dead_letter_gate,
    order_problem,
    raw_serde,
)
from pipelines.streams.config import StreamAppConfig
from streaming import FixedKeyProcessor, Produced, Record, StreamsBuilder, Topology
from streaming.state.stores import Stores

APP = "orders-dedup"
STORE = "orders-dedup-store"


class DedupProcessor(FixedKeyProcessor):
    """Forward a record unless its id (``id_of`` its value; the order id by default) was
    seen within ``window_ms`` of its timestamp, remembered in window store ``store_name``."""

    def __init__(
        self,
        window_ms: int,
        store_name: str = STORE,
        id_of: Callable[[Any], str] = operator.itemgetter("order_id"),
    ) -> None:
        self.window_ms = window_ms
        self.store_name = store_name
        self.id_of = id_of

    def init(self, context: Any) -> None:
        self.context = context
        self.store = context.get_state_store(self.store_name)

    def process(self, record: Record) -> None:
        record_id = self.id_of(record.value)
        ts = record.timestamp
        for _ in self.store.fetch_range(record_id, ts - self.window_ms, ts + self.window_ms):
            return  # a duplicate
        self.store.put(record_id, ts, ts)
        self.context.forward(record)


def dedup_store(name: str, window_ms: int) -> Any:
    """The window store a ``DedupProcessor`` over ``window_ms`` remembers ids in."""
    return Stores.window_store_builder(
        Stores.persistent_window_store(
            name, retention_period=2 * window_ms, window_size=window_ms, retain_duplicates=False
        ),
        KEY_SERDE,
        VALUE_SERDE,
    ).with_caching_disabled()


def build_orders_dedup(config: StreamAppConfig | Mapping[str, Any] | None = None) -> Topology:
    """orders -> drop repeated order ids within the window -> orders-deduped."""
    cfg = StreamAppConfig.of(config)
    window = cfg.dedup_window_ms
    builder = StreamsBuilder()
    builder.add_state_store(dedup_store(STORE, window))
    orders = builder.stream(
        cfg.orders_topic,
        key_serde=KEY_SERDE,
        value_serde=raw_serde(cfg, domain.ORDERS),
        timestamp_extractor=EVENT_TIME,
    )
    usable = dead_letter_gate(
        orders, order_problem, cfg.dead_letter_topic(APP), cfg.max_event_time_ahead_ms
    )
    usable.process_values(lambda: DedupProcessor(window), STORE).to(
        cfg.dedup_topic, Produced(key_serde=KEY_SERDE, value_serde=VALUE_SERDE)
    )
    return builder.build()
