"""Stream health sensor: every minute, the health of every stream application (consumer
lag, state and health, see ``assets.stream_health``) recorded as an evaluation of its
``stream_app_healthy`` check and as observations of its output assets (numeric metadata
the UI plots over time), with the raw topics' sizes; alerts logged.

The sensor requests no runs, so Dagster records its ticks as skipped: each tick's text says
what it observed (every application's lag and health, the raw topics' sizes, the alerts)
instead of "empty result".
"""

from typing import Any

from dagster import (
    AssetCheckEvaluation,
    AssetObservation,
    DefaultSensorStatus,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from assets.keys import kafka_key
from assets.stream_health import health_evaluation, observe_apps
from pipelines import domain
from pipelines.streams.apps import STREAM_APPS
from pipelines.streams.config import StreamAppConfig
from resources.kafka import KafkaResource
from resources.stream_apps import StreamAppsResource


def tick_message(
    observed: dict[str, dict[str, Any]],
    raw_records: dict[str, int],
    alerts: list[str],
    observations: int,
) -> str:
    """What a tick observed, in one line (the tick's text in the UI): per application its
    health or state and consumer lag, the raw topics' sizes, then the alerts."""
    apps = []
    for name, meta in observed.items():
        state = meta.get("health") or meta.get("state")
        lag = meta.get("consumer_lag_total")
        text = f"{name} " + (f"lag {lag:,}" if lag is not None else "lag unavailable")
        if state:
            text += f" {state}"
        apps.append(text)
    healthy = sum(1 for meta in observed.values() if meta.get("healthy"))
    parts = [f"{len(observed)} stream apps ({healthy} healthy): " + ", ".join(apps)]
    if raw_records:
        parts.append(
            "raw topics: " + ", ".join(f"{t} {n:,} records" for t, n in raw_records.items())
        )
    parts.append(f"{observations} observations recorded")
    if alerts:
        parts.append(f"{len(alerts)} alert{'s' if len(alerts) > 1 else ''}: " + "; ".join(alerts))
    else:
        parts.append("no alerts")
    return "Observed " + ". ".join(parts)


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
        description="Evaluates each stream application's stream_app_healthy check (consumer "
        "lag, state, stalls) and observes its outputs and the raw topics' sizes; alerts "
        "logged.",
    )
    def stream_health_sensor(
        context: SensorEvaluationContext, kafka: KafkaResource, stream_apps: StreamAppsResource
    ):
        config = StreamAppConfig()
        observed = observe_apps(kafka, stream_apps)
        broker_error = observed.broker_error
        alerts = observed.all_alerts()
        events: list[AssetObservation | AssetCheckEvaluation] = []
        raw_records: dict[str, int] = {}
        for name, app in STREAM_APPS.items():
            meta = observed.apps[name]
            for topic in app.output_topics(config)[:-1]:
                events.append(AssetObservation(asset_key=kafka_key(topic), metadata=meta))
            events.append(health_evaluation(app, meta, observed.alerts[name]))
        for topic in domain.RAW_TOPICS if broker_error is None else ():
            try:
                offsets = kafka.end_offsets(topic)
            except Exception:
                continue
            raw_records[topic] = sum(offsets.values())
            events.append(
                AssetObservation(
                    asset_key=kafka_key(topic),
                    metadata={"records": raw_records[topic], "partitions": len(offsets)},
                )
            )
        for alert in alerts:
            context.log.warning("ALERT: %s", alert)
        observations = sum(isinstance(e, AssetObservation) for e in events)
        message = tick_message(observed.apps, raw_records, alerts, observations)
        context.log.info("%s", message)
        if not events:
            return SkipReason(message)
        # no run to request: the tick is "skipped", and says what it observed
        return SensorResult(asset_events=events, skip_reason=SkipReason(message))

    return stream_health_sensor
