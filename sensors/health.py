"""Stream health sensor: consumer lag and state of every stream application, and the size of
the raw topics, recorded as asset observations (so they show in the UI) and alerted on.

Lag comes from Kafka (committed offsets of the consumer group ``application.id``), so it is
right wherever the applications run; state and throughput come from the supervisor's status
file when the supervisor runs them.
"""

from typing import Any

from dagster import (
    AssetKey,
    AssetObservation,
    DefaultSensorStatus,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from assets import domain
from assets.streams.apps import STREAM_APPS
from assets.streams.config import StreamAppConfig
from resources.kafka import KafkaResource
from resources.stream_apps import StreamAppsResource

BAD_STATES = {"ERROR", "PENDING_ERROR", "NOT_RUNNING"}


def app_health(
    app: str, lag: dict[str, int], status: dict[str, Any] | None, max_lag: int
) -> tuple[dict[str, Any], list[str]]:
    """Metadata of one application's health and its alerts."""
    total = sum(lag.values())
    meta: dict[str, Any] = {
        "consumer_lag_total": total,
        "consumer_lag_max": max(lag.values(), default=0),
        "partitions": len(lag),
    }
    alerts = []
    if status:
        meta["state"] = status.get("state", "UNKNOWN")
        for field in ("records_per_second", "records_processed", "closed_windows"):
            if field in status:
                meta[field] = status[field]
        if status.get("closed_window_watermark") is not None:
            meta["closed_window_watermark"] = status["closed_window_watermark"]
        if meta["state"] in BAD_STATES:
            alerts.append(f"{app} is {meta['state']}")
    if total > max_lag:
        alerts.append(f"{app} lags {total} records (limit {max_lag})")
    meta["healthy"] = not alerts
    return meta, alerts


def build_health_sensor(
    *,
    minimum_interval_seconds: int = 60,
    default_status: DefaultSensorStatus = DefaultSensorStatus.RUNNING,
) -> Any:
    """The stream health / consumer lag sensor."""

    @sensor(
        name="stream_health_sensor",
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        description="Observes consumer lag and state of the stream applications and the raw "
        "topics' sizes; alerts (logged, and healthy=false) on errors or lag.",
    )
    def stream_health_sensor(
        context: SensorEvaluationContext, kafka: KafkaResource, stream_apps: StreamAppsResource
    ):
        config = StreamAppConfig()
        statuses = stream_apps.supervisor_status().get("apps", {})
        events: list[AssetObservation] = []
        alerts: list[str] = []
        for name, app in STREAM_APPS.items():
            try:
                lag = kafka.consumer_lag(name, app.input_topics(config))
            except Exception as exc:
                alerts.append(f"{name}: lag unavailable ({exc})")
                continue
            meta, app_alerts = app_health(
                name, lag, statuses.get(name), stream_apps.max_healthy_lag
            )
            alerts += app_alerts
            for topic in app.output_topics(config)[:-1]:
                events.append(AssetObservation(asset_key=AssetKey(["kafka", topic]), metadata=meta))
        for topic in domain.RAW_TOPICS:
            try:
                offsets = kafka.end_offsets(topic)
            except Exception:
                continue
            events.append(
                AssetObservation(
                    asset_key=AssetKey(["kafka", topic]),
                    metadata={"records": sum(offsets.values()), "partitions": len(offsets)},
                )
            )
        for alert in alerts:
            context.log.warning("ALERT: %s", alert)
        if not events:
            return SkipReason("; ".join(alerts) or "nothing to observe")
        return SensorResult(asset_events=events)

    return stream_health_sensor
