"""Window specifications: tumbling/hopping, sliding, session and join windows.

Semantics follow Kafka Streams: time windows are aligned to the epoch, ``[start, end)``;
sliding windows are inclusive ``[start, end]``; grace is how long after the window end
late records are still accepted (by stream time).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from streaming.time import to_millis
from streaming.windowed import MAX_TIMESTAMP, TimeWindow

# Kafka 2.x-era default grace for windows built without an explicit grace.
DEPRECATED_DEFAULT_GRACE_MS = 24 * 60 * 60 * 1000 - 1
NO_GRACE = 0


@dataclass(frozen=True)
class TimeWindows:
    """Fixed-size windows; tumbling by default, hopping with ``advance_by``."""

    size_ms: int
    advance_ms: int
    grace_ms: int

    @staticmethod
    def of_size_with_no_grace(size: int | timedelta) -> TimeWindows:
        ms = to_millis(size, "window size")
        if ms <= 0:
            raise ValueError("Window size (sizeMs) must be larger than zero.")
        return TimeWindows(ms, ms, NO_GRACE)

    @staticmethod
    def of_size_and_grace(size: int | timedelta, grace: int | timedelta) -> TimeWindows:
        ms = to_millis(size, "window size")
        if ms <= 0:
            raise ValueError("Window size (sizeMs) must be larger than zero.")
        return TimeWindows(ms, ms, to_millis(grace, "grace"))

    def advance_by(self, advance: int | timedelta) -> TimeWindows:
        ms = to_millis(advance, "advance")
        if ms <= 0 or ms > self.size_ms:
            raise ValueError(
                f"Window advancement interval should be more than zero and less than window "
                f"duration which is {self.size_ms} ms, but given advancement interval is: {ms} ms"
            )
        return TimeWindows(self.size_ms, ms, self.grace_ms)

    def size(self) -> int:
        return self.size_ms

    def grace_period_ms(self) -> int:
        return self.grace_ms

    def windows_for(self, timestamp: int) -> dict[int, TimeWindow]:
        """All windows containing ``timestamp``, keyed by start, in increasing start order."""
        size, advance = self.size_ms, self.advance_ms
        window_start = max(0, timestamp - size + advance) // advance * advance
        out: dict[int, TimeWindow] = {}
        while window_start <= timestamp:
            out[window_start] = TimeWindow(window_start, window_start + size)
            window_start += advance
        return out


class Windows(ABC):
    """Kafka's ``Windows``: the base of custom window kinds for ``windowed_by()``.

    A subclass says which windows a timestamp falls into (``windows_for``, keyed by window
    start, each a ``TimeWindow`` or a subclass), how long a window is (``size``: the window
    store keeps ``size + grace`` and a windowed key's end is ``start + size``) and how long
    after a window's end late records are still taken (``grace_period_ms``)."""

    @abstractmethod
    def windows_for(self, timestamp: int) -> dict[int, TimeWindow]: ...

    @abstractmethod
    def size(self) -> int: ...

    @abstractmethod
    def grace_period_ms(self) -> int: ...


@dataclass(frozen=True)
class UnlimitedWindows(Windows):
    """One window per key from ``start_ms`` on, never closed (Kafka's ``UnlimitedWindows``)."""

    start_ms: int = 0

    @staticmethod
    def of() -> UnlimitedWindows:
        return UnlimitedWindows()

    def start_on(self, start: int | datetime) -> UnlimitedWindows:
        """Kafka's ``startOn``: records before ``start`` (epoch ms or a datetime) fall into
        no window."""
        ms = int(start.timestamp() * 1000) if isinstance(start, datetime) else int(start)
        if ms < 0:
            raise ValueError("Window start time (startMs) cannot be negative.")
        return UnlimitedWindows(ms)

    starting_at = start_on

    def windows_for(self, timestamp: int) -> dict[int, TimeWindow]:
        if timestamp < self.start_ms:
            return {}
        return {self.start_ms: TimeWindow(self.start_ms, MAX_TIMESTAMP)}

    def size(self) -> int:
        return MAX_TIMESTAMP

    def grace_period_ms(self) -> int:
        return 0


@dataclass(frozen=True)
class SlidingWindows:
    """Windows of ``time_difference`` around each record, bounds inclusive."""

    time_difference_ms: int
    grace_ms: int

    @staticmethod
    def of_time_difference_with_no_grace(time_difference: int | timedelta) -> SlidingWindows:
        return SlidingWindows(to_millis(time_difference, "time difference"), NO_GRACE)

    @staticmethod
    def of_time_difference_and_grace(
        time_difference: int | timedelta, grace: int | timedelta
    ) -> SlidingWindows:
        return SlidingWindows(
            to_millis(time_difference, "time difference"), to_millis(grace, "grace")
        )

    def grace_period_ms(self) -> int:
        return self.grace_ms


@dataclass(frozen=True)
class SessionWindows:
    """Sessions of activity separated by at least ``inactivity_gap``."""

    gap_ms: int
    grace_ms: int

    @staticmethod
    def of_inactivity_gap_with_no_grace(gap: int | timedelta) -> SessionWindows:
        ms = to_millis(gap, "inactivity gap")
        if ms <= 0:
            raise ValueError("Gap time cannot be zero or negative.")
        return SessionWindows(ms, NO_GRACE)

    @staticmethod
    def of_inactivity_gap_and_grace(gap: int | timedelta, grace: int | timedelta) -> SessionWindows:
        ms = to_millis(gap, "inactivity gap")
        if ms <= 0:
            raise ValueError("Gap time cannot be zero or negative.")
        return SessionWindows(ms, to_millis(grace, "grace"))

    def inactivity_gap(self) -> int:
        return self.gap_ms

    def grace_period_ms(self) -> int:
        return self.grace_ms


@dataclass(frozen=True)
class JoinWindows:
    """How far apart two records of a stream-stream join may be: ``[-before, +after]``.

    ``before``/``after`` may be negative as long as ``before + after >= 0`` (Kafka's rule).
    """

    before_ms: int
    after_ms: int
    grace_ms: int
    #: False only for the deprecated ``of``: left/outer joins emit eagerly (old behaviour)
    spurious_result_fix: bool = True

    def __post_init__(self) -> None:
        if self.before_ms + self.after_ms < 0:
            raise ValueError("Window interval (ie, beforeMs+afterMs) must not be negative.")
        if self.grace_ms < 0:
            raise ValueError("Grace period must not be negative.")

    @staticmethod
    def of_time_difference_with_no_grace(time_difference: int | timedelta) -> JoinWindows:
        ms = to_millis(time_difference, "time difference")
        return JoinWindows(ms, ms, NO_GRACE)

    @staticmethod
    def of_time_difference_and_grace(
        time_difference: int | timedelta, grace: int | timedelta
    ) -> JoinWindows:
        ms = to_millis(time_difference, "time difference")
        return JoinWindows(ms, ms, to_millis(grace, "grace"))

    @staticmethod
    def of(time_difference: int | timedelta) -> JoinWindows:
        """Deprecated in Kafka: 24 h minus the window as grace, and eager left/outer results."""
        ms = to_millis(time_difference, "time difference")
        return JoinWindows(ms, ms, max(_DEPRECATED_DEFAULT_GRACE_MS - 2 * ms, 0), False)

    def before(self, time_difference: int | timedelta) -> JoinWindows:
        ms = to_millis(time_difference, "before", allow_negative=True)
        return JoinWindows(ms, self.after_ms, self.grace_ms, self.spurious_result_fix)

    def after(self, time_difference: int | timedelta) -> JoinWindows:
        ms = to_millis(time_difference, "after", allow_negative=True)
        return JoinWindows(self.before_ms, ms, self.grace_ms, self.spurious_result_fix)

    def size(self) -> int:
        return self.before_ms + self.after_ms

    def grace_period_ms(self) -> int:
        return self.grace_ms


_DEPRECATED_DEFAULT_GRACE_MS = 24 * 60 * 60 * 1000


class EmitStrategy:
    """When a windowed aggregation emits: on every update, or once when the window closes."""

    ON_WINDOW_UPDATE = "on_window_update"
    ON_WINDOW_CLOSE = "on_window_close"

    def __init__(self, kind: str) -> None:
        self.kind = kind

    @staticmethod
    def on_window_update() -> EmitStrategy:
        return EmitStrategy(EmitStrategy.ON_WINDOW_UPDATE)

    @staticmethod
    def on_window_close() -> EmitStrategy:
        return EmitStrategy(EmitStrategy.ON_WINDOW_CLOSE)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EmitStrategy) and other.kind == self.kind

    def __hash__(self) -> int:
        return hash(self.kind)

    def __repr__(self) -> str:
        return f"EmitStrategy.{self.kind}()"


def window_size_and_retention(windows: Any) -> tuple[int, int]:
    """A windowed aggregate's window size (its windowed keys' serde) and default store
    retention, as Kafka's ``TimeWindowedKStreamImpl`` and ``SlidingWindowedKStreamImpl``
    compute them."""
    if isinstance(windows, SlidingWindows):
        return windows.time_difference_ms, 2 * windows.time_difference_ms + windows.grace_ms
    size = windows.size()
    return size, min(size + windows.grace_period_ms(), MAX_TIMESTAMP)
