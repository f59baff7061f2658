"""``close_when_quiet(quiet_ms)``: one windowed aggregation's own quiet close. With it and no
application setting, the last window of a quiet input comes out once the test driver's wall
clock passes the quiet time; without it nothing does; it wins over ``window.close.quiet.ms``
(-1 turns the application's setting off for the aggregation). A window-close suppression of
its result closes with it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from streaming import (
    BufferConfig,
    EmitStrategy,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    TopologyTestDriver,
    serdes,
)

S = serdes.String()
#: the mocked wall clock at the start: event time and wall clock agree, as on a live input
W0 = 1_800_000_000_000
QUIET_MS = 3_000
#: records at 1 s, 2 s and 3.5 s after W0: quiet from 3.5 s on
INPUTS = [("a", 1_000), ("a", 2_000), ("b", 3_500)]

Quiet = int | timedelta | None


def _time_windows(grouped: Any, quiet: Quiet) -> Any:
    windowed = grouped.windowed_by(TimeWindows.of_size_with_no_grace(10_000))
    windowed = windowed.emit_strategy(EmitStrategy.on_window_close())
    return (windowed if quiet is None else windowed.close_when_quiet(quiet)).count()


def _sliding_windows(grouped: Any, quiet: Quiet) -> Any:
    windowed = grouped.windowed_by(SlidingWindows.of_time_difference_with_no_grace(10_000))
    windowed = windowed.emit_strategy(EmitStrategy.on_window_close())
    return (windowed if quiet is None else windowed.close_when_quiet(quiet)).count()


def _sessions(grouped: Any, quiet: Quiet) -> Any:
    windowed = grouped.windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(2_000))
    windowed = windowed.emit_strategy(EmitStrategy.on_window_close())
    return (windowed if quiet is None else windowed.close_when_quiet(quiet)).count()


def _suppressed(grouped: Any, quiet: Quiet) -> Any:
    windowed = grouped.windowed_by(TimeWindows.of_size_and_grace(10_000, 1_000))
    table = (windowed if quiet is None else windowed.close_when_quiet(quiet)).count()
    return table.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))


def _session_suppressed(grouped: Any, quiet: Quiet) -> Any:
    windowed = grouped.windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(2_000))
    table = (windowed if quiet is None else windowed.close_when_quiet(quiet)).count()
    return table.filter(lambda k, v: v is not None).suppress(
        Suppressed.until_window_closes(BufferConfig.unbounded())
    )


Aggregation = Callable[[Any, Quiet], Any]
AGGREGATIONS: dict[str, Aggregation] = {
    "time": _time_windows,
    "sliding": _sliding_windows,
    "session": _sessions,
    "suppress": _suppressed,
    "session-suppress": _session_suppressed,
}


def _topology(aggregation: Aggregation, quiet: Quiet, *, other: bool = False) -> Any:
    """``aggregation`` of topic ``in`` to ``out``; with ``other``, the same aggregation
    without its own quiet time beside it, to ``other``."""
    b = StreamsBuilder()
    stream = b.stream("in", key_serde=S, value_serde=S)
    outputs = [("out", quiet), ("other", None)] if other else [("out", quiet)]
    for topic, own in outputs:
        table = aggregation(stream.group_by_key(), own)
        table.to_stream().map(
            lambda k, v: (f"{k.key}@{k.window.start - W0}/{k.window.end - W0}", str(v))
        ).to(topic, key_serde=S, value_serde=S)
    return b.build()


def _run(
    topology: Any, app_quiet_ms: int | None, wait_ms: int, topics: tuple[str, ...] = ("out",)
) -> dict[str, list[tuple[str, str, int]]]:
    """Pipe ``INPUTS`` at their event times on the wall clock, then let ``wait_ms`` of
    wall-clock time pass in half-second steps; each topic's outputs with the wall clock
    (ms after W0) they came out at."""
    config: dict[str, Any] = {"application.id": "quiet-own"}
    if app_quiet_ms is not None:
        config["window.close.quiet.ms"] = app_quiet_ms
    seen: dict[str, list[tuple[str, str, int]]] = {topic: [] for topic in topics}
    with TopologyTestDriver(topology, config, initial_wall_clock_time_ms=W0) as driver:
        source = driver.create_input_topic("in", S, S)
        outs = {topic: driver.create_output_topic(topic, S, S) for topic in topics}

        def collect() -> None:
            for topic, out in outs.items():
                now = driver.wall_clock_time_ms - W0
                seen[topic] += [(kv.key, kv.value, now) for kv in out.read_key_values_to_list()]

        for key, offset in INPUTS:
            driver.advance_wall_clock_time(W0 + offset - driver.wall_clock_time_ms)
            source.pipe_input(key, "v", timestamp=W0 + offset)
            collect()
        for _ in range(wait_ms // 500):
            driver.advance_wall_clock_time(500)
            collect()
    return seen


def _outputs(kind: str, quiet: Quiet, app_quiet_ms: int | None = None) -> list[tuple]:
    return _run(_topology(AGGREGATIONS[kind], quiet), app_quiet_ms, 20_000)["out"]


#: the final results with the quiet close at 3 s, and the wall clock they came out at
EXPECTED = {
    # the window [0, 10 s) closes when the clock reaches its end
    "time": [("a@0/10000", "2", 10_000), ("b@0/10000", "1", 10_000)],
    # the suppression waits for the grace (1 s) too
    "suppress": [("a@0/10000", "2", 11_000), ("b@0/10000", "1", 11_000)],
    # the sessions ended long ago: they close once the input was quiet for 3 s, counted
    # from the first check after the last record (at 4 s)
    "session": [("a@1000/2000", "2", 7_000), ("b@3500/3500", "1", 7_000)],
    "session-suppress": [("a@1000/2000", "2", 7_000), ("b@3500/3500", "1", 7_000)],
    # the windows that end at 1 s and 2 s close on the records; the one that ends at the
    # last record when the input was quiet for 3 s, and a's right window (1 s, 11 s] at
    # the first check after the clock passed its end
    "sliding": [
        ("a@-9000/1000", "1", 2_000),
        ("a@-8000/2000", "2", 3_500),
        ("b@-6500/3500", "1", 7_000),
        ("a@1001/11001", "1", 11_500),
    ],
}


@pytest.mark.parametrize("kind", sorted(AGGREGATIONS))
def test_without_a_quiet_time_the_last_windows_wait_for_a_record(kind: str) -> None:
    stopped = INPUTS[-1][1]
    assert [out for out in _outputs(kind, None) if out[2] > stopped] == []


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_the_aggregations_own_quiet_time_closes_its_windows(kind: str) -> None:
    assert _outputs(kind, QUIET_MS) == EXPECTED[kind]
    assert _outputs(kind, timedelta(milliseconds=QUIET_MS)) == EXPECTED[kind]


@pytest.mark.parametrize("kind", ["time", "session", "session-suppress"])
def test_the_aggregations_own_quiet_time_wins_over_the_applications(kind: str) -> None:
    later = _outputs(kind, 12_000, app_quiet_ms=QUIET_MS)
    assert later and all(at >= 4_000 + 12_000 for _, _, at in later)
    assert [(key, value) for key, value, _ in later] == [(k, v) for k, v, _ in EXPECTED[kind]]
    # -1: off for this aggregation, whatever the application says
    assert _outputs(kind, -1, app_quiet_ms=QUIET_MS) == []
    # unset: the application's setting
    assert _outputs(kind, None, app_quiet_ms=QUIET_MS) == EXPECTED[kind]


def test_only_the_aggregation_that_asks_closes_on_the_wall_clock() -> None:
    topology = _topology(_time_windows, QUIET_MS, other=True)
    seen = _run(topology, None, 20_000, ("out", "other"))
    assert seen == {"out": EXPECTED["time"], "other": []}


@pytest.mark.parametrize("make", [_time_windows, _sessions])
def test_a_negative_quiet_time_other_than_minus_one_is_refused(make: Aggregation) -> None:
    grouped = StreamsBuilder().stream("in", key_serde=S, value_serde=S).group_by_key()
    with pytest.raises(ValueError, match=r"close_when_quiet\(quiet_ms\) must be >= 0 ms .* -1"):
        make(grouped, -2)
    with pytest.raises(TypeError, match=r"close_when_quiet\(quiet_ms\) must be int milliseconds"):
        make(grouped, "5s")  # type: ignore[arg-type]
