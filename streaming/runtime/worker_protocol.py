"""What the client and its worker processes share: the store reads a client may ask a
worker for, how long a read waits for the stream thread, and exceptions that survive the
trip between them (``streaming.runtime.worker`` answers, ``worker_process`` asks)."""

from __future__ import annotations

import pickle

#: the read methods of the stores that the client may call (``queries`` views use these)
READS = frozenset(
    {
        "get",
        "range",
        "reverse_range",
        "all",
        "reverse_all",
        "prefix_scan",
        "approximate_num_entries",
        "fetch",
        "backward_fetch",
        "fetch_all",
        "backward_fetch_all",
        "backward_all",
        "find_sessions",
        "backward_find_sessions",
        "fetch_session",
    }
)

#: how long a read waits for the stream thread's lock (held through a rebalance) before
#: it is answered with "try again"; shorter than the client's call timeout
LOCK_WAIT_S = 10.0


class WorkerError(RuntimeError):
    """A worker's failure whose own exception could not be sent to the client."""


def portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling, else a ``WorkerError`` with its type and message."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return WorkerError(f"{type(exc).__name__}: {exc}")
