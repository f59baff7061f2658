"""Shared data for the data-side platform tests: a generated hour of events in a lake."""

from __future__ import annotations

from pathlib import Path

from pipelines import domain
from pipelines.generator import Event, GeneratorConfig, generate_events
from pipelines.lake.writer import ensure_layout, land_events

START_MS = 1_735_689_600_000  # 2025-01-01T00:00:00Z
HOUR = "2025-01-01T00"
PARTITION_KEY = "2025-01-01-00:00"
CONFIG = GeneratorConfig(
    seed=7, start_ms=START_MS, duration_s=3600, orders_per_second=1.0, customers=300
)


def fixture_events() -> list[Event]:
    """One hour of generated events (deterministic)."""
    return generate_events(CONFIG)


def valid_orders(events: list[Event]) -> list[dict]:
    """The orders the stream applications accept, in send order."""
    rows = []
    for event in events:
        if event.topic == domain.ORDERS:
            row = domain.parse_record(domain.ORDERS, event.value)
            if row is not None:
                rows.append(row)
    return rows


def build_lake(lake: Path) -> list[Event]:
    """Land the fixture's raw topics in ``lake``; returns the events."""
    events = fixture_events()
    land_events(lake, events)
    ensure_layout(lake)
    return events
