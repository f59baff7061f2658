"""A Nexmark query's topology over generated events in the ``TopologyTestDriver``.

The events go in generation order; the driver's wall clock moves on by a second with each
second of event time (emit-on-close of session windows is throttled to once per wall-clock
second, as in Kafka Streams). The tests of the DSL and the SQL versions drive both this way.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from bench.nexmark.model import Event
from streaming import Topology, TopologyTestDriver, serdes


def drive(
    topology: Topology,
    topics: Iterable[str],
    events: list[Event],
    output: str,
    application_id: str = "nexmark",
    idle_ms: int = 0,
) -> list[tuple[str | None, Any]]:
    """``events`` of ``topics`` through ``topology``; ``output`` as (key, JSON value) pairs.
    ``idle_ms``: wall-clock time to let pass after the last event (it closes windows on
    processing time)."""
    with TopologyTestDriver(topology, {"application.id": application_id}) as driver:
        inputs = {
            topic: driver.create_input_topic(
                topic, key_serde=serdes.String(), value_serde=serdes.Json()
            )
            for topic in topics
        }
        out = driver.create_output_topic(
            output, key_serde=serdes.String(), value_serde=serdes.Json()
        )
        second = events[0].timestamp // 1000
        for event in events:
            if event.timestamp // 1000 > second:
                second = event.timestamp // 1000
                driver.advance_wall_clock_time(1_000)
            if event.topic in inputs:
                inputs[event.topic].pipe_input(event.key, event.value, timestamp=event.timestamp)
        if idle_ms:
            driver.advance_wall_clock_time(idle_ms)
        return [(r.key, r.value) for r in out.read_records_to_list()]
