"""Hour partitions as Dagster names them, and the job names the sensors and schedules
target. Keys and bounds come from an ``HourlyPartitionsDefinition`` (UTC) over every hour,
so the sensors name an hour exactly as the platform's hourly assets do."""

from datetime import UTC, datetime
from functools import lru_cache

from dagster import HourlyPartitionsDefinition

HOUR_MS = 3_600_000

#: every hour since the epoch: the key format and bounds of the platform's hourly assets
ALL_HOURS = HourlyPartitionsDefinition(start_date="1970-01-01-00:00")


def hour_key(ts_ms: int) -> str:
    """The hourly partition key containing epoch ms ``ts_ms``."""
    return _key_of_hour(ts_ms - ts_ms % HOUR_MS)


@lru_cache(maxsize=4096)
def _key_of_hour(start_ms: int) -> str:
    return ALL_HOURS.get_partition_key_for_timestamp(start_ms / 1000)


def hour_start_ms(key: str) -> int:
    """Epoch ms of the start of hourly partition ``key``."""
    return int(ALL_HOURS.start_time_for_partition_key(key).timestamp() * 1000)


def utc_text(ts_ms: int) -> str:
    """Epoch ms as readable UTC text (``2025-01-01 01:05:00 UTC``) for ticks and logs."""
    return datetime.fromtimestamp(ts_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
