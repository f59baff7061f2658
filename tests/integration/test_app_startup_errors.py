"""``KafkaStreams.start()`` in an environment it cannot use fails fast and says what to fix:
unreachable ``bootstrap.servers`` (within ``bootstrap.timeout.ms``, not a raw ``_TRANSPORT``
after 30 s), a broker that is reachable but slow (not misreported), and a ``state.dir``
that cannot be created (checked before any broker is contacted)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_app_support import unique

from streaming import StreamsBuilder, serdes
from streaming.app import KafkaStreams, State
from streaming.errors import ConfigException
from streaming.runtime.bootstrap_probe import ClusterUnreachableException
from streaming.runtime.state_directory import StateDirectory
from streaming.runtime.topics import MissingSinkTopicError

REPO = Path(__file__).resolve().parents[2]


def _topology(source: str, sink: str):
    builder = StreamsBuilder()
    builder.stream(source, key_serde=serdes.String(), value_serde=serdes.String()).to(sink)
    return builder.build()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_bootstrap_servers_fail_start_within_the_bound(tmp_path):
    address = f"127.0.0.1:{_closed_port()}"
    app_id = unique("unreachable")
    app = KafkaStreams(
        _topology("in", "out"),
        {
            "application.id": app_id,
            "bootstrap.servers": address,
            "state.dir": str(tmp_path),
            "bootstrap.timeout.ms": 2000,
        },
    )
    started = time.monotonic()
    with pytest.raises(ClusterUnreachableException) as info:
        app.start()
    elapsed = time.monotonic() - started
    assert elapsed < 10, elapsed
    message = str(info.value)
    assert f"bootstrap.servers={address!r}" in message
    assert f"{address}: connection refused" in message
    assert "_TRANSPORT" not in message
    # nothing is left half-started: the state directory is free again, close() works
    assert app.state is State.CREATED
    other = StateDirectory(tmp_path, app_id)
    other.lock()
    other.unlock()
    assert app.close(timeout=10)


def test_cli_unreachable_bootstrap_servers_exit_2_with_one_line(tmp_path):
    (tmp_path / "startup_topology.py").write_text(
        "from streaming import StreamsBuilder\n"
        "def topology():\n"
        "    b = StreamsBuilder()\n"
        "    b.stream('in').to('out')\n"
        "    return b\n"
    )
    address = f"127.0.0.1:{_closed_port()}"
    cmd = [sys.executable, "-m", "streaming", "run", "startup_topology:topology", "--quiet"]
    for setting in (
        "application.id=cli-unreachable",
        f"bootstrap.servers={address}",
        f"state.dir={tmp_path / 'state'}",
        "bootstrap.timeout.ms=2000",
    ):
        cmd += ["--set", setting]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    assert "Cannot reach the Kafka cluster at bootstrap.servers=" in errors[0]
    assert address in errors[0]


class _DelayingProxy:
    """A TCP proxy that holds each connection's first request for ``delay`` seconds: a
    broker that is reachable but slow to answer."""

    def __init__(self, upstream: str, delay: float) -> None:
        host, _, port = upstream.split(",")[0].rpartition(":")
        self.upstream = (host, int(port))
        self.delay = delay
        self.server = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.closed = threading.Event()
        self.sockets: list[socket.socket] = [self.server]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.upstream, timeout=10)
        except OSError:
            client.close()
            return
        self.sockets += [client, upstream]
        time.sleep(self.delay)
        threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()
        self._pump(client, upstream)

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.closed.set()
        for s in self.sockets:
            s.close()


def test_reachable_but_slow_broker_is_not_reported_unreachable(kafka_cluster, tmp_path):
    source, sink = unique("slow-in"), unique("slow-out")
    kafka_cluster.create_topic(source, partitions=1)
    kafka_cluster.create_topic(sink, partitions=1)
    proxy = _DelayingProxy(kafka_cluster.bootstrap_servers, delay=3.0)
    app = KafkaStreams(
        _topology(source, sink),
        {
            "application.id": unique("slow"),
            "bootstrap.servers": proxy.address,
            "state.dir": str(tmp_path),
            "bootstrap.timeout.ms": 1000,  # shorter than the broker takes to answer
        },
    )
    try:
        app.start()  # waits on the slow broker instead of calling it unreachable
        assert app.wait_until(State.RUNNING, timeout=60)
    finally:
        app.close(timeout=30)
        proxy.close()


@pytest.mark.parametrize("below", [("file.txt",), ("file.txt", "state")])
def test_state_dir_that_cannot_be_created_fails_start(kafka_cluster, tmp_path, below):
    """Root may write anywhere, so the unusable state.dir is a path through a regular file."""
    (tmp_path / "file.txt").write_text("a file, not a directory")
    state_dir = tmp_path.joinpath(*below)
    app_id = unique("bad-state")
    app = KafkaStreams(
        _topology("in", "out"),
        {
            "application.id": app_id,
            "bootstrap.servers": kafka_cluster.bootstrap_servers,
            "state.dir": str(state_dir),
        },
    )
    with pytest.raises(ConfigException) as info:
        app.start()
    message = str(info.value)
    assert f"state.dir {str(state_dir)!r} cannot be used" in message
    assert f"{tmp_path / 'file.txt'} is a file, not a directory" in message
    assert "set state.dir to a directory" in message
    assert app.state is State.CREATED
    # failed before any broker work: no internal topic, no consumer group
    admin = kafka_cluster.admin()
    assert not [t for t in admin.list_topics(timeout=10).topics if t.startswith(app_id)]
    assert app.close(timeout=10)


def test_a_sink_topic_that_does_not_exist_fails_start_naming_it(kafka_cluster, tmp_path):
    """With automatic topic creation off (the broker's setting here, as on most production
    clusters), records for a missing topic would only time out, one aborted transaction
    after another: start() names the topic instead."""
    source, sink = unique("sink-src"), unique("no-such-sink")
    kafka_cluster.create_topic(source, partitions=1)
    app = KafkaStreams(
        _topology(source, sink),
        {
            "application.id": unique("missing-sink"),
            "bootstrap.servers": kafka_cluster.bootstrap_servers,
            "state.dir": str(tmp_path),
            "processing.guarantee": "exactly_once_v2",
        },
    )
    with pytest.raises(MissingSinkTopicError) as info:
        app.start()
    assert str(info.value) == (
        f"topic {sink} does not exist (automatic topic creation is off): create it before "
        "starting the application"
    )
    assert app.state is State.CREATED
    assert app.close(timeout=10)
    # once the topic exists, the same application starts
    kafka_cluster.create_topic(sink, partitions=1)
    again = KafkaStreams(
        _topology(source, sink),
        {
            "application.id": unique("missing-sink"),
            "bootstrap.servers": kafka_cluster.bootstrap_servers,
            "state.dir": str(tmp_path / "again"),
        },
    )
    again.start()
    assert again.close(timeout=30)
