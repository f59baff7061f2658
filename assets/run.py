"""``make run``: the whole platform on one machine.

    python -m assets.run [--port 3000] [--rate 5] [--no-generator] [--no-stream-apps]

1. starts a local Kafka broker (``streaming.testing.LocalKafkaCluster``) unless
   ``KAFKA_BOOTSTRAP_SERVERS`` points at a cluster;
2. creates the topics of ``platform/topics.yaml``;
3. starts the generator (``python -m assets.generator``, real time) and the stream
   applications (``python -m assets.streams.supervisor``);
4. serves the Dagster UI: ``dagster dev -w workspace.yaml -p 3000`` with
   ``DAGSTER_HOME=.dagster`` (instance config from ``platform/dagster.yaml``).

Ctrl-C (or SIGTERM) stops everything in order (UI, generator, stream applications with a
clean close, broker) and leaves no process behind. Each child runs in its own session so the
terminal's Ctrl-C does not hit them all at once.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DAGSTER_HOME = REPO / ".dagster"
STATE_DIR = REPO / ".state"


def _log(message: str) -> None:
    print(f"[run] {message}", flush=True)


def _start(name: str, cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
    _log(f"starting {name}: {' '.join(cmd)}")
    return subprocess.Popen(cmd, cwd=REPO, env=env, start_new_session=True)


def _stop(name: str, proc: subprocess.Popen, sig: int, timeout: float) -> None:
    if proc.poll() is not None:
        return
    _log(f"stopping {name}")
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        _log(f"{name} did not stop in {timeout:.0f}s: killing it")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    # anything the child left in its session (dagster's code servers, run workers)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def prepare_dagster_home(home: Path = DAGSTER_HOME) -> Path:
    """``.dagster/`` with the instance config from ``platform/dagster.yaml``."""
    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(REPO / "platform" / "dagster.yaml", home / "dagster.yaml")
    return home


def generator_command(python: str, bootstrap: str, rate: float) -> list[str]:
    """The generator's command line: real time, events stamped from now on (no
    ``--start-ms``: records older than the topics' retention would be deleted at once)."""
    return [python, "-m", "assets.generator", "--bootstrap", bootstrap, "--rate", str(rate)]


def main(argv: list[str] | None = None) -> int:
    """Run the platform until Ctrl-C."""
    parser = argparse.ArgumentParser(description="Run the platform (Kafka, apps, Dagster UI)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("DAGSTER_PORT", 3000)))
    parser.add_argument("--rate", type=float, default=5.0, help="generator orders per second")
    parser.add_argument("--no-generator", action="store_true")
    parser.add_argument("--no-stream-apps", action="store_true")
    args = parser.parse_args(argv)

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())

    from streaming.testing import LocalKafkaCluster

    cluster = None
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    children: list[tuple[str, subprocess.Popen, int, float]] = []
    try:
        if not bootstrap:
            _log("starting the local Kafka broker (set KAFKA_BOOTSTRAP_SERVERS to use a cluster)")
            cluster = LocalKafkaCluster(nodes=1).start()
            bootstrap = cluster.bootstrap_servers
            # a fresh broker: local state of a previous run refers to changelogs that are gone
            shutil.rmtree(STATE_DIR / "supervisor", ignore_errors=True)
        _log(f"Kafka at {bootstrap}")
        from assets.topics import create_topics

        create_topics(bootstrap)
        env = {
            **os.environ,
            "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
            "DAGSTER_HOME": str(prepare_dagster_home()),
            "STREAM_STATE_DIR": str(STATE_DIR),
            "GX_ANALYTICS_ENABLED": "false",
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p
            ),
        }
        py = sys.executable
        if not args.no_stream_apps:
            children.append(
                (
                    "stream apps",
                    _start(
                        "stream apps",
                        [py, "-m", "assets.streams.supervisor", "--bootstrap", bootstrap],
                        env,
                    ),
                    signal.SIGTERM,
                    90.0,
                )
            )
        if not args.no_generator:
            children.append(
                (
                    "generator",
                    _start("generator", generator_command(py, bootstrap, args.rate), env),
                    signal.SIGTERM,
                    15.0,
                )
            )
        dagster = str(Path(py).with_name("dagster"))
        children.append(
            (
                "dagster",
                _start(
                    "dagster",
                    [
                        dagster,
                        "dev",
                        "-w",
                        "workspace.yaml",
                        "-p",
                        str(args.port),
                        "-h",
                        "127.0.0.1",
                    ],
                    env,
                ),
                signal.SIGINT,
                60.0,
            )
        )
        _log(f"Dagster UI on http://127.0.0.1:{args.port}  (Ctrl-C stops everything)")
        while not stop.wait(1.0):
            for name, proc, _, _ in children:
                if proc.poll() is not None:
                    _log(f"{name} exited with {proc.returncode}; stopping the platform")
                    stop.set()
    finally:
        for name, proc, sig, timeout in reversed(children):
            _stop(name, proc, sig, timeout)
        if cluster is not None:
            _log("stopping the Kafka broker")
            cluster.stop()
        _log("stopped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
