"""Window types and the Windowed key wrapper (Kafka's Window, TimeWindow, SessionWindow, Windowed)."""

from __future__ import annotations

from typing import Any

MAX_TIMESTAMP = (1 << 63) - 1  # Long.MAX_VALUE


class Window:
    """A time interval with a start and end in milliseconds (Kafka's abstract Window)."""

    __slots__ = ("end", "start")

    def __init__(self, start: int, end: int) -> None:
        if start < 0:
            raise ValueError("Window startMs time cannot be negative.")
        if end < start:
            raise ValueError("Window endMs time cannot be smaller than window startMs time.")
        self.start = start
        self.end = end

    def overlap(self, other: Window) -> bool:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        return type(other) is type(self) and self.start == other.start and self.end == other.end

    def __hash__(self) -> int:
        return hash((self.start, self.end))

    def __repr__(self) -> str:
        return f"Window{{startMs={self.start}, endMs={self.end}}}"


class TimeWindow(Window):
    """A half-open [start, end) time window for hopping/tumbling windows."""

    __slots__ = ()

    def __init__(self, start: int, end: int) -> None:
        super().__init__(start, end)
        if start == end:
            raise ValueError("Window endMs must be greater than window startMs.")

    @classmethod
    def for_size(cls, start: int, size: int) -> TimeWindow:
        """Kafka's WindowKeySchema.timeWindowForSize: end capped at Long.MAX_VALUE."""
        end = start + size
        return cls(start, MAX_TIMESTAMP if end > MAX_TIMESTAMP else end)

    def overlap(self, other: Window) -> bool:
        if type(other) is not TimeWindow:
            raise ValueError(
                f"Cannot compare windows of different type. Other window has type {type(other)}."
            )
        return self.start < other.end and other.start < self.end


class SessionWindow(Window):
    """A session window; both start and end are inclusive."""

    __slots__ = ()

    def overlap(self, other: Window) -> bool:
        if type(other) is not SessionWindow:
            raise ValueError(
                f"Cannot compare windows of different type. Other window has type {type(other)}."
            )
        return not (self.start > other.end or other.start > self.end)


class UnlimitedWindow(Window):
    """A window from start to Long.MAX_VALUE (unbounded end)."""

    __slots__ = ()

    def __init__(self, start: int) -> None:
        super().__init__(start, MAX_TIMESTAMP)

    def overlap(self, other: Window) -> bool:
        if type(other) is not UnlimitedWindow:
            raise ValueError(
                f"Cannot compare windows of different type. Other window has type {type(other)}."
            )
        return True


class Windowed:
    """A key paired with the window it belongs to; the key type of windowed tables."""

    __slots__ = ("key", "window")

    def __init__(self, key: Any, window: Window) -> None:
        self.key = key
        self.window = window

    def __str__(self) -> str:
        return f"[{self.key}@{self.window.start}/{self.window.end}]"

    def __repr__(self) -> str:
        return f"Windowed({self.key!r}, {self.window!r})"

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        return isinstance(other, Windowed) and self.key == other.key and self.window == other.window

    def __hash__(self) -> int:
        return hash((self.key, self.window))
