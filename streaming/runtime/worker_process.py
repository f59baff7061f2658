"""The client's handle of one worker process (``streaming.runtime.worker``).

It stands where a ``StreamThread`` stands in a client that runs threads: it has a ``name``,
the stream thread's last reported ``state``, ``is_alive()``, ``shutdown()`` / ``join()``
and ``status()``, and it tells the client's listener about state changes, assignment
changes and the worker's end (a worker that dies, e.g. killed, ends with
``WorkerDied``). Store reads go to the worker through ``RemoteStore``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from streaming.errors import InvalidStateStoreException
from streaming.runtime import thread as thread_states
from streaming.runtime.metrics import ThreadStatus
from streaming.runtime.runner import PartitionStore
from streaming.runtime.worker_protocol import READS, portable

if TYPE_CHECKING:
    from streaming.runtime.listeners import StandbyHandover, StreamThreadListener
    from streaming.runtime.services import ClientServices

log = logging.getLogger(__name__)

#: how long one call to a worker may take before it counts as failed
CALL_TIMEOUT_S = 30.0


class WorkerDied(RuntimeError):
    """A worker process ended without being asked to (killed, or crashed)."""


class WorkerBusy(InvalidStateStoreException):
    """A worker did not answer a call in time (its stream thread holds its tasks, e.g. in a
    rebalance): the call can be tried again."""


def _pipe() -> tuple[Connection, socket.socket]:
    ours, theirs = socket.socketpair()
    return Connection(ours.detach()), theirs


class WorkerProcess:
    """One worker process: stream thread ``index`` of a client, which hears of its state
    changes, assignment changes and end through ``listener``."""

    def __init__(
        self,
        application_id: str,
        index: int,
        payload: bytes,
        listener: StreamThreadListener,
        standby: Callable[[], StandbyHandover | None],
    ) -> None:
        self.listener = listener
        self._standby = standby
        self.index = index
        self.name = f"{application_id}-StreamThread-{index}"
        self.state = thread_states.CREATED
        self.exception: BaseException | None = None
        self._calls, calls_child = _pipe()
        self._events, events_child = _pipe()
        self._call_lock = threading.Lock()
        self._call_seq = 0
        self._finished = threading.Event()
        self._stopping = False
        env = dict(os.environ)
        # the worker imports what this process imports (the topology's functions by name)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        fds = (calls_child.fileno(), events_child.fileno())
        self.process = subprocess.Popen(
            [sys.executable, "-m", "streaming.runtime.worker", *map(str, fds)],
            pass_fds=fds,
            env=env,
            start_new_session=True,  # a Ctrl-C to the terminal reaches the client only
        )
        calls_child.close()
        events_child.close()
        self._monitor = threading.Thread(
            target=self._watch, name=f"{self.name}-monitor", daemon=True
        )
        # the worker loads its modules and the topology while the client sets itself up
        try:
            self._calls.send(
                {
                    "payload": payload,
                    "index": index,
                    "log_level": logging.getLogger().getEffectiveLevel(),
                }
            )
        except BaseException:
            self.kill()
            raise

    def start(self, services: ClientServices) -> WorkerProcess:
        """Let the worker start its stream thread once the client is set up (internal topics
        exist, its process id is known): it runs under the client's process id, aligned with
        the client's other workers through its alignment table."""
        table = services.alignment.table
        self._calls.send(
            {
                "process_id": services.process_id,
                "alignment_table": None if table is None else str(table.path),
            }
        )
        self._monitor.start()
        return self

    # -- the thread-like surface ----------------------------------------------------------

    def is_alive(self) -> bool:
        return not self._finished.is_set()

    def shutdown(self) -> None:
        """Ask the worker to close (commit, checkpoint, leave the group) and exit."""
        self._stopping = True
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGTERM)

    def join(self, timeout: float | None = None) -> None:
        """Wait until the worker has ended and its end was reported."""
        self._finished.wait(timeout)

    def kill(self) -> None:
        """End a worker that was never started (the client failed to set itself up)."""
        self._stopping = True
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.wait()
        for conn in (self._calls, self._events):
            with contextlib.suppress(OSError):
                conn.close()
        self._finished.set()

    # -- calls ----------------------------------------------------------------------------

    def call(self, op: str, *args: Any) -> Any:
        """One call answered by the worker; its exception is raised here. Calls are
        numbered: the late answer to a call that timed out is skipped, never taken for the
        answer to the next one."""
        with self._call_lock:
            self._call_seq += 1
            seq = self._call_seq
            deadline = time.monotonic() + CALL_TIMEOUT_S
            try:
                self._calls.send((seq, op, args))
                while True:
                    if not self._calls.poll(max(0.0, deadline - time.monotonic())):
                        raise WorkerBusy(f"{self.name} did not answer {op} in {CALL_TIMEOUT_S}s")
                    answered, kind, value = self._calls.recv()
                    if answered == seq:
                        break
            except (EOFError, OSError) as exc:
                raise InvalidStateStoreException(f"{self.name} is not running ({exc})") from None
        if kind == "error":
            raise value
        return value

    def status(self) -> ThreadStatus:
        """The worker's stream thread status (a dead one's when it cannot answer)."""
        if self.is_alive():
            try:
                statuses = self.call("status")
                if statuses:
                    return statuses[0]
            except InvalidStateStoreException as exc:
                log.debug("no status from %s: %s", self.name, exc)
        return ThreadStatus.unknown(self.name, self.state, alive=self.is_alive())

    def partition_stores(self, name: str) -> list[PartitionStore]:
        """Store ``name`` of every running task of the worker's stream thread, each read a
        call there (the worker takes its stream thread's lock); none once it has ended."""
        try:
            partitions = self.call("partitions", name)
        except InvalidStateStoreException:
            if self.is_alive():
                raise
            return []  # a worker that ended (its replacement follows)
        return [
            PartitionStore(p, contextlib.nullcontext(), RemoteStore(self, name, p))
            for p in partitions
        ]

    # -- events ---------------------------------------------------------------------------

    def _watch(self) -> None:
        """Follow the worker's events until it ends; then tell the client how it ended."""
        listener = self.listener
        handing_over: Any = None
        try:
            while True:
                try:
                    message = self._events.recv()
                except (EOFError, OSError):
                    break
                kind = message[0]
                if kind == "state":
                    self.state = message[1]
                    listener.on_thread_state_change(self)
                elif kind == "assignment":
                    listener.on_assignment_change()
                elif kind == "finished":
                    # the stream thread ended: the worker closes, and its end is reported then
                    self.exception = message[1]
                    if self.exception is not None and not self._stopping:
                        with contextlib.suppress(ProcessLookupError):
                            self.process.send_signal(signal.SIGTERM)
                elif kind == "activating":
                    handing_over = self._hand_over(message[1])
                elif kind == "activated" and handing_over is not None:
                    handing_over.__exit__(None, None, None)
                    handing_over = None
        except BaseException as exc:
            # the worker's stream thread may wait for an answer: it must not wait forever
            log.exception("Following %s failed; stopping it", self.name)
            self.exception = self.exception or exc
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
        finally:
            if handing_over is not None:
                handing_over.__exit__(None, None, None)
            code = self.process.wait()
            if self.exception is None and not self._stopping:
                self.exception = WorkerDied(
                    f"worker process {self.process.pid} of {self.name} ended with "
                    + (f"signal {-code}" if code < 0 else f"exit code {code}")
                )
            self.state = thread_states.DEAD
            self._finished.set()
            for conn in (self._calls, self._events):
                with contextlib.suppress(OSError):
                    conn.close()
            listener.on_thread_finished(self, self.exception)

    def _hand_over(self, tid: str) -> Any:
        """The worker activates ``tid``: close the client's standby copy of it and keep it
        closed until the worker says ``activated``; answer in every case (the worker's
        stream thread waits for it), with the error when the handover failed."""
        standby = self._standby()
        held = None
        answer: tuple[str, Any] = ("ok", None)
        try:
            if standby is not None:
                held = standby.activating(tid)
                held.__enter__()
        except Exception as exc:
            log.exception("Handing standby task %s over to %s failed", tid, self.name)
            held = None
            answer = ("error", portable(exc))
        self._events.send(answer)
        return held


class RemoteStore:
    """A store of a task running in a worker process: each read method call (``READS``) is
    one call there, iterators answered as lists."""

    def __init__(self, worker: WorkerProcess, name: str, partition: int) -> None:
        self._worker = worker
        self._name = name
        self._partition = partition

    def __getattr__(self, method: str) -> Any:
        if method not in READS:
            raise AttributeError(method)

        def read(*args: Any) -> Any:
            return self._worker.call("store", self._name, self._partition, method, args)

        return read

    def read_page(
        self, kind: str, bounds: tuple, after: bytes | None, limit: int, scan_chunk: int
    ) -> tuple[list[dict[str, Any]], bool, bytes | None]:
        """The query server's page of this partition, read in chunks in the worker."""
        return self._worker.call(
            "page", self._name, self._partition, kind, bounds, after, limit, scan_chunk
        )
