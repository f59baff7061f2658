"""Custom ``Windows`` subclasses and ``UnlimitedWindows`` in windowed aggregations, as Kafka's
``TimeWindowedKStreamImpl`` runs them: ``windows_for`` picks the windows, ``size()`` gives the
windowed key serde and the store's retention, ``grace_period_ms()`` closes windows."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from streaming import (
    EmitStrategy,
    Materialized,
    StreamsBuilder,
    TimeWindow,
    TopologyTestDriver,
    UnlimitedWindows,
    Windows,
    serdes,
)
from streaming.windowed import MAX_TIMESTAMP

S, L = serdes.String(), serdes.Long()
DAY_MS = 24 * 3600 * 1000


class DailyWindows(Windows):
    """Calendar days of a time zone: 23 or 25 hours long on the days clocks change."""

    def __init__(self, zone: str, grace_ms: int = 0) -> None:
        self.zone = ZoneInfo(zone)
        self.grace_ms = grace_ms

    def _midnight(self, day: datetime) -> int:
        local = datetime(day.year, day.month, day.day, tzinfo=self.zone)
        return int(local.timestamp() * 1000)

    def windows_for(self, timestamp: int) -> dict[int, TimeWindow]:
        day = datetime.fromtimestamp(timestamp / 1000, self.zone)
        start = self._midnight(day)
        end = self._midnight(day + timedelta(days=1))
        return {start: TimeWindow(start, end)}

    def size(self) -> int:
        return DAY_MS

    def grace_period_ms(self) -> int:
        return self.grace_ms


def _ms(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1000)


def _count(windows, inputs, *, cache_bytes: int = 0, size: int, in_memory: bool = False):
    builder = StreamsBuilder()
    materialized = Materialized.as_("counts")
    if in_memory:
        materialized = materialized.in_memory()
    (
        builder.stream("in", key_serde=S, value_serde=S)
        .group_by_key()
        .windowed_by(windows)
        .count(materialized)
        .to_stream()
        .to("out", key_serde=serdes.TimeWindowedSerde(S, size))
    )
    config = {"statestore.cache.max.bytes": cache_bytes}
    with TopologyTestDriver(builder.build(), config) as driver:
        source = driver.create_input_topic("in", S, S)
        for key, ts in inputs:
            source.pipe_input(key, "v", ts)
        out = driver.create_output_topic("out", serdes.TimeWindowedSerde(S, size), L)
        records = [(str(r.key), r.value, r.timestamp) for r in out.read_records_to_list()]
        store = driver.get_window_store("counts")
        fetched = [(str(k), v) for k, v in store.fetch_all(0, MAX_TIMESTAMP)]
        return records, fetched


@pytest.mark.parametrize("in_memory", [False, True])
def test_unlimited_windows_count_everything_per_key(in_memory):
    inputs = [("a", 1), ("a", 5), ("b", 7), ("a", 3)]
    records, fetched = _count(
        UnlimitedWindows.of(), inputs, size=MAX_TIMESTAMP, in_memory=in_memory
    )
    end = MAX_TIMESTAMP
    assert records == [
        (f"[a@0/{end}]", 1, 1),
        (f"[a@0/{end}]", 2, 5),
        (f"[b@0/{end}]", 1, 7),
        (f"[a@0/{end}]", 3, 5),  # the aggregate keeps the largest timestamp
    ]
    assert sorted(fetched) == [(f"[a@0/{end}]", 3), (f"[b@0/{end}]", 1)]


def test_unlimited_windows_start_on_drops_earlier_records():
    inputs = [("a", 1), ("a", 5), ("b", 7), ("a", 3)]
    records, _ = _count(
        UnlimitedWindows.of().start_on(4), inputs, size=MAX_TIMESTAMP, cache_bytes=10_000_000
    )
    end = MAX_TIMESTAMP
    assert records == [(f"[a@4/{end}]", 1, 5), (f"[b@4/{end}]", 1, 7)]


def test_unlimited_windows_reject_a_negative_start():
    with pytest.raises(ValueError, match="cannot be negative"):
        UnlimitedWindows.of().start_on(-1)


def test_custom_daily_windows_follow_the_calendar_across_a_clock_change():
    # Europe/Berlin moves to summer time on 2026-03-29: that day is 23 hours long
    windows = DailyWindows("Europe/Berlin")
    inputs = [
        ("a", _ms("2026-03-28T22:30:00+00:00")),  # 23:30 local, Mar 28
        ("a", _ms("2026-03-28T23:30:00+00:00")),  # 00:30 local, Mar 29
        ("a", _ms("2026-03-29T21:30:00+00:00")),  # 23:30 local (summer time), Mar 29
        ("a", _ms("2026-03-29T22:30:00+00:00")),  # 00:30 local, Mar 30
        ("a", _ms("2026-03-28T23:45:00+00:00")),  # Mar 29 again: closed (no grace), dropped
    ]
    records, fetched = _count(windows, inputs, size=DAY_MS)
    mar28 = _ms("2026-03-27T23:00:00+00:00")
    mar29 = _ms("2026-03-28T23:00:00+00:00")
    mar30 = _ms("2026-03-29T22:00:00+00:00")
    assert [(k, v) for k, v, _ in records] == [
        (f"[a@{mar28}/{mar28 + DAY_MS}]", 1),
        (f"[a@{mar29}/{mar29 + DAY_MS}]", 1),
        (f"[a@{mar29}/{mar29 + DAY_MS}]", 2),
        (f"[a@{mar30}/{mar30 + DAY_MS}]", 1),
    ]
    assert dict(fetched)[f"[a@{mar29}/{mar29 + DAY_MS}]"] == 2


def test_custom_windows_with_grace_take_late_records():
    windows = DailyWindows("UTC", grace_ms=3600_000)
    day1 = _ms("2026-01-01T12:00:00+00:00")
    inputs = [("a", day1), ("a", day1 + DAY_MS), ("a", day1 + 1000)]  # 12 h past day 1's end
    records, _ = _count(windows, inputs, size=DAY_MS)
    assert len(records) == 2  # day 1 closed an hour after midnight: the late record is dropped
    inputs = [("a", day1), ("a", _ms("2026-01-02T00:30:00+00:00")), ("a", day1 + 1000)]
    records, _ = _count(windows, inputs, size=DAY_MS)
    assert [v for _, v, _ in records] == [1, 1, 2]  # within grace: day 1 counts it


def test_emit_on_window_close_is_refused_for_custom_windows():
    builder = StreamsBuilder()
    windowed = (
        builder.stream("in", key_serde=S, value_serde=S)
        .group_by_key()
        .windowed_by(DailyWindows("UTC"))
        .emit_strategy(EmitStrategy.on_window_close())
    )
    with pytest.raises(ValueError, match="only supported for TimeWindows and SlidingWindows"):
        windowed.count()


def test_windowed_by_names_what_it_takes():
    builder = StreamsBuilder()
    with pytest.raises(TypeError, match="Windows subclass"):
        builder.stream("in").group_by_key().windowed_by(object())  # type: ignore[arg-type]


def test_cogrouped_streams_aggregate_over_unlimited_windows():
    builder = StreamsBuilder()
    left = builder.stream("l", key_serde=S, value_serde=S).group_by_key()
    right = builder.stream("r", key_serde=S, value_serde=S).group_by_key()
    (
        left.cogroup(lambda k, v, agg: agg + 1)
        .cogroup(right, lambda k, v, agg: agg + 10)
        .windowed_by(UnlimitedWindows.of())
        .aggregate(lambda: 0, Materialized.as_("both").with_value_serde(L))
        .to_stream()
        .to("out", key_serde=serdes.TimeWindowedSerde(S, MAX_TIMESTAMP), value_serde=L)
    )
    with TopologyTestDriver(builder.build(), {"statestore.cache.max.bytes": 0}) as driver:
        driver.create_input_topic("l", S, S).pipe_input("a", "x", 1)
        driver.create_input_topic("r", S, S).pipe_input("a", "y", 2)
        out = driver.create_output_topic("out", serdes.TimeWindowedSerde(S, MAX_TIMESTAMP), L)
        assert [(str(kv.key), kv.value) for kv in out.read_key_values_to_list()] == [
            (f"[a@0/{MAX_TIMESTAMP}]", 1),
            (f"[a@0/{MAX_TIMESTAMP}]", 11),
        ]
