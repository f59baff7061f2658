"""The exception handler of the platform's stream applications: a record they cannot read
or process is skipped (the runtime writes it to ``<app>-dlq`` with the reason in KIP-1034
headers) and summarised in one INFO line a minute, instead of a WARNING per record (the
generator injects malformed records on purpose, every few seconds).

The first bad record is told at once, so that a user sees that dead-lettering happens; the
others are counted and told together once ``interval_s`` has passed since the last line,
when the next bad record comes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from streaming.runtime.errors import ErrorHandlerContext, Response

log = logging.getLogger(__name__)


class DeadLetterSummary:
    """A deserialization and processing exception handler: CONTINUE, counted per source
    topic and per reason, told in one INFO line per ``interval_s`` seconds."""

    interval_s = 60.0

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._topics: Counter[str] = Counter()
        self._reasons: Counter[str] = Counter()
        self._told_at: float | None = None

    def handle(self, context: ErrorHandlerContext, record: Any, exception: Exception) -> Response:
        """Skip the record; count it, and tell the counts when the interval has passed."""
        with self._lock:
            self._topics[context.topic or "?"] += 1
            self._reasons[_reason(exception)] += 1
            now = self._clock()
            if self._told_at is None or now - self._told_at >= self.interval_s:
                line = self._summary(now)
                self._told_at = now
                self._topics.clear()
                self._reasons.clear()
            else:
                line = None
        if line:
            log.info("%s", line)
        return Response.CONTINUE

    def _summary(self, now: float) -> str:
        total = sum(self._topics.values())
        since = "" if self._told_at is None else f" in the last {now - self._told_at:.0f} s"
        topics = ", ".join(f"{t} {n}" for t, n in self._topics.most_common())
        reasons = "; ".join(f"{r} ({n})" for r, n in self._reasons.most_common(3))
        noun = "record" if total == 1 else "records"
        return (
            f"{total} unreadable {noun}{since} skipped to the dead-letter topic "
            f"({topics}): {reasons}"
        )


def _reason(exception: Exception) -> str:
    """The kind of failure, short: the exception type and its first line (80 characters)."""
    first = (str(exception).splitlines() or [""])[0][:80]
    return f"{type(exception).__name__}: {first}" if first else type(exception).__name__
