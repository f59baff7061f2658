"""Which local stores answer a read of a store name (Kafka's ``QueryableStoreProvider``
over ``StreamThreadStateStoreProvider``s): the running tasks' stores of every stream
runner of one client, ordered by partition. ``KafkaStreams.store``, a worker process's
answers and the HTTP query service all read through it."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from streaming.runtime.runner import PartitionStore, StreamRunner


class StoreProvider:
    """The stores of the running local tasks, found through the client's runners."""

    def __init__(
        self,
        runners: Callable[[], Iterable[StreamRunner]],
        require_running: Callable[[], None],
    ) -> None:
        self._runners = runners
        self._require_running = require_running

    def partition_stores(self, name: str) -> list[PartitionStore]:
        """Store ``name`` of every running local task, by partition: the query server pages
        scans over these, reading a bounded chunk per lock hold so that a scan never blocks
        processing for long."""
        self._require_running()
        out = [entry for runner in self._runners() for entry in runner.partition_stores(name)]
        out.sort(key=lambda entry: entry.partition)
        return out

    def stores(self, name: str) -> list[tuple[object, object]]:
        """(lock, store) of every running local task of ``name``."""
        return [(entry.lock, entry.store) for entry in self.partition_stores(name)]
