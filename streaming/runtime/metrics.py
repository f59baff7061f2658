"""Counters of a running application, read by ``KafkaStreams.metrics()``.

Each stream thread owns a ``ThreadMetrics`` it updates without locks (single writer); its
tasks count the records their processors drop into it (a late record: the windowed
aggregation reports it on the task's dropped-records sensor).
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ThreadMetrics:
    """What one stream thread counts."""

    processed: int = 0
    commits: int = 0
    commit_latency_total_ms: float = 0.0
    commit_latency_max_ms: float = 0.0
    dropped_records: int = 0
    late_records_dropped: int = 0
    punctuations: int = 0
    rebalances: int = 0
    aborted_transactions: int = 0
    restored_records: int = 0
    producer_replacements: int = 0
    #: processing rounds in which a source task waited for slower partitions (alignment)
    alignment_waits: int = 0
    started: float = field(default_factory=time.monotonic)
    _samples: collections.deque = field(default_factory=lambda: collections.deque(maxlen=32))

    def record_commit(self, latency_ms: float) -> None:
        self.commits += 1
        self.commit_latency_total_ms += latency_ms
        if latency_ms > self.commit_latency_max_ms:
            self.commit_latency_max_ms = latency_ms

    def sample(self) -> None:
        """Remember (time, processed) for the process rate (called once per loop at most 4/s)."""
        now = time.monotonic()
        samples = self._samples
        if not samples or now - samples[-1][0] >= 0.25:
            samples.append((now, self.processed))

    def process_rate(self, window_s: float = 5.0) -> float:
        """Records per second over roughly the last ``window_s`` seconds."""
        samples = list(self._samples)
        if len(samples) < 2:
            return 0.0
        now_t, now_n = samples[-1]
        for t, n in samples:
            if now_t - t <= window_s:
                return (now_n - n) / (now_t - t) if now_t > t else 0.0
        return 0.0


@dataclass(frozen=True)
class ThreadStatus:
    """A stream thread's state, tasks and counters at one moment: plain data, so that a
    worker process can send its thread's to the client (``KafkaStreams.metrics()`` sums
    these)."""

    name: str
    state: str
    alive: bool
    #: task id -> task state
    tasks: dict[str, str]
    assigned: list[tuple[str, int]]
    metrics: ThreadMetrics
    process_rate: float
    lag: dict[tuple[str, int], int]
    #: changelog partition ("topic-partition") -> restore progress
    restore: dict[str, dict[str, Any]]
    records_sent: int
    stalled: bool
    stalled_seconds: float
    stall_reason: str | None
    stalls_total: int

    @staticmethod
    def unknown(name: str, state: str, *, alive: bool) -> ThreadStatus:
        """The status of a thread that cannot tell (a worker process ending or ended)."""
        return ThreadStatus(
            name=name,
            state=state,
            alive=alive,
            tasks={},
            assigned=[],
            metrics=ThreadMetrics(),
            process_rate=0.0,
            lag={},
            restore={},
            records_sent=0,
            stalled=False,
            stalled_seconds=0.0,
            stall_reason=None,
            stalls_total=0,
        )
