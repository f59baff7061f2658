"""``StreamAppConfig``: topic names and the business parameters of the stream applications.

Defaults come from ``pipelines.domain`` (shared with the lake, batch recompute and
reconciliation, so both halves compute the same thing).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from pipelines import domain
from pipelines.schemas import JSON, RawFormat


@dataclass(frozen=True)
class StreamAppConfig:
    """Topics and parameters shared by the topology factories; every field has a default."""

    orders_topic: str = domain.ORDERS
    customers_topic: str = domain.CUSTOMERS
    clicks_topic: str = domain.CLICKS
    revenue_topic: str = domain.REVENUE_5M
    hopping_revenue_topic: str = domain.REVENUE_HOPPING
    enriched_topic: str = domain.ENRICHED_ORDERS
    fraud_topic: str = domain.FRAUD_ALERTS
    sessions_topic: str = domain.CLICK_SESSIONS
    dedup_topic: str = domain.ORDERS_DEDUPED
    # sinks of the SQL applications (pipelines/streams/sql/*.sql)
    revenue_sql_topic: str = domain.REVENUE_5M_SQL
    enriched_sql_topic: str = domain.ENRICHED_ORDERS_SQL
    fraud_sql_topic: str = domain.FRAUD_ALERTS_SQL
    # dead-letter topic of an application: f"{app name}{dead_letter_suffix}"
    dead_letter_suffix: str = domain.DEAD_LETTER_SUFFIX
    # late-record topic of an application with windows: f"{app name}{late_suffix}"
    late_suffix: str = domain.LATE_SUFFIX
    revenue_window_ms: int = domain.REVENUE_WINDOW_MS
    revenue_grace_ms: int = domain.REVENUE_GRACE_MS
    hopping_size_ms: int = domain.HOPPING_SIZE_MS
    hopping_advance_ms: int = domain.HOPPING_ADVANCE_MS
    high_value_threshold: float = domain.HIGH_VALUE_THRESHOLD
    burst_max_orders: int = domain.BURST_MAX_ORDERS  # an alert at the next order
    burst_window_ms: int = domain.BURST_WINDOW_MS
    burst_grace_ms: int = domain.REVENUE_GRACE_MS
    session_gap_ms: int = domain.SESSION_GAP_MS
    session_grace_ms: int = 5 * domain.MINUTE_MS
    dedup_window_ms: int = domain.DEDUP_WINDOW_MS
    # records with an event time further ahead of the wall clock go to the dead-letter topic
    max_event_time_ahead_ms: int = domain.MAX_EVENT_TIME_AHEAD_MS
    # how the raw topics' values are written: JSON, or Avro with a schema registry
    raw_format: RawFormat = JSON

    @staticmethod
    def of(config: StreamAppConfig | Mapping[str, Any] | None = None) -> StreamAppConfig:
        """A config from None (defaults), an instance, or a mapping of field names."""
        if config is None:
            return StreamAppConfig()
        if isinstance(config, StreamAppConfig):
            return config
        known = {f.name for f in fields(StreamAppConfig)}
        unknown = set(config) - known
        if unknown:
            raise ValueError(
                f"unknown stream app settings {sorted(unknown)}; known: {sorted(known)}"
            )
        return replace(StreamAppConfig(), **dict(config))

    def dead_letter_topic(self, app: str) -> str:
        """The dead-letter topic of application ``app``."""
        return f"{app}{self.dead_letter_suffix}"

    def late_topic(self, app: str) -> str:
        """The topic where application ``app`` reports the records it dropped as late."""
        return f"{app}{self.late_suffix}"
