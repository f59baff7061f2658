"""Environment settings of the data side (defaults for the embedded ``make run`` mode)."""

from __future__ import annotations

import os

DEFAULT_BOOTSTRAP = "localhost:9092"
DEFAULT_PARTITIONS_START = "2025-01-01-00:00"


def kafka_bootstrap() -> str:
    """``KAFKA_BOOTSTRAP_SERVERS`` (the broker ``make run`` starts by default)."""
    return os.environ.get("KAFKA_BOOTSTRAP_SERVERS") or DEFAULT_BOOTSTRAP


def partitions_start() -> str:
    """First hourly partition (``PLATFORM_PARTITIONS_START``, Dagster ``YYYY-MM-DD-HH:MM``)."""
    return os.environ.get("PLATFORM_PARTITIONS_START") or DEFAULT_PARTITIONS_START
