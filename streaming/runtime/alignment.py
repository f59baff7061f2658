"""Event-time alignment of source partitions while an application works off a backlog.

A backlog (a restart after a stop, a replay from the earliest offsets) is fetched a partition
at a time, so without a bound one source partition runs hours of event time ahead of another:
the repartition topics and stores downstream see the records far out of event-time order,
stream time runs ahead, windows close early and the records of the slower partitions are
dropped as late, sessions are split. Flink bounds it with watermark alignment (FLIP-182):
a split more than a drift ahead of the slowest one is paused. Here a task whose next source
record lies more than ``event.time.alignment.max.drift.ms`` ahead of the client's lowest
source partition waits (its queue fills and the consumer pauses it, as for any full queue),
while the client is behind: more than ``event.time.alignment.lag.records`` source records
not yet processed, or its slowest source partition more than ``event.time.alignment.lag.ms``
of event time behind the wall clock (the tail of a replayed backlog is few records but hours
old; live records are not). A partition with nothing queued holds the others back only while records
are on their way (lag), and for at most ``event.time.alignment.idle.ms``, as Flink's
``withIdleness``: idle and empty partitions never block.

The stream threads of one client share one ``EventTimeAlignment``; each reports the low
watermark of its own source partitions once per processing round.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streaming.runtime.partition_group import PartitionGroup

TopicPartition = tuple[str, int]

#: the low watermark of a partition that has records on their way but none fetched yet
BEFORE_ANY = -(2**63)


@dataclass(frozen=True)
class AlignmentSettings:
    """``event.time.alignment.*``: drift bound (negative: off), backlog bound, idleness."""

    max_drift_ms: int = 10_000
    lag_records: int = 1_000
    lag_ms: int = 60_000
    idle_ms: int = 10_000

    @property
    def enabled(self) -> bool:
        return self.max_drift_ms >= 0


@dataclass
class _Report:
    low: int | None
    backlog: int
    queued: bool


class EventTimeAlignment:
    """The low watermarks of one client's stream threads, and the event time up to which
    their source tasks may process now."""

    def __init__(self, settings: AlignmentSettings) -> None:
        self.settings = settings
        self._reports: dict[str, _Report] = {}
        self._lock = threading.Lock()

    def member(self, name: str) -> ThreadAlignment:
        """The handle one stream thread reports through."""
        return ThreadAlignment(self, name)

    def report(
        self, name: str, low: int | None, backlog: int, queued: bool, now_ms: int
    ) -> int | None:
        """Record a thread's low watermark (None: no partition holds the others back), its
        source backlog and whether it has source records queued; the event time its tasks
        may process up to (None: no bound)."""
        with self._lock:
            self._reports[name] = _Report(low, backlog, queued)
            reports = list(self._reports.values())
        lows = [r.low for r in reports if r.low is not None]
        if not lows:
            return None
        low = min(lows)
        settings = self.settings
        behind = (
            low < now_ms - settings.lag_ms or sum(r.backlog for r in reports) > settings.lag_records
        )
        if not behind:
            return None
        return low if low == BEFORE_ANY else low + settings.max_drift_ms

    def queued_elsewhere(self, name: str) -> bool:
        """Whether another thread reported source records queued (waiting to be processed)."""
        with self._lock:
            return any(r.queued for n, r in self._reports.items() if n != name)

    def forget(self, name: str) -> None:
        """A thread ended: its partitions no longer hold anyone back."""
        with self._lock:
            self._reports.pop(name, None)


class ThreadAlignment:
    """One stream thread's view: computes its low watermark from its source partitions."""

    def __init__(self, shared: EventTimeAlignment, name: str) -> None:
        self.shared = shared
        self.name = name
        self.settings = shared.settings
        #: since when (wall clock ms) each source partition has had nothing queued
        self._empty_since: dict[TopicPartition, int] = {}

    def limit(
        self,
        sources: Iterable[tuple[TopicPartition, PartitionGroup]],
        lag: Callable[[TopicPartition], int | None],
        now_ms: int,
    ) -> int | None:
        """The event time this thread's source tasks may process up to now (None: any)."""
        low: int | None = None
        backlog = 0
        queued = False
        waiting: list[tuple[TopicPartition, PartitionGroup]] = []
        empty_since = self._empty_since
        for tp, group in sources:
            queue = group.queues.get(tp)
            fetched_lag = lag(tp)
            if fetched_lag:
                backlog += fetched_lag
            if queue:
                empty_since.pop(tp, None)
                backlog += len(queue)
                queued = True
                mark = queue[0].timestamp
                if low is None or mark < low:
                    low = mark
            elif fetched_lag == 0:
                empty_since.pop(tp, None)  # idle: nothing on its way
            else:
                waiting.append((tp, group))
        # an empty partition with records on their way (or not fetched yet) holds the others
        # back; its idle time counts only while there are others to hold back
        holding = queued or self.shared.queued_elsewhere(self.name)
        for tp, group in waiting:
            if holding and now_ms - empty_since.setdefault(tp, now_ms) >= self.settings.idle_ms:
                continue  # nothing came for the idle time
            # what came last is a lower bound of what comes next
            mark = group.stream_time if group.stream_time >= 0 else BEFORE_ANY
            if low is None or mark < low:
                low = mark
        return self.shared.report(self.name, low, backlog, queued, now_ms)

    def forget(self) -> None:
        self.shared.forget(self.name)
        self._empty_since.clear()
