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
old; live records are not). A partition with nothing queued holds the others back only
while records are on their way (or it was not read yet), and for at most
``event.time.alignment.idle.ms`` once others wait for it, as Flink's ``withIdleness``: idle
and empty partitions never block for long.

The stream threads of one client share one ``EventTimeAlignment``; each reports the low
watermark of its own source partitions once per processing pass. Worker processes share
theirs through an ``AlignmentTable``, a file of the client's state directory they all map.
The other instances of the application count as one more report, ``PEERS``, that the
client's ``AlignmentExchange`` keeps current (``runtime.alignment_exchange``).

What a thread reports bounds what it will still append to the repartition topics, so with
other producers aligning with it (exactly-once, where every record's delivery is reported)
it reports at most the oldest timestamp of its records not acknowledged yet
(``runtime.in_flight``): records already processed may wait in the producer while the
others append later event times first.
"""

from __future__ import annotations

import dataclasses
import mmap
import struct
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streaming.runtime.partition_group import TIMESTAMP

if TYPE_CHECKING:
    from streaming.runtime.partition_group import PartitionGroup

TopicPartition = tuple[str, int]

#: the low watermark of a partition that has records on their way but none fetched yet
BEFORE_ANY = -(2**63)


#: the drift bound of a topology whose windows and joins have no grace that calls for a wider
#: one (or that has none)
DEFAULT_MAX_DRIFT_MS = 10_000


@dataclass(frozen=True)
class AlignmentSettings:
    """``event.time.alignment.*``: drift bound (negative: off), backlog bound, idleness,
    whether the instances align with each other."""

    #: None: not set, derived from the topology (``for_grace``)
    max_drift_ms: int | None = None
    lag_records: int = 1_000
    lag_ms: int = 60_000
    idle_ms: int = 10_000
    #: align with the other instances of the application too (runtime.alignment_exchange;
    #: off by default: an instance in a long rebalance or a broker outage holds the others)
    across_instances: bool = False

    @property
    def enabled(self) -> bool:
        return self.max_drift_ms is None or self.max_drift_ms >= 0

    @property
    def drift_ms(self) -> int:
        return DEFAULT_MAX_DRIFT_MS if self.max_drift_ms is None else self.max_drift_ms

    def for_grace(self, smallest_grace_ms: int | None) -> AlignmentSettings:
        """These settings with the drift decided: where it is not set, a quarter of the
        smallest grace of the topology's windows and joins, and at least the default.

        The threads pace each other by acknowledged records, so a worker goes at most one
        drift further per round trip of its producer: a drift far inside the grace costs a
        backlog its speed and buys nothing (a 2-hour grace, 10 s of drift: a second worker
        made a sparse backlog 2.6 times slower than one)."""
        if self.max_drift_ms is not None:
            return self
        drift = DEFAULT_MAX_DRIFT_MS
        if smallest_grace_ms is not None:
            drift = max(drift, smallest_grace_ms // 4)
        return dataclasses.replace(self, max_drift_ms=drift)

    def behind(self, low: int | None, backlog: int, now_ms: int) -> bool:
        """Whether sources with this low watermark and backlog are behind: then they align."""
        return (low is not None and low < now_ms - self.lag_ms) or backlog > self.lag_records


@dataclass
class AlignmentReport:
    """What one stream thread (or, combined, one instance) reports: its low watermark (None:
    nothing holds the others back), its source backlog, whether it has records queued."""

    low: int | None
    backlog: int
    queued: bool


def combine_reports(reports: list[AlignmentReport]) -> AlignmentReport | None:
    """Several reports as one (None: there are none): the lowest watermark, the summed
    backlog, whether any has records queued."""
    if not reports:
        return None
    lows = [r.low for r in reports if r.low is not None]
    return AlignmentReport(
        min(lows) if lows else None,
        sum(r.backlog for r in reports),
        any(r.queued for r in reports),
    )


_SLOT = struct.Struct("<qqqq")  # low (NO_LOW: none), backlog, queued, updated (epoch ms)
NO_LOW = 2**63 - 1
#: slots in a table: one per worker (a worker with a higher thread index aligns its own
#: partitions), the last one the other instances' combined report
TABLE_SLOTS = 64
#: the slot, or the key in memory, of the other instances' combined report
PEERS_SLOT = TABLE_SLOTS - 1
PEERS = "peers"
#: the table's file name in the client's state directory
ALIGNMENT_TABLE = "event-time-alignment"
#: a slot not updated for this long belongs to a worker that ended without clearing it
STALE_MS = 30_000


class AlignmentTable:
    """The reports of a client's worker processes: one slot per stream thread index in a
    small file of the client's state directory that the client creates and each worker
    maps (a slot is rewritten whole on every report; a reader that catches one mid-write
    sees a mix for one processing pass)."""

    def __init__(self, path: str | Path, *, create: bool = False) -> None:
        path = Path(path)
        size = TABLE_SLOTS * _SLOT.size
        if create:
            path.write_bytes(bytes(size))
        with open(path, "r+b") as f:
            self._map = mmap.mmap(f.fileno(), size)
        self.path = path

    def write(self, slot: int, report: AlignmentReport | None, now_ms: int) -> None:
        """Set (None: clear) the report of thread slot ``slot``."""
        if not 0 <= slot < TABLE_SLOTS:
            return
        data = (
            bytes(_SLOT.size)
            if report is None
            else _SLOT.pack(
                NO_LOW if report.low is None else report.low,
                report.backlog,
                int(report.queued),
                now_ms,
            )
        )
        offset = slot * _SLOT.size
        self._map[offset : offset + _SLOT.size] = data

    def read(self, now_ms: int) -> dict[int, AlignmentReport]:
        """The current (not stale) reports by slot."""
        out = {}
        for slot in range(TABLE_SLOTS):
            low, backlog, queued, updated = _SLOT.unpack_from(self._map, slot * _SLOT.size)
            if updated and now_ms - updated <= STALE_MS:
                out[slot] = AlignmentReport(None if low == NO_LOW else low, backlog, bool(queued))
        return out


class EventTimeAlignment:
    """The low watermarks of one client's stream threads (in this process, or in its worker
    processes through an ``AlignmentTable``), and the event time up to which their source
    tasks may process now."""

    def __init__(self, settings: AlignmentSettings, table: AlignmentTable | None = None) -> None:
        self.settings = settings
        self.table = table
        self._reports: dict[Any, AlignmentReport] = {}
        self._lock = threading.Lock()

    def member(self, name: str, slot: int) -> ThreadAlignment:
        """The handle stream thread ``name`` (slot: its index - 1) reports through."""
        return ThreadAlignment(self, name, slot)

    def _exchange(
        self, key: Any, report: AlignmentReport | None, now_ms: int
    ) -> dict[Any, AlignmentReport]:
        """Publish (None: withdraw) a thread's report; everyone's current reports."""
        with self._lock:
            if self.table is not None:
                self.table.write(key, report, now_ms)
                return self.table.read(now_ms)
            if report is None:
                self._reports.pop(key, None)
            else:
                self._reports[key] = report
            return dict(self._reports)

    def report(
        self,
        key: Any,
        low: int | None,
        backlog: int,
        queued: bool,
        now_ms: int,
        in_flight: int | None = None,
    ) -> tuple[int | None, bool]:
        """Record a thread's low watermark (None: no partition holds the others back), its
        source backlog and whether it has source records queued; the event time its tasks
        may process up to (None: no bound), and whether another thread has source records
        queued.

        ``in_flight``: the oldest timestamp of the records the thread wrote to the
        repartition topics that are not acknowledged yet. The others see the lower of it
        and ``low``: what they append must not pass what this thread still appends. The
        thread's own bound counts ``low`` only (its producer appends its records in the
        order it wrote them)."""
        published = (
            low if in_flight is None or (low is not None and low <= in_flight) else in_flight
        )
        reports = self._exchange(key, AlignmentReport(published, backlog, queued), now_ms)
        queued_elsewhere = any(r.queued for k, r in reports.items() if k != key)
        marks = (low if k == key else r.low for k, r in reports.items())
        lows = [mark for mark in marks if mark is not None]
        if not lows:
            return None, queued_elsewhere
        low = min(lows)
        if not self.settings.behind(low, sum(r.backlog for r in reports.values()), now_ms):
            return None, queued_elsewhere
        return (low if low == BEFORE_ANY else low + self.settings.drift_ms), queued_elsewhere

    def forget(self, key: Any, now_ms: int) -> None:
        """A thread ended: its partitions no longer hold anyone back."""
        self._exchange(key, None, now_ms)

    @property
    def _peers_key(self) -> Any:
        return PEERS_SLOT if self.table is not None else PEERS

    def local_summary(self, now_ms: int) -> AlignmentReport | None:
        """This client's threads as one report (None: none reports): the lowest watermark,
        the summed backlog, whether any has source records queued."""
        with self._lock:
            current = self.table.read(now_ms) if self.table is not None else dict(self._reports)
        return combine_reports([r for k, r in current.items() if k != self._peers_key])

    def set_peers(self, report: AlignmentReport | None, now_ms: int) -> None:
        """The other instances' combined report (None: none holds this client back)."""
        self._exchange(self._peers_key, report, now_ms)


