"""Schedules: the hourly batch + reconcile run of the hour that just ended (unless the
watermark sensor already ran it), and a nightly backfill of the previous day."""

from typing import Any

from dagster import (
    DefaultScheduleStatus,
    RunRequest,
    ScheduleEvaluationContext,
    SkipReason,
    schedule,
)

from assets.keys import HOURLY_JOB
from pipelines import domain
from resources.kafka import KafkaResource
from sensors.hours import HOUR_MS, hour_key, hour_start_ms
from sensors.runs import latest_run_created

# the run tags Dagster reads a partition range from (a single-run backfill)
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"


def previous_day_hours(now_ms: int) -> list[str]:
    """The 24 hourly partition keys of the (UTC) day before ``now_ms``."""
    day_start = now_ms - now_ms % (24 * HOUR_MS)
    first = day_start - 24 * HOUR_MS
    return [hour_key(first + i * HOUR_MS) for i in range(24)]


def build_hourly_schedule(
    job: Any,
    partitions_def: Any,
    minute_of_hour: int = 10,
    default_status: DefaultScheduleStatus = DefaultScheduleStatus.RUNNING,
    orders_topic: str = domain.ORDERS,
) -> Any:
    """Run ``job`` every hour at ``minute_of_hour`` for the hour that just ended (the grace
    period has passed by then), unless that hour already has a run: the watermark sensor
    starts it as soon as the stream closes the hour; the schedule is the fallback for a
    stream that stalled (its hour reconciles red instead of never). An hour without a
    single order in ``orders_topic`` (before the platform first ran, or while it was off)
    is skipped: there is nothing to reconcile."""

    @schedule(
        cron_schedule=f"{minute_of_hour} * * * *",
        job=job,
        name="hourly_batch_reconcile_schedule",
        execution_timezone="UTC",
        default_status=default_status,
        description="Hourly batch recompute + reconciliation of the hour that just ended, "
        "when the watermark sensor has not run it yet",
    )
    def hourly_batch_reconcile_schedule(context: ScheduleEvaluationContext, kafka: KafkaResource):
        ended = context.scheduled_execution_time.timestamp() - HOUR_MS / 1000
        first = partitions_def.get_first_partition_key()
        if first is None or ended < partitions_def.start_time_for_partition_key(first).timestamp():
            return SkipReason("no hourly partition has ended yet")
        hour = partitions_def.get_partition_key_for_timestamp(ended)
        if latest_run_created(context.instance, job.name, hour) is not None:
            return SkipReason(f"hour {hour} already has a run (the watermark sensor's)")
        start = hour_start_ms(hour)
        try:
            has_orders = kafka.has_records_between(orders_topic, start, start + HOUR_MS)
        except Exception as exc:  # unknown: run the hour, as a fallback should
            context.log.warning(f"could not look up {orders_topic} for hour {hour}: {exc}")
            has_orders = True
        if not has_orders:
            return SkipReason(f"no orders in hour {hour} (the platform was not running)")
        return RunRequest(run_key=f"hourly-{hour}", partition_key=hour, tags={"trigger": "hourly"})

    return hourly_batch_reconcile_schedule


def build_nightly_backfill(
    job_name: str = HOURLY_JOB,
    partitions_def: Any = None,
    cron: str = "0 2 * * *",
    default_status: DefaultScheduleStatus = DefaultScheduleStatus.RUNNING,
) -> Any:
    """At 02:00 UTC, request one ``job_name`` run for the range of every hour of the
    previous day."""

    @schedule(
        cron_schedule=cron,
        job_name=job_name,
        name="nightly_backfill_schedule",
        execution_timezone="UTC",
        default_status=default_status,
        description="Nightly backfill: batch recompute + reconciliation of every hour of the "
        "previous day",
    )
    def nightly_backfill_schedule(context: ScheduleEvaluationContext):
        now_ms = int(context.scheduled_execution_time.timestamp() * 1000)
        day = hour_key(now_ms - 24 * HOUR_MS)[:10]
        hours = [
            key
            for key in previous_day_hours(now_ms)
            if partitions_def is None or partitions_def.has_partition_key(key)
        ]
        if not hours:
            return SkipReason(f"no partition of {day} exists (partitions start later)")
        # one run for the whole day (the assets' backfill policy is a single run)
        return RunRequest(
            run_key=f"nightly-{day}",
            tags={
                RANGE_START_TAG: hours[0],
                RANGE_END_TAG: hours[-1],
                "trigger": "nightly-backfill",
                "backfill_day": day,
            },
        )

    return nightly_backfill_schedule


__all__ = [
    "build_hourly_schedule",
    "build_nightly_backfill",
    "previous_day_hours",
]
