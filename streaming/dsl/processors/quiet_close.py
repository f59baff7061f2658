"""Windows that close when the input goes quiet (``window.close.quiet.ms``, off by default).

Stream time moves only with records, so the final result of the last window of an input
that stops (``suppress``, emit-on-window-close) never comes out: Kafka Streams' behaviour,
kept as the default. With the setting on, a windowed aggregation or a window-close
suppression whose stream time stood still for that much wall-clock time takes the wall clock
as its stream time, checked every ``min(quiet, 500 ms)``: the windows whose end plus grace
the clock passed close and are emitted, and a record that arrives later for one of them is
late like any other (dropped and reported).

A windowed aggregation may set its own quiet time (``close_when_quiet`` on the windowed
stream, or a SQL table's ``'window.close.quiet'``): it wins over the application's, for the
aggregation and for a window-close suppression of its result."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streaming.topology.processor import PunctuationType

#: the setting: quiet milliseconds before the wall clock stands in for stream time; -1: off
WINDOW_CLOSE_QUIET_MS = "window.close.quiet.ms"
#: the quiet time that turns the quiet close off
OFF = -1
#: the longest wall-clock time between two checks for a quiet input
CHECK_INTERVAL_MS = 500
NO_TIMESTAMP = -1


def window_close_quiet_ms(app_configs: Any) -> int:
    """The setting's value from ``context.app_configs`` (-1 when off or absent)."""
    value = app_configs.get(WINDOW_CLOSE_QUIET_MS) if app_configs else None
    return OFF if value is None else int(value)


def check_quiet_ms(quiet_ms: int, what: str = "the quiet time") -> int:
    """``quiet_ms`` if it is a quiet time (>= 0) or ``OFF`` (-1); else a ValueError that says
    what to pass, since any other negative value would silently turn the close off."""
    if quiet_ms < OFF:
        raise ValueError(
            f"{what} must be >= 0 ms (how long the input stands still on the wall clock "
            f"before its windows close) or -1 (off for this aggregation), got {quiet_ms}"
        )
    return quiet_ms


def effective_quiet_ms(own_ms: int | None, app_configs: Any) -> int:
    """The quiet time a processor runs with: its aggregation's own when set (``OFF``
    included, which turns the application's setting off for it), else the application's."""
    return window_close_quiet_ms(app_configs) if own_ms is None else own_ms


class QuietClock:
    """One processor's stream time as the quiet close sees it: what the records made it,
    until it stood still for ``quiet_ms`` of wall-clock time; from then on the wall clock
    (never backwards), until a record moves it again."""

    __slots__ = ("_seen", "_still_since", "quiet_ms")

    def __init__(self, quiet_ms: int) -> None:
        self.quiet_ms = quiet_ms
        self._seen = NO_TIMESTAMP
        self._still_since = 0

    def stream_time(self, observed: int, now: int) -> int:
        """The stream time at wall-clock ``now``, given the one the records made (a quiet
        time of 0: the wall clock at once, once it is ahead)."""
        if observed != self._seen:  # a record moved it (or it is the first look)
            self._seen = observed
            self._still_since = now
            if self.quiet_ms > 0:
                return observed
        if observed == NO_TIMESTAMP or now <= observed or now - self._still_since < self.quiet_ms:
            return observed
        self._seen = now
        return now


def schedule_quiet_close(
    context: Any,
    observed: Callable[[], int],
    advance: Callable[[int], None],
    own_ms: int | None = None,
) -> None:
    """With the quiet close on (the aggregation's ``own_ms``, else the application's setting),
    check every ``min(quiet, CHECK_INTERVAL_MS)`` of wall-clock time whether ``observed()``
    stood still for the quiet time, and then ``advance`` stream time to the wall clock."""
    quiet_ms = effective_quiet_ms(own_ms, getattr(context, "app_configs", None))
    if quiet_ms < 0:
        return
    clock = QuietClock(quiet_ms)

    def check(now: int) -> None:
        current = observed()
        stream_time = clock.stream_time(current, now)
        if stream_time != current:
            advance(stream_time)

    context.schedule(
        max(1, min(quiet_ms, CHECK_INTERVAL_MS)), PunctuationType.WALL_CLOCK_TIME, check
    )


__all__ = [
    "OFF",
    "WINDOW_CLOSE_QUIET_MS",
    "QuietClock",
    "check_quiet_ms",
    "effective_quiet_ms",
    "schedule_quiet_close",
    "window_close_quiet_ms",
]
