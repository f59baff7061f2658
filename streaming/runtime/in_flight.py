"""The timestamps of records a stream thread produced that are not acknowledged yet.

Under event-time alignment a thread's report bounds what it will still append to the
repartition topics. Records it already processed may still wait in the producer (batched,
or the process descheduled before they are sent), so its report is at most the oldest of
them: the others, bounded by the report, could otherwise append later event times first
and the tasks downstream see them out of order (``runtime.alignment``).
"""

from __future__ import annotations

import heapq


class InFlightTimestamps:
    """A multiset of timestamps with its minimum: a count per timestamp and a min-heap
    cleaned lazily (a timestamp whose count fell to zero leaves the heap when it surfaces)."""

    __slots__ = ("_counts", "_heap")

    def __init__(self) -> None:
        self._counts: dict[int, int] = {}
        self._heap: list[int] = []

    def add(self, timestamp: int) -> None:
        """A record with this timestamp was handed to the producer."""
        counts = self._counts
        n = counts.get(timestamp)
        if n is None:
            counts[timestamp] = 1
            heapq.heappush(self._heap, timestamp)
        else:
            counts[timestamp] = n + 1

    def done(self, timestamp: int) -> None:
        """The producer reported a record with this timestamp (acknowledged or failed);
        a timestamp not held is ignored."""
        counts = self._counts
        n = counts.get(timestamp)
        if n is None:
            return
        if n == 1:
            del counts[timestamp]
        else:
            counts[timestamp] = n - 1

    def low(self) -> int | None:
        """The smallest timestamp held (None: none)."""
        heap, counts = self._heap, self._counts
        while heap and heap[0] not in counts:
            heapq.heappop(heap)
        return heap[0] if heap else None

    def clear(self) -> None:
        """Nothing is in flight (the producer was flushed or replaced)."""
        self._counts.clear()
        self._heap.clear()

    def __len__(self) -> int:
        return sum(self._counts.values())