class ThreadAlignment:
    """One stream thread's view: computes its low watermark from its source partitions."""

    def __init__(self, shared: EventTimeAlignment, name: str, slot: int) -> None:
        self.shared = shared
        self.name = name
        #: what the thread reports under: its slot in the client's table (past the table's
        #: thread slots: none, its partitions align on their own), else its name
        self.key: Any = (slot if slot < PEERS_SLOT else -1) if shared.table is not None else name
        self.settings = shared.settings
        self._queued_elsewhere = False
        #: the oldest timestamp of the thread's records written to the repartition topics
        #: and not acknowledged yet (None: not kept: no other producer aligns with it)
        self.in_flight: Callable[[], int | None] | None = None
        #: since when (wall clock ms) each source partition has had nothing queued
        self._empty_since: dict[TopicPartition, int] = {}
        #: whether the last ``limit`` bounded the thread's tasks: the client is behind and
        #: the threads pace each other, so what lets one go on is another's next report
        self.aligning = False

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
                mark = queue[0][TIMESTAMP]
                if low is None or mark < low:
                    low = mark
            elif fetched_lag == 0:
                empty_since.pop(tp, None)  # idle: nothing on its way
            else:
                waiting.append((tp, group))
        # an empty partition with records on their way (or not fetched yet) holds the others
        # back; its idle time counts only while there are others to hold back
        holding = queued or self._queued_elsewhere
        for tp, group in waiting:
            if holding and now_ms - empty_since.setdefault(tp, now_ms) >= self.settings.idle_ms:
                continue  # nothing came for the idle time
            # what came last is a lower bound of what comes next
            mark = group.stream_time if group.stream_time >= 0 else BEFORE_ANY
            if low is None or mark < low:
                low = mark
        in_flight = self.in_flight() if self.in_flight is not None else None
        until, self._queued_elsewhere = self.shared.report(
            self.key, low, backlog, queued, now_ms, in_flight
        )
        self.aligning = until is not None
        return until

    def hold(self) -> None:
        """Until this thread's next ``limit``: its partitions are not known yet (it starts,
        or a rebalance is under way), and the other threads wait as for a partition not read
        yet. Otherwise a thread kept running its partitions in the moments before another
        one, assigned the rest, reported them (the table ignores a worker that stopped
        reporting after ``STALE_MS``)."""
        self.shared.report(self.key, BEFORE_ANY, 0, False, int(time.time() * 1000))

    def forget(self) -> None:
        self.shared.forget(self.key, int(time.time() * 1000))
        self._empty_since.clear()
        self.aligning = False
