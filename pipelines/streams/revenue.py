"""Windowed revenue: revenue and order count per region.

- 5-minute tumbling windows with 1 minute of grace, one final result per window when it
  closes (``EmitStrategy.on_window_close``) -> ``revenue-per-region-5m``;
- 10-minute windows every 5 minutes, updated eagerly (on every commit) for dashboards
  -> ``revenue-per-region-hopping``;
- the orders either aggregation dropped as late, one record per dropped window
  -> ``windowed-revenue-late`` (``pipelines.streams.late``).

Both read the orders rekeyed by region through one repartition topic. Output key: the
region; value ``{"region", "window_start", "window_end", "revenue", "order_count",
"revenue_cents"}`` (sums in integer cents, so stream and batch agree exactly). Stores
(interactive queries): ``revenue-5m-store`` and ``revenue-hopping-store``, values
``{"revenue_cents", "order_count"}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipelines import domain
from pipelines.streams.common import (
    EVENT_TIME,
    KEY_SERDE,
    VALUE_SERDE,
    cents,
    dead_letter_gate,
    order_problem,
    raw_serde,
)
from pipelines.streams.config import StreamAppConfig
from pipelines.streams.late import report_late
from streaming import (
    EmitStrategy,
    Materialized,
    Produced,
    Repartitioned,
    StreamsBuilder,
    TimeWindows,
    Topology,
)

APP = "windowed-revenue"
STORE_5M = "revenue-5m-store"
STORE_HOPPING = "revenue-hopping-store"


def _init() -> dict[str, int]:
    return {"revenue_cents": 0, "order_count": 0}


def _add(key: str, order: dict[str, Any], agg: dict[str, int]) -> dict[str, int]:
    return {
        "revenue_cents": agg["revenue_cents"] + cents(order["amount"]),
        "order_count": agg["order_count"] + 1,
    }


def _publish(windowed: Any, agg: dict[str, int] | None) -> tuple[str, dict[str, Any] | None]:
    key = windowed.key
    if agg is None:
        return key, None
    window = windowed.window
    return key, {
        "region": key,
        "window_start": window.start,
        "window_end": window.end,
        "revenue": agg["revenue_cents"] / 100,
        "order_count": agg["order_count"],
        "revenue_cents": agg["revenue_cents"],
    }


def build_windowed_revenue(config: StreamAppConfig | Mapping[str, Any] | None = None) -> Topology:
    """orders -> by region -> tumbling (final on close) and hopping (eager) revenue."""
    cfg = StreamAppConfig.of(config)
    builder = StreamsBuilder()
    orders = builder.stream(
        cfg.orders_topic,
        key_serde=KEY_SERDE,
        value_serde=raw_serde(cfg, domain.ORDERS),
        timestamp_extractor=EVENT_TIME,
    )
    usable = dead_letter_gate(
        orders, order_problem, cfg.dead_letter_topic(APP), cfg.max_event_time_ahead_ms
    )
    rekeyed = usable.select_key(lambda k, v: v["region"]).repartition(
        Repartitioned(name="orders-by-region", key_serde=KEY_SERDE, value_serde=VALUE_SERDE)
    )
    by_region = rekeyed.group_by_key()
    tumbling = TimeWindows.of_size_and_grace(cfg.revenue_window_ms, cfg.revenue_grace_ms)
    hopping = TimeWindows.of_size_and_grace(cfg.hopping_size_ms, cfg.revenue_grace_ms).advance_by(
        cfg.hopping_advance_ms
    )
    out = Produced(key_serde=KEY_SERDE, value_serde=VALUE_SERDE)
    revenue_5m = (
        by_region.windowed_by(tumbling)
        .emit_strategy(EmitStrategy.on_window_close())
        .aggregate(_init, _add, Materialized.as_(STORE_5M).with_value_serde(VALUE_SERDE))
    )
    revenue_5m.to_stream().map(_publish).to(cfg.revenue_topic, out)
    revenue_hopping = by_region.windowed_by(hopping).aggregate(
        _init, _add, Materialized.as_(STORE_HOPPING).with_value_serde(VALUE_SERDE)
    )
    revenue_hopping.to_stream().map(_publish).to(cfg.hopping_revenue_topic, out)
    late_topic = cfg.late_topic(APP)
    report_late(revenue_5m, result="revenue_5m", topic=late_topic)
    report_late(revenue_hopping, result="revenue_hopping", topic=late_topic)
    return builder.build()
