"""``make run``: the whole platform on one machine.

    python -m assets.run [--port 3000] [--rate 5] [--no-generator] [--no-stream-apps]
                         [--kafka-port 9092] [--fresh [--yes] [--keep-lake]]

1. starts a local Kafka broker (``streaming.testing.LocalKafkaCluster``) unless
   ``KAFKA_BOOTSTRAP_SERVERS`` points at a cluster. Its storage (KRaft log dirs, cluster id)
   lives in ``.state/kafka`` and is reused by the next run, on a stable port: 9092, or
   ``--kafka-port`` / ``KAFKA_PORT`` (the controller listens on the next port). The terminal
   says whether the broker is new or resumed (cluster id, data dir, topics found); when the
   cluster is not the one of the previous run, the stream applications' local state (which
   refers to the old cluster's changelogs) is dropped, and the lake and the late-data sensor
   re-read from the earliest offsets by themselves;
2. creates the topics of ``platform/topics.yaml``;
3. starts the generator (``python -m assets.generator``, real time) and the stream
   applications (``python -m assets.streams.supervisor``);
4. serves the Dagster UI: ``dagster dev -w workspace.yaml -p 3000`` with
   ``DAGSTER_HOME=.dagster`` (instance config from ``platform/dagster.yaml``).

Ctrl-C (or SIGTERM) stops everything in order (UI, generator, stream applications with a
clean close, broker) and leaves no process behind. Each child runs in its own session so the
terminal's Ctrl-C does not hit them all at once. The next run resumes: topics, offsets,
stream state (``.state/supervisor``), lake manifests, sensor cursors (``.dagster``).

``--fresh`` starts from scratch: it deletes ``.state/`` (broker data, stream state),
``.dagster/`` (runs, sensor cursors) and the default lake ``.lake/`` (Parquet, manifests,
the dbt warehouse; ``--keep-lake`` keeps it) after asking, or at once with ``--yes``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DAGSTER_HOME = REPO / ".dagster"
STATE_DIR = REPO / ".state"
#: the local broker's storage (KRaft log dirs and cluster id), kept between runs
KAFKA_DATA_DIR = STATE_DIR / "kafka"
#: the Kafka cluster the stream state under ``STATE_DIR`` belongs to
CLUSTER_FILE = STATE_DIR / "kafka-cluster.json"
DEFAULT_LAKE = REPO / ".lake"
DEFAULT_KAFKA_PORT = 9092


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


class BrokerStartError(RuntimeError):
    """The local broker could not start; the message says what to do."""


def default_kafka_port() -> int:
    """``$KAFKA_PORT``, else 9092."""
    value = os.environ.get("KAFKA_PORT") or str(DEFAULT_KAFKA_PORT)
    try:
        return int(value)
    except ValueError:
        raise SystemExit(f"KAFKA_PORT must be a port number, got {value!r}") from None


def stored_cluster_id(data_dir: Path) -> str | None:
    """The cluster id a kept broker storage under ``data_dir`` was formatted with."""
    for meta in sorted(data_dir.glob("node-*/data/meta.properties")):
        for line in meta.read_text().splitlines():
            if line.startswith("cluster.id="):
                return line.split("=", 1)[1].strip()
    return None


def start_local_broker(
    port: int, data_dir: Path = KAFKA_DATA_DIR, **kwargs: Any
) -> tuple[Any, bool]:
    """Start (or resume) the local broker on ``port`` with its storage in ``data_dir``;
    returns the cluster and whether it is new (storage formatted now)."""
    from streaming.testing.kafka_cluster import (
        KafkaClusterError,
        LocalKafkaCluster,
        PortInUseError,
    )

    new = stored_cluster_id(data_dir) is None
    cluster = LocalKafkaCluster(
        nodes=1, data_dir=data_dir, port=port, **{"shutdown_timeout": 30.0, **kwargs}
    )
    try:
        cluster.start()
    except PortInUseError as exc:
        raise BrokerStartError(
            f"port {exc.port} is in use by another process; stop it or run with "
            f"--kafka-port N (or KAFKA_PORT=N make run) to choose another (the broker uses "
            f"the port and the next one, for its controller)"
        ) from exc
    except KafkaClusterError as exc:
        raise BrokerStartError(
            f"the local Kafka broker did not start: {exc}\n(its data is in {data_dir}; "
            "`python -m assets.run --fresh` starts from scratch)"
        ) from exc
    return cluster, new


def describe_topics(bootstrap: str, timeout: float = 10.0) -> tuple[str | None, dict[str, int]]:
    """The cluster id and ``{topic: records}`` (end minus start offsets) of every
    non-internal topic."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "assets-run-describe"})
    try:
        meta = consumer.list_topics(timeout=timeout)
        counts = {}
        for name, topic in sorted(meta.topics.items()):
            if name.startswith("__") or topic.error is not None:
                continue
            total = 0
            for p in topic.partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(name, p), timeout=timeout)
                total += max(0, high - low)
            counts[name] = total
        return meta.cluster_id, counts
    finally:
        consumer.close()


