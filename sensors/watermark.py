"""Watermark sensor: once the stream's closed-window watermark passes an hour (the last
window of the hour is final, i.e. stream time passed hour end + grace), request the
batch recompute + reconciliation of that hour partition, once per hour. An hour that a run
created after the hour was complete (hour end + grace, wall clock) already covers, queued,
running or succeeded (the late-data sensor's, one from the UI), gets no second run."""

from collections.abc import Callable
from typing import Any

from dagster import (
    DefaultSensorStatus,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from assets.keys import HOURLY_JOB
from pipelines import domain
from resources.kafka import KafkaResource
from sensors.hours import HOUR_MS, hour_key, hour_start_ms, utc_text
from sensors.runs import COVERING, latest_run_created

MAX_HOURS_PER_TICK = 24


def hours_to_reconcile(
    watermark_ms: int | None,
    cursor: str | None,
    *,
    valid: Callable[[str], bool] | None = None,
    max_hours: int = MAX_HOURS_PER_TICK,
) -> list[str]:
    """Hour keys whose windows are all closed at ``watermark_ms`` (window end through which
    results are final) and later than the ``cursor`` hour; at most ``max_hours``, oldest
    first. Without a cursor, only the latest complete hour (older hours are the nightly
    backfill's job)."""
    if watermark_ms is None:
        return []
    last_complete = watermark_ms - watermark_ms % HOUR_MS - HOUR_MS  # its end <= watermark
    first = hour_start_ms(cursor) + HOUR_MS if cursor else last_complete
    keys = [hour_key(t) for t in range(first, last_complete + 1, HOUR_MS)]
    if valid is not None:
        keys = [k for k in keys if valid(k)]
    return keys[:max_hours]


def covered_hours(
    instance: Any, job_name: str, hours: list[str], grace_ms: int = domain.REVENUE_GRACE_MS
) -> list[str]:
    """Those of ``hours`` with a run queued, running or succeeded that was created once the
    hour was complete (its end + grace, wall clock): it landed and reconciled the whole hour."""
    covered = []
    for h in hours:
        created = latest_run_created(instance, job_name, h, COVERING)
        if created is not None and created * 1000 >= hour_start_ms(h) + HOUR_MS + grace_ms:
            covered.append(h)
    return covered


def build_watermark_sensor(
    job_name: str = HOURLY_JOB,
    *,
    topic: str = domain.REVENUE_5M,
    partitions_def: Any = None,
    minimum_interval_seconds: int = 30,
    read_timeout_seconds: float = 10.0,
    default_status: DefaultSensorStatus = DefaultSensorStatus.RUNNING,
) -> Any:
    """The watermark sensor for ``job_name`` (an hourly-partitioned job); a tick that cannot
    read ``topic``'s tail in ``read_timeout_seconds`` skips."""
    valid = None
    if partitions_def is not None:

        def valid(key: str) -> bool:
            return partitions_def.has_partition_key(key)

    @sensor(
        name="stream_watermark_sensor",
        job_name=job_name,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=default_status,
        description=f"Requests {job_name} for an hour once the closed-window watermark of "
        f"{topic} passes its end (hour + grace).",
    )
    def stream_watermark_sensor(context: SensorEvaluationContext, kafka: KafkaResource):
        try:
            watermark = kafka.closed_window_watermark(topic, read_timeout_seconds)
        except TimeoutError as exc:  # a partial read would overstate the watermark
            return SkipReason(f"watermark unknown: {exc}")
        hours = hours_to_reconcile(watermark, context.cursor, valid=valid)
        if not hours:
            closed = (
                "no window closed yet"
                if watermark is None
                else f"windows closed through {utc_text(watermark)}"
            )
            return SkipReason(f"{closed}: no new complete hour")
        covered = covered_hours(context.instance, job_name, hours)
        requests = [
            RunRequest(run_key=f"watermark-{h}", partition_key=h, tags={"trigger": "watermark"})
            for h in hours
            if h not in covered
        ]
        if not requests:
            reason = f"{', '.join(covered)} already reconciled by a run created after it ended"
            return SensorResult(skip_reason=SkipReason(reason), cursor=hours[-1])
        return SensorResult(run_requests=requests, cursor=hours[-1])

    return stream_watermark_sensor
