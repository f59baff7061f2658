"""Enriched orders: each order with its customer's profile and a credit-limit flag.

orders (rekeyed by ``customer_id``) LEFT JOIN the ``customers`` KTable -> ``enriched-orders``,
keyed by customer id. The value is the order plus

- ``customer_known``: false when no profile exists (such orders are kept),
- ``customer_name``, ``tier``, ``credit_limit``, ``known_locations`` from the profile (null
  for unknown customers),
- ``within_credit_limit``: ``amount <= credit_limit``; false for unknown customers (no
  limit to check against).

Customer updates carry timestamp 0 (``TABLE_TIME``) so a task applies them before the
orders that need them. Store (interactive queries): ``customers-store``. The ``customers``
topic and the repartition topic must have the same partition count (co-partitioning).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipelines import domain
from pipelines.streams.common import (
    EVENT_TIME,
    KEY_SERDE,
    TABLE_TIME,
    VALUE_SERDE,
    dead_letter_gate,
    order_problem,
    raw_serde,
)
from pipelines.streams.config import StreamAppConfig
from streaming import Materialized, Produced, Repartitioned, StreamsBuilder, Topology

APP = "enriched-orders"
CUSTOMERS_STORE = "customers-store"


def enrich(order: dict[str, Any], customer: dict[str, Any] | None) -> dict[str, Any]:
    """The enriched order value (the joiner)."""
    profile = customer if isinstance(customer, dict) else {}
    limit = profile.get("credit_limit")
    within = (
        isinstance(limit, int | float) and not isinstance(limit, bool) and order["amount"] <= limit
    )
    return {
        **order,
        "customer_known": bool(profile),
        "customer_name": profile.get("name"),
        "tier": profile.get("tier"),
        "credit_limit": limit,
        "known_locations": profile.get("known_locations"),
        "within_credit_limit": within,
    }


def customers_table(builder: StreamsBuilder, cfg: StreamAppConfig, store: str) -> Any:
    """The customers KTable (profiles by customer id), materialised in ``store``."""
    return builder.table(
        cfg.customers_topic,
        key_serde=KEY_SERDE,
        value_serde=raw_serde(cfg, domain.CUSTOMERS),
        timestamp_extractor=TABLE_TIME,
        materialized=Materialized.as_(store)
        .with_key_serde(KEY_SERDE)
        .with_value_serde(VALUE_SERDE),
    )


def orders_by_customer(builder: StreamsBuilder, cfg: StreamAppConfig, app: str) -> Any:
    """Usable orders rekeyed by customer id through a named repartition topic; invalid
    ones and ones too far in the future go to the application's dead-letter topic."""
    orders = builder.stream(
        cfg.orders_topic,
        key_serde=KEY_SERDE,
        value_serde=raw_serde(cfg, domain.ORDERS),
        timestamp_extractor=EVENT_TIME,
    )
    usable = dead_letter_gate(
        orders, order_problem, cfg.dead_letter_topic(app), cfg.max_event_time_ahead_ms
    )
    return usable.select_key(lambda k, v: v["customer_id"]).repartition(
        Repartitioned(name="orders-by-customer", key_serde=KEY_SERDE, value_serde=VALUE_SERDE)
    )


def build_enriched_orders(config: StreamAppConfig | Mapping[str, Any] | None = None) -> Topology:
    """orders by customer LEFT JOIN customers -> enriched-orders."""
    cfg = StreamAppConfig.of(config)
    builder = StreamsBuilder()
    customers = customers_table(builder, cfg, CUSTOMERS_STORE)
    (
        orders_by_customer(builder, cfg, APP)
        .left_join(customers, enrich)
        .to(cfg.enriched_topic, Produced(key_serde=KEY_SERDE, value_serde=VALUE_SERDE))
    )
    return builder.build()
