"""Recompute one result for one hour partition: read the lake, transform, store."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assets import domain
from assets.batch import compute
from assets.batch.read import read_all, read_hours
from assets.batch.session import get_spark
from assets.batch.store import write_result
from assets.lake.paths import HOUR_MS, hour_of, hour_start_ms

# Batch result name -> the stream topic it recomputes.
RESULTS = {
    "revenue_5m": domain.REVENUE_5M,
    "revenue_hopping": domain.REVENUE_HOPPING,
    "fraud_alerts": domain.FRAUD_ALERTS,
    "click_sessions": domain.CLICK_SESSIONS,
    "orders_deduped": domain.ORDERS_DEDUPED,
}


@dataclass
class BatchOutput:
    """One recomputed result: its rows (pandas) and where they were stored."""

    result: str
    hour: str
    frame: Any
    path: Path | None


def compute_result(result: str, hour: str, lake: Path | None = None, spark: Any = None) -> Any:
    """The Spark DataFrame of batch ``result`` for ``hour`` (lake hour or Dagster key)."""
    spark = spark or get_spark()
    start = hour_start_ms(hour)
    end = start + HOUR_MS
    if result == "revenue_5m":
        orders = read_hours(spark, domain.ORDERS, start, end, lake)
        return compute.revenue_tumbling(orders, start, end)
    if result == "revenue_hopping":
        orders = read_hours(spark, domain.ORDERS, start, end + domain.HOPPING_SIZE_MS, lake)
        return compute.revenue_hopping(orders, start, end)
    if result == "fraud_alerts":
        orders = read_hours(spark, domain.ORDERS, start, end, lake)
        customers = read_all(spark, domain.CUSTOMERS, lake)
        return compute.fraud_alerts(orders, customers, start, end)
    if result == "click_sessions":
        clicks = read_hours(spark, domain.CLICKS, start - HOUR_MS, end + HOUR_MS, lake)
        return compute.click_sessions(clicks, start, end)
    if result == "orders_deduped":
        orders = read_hours(spark, domain.ORDERS, start, end, lake)
        return compute.dedup_orders(orders, start, end)
    raise KeyError(f"unknown batch result {result!r}; known: {sorted(RESULTS)}")


_SORT = {
    "revenue_5m": ["window_start", "region"],
    "revenue_hopping": ["window_start", "region"],
    "fraud_alerts": ["rule", "customer_id", "order_id"],
    "click_sessions": ["session_start", "user_id"],
    "orders_deduped": ["event_time", "order_id"],
}


def recompute(
    result: str, hour: str, lake: Path | None = None, spark: Any = None, *, store: bool = True
) -> BatchOutput:
    """Compute ``result`` for ``hour`` and (by default) store it in the lake."""
    frame = compute_result(result, hour, lake, spark).toPandas()
    frame = frame.sort_values(_SORT[result], kind="stable").reset_index(drop=True)
    lake_hour = hour_of(hour_start_ms(hour))
    path = write_result(result, lake_hour, frame, lake) if store else None
    return BatchOutput(result, lake_hour, frame, path)
