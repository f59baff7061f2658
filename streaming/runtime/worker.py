"""A worker process: one stream thread of a client in its own interpreter.

CPython runs one thread's bytecode at a time, so ``num.stream.threads = N`` threads share a
core; with ``stream.workers = processes`` (the default) the client starts N of these
instead (``python -m streaming.runtime.worker <calls fd> <events fd>``, started by
``worker_process.WorkerProcess``). Each builds the client's services from its topology
and config again (``WorkerRuntime``; sent with cloudpickle, so lambdas travel by value) and
runs exactly what a stream thread of the client would: the same process id, its own thread index (so its consumer is the
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
import signal
import sys
import threading
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from streaming.errors import InvalidStateStoreException
from streaming.runtime.assignment import TopologyPlan
from streaming.runtime.client_log import client_logger
from streaming.runtime.config import StreamsConfig
from streaming.runtime.global_thread import GlobalStreamThread
from streaming.runtime.services import create_services
from streaming.runtime.store_pages import read_page
from streaming.runtime.store_provider import StoreProvider
from streaming.runtime.thread import StreamThread
from streaming.runtime.worker_protocol import LOCK_WAIT_S, READS, WorkerError, portable

if TYPE_CHECKING:
    from streaming.runtime.metrics import ThreadStatus
    from streaming.runtime.runner import StreamRunner

log = logging.getLogger(__name__)


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


def _partition_store(runtime: WorkerRuntime, name: str, partition: int) -> tuple[Any, Any]:
    """(lock, store) of the running task of ``partition`` of store ``name``."""

    for p, lock, store in runtime.store_provider.partition_stores(name):
        if p == partition:
            return lock, store
    raise InvalidStateStoreException(
        f"partition {partition} of store {name} is no longer served by this worker"
    )


def store_call(runtime: WorkerRuntime, name: str, partition: int, method: str, args: tuple) -> Any:
    """``method(*args)`` (a read) on the store ``name`` of the task of ``partition``."""
    if method not in READS:
        raise AttributeError(f"{method} is not a store read")
    lock, store = _partition_store(runtime, name, partition)
    with _BoundedLock(lock):
        result = getattr(store, method)(*args)
        return list(result) if hasattr(result, "__next__") else result


def store_page(runtime: WorkerRuntime, name: str, partition: int, *args: Any) -> Any:
    """The query server's ``read_page`` of one task's store, read here in chunks."""
    lock, store = _partition_store(runtime, name, partition)
    return read_page(_BoundedLock(lock), store, *args)


class WorkerRuntime:
    """The worker's side of one stream thread of a client: the client's services built again
    here (under the client's state-directory lock, with its process id), a copy of the
    global stores of its own, and the stream thread, which reports to the client."""

    def __init__(self, topology: Any, originals: dict[str, Any], index: int) -> None:
        self.topology = topology
        self.config = StreamsConfig.from_mapping(originals)
        self.plan = TopologyPlan(
            topology,
            self.config.application_id,
            window_additional_retention_ms=self.config.window_changelog_additional_retention_ms,
        )
        self.index = index
        self.thread: StreamThread | None = None
        self.global_thread: GlobalStreamThread | None = None
        self.store_provider = StoreProvider(self._runners, self._require_running)

    def start(self, process_id: str, link: ClientLink, alignment_table: str | None) -> None:
        """Build the services, bootstrap the global stores, start the stream thread."""
        services = create_services(
            self.config,
            self.topology,
            self.plan,
            client_logger=client_logger(),
            process_id=process_id,
            alignment_table=alignment_table if self.config.alignment.enabled else None,
            standby_handover=lambda: link,
        )
        if self.topology.global_stores:
            self.global_thread = GlobalStreamThread(services, f"global-worker-{self.index}", self)
            self.global_thread.bootstrap()
            services.global_stores.update(self.global_thread.stores)
            self.global_thread.start()
        self.thread = StreamThread.create(services, self.index, link)
        self.thread.start()

    def statuses(self) -> list[ThreadStatus]:
        return [runner.status() for runner in self._runners()]

    def on_global_thread_failure(self, exc: BaseException) -> None:
        """The stream thread cannot go on without its global stores: it stops (the client
        sees its worker end)."""
        log.error("worker %s: the global stream thread failed: %s", self.index, exc)
        if self.thread is not None:
            self.thread.shutdown()

    def close(self) -> None:
        """Stop the stream thread (commit, checkpoint, leave the group), then the global one."""
        for runner in (self.thread, self.global_thread):
            if runner is not None:
                runner.shutdown()
                runner.join()
        if self.global_thread is not None:
            self.global_thread.close()

    def _runners(self) -> list[StreamThread]:
        return [self.thread] if self.thread is not None else []

    def _require_running(self) -> None:
        if self.thread is None or not self.thread.is_alive():
            raise InvalidStateStoreException(f"worker {self.index}'s stream thread is not running")


class ClientLink:
    """The worker's side of the events connection: the stream thread's listener, and the
    standby handover (the client's standby updater answers)."""

    def __init__(self, events: Connection) -> None:
        self._events = events
        self._lock = threading.Lock()

    def _send(self, *message: Any) -> None:
        with self._lock, contextlib.suppress(OSError):
            self._events.send(message)

    def on_thread_state_change(self, thread: StreamRunner) -> None:
        self._send("state", thread.state)

    def on_assignment_change(self) -> None:
        self._send("assignment")

    def on_thread_finished(self, thread: StreamRunner, exc: BaseException | None) -> None:
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


def _answer(runtime: WorkerRuntime, op: str, args: tuple) -> Any:
    if op == "status":
        return runtime.statuses()
    if op == "partitions":
        return [entry.partition for entry in runtime.store_provider.partition_stores(*args)]
    if op == "store":
        return store_call(runtime, *args)
    if op == "page":
        return store_page(runtime, *args)
    raise ValueError(f"unknown call {op!r}")


def serve(runtime: WorkerRuntime, calls: Connection, signals: _Signals) -> None:
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
            reply: tuple[int, str, Any] = (seq, "ok", _answer(runtime, op, args))
        except Exception as exc:
            reply = (seq, "error", portable(exc))
        try:
            calls.send(reply)
        except Exception as exc:  # an answer that cannot be pickled
            with contextlib.suppress(Exception):
                calls.send((seq, "error", WorkerError(f"the answer could not be sent: {exc}")))
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # closing already (SIGKILL still ends it)
    runtime.close()


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

    try:
        topology, originals = cloudpickle.loads(setup["payload"])
        runtime = WorkerRuntime(topology, originals, setup["index"])
        link = ClientLink(events)
        try:
            go = calls.recv()  # the client is set up
        except (EOFError, OSError):
            return 1  # it failed to start, or is gone
        runtime.start(go["process_id"], link, go.get("alignment_table"))
    except BaseException as exc:
        log.exception("worker %s failed to start", setup["index"])
        with contextlib.suppress(OSError):
            events.send(("finished", portable(exc)))
        return 1
    serve(runtime, calls, signals)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
