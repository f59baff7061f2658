"""The client side of worker processes, without a broker: numbered calls over a real socket
pair (a late answer is never taken for the next call's), reads only, the start-up checks."""

from __future__ import annotations

import threading
import time
from multiprocessing.connection import Connection

import pytest

from streaming import StreamsBuilder
from streaming.app import KafkaStreams, State
from streaming.errors import ConfigException, InvalidStateStoreException
from streaming.runtime import worker_process
from streaming.runtime.config import StreamsConfig
from streaming.runtime.worker_process import RemoteStore, WorkerBusy, WorkerProcess
from streaming.runtime.worker_protocol import WorkerError, portable


def _handle_with_peer(monkeypatch, answer) -> WorkerProcess:
    """A ``WorkerProcess`` whose calls go to ``answer(seq, op, args)`` on a thread."""
    monkeypatch.setattr(worker_process, "CALL_TIMEOUT_S", 0.3)
    ours, theirs = worker_process._pipe()
    peer = Connection(theirs.detach())

    def serve() -> None:
        while True:
            try:
                seq, op, args = peer.recv()
            except EOFError:
                return
            peer.send(answer(seq, op, args))

    threading.Thread(target=serve, daemon=True).start()
    handle = WorkerProcess.__new__(WorkerProcess)
    handle._calls, handle._call_lock, handle._call_seq = ours, threading.Lock(), 0
    handle.name = "w"
    handle._finished = threading.Event()
    return handle


def test_a_late_answer_is_skipped_not_taken_for_the_next_call(monkeypatch):
    def answer(seq, op, args):
        if op == "slow":
            time.sleep(0.6)
        return (seq, "ok", (op, args))

    handle = _handle_with_peer(monkeypatch, answer)
    with pytest.raises(WorkerBusy, match="did not answer slow"):
        handle.call("slow", "k1")
    time.sleep(0.5)  # the late answer arrives meanwhile
    assert handle.call("store", "k2") == ("store", ("k2",))
    assert isinstance(WorkerBusy("x"), InvalidStateStoreException)  # a 503 for the server


def test_errors_come_back_as_the_workers_exception(monkeypatch):
    handle = _handle_with_peer(monkeypatch, lambda seq, op, args: (seq, "error", KeyError(op)))
    with pytest.raises(KeyError, match="status"):
        handle.call("status")


def test_a_dead_worker_is_not_running(monkeypatch):
    handle = _handle_with_peer(monkeypatch, lambda seq, op, args: (seq, "ok", None))
    handle._calls.close()
    with pytest.raises(InvalidStateStoreException, match="not running"):
        handle.call("status")


def test_remote_stores_offer_reads_only(monkeypatch):
    handle = _handle_with_peer(monkeypatch, lambda seq, op, args: (seq, "ok", args))
    store = RemoteStore(handle, "counts", 3)
    assert store.get("k") == ("counts", 3, "get", ("k",))
    for method in ("put", "delete", "close", "_wrapped"):
        with pytest.raises(AttributeError):
            getattr(store, method)


def test_unpicklable_exceptions_travel_as_their_text():
    class Odd(Exception):
        def __init__(self, a, b):
            super().__init__(f"{a}/{b}")

    sent = portable(Odd(1, 2))
    assert isinstance(sent, WorkerError) and str(sent) == "Odd: 1/2"
    plain = ValueError("fine")
    assert portable(plain) is plain


def test_stream_workers_setting():
    base = {"application.id": "a", "bootstrap.servers": "localhost:1"}
    assert StreamsConfig.from_mapping({**base, "num.stream.threads": 2}).worker_processes
    assert not StreamsConfig.from_mapping(base).worker_processes
    threads = {**base, "num.stream.threads": 2, "stream.workers": "threads"}
    assert not StreamsConfig.from_mapping(threads).worker_processes
    with pytest.raises(ConfigException, match=r"stream\.workers: use one of processes, threads"):
        StreamsConfig.from_mapping({**base, "stream.workers": "fork"})


def test_a_topology_the_workers_cannot_get_fails_start_with_the_fix(tmp_path):
    lock = threading.Lock()
    builder = StreamsBuilder()
    builder.stream("in").foreach(lambda k, v: lock)  # a lock cannot be pickled
    app = KafkaStreams(
        builder.build(),
        {
            "application.id": "unpicklable",
            "bootstrap.servers": "localhost:1",
            "num.stream.threads": 2,
            "state.dir": str(tmp_path),
        },
    )
    with pytest.raises(ValueError, match=r"set stream\.workers=threads"):
        app.start()
    assert app.state is State.CREATED and app.workers == []
