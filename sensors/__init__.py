"""Sensors and schedules of the platform.

- ``stream_watermark_sensor`` (``watermark``): requests batch + reconciliation of an hour once
  the stream's closed-window watermark passes it;
- ``stream_health_sensor`` (``health``): consumer lag and state of the stream applications as
  asset observations, with alerts;
- ``late_data_sensor`` (``late_data``): batch re-runs of hours that received late orders;
- ``topic_materializations_sensor`` (``topic_materializations``): the topics written outside
  Dagster runs (generator, supervisor) reported as materialized when they grow;
- ``hourly_batch_reconcile_schedule`` and ``nightly_backfill_schedule`` (``schedules``).
"""

from assets.keys import HOURLY_JOB, KAPPA_JOB
from sensors.health import build_health_sensor
from sensors.hours import hour_key, hour_start_ms
from sensors.late_data import build_late_data_sensor
from sensors.schedules import build_hourly_schedule, build_nightly_backfill
from sensors.topic_materializations import build_topic_materializations_sensor
from sensors.watermark import build_watermark_sensor

__all__ = [
    "HOURLY_JOB",
    "KAPPA_JOB",
    "build_health_sensor",
    "build_hourly_schedule",
    "build_late_data_sensor",
    "build_nightly_backfill",
    "build_topic_materializations_sensor",
    "build_watermark_sensor",
    "hour_key",
    "hour_start_ms",
]
