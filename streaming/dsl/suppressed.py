"""``Suppressed``: hold back KTable updates until a window closes or a time limit passes."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta

from streaming.time import to_millis

UNBOUNDED = None


@dataclass(frozen=True)
class BufferConfig:
    """Buffer bounds and what to do when they are exceeded (emit early or fail)."""

    record_limit: int | None = None
    byte_limit: int | None = None
    on_full: str = "emit_early"  # "emit_early" | "shut_down"
    logging_enabled: bool = True

    @staticmethod
    def unbounded() -> BufferConfig:
        return BufferConfig(on_full="shut_down")

    @staticmethod
    def max_records(n: int) -> BufferConfig:
        return BufferConfig(record_limit=n)

    @staticmethod
    def max_bytes(n: int) -> BufferConfig:
        return BufferConfig(byte_limit=n)

    def with_max_records(self, n: int) -> BufferConfig:
        return replace(self, record_limit=n)

    def with_max_bytes(self, n: int) -> BufferConfig:
        return replace(self, byte_limit=n)

    def with_no_bound(self) -> BufferConfig:
        return replace(self, record_limit=None, byte_limit=None, on_full="shut_down")

    def emit_early_when_full(self) -> BufferConfig:
        return replace(self, on_full="emit_early")

    def shut_down_when_full(self) -> BufferConfig:
        return replace(self, on_full="shut_down")

    def with_logging_disabled(self) -> BufferConfig:
        return replace(self, logging_enabled=False)


@dataclass(frozen=True)
class Suppressed:
    """A suppression: final results on window close, or rate-limited by a time limit."""

    kind: str  # "window_close" | "time_limit"
    time_to_wait_ms: int
    buffer_config: BufferConfig
    name: str | None = None

    @staticmethod
    def until_window_closes(buffer_config: BufferConfig | None = None) -> Suppressed:
        buffer = buffer_config or BufferConfig.unbounded()
        if buffer.on_full != "shut_down":
            raise ValueError(
                "until_window_closes() needs a strict buffer: BufferConfig.unbounded() or "
                "a bounded one with shut_down_when_full()"
            )
        return Suppressed("window_close", -1, buffer)

    @staticmethod
    def until_time_limit(
        time_to_wait_for_more_events: int | timedelta, buffer_config: BufferConfig | None = None
    ) -> Suppressed:
        return Suppressed(
            "time_limit",
            to_millis(time_to_wait_for_more_events, "time to wait"),
            buffer_config or BufferConfig.unbounded(),
        )

    def with_name(self, name: str) -> Suppressed:
        return replace(self, name=name)

    def with_logging_disabled(self) -> Suppressed:
        return replace(self, buffer_config=self.buffer_config.with_logging_disabled())
