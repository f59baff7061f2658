"""Emit-on-window-close while catching up: a backlog read faster than its event time passes.

Emit-on-close runs at most once per wall-clock second (``__emit.interval.ms.kstreams.windowed.
aggregation__``), and the window and session stores stop returning what their retention has
passed. Between two emits, stream time may move more than the retention (a restart after an
outage, a replay, a sparse key); Kafka's processors then never emit the windows in between.
Here every window comes out exactly once, with the value the eager aggregation ends with.
"""

from __future__ import annotations

from typing import Any

import pytest

from streaming import (
    EmitStrategy,
    Materialized,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    TimeWindows,
    TopologyTestDriver,
    serdes,
)

S, L = serdes.String(), serdes.Long()
EMIT_INTERVAL = "__emit.interval.ms.kstreams.windowed.aggregation__"
BASE = 1_700_000_000_000
CLOSING_KEY = "closing"

WINDOWS: dict[str, Any] = {
    "tumbling": TimeWindows.of_size_and_grace(10_000, 4_000),
    "hopping": TimeWindows.of_size_and_grace(10_000, 4_000).advance_by(2_000),
    "sliding": SlidingWindows.of_time_difference_and_grace(10_000, 4_000),
    "session": SessionWindows.of_inactivity_gap_and_grace(10_000, 4_000),
}


def _topology(windows: Any, emit: EmitStrategy, store_type: str):
    builder = StreamsBuilder()
    (
        builder.stream("in", key_serde=S, value_serde=S)
        .group_by_key()
        .windowed_by(windows)
        .emit_strategy(emit)
        .count(Materialized.as_("counts").with_store_type(store_type))
        .to_stream()
        .map(lambda wk, n: (f"{wk.key}@{wk.window.start}-{wk.window.end}", n))
        .to("out", key_serde=S, value_serde=L)
    )
    return builder.build()


def _trace(base: int) -> list[tuple[str, int]]:
    """Keys active in bursts (their windows and sessions close all along) from ``base`` on,
    then three records of another key that each move stream time 200 s on, far past every
    retention."""
    records = [(f"k{(n // 7) % 13}", base + 700 * n) for n in range(1500)]
    last = records[-1][1]
    return records + [(CLOSING_KEY, last + 200_000 * step) for step in (1, 2, 3)]


def _run(
    windows: Any,
    emit: EmitStrategy,
    store_type: str,
    tmp_path,
    *,
    wall_ms_per_record: int,
    base: int,
) -> list[tuple[str, int | None]]:
    config = {EMIT_INTERVAL: 1_000, "state.dir": str(tmp_path / f"{emit.kind}-{store_type}")}
    with TopologyTestDriver(
        _topology(windows, emit, store_type), config, initial_wall_clock_time_ms=0
    ) as driver:
        source = driver.create_input_topic("in", S, S)
        out = driver.create_output_topic("out", S, L)
        trace = _trace(base)
        for key, ts in trace:
            source.pipe_input(key, "x", ts)
            driver.advance_wall_clock_time(wall_ms_per_record)
        # one more record a throttle interval later, at the last stream time: the last emit
        driver.advance_wall_clock_time(1_100)
        source.pipe_input(CLOSING_KEY, "x", trace[-1][1])
        return [(kv.key, kv.value) for kv in out.read_key_values_to_list()]


@pytest.mark.parametrize("store_type", ["rocksdb", "in_memory"])
@pytest.mark.parametrize("kind", list(WINDOWS))
@pytest.mark.parametrize("wall_ms_per_record", [0, 3])
# event times at the epoch too: no window has closed yet at the first look there
@pytest.mark.parametrize("base", [BASE, 0], ids=["now", "epoch"])
def test_every_window_is_emitted_once_when_stream_time_outruns_the_throttle(
    kind: str, store_type: str, wall_ms_per_record: int, base: int, tmp_path
) -> None:
    windows = WINDOWS[kind]
    eager: dict[str, int] = {}
    for key, value in _run(
        windows,
        EmitStrategy.on_window_update(),
        store_type,
        tmp_path,
        wall_ms_per_record=1,
        base=base,
    ):
        if value is None:  # a session merged into a later one
            eager.pop(key, None)
        else:
            eager[key] = value
    expected = {k: v for k, v in eager.items() if not k.startswith(CLOSING_KEY)}
    assert len(expected) > 200

    final = _run(
        windows,
        EmitStrategy.on_window_close(),
        store_type,
        tmp_path,
        wall_ms_per_record=wall_ms_per_record,
        base=base,
    )
    emitted = [(k, v) for k, v in final if not k.startswith(CLOSING_KEY)]
    assert len(emitted) == len({k for k, _ in emitted}), "a window came out twice"
    assert dict(emitted) == expected


def test_windows_held_back_by_the_throttle_come_out_on_the_wall_clock(tmp_path) -> None:
    """Records close windows while the throttle holds emits back, and no record follows: the
    windows come out once the interval has passed on the wall clock, also from a second
    emit-on-close stage that only the first one feeds (Kafka waits for the next record)."""
    builder = StreamsBuilder()
    per_key = (
        builder.stream("in", key_serde=S, value_serde=S)
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(10_000, 0))
        .emit_strategy(EmitStrategy.on_window_close())
        .count(Materialized.as_("per-key"))
    )
    per_key.to_stream().map(lambda wk, n: (f"{wk.key}@{wk.window.start}", n)).to(
        "per-key", key_serde=S, value_serde=L
    )
    (  # the final results per second of their timestamps: a second emit-on-close stage
        per_key.to_stream()
        .map(lambda wk, n: ("all", str(n)))
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(1_000, 0))
        .emit_strategy(EmitStrategy.on_window_close())
        .count(Materialized.as_("finals").with_retention(60_000))  # else b's jump emits
        .to_stream()
        .map(lambda wk, n: (f"{wk.window.start}", n))
        .to("finals", key_serde=S, value_serde=L)
    )
    config = {EMIT_INTERVAL: 1_000, "state.dir": str(tmp_path)}
    with TopologyTestDriver(builder.build(), config, initial_wall_clock_time_ms=0) as driver:
        source = driver.create_input_topic("in", S, S)
        per_key_out = driver.create_output_topic("per-key", S, L)
        finals_out = driver.create_output_topic("finals", S, L)
        source.pipe_input("a", "x", BASE)  # the first look: nothing closed yet
        source.pipe_input("b", "x", BASE + 5_000)
        source.pipe_input("c", "x", BASE + 10_000)  # closes a's and b's windows: held back
        assert per_key_out.read_key_values_to_list() == []
        driver.advance_wall_clock_time(1_000)
        assert [(kv.key, kv.value) for kv in per_key_out.read_key_values_to_list()] == [
            (f"a@{BASE}", 1),
            (f"b@{BASE}", 1),
        ]
        # the second stage's first look came with a's result, b's closed a's second
        assert finals_out.read_key_values_to_list() == []
        driver.advance_wall_clock_time(1_000)
        assert [(kv.key, kv.value) for kv in finals_out.read_key_values_to_list()] == [
            (f"{BASE}", 1)
        ]
        driver.advance_wall_clock_time(5_000)  # nothing else has closed
        assert per_key_out.read_key_values_to_list() == []
        assert finals_out.read_key_values_to_list() == []