def follow_cluster(
    cluster_id: str | None, new_broker: bool, state_dir: Path = STATE_DIR
) -> list[str]:
    """Keep the stream applications' local state only if it belongs to ``cluster_id``.

    The state (every folder under ``state_dir`` but ``kafka/``: ``supervisor/`` and the
    Dagster runs' ``run-*/``) refers to changelogs and offsets of the cluster recorded in
    ``kafka-cluster.json``; on another cluster (or a new broker when nothing was recorded)
    it is deleted. Records ``cluster_id``; returns what happened, for the terminal."""
    marker = state_dir / CLUSTER_FILE.name
    try:
        previous = json.loads(marker.read_text()).get("cluster_id")
    except (OSError, ValueError):
        previous = None
    stale = (
        [p for p in sorted(state_dir.iterdir()) if p.is_dir() and p.name != KAFKA_DATA_DIR.name]
        if state_dir.is_dir()
        else []
    )
    notes = []
    changed = previous is not None and cluster_id is not None and previous != cluster_id
    if changed or (previous is None and new_broker):
        if changed:
            notes.append(
                f"the Kafka cluster changed from {previous} to {cluster_id}: the lake and the "
                "late-data sensor re-read from the earliest offsets"
            )
        if stale:
            for path in stale:
                shutil.rmtree(path, ignore_errors=True)
            notes.append(
                "dropped the stream applications' local state of the previous cluster "
                f"({', '.join(p.name for p in stale)} under {state_dir}): it is rebuilt "
                "from this cluster"
            )
    if cluster_id is not None:
        state_dir.mkdir(parents=True, exist_ok=True)
        marker.write_text(
            json.dumps({"cluster_id": cluster_id, "recorded_at": int(time.time())}, indent=1)
        )
    return notes


def fresh_paths(keep_lake: bool = False) -> list[Path]:
    """What ``--fresh`` deletes: ``.state/``, ``.dagster/`` and (unless ``keep_lake``, or
    ``LAKE_ROOT`` names another lake) the default lake ``.lake/``."""
    paths = [STATE_DIR, DAGSTER_HOME]
    if keep_lake or os.environ.get("LAKE_ROOT"):
        kept = os.environ.get("LAKE_ROOT") or DEFAULT_LAKE
        _log(
            f"--fresh keeps the lake {kept} (its manifests notice the new cluster and re-land "
            "from the earliest offsets; delete it yourself for an empty lake)"
        )
    else:
        paths.append(DEFAULT_LAKE)
    return paths


def clean_state(
    paths: list[Path],
    *,
    assume_yes: bool,
    ask: Callable[[str], str] = input,
    interactive: bool | None = None,
) -> bool:
    """Delete ``paths`` after a confirmation (or at once with ``assume_yes``); False when
    the user said no, or nobody can be asked."""
    present = [p for p in paths if p.exists()]
    if not present:
        _log("--fresh: nothing to delete")
        return True
    _log("--fresh deletes: " + ", ".join(str(p) for p in present))
    if not assume_yes:
        if not (sys.stdin.isatty() if interactive is None else interactive):
            _log("--fresh needs a confirmation: run it in a terminal, or add --yes")
            return False
        if ask("[run] delete them and start from scratch? [y/N] ").strip().lower() not in (
            "y",
            "yes",
        ):
            _log("kept everything")
            return False
    for path in present:
        shutil.rmtree(path, ignore_errors=True)
    _log("deleted; starting from scratch")
    return True


def _report_broker(
    bootstrap: str, new: bool | None, data_dir: Path | None
) -> tuple[str | None, dict[str, int]]:
    """Say which cluster this is and what it holds."""
    try:
        cluster_id, topics = describe_topics(bootstrap)
    except Exception as exc:  # an external cluster that does not answer: create_topics says so
        _log(f"could not describe the Kafka cluster at {bootstrap}: {exc}")
        return None, {}
    if new is None:
        kind = "external Kafka cluster"
    else:
        kind = "NEW local Kafka broker" if new else "RESUMED local Kafka broker"
    where = f", data in {data_dir}" if data_dir is not None else ""
    _log(f"{kind} at {bootstrap}: cluster id {cluster_id}{where}")
    if topics:
        filled = ", ".join(f"{name} ({n} records)" for name, n in topics.items() if n)
        empty = sorted(name for name, n in topics.items() if not n)
        _log(
            f"topics found: {len(topics)}"
            + (f"; {filled}" if filled else "")
            + (f"; empty: {', '.join(empty)}" if empty else "")
        )
    else:
        _log("topics found: none")
    return cluster_id, topics


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
    parser.add_argument(
        "--kafka-port",
        type=int,
        default=None,
        help=f"the local broker's port (default: $KAFKA_PORT or {DEFAULT_KAFKA_PORT}; its "
        "controller uses the next port)",
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="start from scratch: delete .state/ (broker data, stream state), .dagster/ "
        "(runs, sensor cursors) and .lake/ first, after a confirmation",
    )
    parser.add_argument("--yes", action="store_true", help="with --fresh: do not ask")
    parser.add_argument("--keep-lake", action="store_true", help="with --fresh: keep .lake/")
    args = parser.parse_args(argv)
    kafka_port = args.kafka_port if args.kafka_port is not None else default_kafka_port()
    if args.fresh and not clean_state(fresh_paths(args.keep_lake), assume_yes=args.yes):
        return 1

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())

    cluster = None
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    children: list[tuple[str, subprocess.Popen, int, float]] = []
    try:
        new: bool | None = None
        if not bootstrap:
            _log(
                f"starting the local Kafka broker on port {kafka_port}, data in "
                f"{KAFKA_DATA_DIR} (set KAFKA_BOOTSTRAP_SERVERS to use a cluster)"
            )
            try:
                cluster, new = start_local_broker(kafka_port, KAFKA_DATA_DIR)
            except BrokerStartError as exc:
                _log(str(exc))
                return 1
            bootstrap = cluster.bootstrap_servers
        cluster_id, _ = _report_broker(bootstrap, new, KAFKA_DATA_DIR if cluster else None)
        for note in follow_cluster(cluster_id, bool(new), STATE_DIR):
            _log(f"WARNING: {note}")
        _log(
            f"stream state in {STATE_DIR}, lake in {os.environ.get('LAKE_ROOT') or DEFAULT_LAKE}"
            f", Dagster (runs, sensor cursors) in {DAGSTER_HOME}"
        )
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
