"""Hour partitions as Dagster names them (``YYYY-MM-DD-HH:MM``, UTC) and the job names the
sensors and schedules target."""

from datetime import UTC, datetime

HOUR_MS = 3_600_000
HOURLY_JOB = "hourly_batch_reconcile"
KAPPA_JOB = "kappa_replay_job"
PARTITION_FORMAT = "%Y-%m-%d-%H:%M"


def hour_key(ts_ms: int) -> str:
    """The hourly partition key containing epoch ms ``ts_ms``."""
    start = ts_ms - ts_ms % HOUR_MS
    return datetime.fromtimestamp(start / 1000, tz=UTC).strftime(PARTITION_FORMAT)


def hour_start_ms(key: str) -> int:
    """Epoch ms of the start of hourly partition ``key``."""
    parsed = datetime.strptime(key, PARTITION_FORMAT).replace(tzinfo=UTC)
    return int(parsed.timestamp() * 1000)


def utc_text(ts_ms: int) -> str:
    """Epoch ms as readable UTC text (``2025-01-01 01:05:00 UTC``) for ticks and logs."""
    return datetime.fromtimestamp(ts_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
