"""A worker process: one stream thread of a ``KafkaStreams`` client in its own interpreter.

CPython runs one thread's bytecode at a time, so ``num.stream.threads = N`` threads share a
core; with ``stream.workers = processes`` (the default) the client starts N of these
instead (``python -m streaming.runtime.worker <calls fd> <events fd>``, started by
``worker_process.WorkerProcess``). Each builds the client's topology and config again
(sent with cloudpickle, so lambdas travel by value) and runs exactly what a stream thread
of the client would: the same process id, its own thread index (so its consumer is the
client's static member ``<n>``, its transactional id ``<app>-<process>-<n>`` and its
task directories the client's), under the client's state-directory lock.

Two connections to the client:

- *calls* (client -> worker, numbered, one answer each): ``status``, ``partitions`` (the
  running tasks of a store), ``store`` (one read of one task's store) and ``page`` (a query
  server page of one task's store), reads done under the stream thread's lock, waiting for
  it at most ``LOCK_WAIT_S``;
- *events* (worker -> client): the stream thread's state changes, assignment changes and
  its end, and the ``activating`` handshake that hands a standby task's state directory
  over from the client's standby updater.

SIGTERM closes the worker cleanly (commit, checkpoint, leave the group); losing the client
(its end of *calls* closes: it was killed) ends the worker at once, as if it had been
killed with it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import signal
import sys
import threading
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from streaming.errors import InvalidStateStoreException

if TYPE_CHECKING:
    from streaming.runtime.app import KafkaStreams
    from streaming.runtime.thread import StreamThread

log = logging.getLogger(__name__)

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


class _BoundedLock:
    """The stream thread's lock, or "try again" after ``LOCK_WAIT_S`` without it."""

    def __init__(self, lock: Any) -> None:
        self._lock = lock

    def __enter__(self) -> None:
        if not self._lock.acquire(timeout=LOCK_WAIT_S):
            raise InvalidStateStoreException(
                f"the stream thread held its tasks for over {LOCK_WAIT_S:.0f} s (a "
                "rebalance?); try again"
            )

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def _partition_store(app: KafkaStreams, name: str, partition: int) -> tuple[Any, Any]:
    """(lock, store) of the running task of ``partition`` of store ``name``."""

    for p, lock, store in app._local_partition_stores(name):
        if p == partition:
            return lock, store
    raise InvalidStateStoreException(
        f"partition {partition} of store {name} is no longer served by this worker"
    )


def store_call(app: KafkaStreams, name: str, partition: int, method: str, args: tuple) -> Any:
    """``method(*args)`` (a read) on the store ``name`` of the task of ``partition``."""
    if method not in READS:
        raise AttributeError(f"{method} is not a store read")
    lock, store = _partition_store(app, name, partition)
    with _BoundedLock(lock):
        result = getattr(store, method)(*args)
        return list(result) if hasattr(result, "__next__") else result


def store_page(app: KafkaStreams, name: str, partition: int, *args: Any) -> Any:
    """The query server's ``read_page`` of one task's store, read here in chunks."""
    from streaming.query.service import read_page

    lock, store = _partition_store(app, name, partition)
    return read_page(_BoundedLock(lock), store, *args)


class ClientLink:
    """The worker's side of the events connection: the stream thread's listener."""

    def __init__(self, app: KafkaStreams, events: Connection) -> None:
        self.app = app
        self._events = events
        self._lock = threading.Lock()

    def _send(self, *message: Any) -> None:
        with self._lock, contextlib.suppress(OSError):
            self._events.send(message)

    def on_thread_state_change(self, thread: StreamThread) -> None:
        self.app.on_thread_state_change(thread)
        self._send("state", thread.state)

    def on_assignment_change(self) -> None:
        self.app.on_assignment_change()
        self._send("assignment")

    def on_thread_finished(self, thread: StreamThread, exc: BaseException | None) -> None:
        self._send("finished", None if exc is None else portable(exc))

    @contextlib.contextmanager
    def activating(self, tid: str) -> Iterator[None]:
        """Held while the stream thread turns ``tid`` into an active task: the client's
        standby updater closes its copy first and keeps it closed until this ends."""
        with self._lock:
            self._events.send(("activating", tid))
            kind, error = self._events.recv()
        if kind == "error":
            raise error
        try:
            yield
        finally:
            self._send("activated", tid)


class _Stop(Exception):
    """SIGTERM arrived while the worker waited for a call."""


class _Signals:
    """SIGTERM: stop at the next opportunity (at once while waiting for a call)."""

    def __init__(self) -> None:
        self.stop = False
        self.waiting = False
        signal.signal(signal.SIGTERM, self._on_term)

    def _on_term(self, _signum: int, _frame: Any) -> None:
        self.stop = True
        if self.waiting:
            raise _Stop


def _answer(app: KafkaStreams, op: str, args: tuple) -> Any:
    if op == "status":
        return [thread.status() for thread in list(app.threads)]
    if op == "partitions":
        return [p for p, _lock, _store in app._local_partition_stores(*args)]
    if op == "store":
        return store_call(app, *args)
    if op == "page":
        return store_page(app, *args)
    raise ValueError(f"unknown call {op!r}")


def serve(app: KafkaStreams, calls: Connection, signals: _Signals) -> None:
    """Answer the client's calls until SIGTERM (then close cleanly) or until the client is
    gone (then end at once)."""
    while not signals.stop:
        try:
            signals.waiting = True
            if signals.stop:
                break
            seq, op, args = calls.recv()
        except _Stop:
            break
        except (EOFError, OSError):
            log.error("worker %s: the client process is gone; stopping at once", os.getpid())
            os._exit(1)
        finally:
            signals.waiting = False
        try:
            reply: tuple[int, str, Any] = (seq, "ok", _answer(app, op, args))
        except Exception as exc:
            reply = (seq, "error", portable(exc))
        try:
            calls.send(reply)
        except Exception as exc:  # an answer that cannot be pickled
            with contextlib.suppress(Exception):
                calls.send((seq, "error", WorkerError(f"the answer could not be sent: {exc}")))
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # closing already (SIGKILL still ends it)
    app.close()


def main(argv: list[str]) -> int:
    calls = Connection(int(argv[1]))
    events = Connection(int(argv[2]))
    signals = _Signals()  # a SIGTERM while starting is honoured once started
    setup = calls.recv()
    logging.basicConfig(
        level=setup["log_level"],
        format=f"%(asctime)s worker-{setup['index']} %(name)s %(levelname)s %(message)s",
    )
    import cloudpickle

    from streaming.runtime.app import KafkaStreams

    try:
        topology, originals = cloudpickle.loads(setup["payload"])
        app = KafkaStreams(topology, originals)
        link = ClientLink(app, events)
        try:
            go = calls.recv()  # the client is set up
        except (EOFError, OSError):
            return 1  # it failed to start, or is gone
        app.start_worker(
            index=setup["index"],
            process_id=go["process_id"],
            link=link,
            alignment_table=go.get("alignment_table"),
        )
    except BaseException as exc:
        log.exception("worker %s failed to start", setup["index"])
        with contextlib.suppress(OSError):
            events.send(("finished", portable(exc)))
        return 1
    serve(app, calls, signals)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
