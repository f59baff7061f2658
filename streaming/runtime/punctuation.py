"""Punctuation schedules, fired in time order like Kafka Streams' ``PunctuationQueue``."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Any


class PunctuationSchedule:
    """One scheduled punctuator; ``cancel()`` stops it."""

    __slots__ = ("cancelled", "interval", "node", "punctuator", "timestamp")

    def __init__(self, node: Any, timestamp: int, interval: int, punctuator: Callable) -> None:
        self.node = node
        self.timestamp = timestamp
        self.interval = interval
        self.punctuator = punctuator
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def next_time(self, current: int) -> int:
        """The next due time; missed intervals are skipped, not replayed."""
        nxt = self.timestamp + self.interval
        if current >= nxt:
            missed = (current - self.timestamp) // self.interval
            nxt = self.timestamp + (missed + 1) * self.interval
        return nxt


class PunctuationQueue:
    """Schedules ordered by due time; ``maybe_punctuate`` fires those due at ``now``."""

    def __init__(self) -> None:
        #: (due time, sequence, schedule), the next due first; empty when nothing is scheduled
        self.heap: list[tuple[int, int, PunctuationSchedule]] = []
        self._seq = itertools.count()

    def schedule(self, sched: PunctuationSchedule) -> PunctuationSchedule:
        heapq.heappush(self.heap, (sched.timestamp, next(self._seq), sched))
        return sched

    def __bool__(self) -> bool:
        return bool(self.heap)

    def maybe_punctuate(self, now: int, fire: Callable[[PunctuationSchedule, int], None]) -> bool:
        punctuated = False
        heap = self.heap
        while heap and heap[0][0] <= now:
            _, _, sched = heapq.heappop(heap)
            if sched.cancelled:
                continue
            fire(sched, now)
            punctuated = True
            if not sched.cancelled:
                sched.timestamp = sched.next_time(now)
                heapq.heappush(heap, (sched.timestamp, next(self._seq), sched))
        return punctuated
