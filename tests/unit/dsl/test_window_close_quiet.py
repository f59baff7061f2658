"""``window.close.quiet.ms``: once a windowed operator's input stood still for the quiet
time, the wall clock stands in for its stream time, so the last window's final result comes
out; off (the default, Kafka's behaviour) it waits for the next record. Driven by the test
driver's mocked wall clock, in the half-second steps the check runs at."""

from __future__ import annotations

import pytest

from streaming import (
    BufferConfig,
    ConfigException,
    EmitStrategy,
    SessionWindows,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    TopologyTestDriver,
    serdes,
)
from streaming.runtime.config import StreamsConfig

S = serdes.String()
#: the mocked wall clock at the start: event time and wall clock agree, as on a live input
W0 = 1_800_000_000_000
QUIET_MS = 3_000


def _topology(kind: str):
    b = StreamsBuilder()
    grouped = b.stream("in", key_serde=S, value_serde=S).group_by_key()
    if kind == "emit-final":
        windowed = grouped.windowed_by(TimeWindows.of_size_with_no_grace(10_000))
        table = windowed.emit_strategy(EmitStrategy.on_window_close()).count()
    elif kind == "suppress":
        windowed = grouped.windowed_by(TimeWindows.of_size_and_grace(10_000, 1_000))
        table = windowed.count().suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
    else:
        windowed = grouped.windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(2_000))
        table = windowed.emit_strategy(EmitStrategy.on_window_close()).count()
    table.to_stream().map(lambda k, v: (f"{k.key}@{k.window.start}/{k.window.end}", str(v))).to(
        "out", key_serde=S, value_serde=S
    )
    return b.build()


def _run(kind: str, quiet_ms: int | None, inputs: list[tuple[str, int]], wait_ms: int):
    """Pipe ``inputs`` (key, ms after W0) at their event times on the wall clock, then let
    ``wait_ms`` of wall-clock time pass; the outputs with the wall clock they came out at."""
    config = {"application.id": "quiet"}
    if quiet_ms is not None:
        config["window.close.quiet.ms"] = quiet_ms
    seen: list[tuple[str, str, int]] = []
    with TopologyTestDriver(_topology(kind), config, initial_wall_clock_time_ms=W0) as driver:
        source = driver.create_input_topic("in", S, S)
        out = driver.create_output_topic("out", S, S)

        def collect() -> None:
            for kv in out.read_key_values_to_list():
                seen.append((kv.key, kv.value, driver.wall_clock_time_ms - W0))

        for key, offset in inputs:
            driver.advance_wall_clock_time(W0 + offset - driver.wall_clock_time_ms)
            source.pipe_input(key, "v", timestamp=W0 + offset)
            collect()
        for _ in range(wait_ms // 500):
            driver.advance_wall_clock_time(500)
            collect()
    return seen


def _window(key: str, start: int, end: int) -> str:
    return f"{key}@{W0 + start}/{W0 + end}"


def test_off_the_last_window_waits_for_a_record_as_in_kafka() -> None:
    inputs = [("a", 1_000), ("a", 2_000), ("b", 4_000)]
    assert _run("emit-final", None, inputs, 60_000) == []
    assert _run("suppress", None, inputs, 60_000) == []
    assert _run("session", None, inputs, 60_000) == []


def test_a_quiet_input_closes_the_last_window_once_the_clock_passes_its_end() -> None:
    inputs = [("a", 1_000), ("a", 2_000), ("b", 4_000)]
    # quiet from 4 s on; the window [0, 10 s) closes when the clock reaches its end
    assert _run("emit-final", QUIET_MS, inputs, 20_000) == [
        (_window("a", 0, 10_000), "2", 10_000),
        (_window("b", 0, 10_000), "1", 10_000),
    ]
    # the suppression waits for the grace (1 s) too
    assert _run("suppress", QUIET_MS, inputs, 20_000) == [
        (_window("a", 0, 10_000), "2", 11_000),
        (_window("b", 0, 10_000), "1", 11_000),
    ]


def test_a_quiet_input_closes_sessions_after_the_quiet_time() -> None:
    # the sessions' ends passed long ago: they close once the input was quiet for 3 s,
    # counted from the first check after the last record (at 3 s): within quiet + 0.5 s
    inputs = [("a", 1_000), ("a", 2_000), ("b", 2_500)]
    assert _run("session", QUIET_MS, inputs, 10_000) == [
        (_window("a", 1_000, 2_000), "2", 6_000),
        (_window("b", 2_500, 2_500), "1", 6_000),
    ]


def test_a_quiet_time_of_zero_closes_windows_as_the_clock_passes_their_end() -> None:
    # quiet 0 (SQL's windows over PROCTIME()): the first check after the clock passes the
    # window's end closes it, although a record came just before that check
    inputs = [("a", 1_000), ("b", 9_900)]
    assert _run("emit-final", 0, inputs, 1_000) == [
        (_window("a", 0, 10_000), "1", 10_400),
        (_window("b", 0, 10_000), "1", 10_400),
    ]


def test_records_within_the_quiet_time_keep_stream_time_their_own() -> None:
    # a record every 2 s (quiet time 3 s): the first window closes on the record at 10 s,
    # as without the setting, not earlier
    inputs = [("a", t) for t in range(0, 12_000, 2_000)]
    assert _run("emit-final", QUIET_MS, inputs, 0) == [(_window("a", 0, 10_000), "5", 10_000)]
    assert _run("emit-final", None, inputs, 0) == [(_window("a", 0, 10_000), "5", 10_000)]


def test_a_record_after_the_quiet_close_is_late() -> None:
    with TopologyTestDriver(
        _topology("emit-final"),
        {"application.id": "quiet", "window.close.quiet.ms": QUIET_MS},
        initial_wall_clock_time_ms=W0,
    ) as driver:
        source = driver.create_input_topic("in", S, S)
        out = driver.create_output_topic("out", S, S)
        source.pipe_input("a", "v", timestamp=W0 + 1_000)
        for _ in range(30):
            driver.advance_wall_clock_time(500)
        assert out.read_key_values_to_list()[0].value == "1"
        # the window [0, 10 s) is closed: a record for it is dropped, not counted
        source.pipe_input("a", "v", timestamp=W0 + 2_000)
        for _ in range(30):
            driver.advance_wall_clock_time(500)
        assert out.read_key_values_to_list() == []
        store = driver.get_window_store(driver_store_name(driver))
        assert [count for _, count in store.fetch("a", W0, W0 + 1)] == [1]


def driver_store_name(driver: TopologyTestDriver) -> str:
    (name,) = [n for n in driver.get_all_state_stores() if "STATE-STORE" in n]
    return name


@pytest.mark.parametrize("value", ["3s", "-2", "true"])
def test_a_bad_value_fails_fast(value: str) -> None:
    config = {"application.id": "a", "bootstrap.servers": "h:1", "window.close.quiet.ms": value}
    with pytest.raises(ConfigException, match=r"window\.close\.quiet\.ms"):
        StreamsConfig.from_mapping(config)
