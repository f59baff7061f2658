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

- *calls* (client -> worker, one answer each): ``status``, ``partitions`` (the running
  tasks of a store) and ``store`` (one read of one task's store, run under the stream
  thread's lock, iterators answered as lists);
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

if TYPE_CHECKING:
    from streaming.runtime.app import KafkaStreams
    from streaming.runtime.thread import StreamThread

log = logging.getLogger(__name__)


class WorkerError(RuntimeError):
    """A worker's failure whose own exception could not be sent to the client."""


def portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling, else a ``WorkerError`` with its type and message."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return WorkerError(f"{type(exc).__name__}: {exc}")


def store_call(app: KafkaStreams, name: str, partition: int, method: str, args: tuple) -> Any:
    """``method(*args)`` on the store ``name`` of the running task of ``partition``."""
    from streaming.runtime.queries import InvalidStateStoreException

    for _p, lock, store in app._local_partition_stores(name):
        if _p != partition:
            continue
        if method.startswith("_"):
            raise AttributeError(method)
        with lock:
            result = getattr(store, method)(*args)
            if hasattr(result, "__next__") or isinstance(result, (map, filter)):
                result = list(result)
        return result
    raise InvalidStateStoreException(
        f"partition {partition} of store {name} is no longer served by this worker"
    )


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
            self._events.recv()  # the standby copy is closed
        try:
            yield
        finally:
            self._send("activated", tid)


class _Stop(Exception):
    """SIGTERM arrived while the worker waited for a call."""


def serve(app: KafkaStreams, calls: Connection) -> None:
    """Answer the client's calls until SIGTERM (clean close) or the client is gone."""
    waiting = False
    stop = False

    def on_term(_signum: int, _frame: Any) -> None:
        nonlocal stop
        stop = True
        if waiting:
            raise _Stop

    signal.signal(signal.SIGTERM, on_term)
    while not stop:
        try:
            waiting = True
            message = calls.recv()
        except _Stop:
            break
        except (EOFError, OSError):
            log.error("worker %s: the client process is gone; stopping at once", os.getpid())
            os._exit(1)
        finally:
            waiting = False
        op, args = message
        try:
            if op == "status":
                result: Any = [thread.status() for thread in list(app.threads)]
            elif op == "partitions":
                result = [p for p, _lock, _store in app._local_partition_stores(*args)]
            elif op == "store":
                result = store_call(app, *args)
            else:
                raise ValueError(f"unknown call {op!r}")
            reply: tuple[str, Any] = ("ok", result)
        except BaseException as exc:
            reply = ("error", portable(exc))
        try:
            calls.send(reply)
        except (OSError, pickle.PicklingError, TypeError, AttributeError) as exc:
            calls.send(("error", WorkerError(f"the answer could not be sent: {exc}")))
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # closing already (SIGKILL still ends it)
    app.close()


def main(argv: list[str]) -> int:
    calls = Connection(int(argv[1]))
    events = Connection(int(argv[2]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the client; it decides
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
        app.start_worker(index=setup["index"], process_id=go["process_id"], link=link)
    except BaseException as exc:
        log.exception("worker %s failed to start", setup["index"])
        with contextlib.suppress(OSError):
            events.send(("finished", portable(exc)))
        return 1
    serve(app, calls)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
