"""``LateRecordTap``: the late decision of a windowed aggregation, reported per window."""

from __future__ import annotations

from typing import Any

from pipelines.streams.late import LateRecordTap
from streaming import TimeWindows
from streaming.topology.processor import Record

M = 60_000


class Context:
    """The two context calls the tap makes (processor metadata of the task, forward)."""

    def __init__(self, metadata: dict[str, int] | None = None) -> None:
        self.metadata = metadata or {}
        self.forwarded: list[Record] = []

    def processor_metadata_for_key(self, key: str) -> int | None:
        return self.metadata.get(key)

    def forward(self, record: Record) -> None:
        self.forwarded.append(record)


def tap(windows: TimeWindows, context: Context, final_store: str | None = None) -> LateRecordTap:
    processor = LateRecordTap("r", windows, final_store)
    processor.init(context)  # type: ignore[arg-type]
    return processor


def late_windows(context: Context) -> list[tuple[Any, int, int]]:
    return [(r.key, r.value["window_start"], r.value["stream_time"]) for r in context.forwarded]


def test_tumbling_windows_late_at_end_plus_grace() -> None:
    context = Context()
    p = tap(TimeWindows.of_size_and_grace(5 * M, 1 * M), context)
    p.process(Record("k", {"n": 1}, 7 * M))  # stream time 7M: [0, 5M) closed at 6M
    p.process(Record("k", {"n": 2}, 4 * M))  # dropped
    p.process(Record("k", {"n": 3}, 6 * M))  # [5M, 10M) still open
    p.process(Record(None, {"n": 4}, 0))  # null keys are skipped, not late
    p.process(Record("k", {"n": 5}, 6 * M - 1))  # [5M, 10M): open
    assert late_windows(context) == [("k", 0, 7 * M)]
    assert context.forwarded[0].value["n"] == 2 and context.forwarded[0].timestamp == 4 * M


def test_hopping_reports_only_the_closed_windows_of_a_record() -> None:
    context = Context()
    p = tap(TimeWindows.of_size_and_grace(10 * M, 1 * M).advance_by(5 * M), context)
    p.process(Record("k", {}, 16 * M))  # close time 15M
    p.process(Record("k", {}, 7 * M))  # in [0, 10M) (closed) and [5M, 15M) (closed at 15M)
    p.process(Record("k", {}, 12 * M))  # in [5M, 15M) (closed) and [10M, 20M) (open)
    assert late_windows(context) == [("k", 0, 16 * M), ("k", 5 * M, 16 * M), ("k", 5 * M, 16 * M)]


def test_windows_emitted_as_final_before_a_restart_count_as_closed() -> None:
    # after a restart the aggregation's stream time starts over, but a window already
    # emitted on close (its close time is in the task's processor metadata) stays final
    context = Context({"store": 11 * M})
    p = tap(TimeWindows.of_size_and_grace(5 * M, 1 * M), context, final_store="store")
    p.process(Record("k", {}, 9 * M))  # [5M, 10M) was emitted at close time 11M
    p.process(Record("k", {}, 10 * M))  # [10M, 15M) was not
    assert late_windows(context) == [("k", 5 * M, 9 * M)]
    no_metadata = Context()
    tap(TimeWindows.of_size_and_grace(5 * M, 1 * M), no_metadata, "store").process(
        Record("k", {}, 9 * M)
    )
    assert no_metadata.forwarded == []
