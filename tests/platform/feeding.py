"""Feeding generator events to a running platform in 5-minute slices of event time.

Each slice is produced once the stream applications have caught up with the previous one.
Within a slice the applications, behind the wall clock, read their input partitions aligned
by event time (``event.time.alignment.*``), so a slice's records reach the windows in
about the order they would have live and none is dropped as late but the generator's own
late orders."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from confluent_kafka import Producer

from pipelines.streams.apps import consumer_groups
from pipelines.streams.monitor import BrokerProbe, groups_lag, wait_for_no_lag

SLICE_MS = 300_000


def wait_caught_up(
    bootstrap: str,
    timeout: float = 120.0,
    apps: Sequence[str] | None = None,
    probe: BrokerProbe | None = None,
) -> None:
    """Until the consumer group of every stream application (or of ``apps``) has no lag
    (``monitor.wait_for_no_lag``; a lookup that fails counts as lag). ``probe``: the clients
    to ask with (kept by a caller that waits again and again; a fresh one otherwise)."""
    groups = consumer_groups(apps)
    own = probe is None
    probe = probe or BrokerProbe(bootstrap, timeout=10.0)
    try:
        lag = wait_for_no_lag(probe, groups, timeout)
        if lag != 0:
            lags = {group: groups_lag(probe, {group: topics}) for group, topics in groups.items()}
            raise AssertionError(
                f"stream applications still lag {lag} records after {timeout}s: "
                + ", ".join(f"{group} {group_lag}" for group, group_lag in lags.items())
            )
    finally:
        if own:
            probe.close()


def feed(
    bootstrap: str,
    events: Sequence[Any],
    start_ms: int,
    apps: Sequence[str] | None = None,
    slice_ms: int = SLICE_MS,
) -> int:
    """Produce ``events`` (sorted by ``emit_ms``) slice by slice (``slice_ms`` of emit time)
    from ``start_ms``, waiting for the applications (every one, or ``apps``) after each;
    returns how many were produced."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", "linger.ms": 5}
    )
    probe = BrokerProbe(bootstrap, timeout=10.0)
    i = 0
    slice_end = start_ms
    try:
        while i < len(events):
            slice_end += slice_ms
            while i < len(events) and events[i].emit_ms < slice_end:
                e = events[i]
                producer.produce(
                    e.topic,
                    key=None if e.key is None else e.key.encode(),
                    value=e.value,
                    timestamp=e.timestamp,
                )
                i += 1
            assert producer.flush(30) == 0
            wait_caught_up(bootstrap, apps=apps, probe=probe)
    finally:
        probe.close()
    return i
