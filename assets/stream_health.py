"""Stream health as asset checks: ``stream_app_healthy`` on the first output asset of every
stream application (its consumer lag, state and health), declared by the application's
streaming asset. ``stream_health_sensor`` records an evaluation of each every tick (a
runless check evaluation, WARN when unhealthy), so the asset page shows whether the
application is healthy now and since when it was not; a run of the streaming asset
evaluates it once more when it ends.

Lag comes from Kafka (committed offsets of the consumer group ``application.id``), so it is
right wherever the applications run; state, throughput and health come from the
supervisor's status file when the supervisor runs them: ``health`` RUNNING or STALLED
(``stalled_since``, ``stall_reason``), ``restarts`` and ``last_error``. Applications run
elsewhere (pods on Kubernetes) are asked over HTTP when ``StreamAppsResource.query_url``
names where: every instance's state (``instances``, ``instances_running``; UNREACHABLE
alerts). A broker that does not answer is reported on every application
(``broker_error``), and so is a status file the supervisor stopped writing
(``status_age_s``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from dagster import (
    AssetCheckEvaluation,
    AssetCheckKey,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetKey,
    MetadataValue,
)

from assets.keys import kafka_key
from pipelines.streams import monitor
from pipelines.streams.apps import STREAM_APPS, StreamApp
from pipelines.streams.config import StreamAppConfig
from pipelines.streams.monitor import HEALTH_FIELDS
from resources.kafka import KafkaResource
from resources.stream_apps import StreamAppsResource

HEALTH_CHECK = "stream_app_healthy"


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
        meta.update(watermark_and_health_metadata(status))
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


def watermark_and_health_metadata(status: dict[str, Any]) -> dict[str, Any]:
    """The closed-window watermark (as a date) and the health fields of an application's
    status (``StreamAppRunner.watch``: RUNNING / STALLED since when and why / restarts)."""
    meta: dict[str, Any] = {}
    if status.get("closed_window_watermark") is not None:
        # window end through which results are final, shown as a date
        meta["closed_window_watermark"] = MetadataValue.timestamp(
            status["closed_window_watermark"] / 1000
        )
    for name in HEALTH_FIELDS:
        if status.get(name) is not None:
            meta[name] = status[name]
    return meta


@dataclass
class Observed:
    """One look at every stream application: per application its health metadata and
    alerts, and the broker's error when it did not answer."""

    apps: dict[str, dict[str, Any]] = field(default_factory=dict)
    alerts: dict[str, list[str]] = field(default_factory=dict)
    broker_error: str | None = None

    def all_alerts(self) -> list[str]:
        """Every alert: the broker's first, then each application's."""
        head = [f"Kafka does not answer: {self.broker_error}"] if self.broker_error else []
        return head + [a for alerts in self.alerts.values() for a in alerts]


def observe_apps(
    kafka: KafkaResource, stream_apps: StreamAppsResource, names: list[str] | None = None
) -> Observed:
    """The health of the stream applications ``names`` (default: all)."""
    config = StreamAppConfig()
    report = stream_apps.supervisor_status()
    statuses = report.get("apps", {})
    written_at = report.get("written_at")
    age = None if written_at is None else time.time() - float(written_at)
    stale = age is not None and age > stream_apps.status_stale_after_s
    # one quick probe first: with the broker away, every lag query would wait its timeout
    observed = Observed(broker_error=kafka.reachable())
    for name in names or list(STREAM_APPS):
        app = STREAM_APPS[name]
        lag: dict[str, int] | None = None
        lag_error = observed.broker_error
        if observed.broker_error is None:
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
            except Exception as exc:  # never fail the look: report it
                status = {"state": "UNREACHABLE", "error": str(exc)}
        elif status is not None and stale and age is not None:
            status = {**status, "status_age_s": round(age, 1)}
        meta, alerts = app_health(
            name, lag, status, stream_apps.max_healthy_lag, lag_error=lag_error
        )
        if observed.broker_error:
            meta["broker_error"] = observed.broker_error
        observed.apps[name] = meta
        observed.alerts[name] = alerts
    return observed


def health_asset_key(app: StreamApp) -> AssetKey:
    """The asset the health check of ``app`` sits on: its first output topic."""
    return kafka_key(app.output_topics(StreamAppConfig())[0])


def health_description(meta: dict[str, Any], alerts: list[str]) -> str:
    """The check's text: the alerts, or what healthy means now."""
    if alerts:
        return "; ".join(alerts)
    state = meta.get("health") or meta.get("state") or "no status"
    return f"healthy: {state}, consumer lag {meta.get('consumer_lag_total', 0):,}"


def health_evaluation(
    app: StreamApp, meta: dict[str, Any], alerts: list[str]
) -> AssetCheckEvaluation:
    """A runless evaluation of ``app``'s health check (what the sensor records)."""
    return AssetCheckEvaluation(
        asset_key=health_asset_key(app),
        check_name=HEALTH_CHECK,
        passed=not alerts,
        severity=AssetCheckSeverity.WARN,
        metadata=meta,
        description=health_description(meta, alerts),
    )


def health_check_spec(app: StreamApp) -> AssetCheckSpec:
    """The ``stream_app_healthy`` check of ``app``: declared by its streaming asset (a run
    of the asset reports the application's health at its end), evaluated every minute by
    ``stream_health_sensor``."""
    return AssetCheckSpec(
        HEALTH_CHECK,
        asset=health_asset_key(app),
        description=f"The `{app.name}` application is healthy: running (not stalled, not in "
        "ERROR), its consumer lag within the limit; evaluated every minute by "
        "stream_health_sensor and at the end of a run of the asset (WARN when not)",
    )


HEALTH_CHECK_KEYS = [
    AssetCheckKey(health_asset_key(app), HEALTH_CHECK) for app in STREAM_APPS.values()
]
