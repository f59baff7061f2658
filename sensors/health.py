"""Stream health sensor: consumer lag, state and health of every stream application, and the
size of the raw topics, recorded as asset observations (so they show in the UI) and alerted on.

Lag comes from Kafka (committed offsets of the consumer group ``application.id``), so it is
right wherever the applications run; state, throughput and health come from the supervisor's
status file when the supervisor runs them: ``health`` RUNNING or STALLED (``stalled_since``,
``stall_reason``), ``restarts`` and ``last_error``. Applications run elsewhere (pods on
Kubernetes) are asked over HTTP when ``StreamAppsResource.query_url`` names where: every
instance's state (``instances``, ``instances_running``; UNREACHABLE alerts). A broker that does not answer is itself
reported on every application's observation (``broker_error``) instead of failing the tick,
and so is a status file the supervisor stopped writing (``status_age_s``).

The sensor requests no runs, so Dagster records its ticks as skipped: each tick's text says
what it observed (every application's lag and health, the raw topics' sizes, the alerts)
instead of "empty result".
"""

import time
from typing import Any

from dagster import (
    AssetObservation,
    DefaultSensorStatus,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from assets.keys import kafka_key
from pipelines import domain
from pipelines.streams import monitor
from pipelines.streams.apps import STREAM_APPS
from pipelines.streams.config import StreamAppConfig
from pipelines.streams.monitor import HEALTH_FIELDS
from resources.kafka import KafkaResource
from resources.stream_apps import StreamAppsResource

BAD_STATES = {"ERROR", "PENDING_ERROR", "NOT_RUNNING", "UNREACHABLE"}


def app_health(
    app: str,
    lag: dict[str, int] | None,
    status: dict[str, Any] | None,
    max_lag: int,
    *,
    lag_error: str | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Metadata of one application's health and its alerts (``lag`` None: unavailable,
    ``lag_error`` says why)."""
    meta: dict[str, Any] = {}
    alerts = []
    if lag is not None:
        total = sum(lag.values())
        meta.update(
            consumer_lag_total=total,
            consumer_lag_max=max(lag.values(), default=0),
            partitions=len(lag),
        )
        if total > max_lag:
            alerts.append(f"{app} lags {total} records (limit {max_lag})")
    else:
        meta["lag_error"] = lag_error or "unavailable"
        alerts.append(f"{app}: lag unavailable ({meta['lag_error']})")
    if status:
        meta["state"] = status.get("state", "UNKNOWN")
        for field in (
            "records_per_second",
            "records_processed",
            "closed_windows",
            "instances",
            "instances_running",
        ):
            if field in status:
                meta[field] = status[field]
        if status.get("closed_window_watermark") is not None:
            meta["closed_window_watermark"] = status["closed_window_watermark"]
        for field in HEALTH_FIELDS:
            if status.get(field) is not None:
                meta[field] = status[field]
        if meta["state"] in BAD_STATES:
            alerts.append(f"{app} is {meta['state']}")
        if status.get("health") == "STALLED":
            alerts.append(
                f"{app} STALLED since {status.get('stalled_since')}: {status.get('stall_reason')}"
            )
        if status.get("status_age_s") is not None:
            meta["status_age_s"] = status["status_age_s"]
            alerts.append(
                f"{app}: the supervisor's status is {status['status_age_s']:.0f} s old "
                "(is the supervisor running?)"
            )
    meta["healthy"] = not alerts
    return meta, alerts


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
        description="Observes consumer lag and state of the stream applications and the raw "
        "topics' sizes; alerts (logged, and healthy=false) on errors or lag.",
    )
    def stream_health_sensor(
        context: SensorEvaluationContext, kafka: KafkaResource, stream_apps: StreamAppsResource
    ):
        config = StreamAppConfig()
        report = stream_apps.supervisor_status()
        statuses = report.get("apps", {})
        written_at = report.get("written_at")
        age = None if written_at is None else time.time() - float(written_at)
        stale = age is not None and age > stream_apps.status_stale_after_s
        # one quick probe first: with the broker away, every lag query would wait its timeout
        broker_error = kafka.reachable()
        events: list[AssetObservation] = []
        alerts: list[str] = []
        observed: dict[str, dict[str, Any]] = {}  # per application, for the tick's message
        raw_records: dict[str, int] = {}
        if broker_error:
            alerts.append(f"Kafka does not answer: {broker_error}")
        for name, app in STREAM_APPS.items():
            lag: dict[str, int] | None = None
            lag_error = broker_error
            if broker_error is None:
                try:
                    lag = kafka.consumer_lag(name, app.input_topics(config))
                except Exception as exc:
                    lag_error = str(exc)
            status = statuses.get(name)
            url = stream_apps.query_url(name)
            if status is None and url:
                # run elsewhere (pods): every instance asked over HTTP
                try:
                    status = monitor.instances_health(url, token=stream_apps.query_token)
                except Exception as exc:  # never fail the tick: report it
                    status = {"state": "UNREACHABLE", "error": str(exc)}
            elif status is not None and stale:
                status = {**status, "status_age_s": round(age, 1)}
            meta, app_alerts = app_health(
                name, lag, status, stream_apps.max_healthy_lag, lag_error=lag_error
            )
            if broker_error:
                meta["broker_error"] = broker_error
            alerts += app_alerts
            observed[name] = meta
            for topic in app.output_topics(config)[:-1]:
                events.append(AssetObservation(asset_key=kafka_key(topic), metadata=meta))
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
        message = tick_message(observed, raw_records, alerts, len(events))
        context.log.info("%s", message)
        if not events:
            return SkipReason(message)
        # no run to request: the tick is "skipped", and says what it observed
        return SensorResult(asset_events=events, skip_reason=SkipReason(message))

    return stream_health_sensor
