"""Fraud alerts: three rules merged into ``fraud-alerts`` (keyed by customer id).

- ``high_value``: an order over ``high_value_threshold`` (10,000);
- ``rapid_burst``: more than ``burst_max_orders`` (3) orders of a customer in one 5-minute
  tumbling window (epoch-aligned, 1 minute of grace): one alert per customer and window,
  raised by the order that exceeds the limit (window store ``burst-count-store`` without
  caching, so every update is seen); the alert carries ``window_start``;
- ``new_location``: an order from a location the customer's profile does not list
  (orders joined with the ``customers`` KTable; customers without a profile are skipped:
  they are the enriched-orders application's concern).

An alert is final: an order sent twice (the generator's duplicates) raises its
``high_value`` and ``new_location`` alerts once (``alert-dedup-store`` remembers each rule and
order id for ``dedup_window_ms``), as the batch recompute raises them once per order id.

Orders the burst count dropped as late go to ``fraud-alerts-late`` (``pipelines.streams.late``).

Alert value: ``{"rule", "customer_id", "order_id", "amount", "event_time", "window_start",
"evidence"}`` (``window_start`` null except for bursts) with the rule's evidence as a JSON
object (amount and threshold; count, window and order ids; location and known locations).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipelines.streams.common import KEY_SERDE, VALUE_SERDE
from pipelines.streams.config import StreamAppConfig
from pipelines.streams.dedup import DedupProcessor, dedup_store
from pipelines.streams.enriched import customers_table, orders_by_customer
from pipelines.streams.late import report_late
from streaming import Materialized, Produced, StreamsBuilder, TimeWindows, Topology

APP = "fraud-alerts"
BURST_STORE = "burst-count-store"
PROFILE_STORE = "fraud-customers-store"
ALERT_DEDUP_STORE = "alert-dedup-store"


def _alert_id(alert: dict[str, Any]) -> str:
    return f"{alert['rule']}/{alert['order_id']}"


def alert(
    rule: str, order: dict[str, Any], evidence: dict[str, Any], window_start: int | None = None
) -> dict[str, Any]:
    """An alert value for ``order`` under ``rule``."""
    return {
        "rule": rule,
        "customer_id": order["customer_id"],
        "order_id": order["order_id"],
        "amount": order["amount"],
        "event_time": order["event_time"],
        "window_start": window_start,
        "evidence": evidence,
    }


def _burst_init() -> dict[str, Any]:
    return {"count": 0, "order_ids": [], "last": None}


def _burst_add(key: str, order: dict[str, Any], agg: dict[str, Any]) -> dict[str, Any]:
    return {
        "count": agg["count"] + 1,
        "order_ids": [*agg["order_ids"], order["order_id"]],
        "last": order,
    }


def _new_location(order: dict[str, Any], customer: dict[str, Any]) -> dict[str, Any] | None:
    known = customer.get("known_locations") or []
    location = order.get("location")
    if location in known:
        return None
    return alert("new_location", order, {"location": location, "known_locations": list(known)})


def build_fraud_alerts(config: StreamAppConfig | Mapping[str, Any] | None = None) -> Topology:
    """orders by customer -> high value | burst count | profile join -> fraud-alerts."""
    cfg = StreamAppConfig.of(config)
    builder = StreamsBuilder()
    customers = customers_table(builder, cfg, PROFILE_STORE)
    orders = orders_by_customer(builder, cfg, APP)

    threshold = cfg.high_value_threshold
    high_value = orders.filter(lambda k, v: v["amount"] > threshold).map_values(
        lambda v: alert("high_value", v, {"amount": v["amount"], "threshold": threshold})
    )

    alert_count = cfg.burst_max_orders + 1

    def burst_alert(windowed: Any, agg: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        window = windowed.window
        evidence = {
            "count": agg["count"],
            "window_start": window.start,
            "window_end": window.end,
            "order_ids": agg["order_ids"],
        }
        return windowed.key, alert("rapid_burst", agg["last"], evidence, window.start)

    burst_windows = TimeWindows.of_size_and_grace(cfg.burst_window_ms, cfg.burst_grace_ms)
    burst_counts = (
        orders.group_by_key()
        .windowed_by(burst_windows)
        .aggregate(
            _burst_init,
            _burst_add,
            Materialized.as_(BURST_STORE).with_value_serde(VALUE_SERDE).with_caching_disabled(),
        )
    )
    bursts = (
        burst_counts.to_stream()
        .filter(lambda k, v: v is not None and v["count"] == alert_count)
        .map(burst_alert)
    )

    new_location = orders.join(customers, _new_location).filter(lambda k, v: v is not None)

    builder.add_state_store(dedup_store(ALERT_DEDUP_STORE, cfg.dedup_window_ms))
    window = cfg.dedup_window_ms
    per_order = high_value.merge(new_location).process_values(
        lambda: DedupProcessor(window, ALERT_DEDUP_STORE, _alert_id), ALERT_DEDUP_STORE
    )
    per_order.merge(bursts).to(
        cfg.fraud_topic, Produced(key_serde=KEY_SERDE, value_serde=VALUE_SERDE)
    )
    report_late(burst_counts, result="rapid_burst", topic=cfg.late_topic(APP))
    return builder.build()
