"""The log of the Kafka clients (librdkafka), with repeats folded.

While a broker is away, librdkafka logs the same connection failure for every client, broker
and retry: thousands of lines a minute. ``RepeatFilter`` lets the first of a kind through
(numbers such as ports and durations, and client names, do not make a new kind), drops its repeats for
``window_s`` seconds and then says how many it dropped. Debug records (a client's ``debug``
setting asked for them) all pass: their repeats are what such a log is read for.
"""

from __future__ import annotations

import logging
import re
import threading
import time

LOGGER_NAME = "streaming.runtime.librdkafka"
_VARYING = re.compile(r"\[[^\]]*\]|\d+")


class RepeatFilter(logging.Filter):
    """Drop a log record that repeats an earlier one within ``window_s`` seconds."""

    def __init__(self, window_s: float = 30.0, max_kinds: int = 1000) -> None:
        super().__init__()
        self.window_s = window_s
        self.max_kinds = max_kinds
        self._seen: dict[tuple[int, str], list[float | int]] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno <= logging.DEBUG:
            return True
        kind = (record.levelno, _VARYING.sub("#", record.getMessage()))
        now = time.monotonic()
        with self._lock:
            seen = self._seen.get(kind)
            if seen is not None and now - seen[0] < self.window_s:
                seen[1] += 1
                return False
            if len(self._seen) >= self.max_kinds:
                self._seen.clear()
            self._seen[kind] = [now, 0]
        if seen is not None and seen[1]:
            record.msg = f"{record.getMessage()} ({seen[1]} similar messages in the last "
            record.msg += f"{self.window_s:.0f} s not shown)"
            record.args = ()
        return True


_FILTER = RepeatFilter()


def client_logger() -> logging.Logger:
    """The logger every Kafka client of the runtime logs to, with repeats folded."""
    logger = logging.getLogger(LOGGER_NAME)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return logger
