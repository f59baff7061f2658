"""What the runtime's threads tell their client about, as protocols: a thread holds its
listener, never the client (``StreamsClient`` implements them; in a worker process the link
to the client does)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from streaming.runtime.runner import StreamRunner


class StreamThreadListener(Protocol):
    """Receives a stream runner's state changes, assignment changes and its end."""

    def on_thread_state_change(self, thread: StreamRunner) -> None:
        """``thread.state`` changed (the client derives its own state from its threads')."""

    def on_assignment_change(self) -> None:
        """The thread's tasks changed (cached metadata and standby placement are stale)."""

    def on_thread_finished(self, thread: StreamRunner, exc: BaseException | None) -> None:
        """The thread ended, with the exception that ended it (None: a clean stop)."""


class GlobalThreadListener(Protocol):
    """Receives the failure of the global stream thread."""

    def on_global_thread_failure(self, exc: BaseException) -> None:
        """The global thread stopped on ``exc``; the client cannot go on without it."""


class StandbyHandover(Protocol):
    """Hands a standby task's state directory over to a stream thread that activates it."""

    def activating(self, tid: str) -> AbstractContextManager[None]:
        """Held while ``tid`` becomes active: the standby copy is closed and stays closed."""
