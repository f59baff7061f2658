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
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from streaming.runtime import thread as thread_states
from streaming.runtime.metrics import ThreadMetrics, ThreadStatus
from streaming.runtime.queries import InvalidStateStoreException

if TYPE_CHECKING:
    from streaming.runtime.app import KafkaStreams

log = logging.getLogger(__name__)

#: how long one call to a worker may take before it counts as failed
CALL_TIMEOUT_S = 30.0


class WorkerDied(RuntimeError):
    """A worker process ended without being asked to (killed, or crashed)."""


def _pipe() -> tuple[Connection, socket.socket]:
    ours, theirs = socket.socketpair()
    return Connection(ours.detach()), theirs


class WorkerProcess:
    """One worker process: a stream thread of ``app`` with index ``index``."""

    def __init__(self, app: KafkaStreams, index: int, payload: bytes) -> None:
        self.app = app
        self.index = index
        self.name = f"{app.config.application_id}-StreamThread-{index}"
        self.state = thread_states.CREATED
        self.exception: BaseException | None = None
        self._calls, calls_child = _pipe()
        self._events, events_child = _pipe()
        self._call_lock = threading.Lock()
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
        self._calls.send(
            {
                "payload": payload,
                "index": index,
                "log_level": logging.getLogger().getEffectiveLevel(),
            }
        )

    def start(self) -> WorkerProcess:
        """Let the worker start its stream thread (the client is set up: internal topics
        exist, its process id is known)."""
        self._calls.send({"process_id": self.app.process_id})
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
        self._finished.wait(timeout)
        if self._finished.is_set():
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(1.0)

    def kill(self) -> None:
        """End a worker that was never started (the client failed to set itself up)."""
        self._stopping = True
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.wait()
        for conn in (self._calls, self._events):
            conn.close()
        self._finished.set()

    # -- calls ----------------------------------------------------------------------------

    def call(self, op: str, *args: Any) -> Any:
        """One call answered by the worker; its exception is raised here."""
        with self._call_lock:
            try:
                self._calls.send((op, args))
                if not self._calls.poll(CALL_TIMEOUT_S):
                    raise TimeoutError(f"{self.name} did not answer {op} in {CALL_TIMEOUT_S}s")
                kind, value = self._calls.recv()
            except (EOFError, OSError) as exc:
                raise InvalidStateStoreException(f"{self.name} is not running ({exc})") from None
        if kind == "error":
            raise value
        return value

    def status(self) -> ThreadStatus:
        """The worker's stream thread status (a dead one's when it cannot answer)."""
        if self.is_alive():
            with contextlib.suppress(Exception):
                statuses = self.call("status")
                if statuses:
                    return statuses[0]
        return ThreadStatus(
            name=self.name,
            state=self.state,
            alive=self.is_alive(),
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

    # -- events ---------------------------------------------------------------------------

    def _watch(self) -> None:
        """Follow the worker's events until it ends; then tell the client how it ended."""
        listener = self.app
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
                    standby = self.app.standby
                    if standby is not None:
                        handing_over = standby.activating(message[1])
                        handing_over.__enter__()
                    self._events.send(("ok",))
                elif kind == "activated" and handing_over is not None:
                    handing_over.__exit__(None, None, None)
                    handing_over = None
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


class RemoteStore:
    """A store of a task running in a worker process: each method call is one read there."""

    def __init__(self, worker: WorkerProcess, name: str, partition: int) -> None:
        self._worker = worker
        self._name = name
        self._partition = partition

    def __getattr__(self, method: str) -> Any:
        if method.startswith("_"):
            raise AttributeError(method)

        def read(*args: Any) -> Any:
            return self._worker.call("store", self._name, self._partition, method, args)

        return read
