"""Schedules: the hourly batch + reconcile run, and a nightly backfill of the previous day."""

from typing import Any

from dagster import (
    DefaultScheduleStatus,
    RunRequest,
    ScheduleEvaluationContext,
    SkipReason,
    build_schedule_from_partitioned_job,
    schedule,
)

from sensors.hours import HOUR_MS, HOURLY_JOB, hour_key

# the run tags Dagster reads a partition range from (a single-run backfill)
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"


def previous_day_hours(now_ms: int) -> list[str]:
    """The 24 hourly partition keys of the (UTC) day before ``now_ms``."""
    day_start = now_ms - now_ms % (24 * HOUR_MS)
    first = day_start - 24 * HOUR_MS
    return [hour_key(first + i * HOUR_MS) for i in range(24)]


def build_hourly_schedule(job: Any, minute_of_hour: int = 10) -> Any:
    """Run ``job`` every hour at ``minute_of_hour`` for the hour that just ended (the grace
    period has passed by then)."""
    return build_schedule_from_partitioned_job(
        job,
        name="hourly_batch_reconcile_schedule",
        minute_of_hour=minute_of_hour,
        default_status=DefaultScheduleStatus.STOPPED,
        description="Hourly batch recompute + reconciliation of the hour that just ended",
    )


def build_nightly_backfill(
    job_name: str = HOURLY_JOB, partitions_def: Any = None, cron: str = "0 2 * * *"
) -> Any:
    """At 02:00 UTC, request one ``job_name`` run for the range of every hour of the
    previous day."""

    @schedule(
        cron_schedule=cron,
        job_name=job_name,
        name="nightly_backfill_schedule",
        execution_timezone="UTC",
        default_status=DefaultScheduleStatus.STOPPED,
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
