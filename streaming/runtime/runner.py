"""What the client asks of whatever runs a stream thread: a ``StreamThread`` in this
process or a ``WorkerProcess`` running one in its own interpreter. The client treats both
alike through this protocol."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:
    from streaming.runtime.metrics import ThreadStatus


class PartitionStore(NamedTuple):
    """One running task's store: its partition, the lock reads hold (the owning stream
    thread's, or a no-op for a worker process, which locks on its side) and the store."""

    partition: int
    lock: Any
    store: Any


class StreamRunner(Protocol):
    """A stream thread, here or in a worker process."""

    name: str
    index: int
    state: str

    def is_alive(self) -> bool:
        """True until the stream thread has ended."""

    def shutdown(self) -> None:
        """Ask the stream thread to close (commit, checkpoint, leave the group)."""

    def join(self, timeout: float | None = None) -> None:
        """Wait for the stream thread's end, at most ``timeout`` seconds."""

    def status(self) -> ThreadStatus:
        """The stream thread's state, tasks and counters now."""

    def partition_stores(self, name: str) -> list[PartitionStore]:
        """Store ``name`` of every running task of the stream thread."""
