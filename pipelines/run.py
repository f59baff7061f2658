"""``make run``: the whole platform on one machine.

    python -m pipelines.run [--port 3000] [--rate 5] [--no-generator] [--no-stream-apps]
                         [--kafka-port 9092] [--fresh [--yes] [--keep-lake]]

1. starts a local Kafka broker (``streaming.testing.LocalKafkaCluster``) unless
   ``KAFKA_BOOTSTRAP_SERVERS`` points at a cluster. Its storage (KRaft log dirs, cluster id)
   lives in ``.state/kafka`` and is reused by the next run, on a stable port: 9092, or
   ``--kafka-port`` / ``KAFKA_PORT`` (the controller listens on the next port). The terminal
   says whether the broker is new or resumed (cluster id, data dir, topics found); when the
   cluster is not the one of the previous run, the stream applications' local state (which
   refers to the old cluster's changelogs) is dropped, and the lake and the late-data sensor
   re-read from the earliest offsets by themselves;
   A schema registry (``streaming.testing.LocalSchemaRegistry``, in memory) starts beside it
   unless ``SCHEMA_REGISTRY_URL`` points at one; the children get its URL in
   ``SCHEMA_REGISTRY_URL`` (with ``PLATFORM_VALUE_FORMAT=avro`` they write and read the raw
   topics in Avro through it);
2. creates the topics of ``platform/topics.yaml``;
3. starts the generator (``python -m pipelines.generator``, real time) and the stream
   applications (``python -m pipelines.streams.supervisor``);
4. serves the Dagster UI: ``dg dev -w workspace.yaml -p 3000`` with
   ``DAGSTER_HOME=.dagster`` (instance config from ``platform/dagster.yaml``), and prints
   ``READY`` once the UI answers HTTP (polled) and the code location loaded, with the
   schedules and sensors and their status. Schedules and the sensors that launch runs are
   on from the start (their default status; ``--no-schedules`` starts them stopped; one
   stopped or started in the UI keeps that state).

The console stays compact: each child's whole output goes to ``.state/logs/<child>.log``
(``dagster.log``, ``stream-apps.log``, ``generator.log``); the console gets their warnings
and errors, and a status line (each stream application's health, rate and lag) every
``--status-interval`` seconds and whenever an application's health changes. When a child
exits, the end of its log is printed.

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
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipelines.connection import Kafka, KafkaConnection

REPO = Path(__file__).resolve().parents[1]
DAGSTER_HOME = REPO / ".dagster"
STATE_DIR = REPO / ".state"
#: where the children's output goes, whole (the console gets warnings, errors and a status)
LOG_DIR = STATE_DIR / "logs"
#: the local broker's storage (KRaft log dirs and cluster id), kept between runs
KAFKA_DATA_DIR = STATE_DIR / "kafka"
#: the Kafka cluster the stream state under ``STATE_DIR`` belongs to
CLUSTER_FILE = STATE_DIR / "kafka-cluster.json"
DEFAULT_LAKE = REPO / ".lake"
DEFAULT_KAFKA_PORT = 9092
HOUR_MS = 3_600_000
#: locked by the ``make run`` of this checkout while it runs (its pid inside); outside
#: ``.state/`` so that ``--fresh`` cannot delete it from under a running platform
RUN_LOCK = REPO / ".run.lock"


def _log(message: str) -> None:
    print(f"[run] {message}", flush=True)


def log_path(name: str, log_dir: Path | None = None) -> Path:
    """The log file of child ``name`` (``stream apps`` -> ``stream-apps.log``)."""
    return (log_dir or LOG_DIR) / f"{name.replace(' ', '-')}.log"


def _start(name: str, cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
    """Start a child in its own session; its output goes to its log file, and its warnings
    and errors to the console too (``LogPump``)."""
    path = log_path(name)
    _log(f"starting {name} (log: {path.relative_to(REPO) if path.is_relative_to(REPO) else path})")
    proc = subprocess.Popen(
        cmd,
        cwd=REPO,
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as out:
        out.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(cmd)}\n")
    pump = PUMPS[name] = LogPump(name, proc.stdout, path)
    pump.start()
    return proc


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


class StartRefused(RuntimeError):
    """``make run`` cannot start here and now; the message says why and what to do."""


def hold_run_lock(path: Path | None = None) -> Any:
    """Lock ``path`` (default ``RUN_LOCK``) for this process (the lock goes with the process); ``StartRefused``
    naming the pid of the ``make run`` holding it. Two platforms on one ``.state/`` would
    share the broker's storage and the stream state."""
    import fcntl

    handle = open(path or RUN_LOCK, "a+")  # noqa: SIM115 (held until the process ends)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        pid = handle.read().strip() or "unknown"
        handle.close()
        raise StartRefused(
            f"another make run (pid {pid}) is running in this checkout; use that one (its "
            f"UI, its console), or stop it (Ctrl-C in its terminal, or kill {pid}) first"
        ) from None
    handle.truncate(0)
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def start_local_registry() -> Any:
    """A local schema registry (in memory, on a free port), or None with a warning when it
    cannot start: only Avro raw topics (``PLATFORM_VALUE_FORMAT=avro``) need it."""
    from streaming.testing.schema_registry import LocalSchemaRegistry, SchemaRegistryError

    try:
        registry = LocalSchemaRegistry().start()
    except SchemaRegistryError as exc:
        _log(f"WARNING: no schema registry: {exc}")
        return None
    _log(f"schema registry on {registry.url} (in memory; set SCHEMA_REGISTRY_URL to use another)")
    return registry


def check_ports(ui_port: int, kafka_port: int | None, query_ports: range = range(0)) -> None:
    """``StartRefused`` naming the first port ``make run`` needs that another process holds,
    and the setting that moves it (``kafka_port``: the local broker's, None for an external
    cluster; ``query_ports``: the stream applications' query servers)."""
    from streaming.testing.kafka_cluster import PortInUseError, check_ports_free

    wanted = [(ui_port, "the Dagster UI", "--port N (or DAGSTER_PORT=N make run)")]
    if kafka_port is not None:
        setting = "--kafka-port N (or KAFKA_PORT=N make run; the controller takes N+1)"
        wanted += [
            (kafka_port, "the Kafka broker", setting),
            (kafka_port + 1, "the Kafka broker's controller", setting),
        ]
    wanted += [
        (port, "a stream application's query server", "STREAM_QUERY_BASE_PORT=N make run")
        for port in query_ports
    ]
    for port, what, setting in wanted:
        try:
            check_ports_free([port])
        except PortInUseError:
            also = (
                " (a Dagster UI answers there: another platform?)"
                if port == ui_port and ui_answers(f"http://127.0.0.1:{port}", timeout=1.0)
                else ""
            )
            raise StartRefused(
                f"port {port}, needed by {what}, is in use by another process{also}; stop "
                f"it, or run with {setting}"
            ) from None


def query_ports() -> range:
    """The ports of the stream applications' query servers (one per application from
    ``STREAM_QUERY_BASE_PORT``, 7070 by default)."""
    from pipelines.streams.apps import STREAM_APPS

    base = int(os.environ.get("STREAM_QUERY_BASE_PORT", "7070"))
    return range(base, base + len(STREAM_APPS)) if base else range(0)


def check_java() -> None:
    """``StartRefused`` when there is no Java for the local broker, saying how to get one
    or how to use a cluster instead."""
    from streaming.testing.kafka_cluster import JavaNotFoundError, find_java

    try:
        find_java()
    except JavaNotFoundError as exc:
        raise StartRefused(
            f"{exc}; or set KAFKA_BOOTSTRAP_SERVERS to use a running Kafka cluster"
        ) from None


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
        JavaNotFoundError,
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
    except JavaNotFoundError as exc:
        raise BrokerStartError(str(exc)) from exc
    except KafkaClusterError as exc:
        raise BrokerStartError(
            f"the local Kafka broker did not start: {exc}\n(its data is in {data_dir}; "
            "`python -m pipelines.run --fresh` starts from scratch)"
        ) from exc
    return cluster, new


def describe_topics(kafka: Kafka, timeout: float = 30.0) -> tuple[str | None, dict[str, int]]:
    """The cluster id and ``{topic: records}`` (end minus start offsets) of every
    non-internal topic. A broker that has just resumed its storage has no leader yet, or
    answers "not leader", for partitions it is still loading: the description is asked
    again until they are loaded, for up to ``timeout`` seconds."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    loading = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE}
    deadline = time.monotonic() + timeout
    consumer = Consumer(
        KafkaConnection.of(kafka).client_config(**{"group.id": "assets-run-describe"})
    )

    def describe() -> tuple[str | None, dict[str, int]]:
        left = max(1.0, deadline - time.monotonic())
        meta = consumer.list_topics(timeout=left)
        counts = {}
        for name, topic in sorted(meta.topics.items()):
            if name.startswith("__"):
                continue
            if topic.error is not None:
                if topic.error.code() in loading:
                    raise KafkaException(topic.error)
                continue
            total = 0
            for p in topic.partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(name, p), timeout=left)
                total += max(0, high - low)
            counts[name] = total
        return meta.cluster_id, counts

    try:
        while True:
            try:
                return describe()
            except KafkaException as exc:
                if exc.args[0].code() not in loading or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()


def partitions_start_hour(
    state_dir: Path = STATE_DIR, now_ms: int | None = None, first_ms: int | None = None
) -> str:
    """The first hourly partition: the hour of the platform's first data, recorded in
    ``first-hour.txt`` on the first start (``--fresh`` forgets it): the hour of
    ``first_ms`` (a backlog's start), else the hour the generator's first late events may
    fall into; the Dagster key ``YYYY-MM-DD-HH:00``."""
    marker = state_dir / "first-hour.txt"
    try:
        return marker.read_text().strip()
    except OSError:
        pass
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    from pipelines.generator import GeneratorConfig

    first = first_ms if first_ms is not None else now_ms - GeneratorConfig.late_max_ms
    key = time.strftime("%Y-%m-%d-%H:00", time.gmtime(first // 1000))
    state_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text(key + "\n")
    return key


def follow_cluster(
    cluster_id: str | None, new_broker: bool, state_dir: Path = STATE_DIR
) -> list[str]:
    """Keep the stream applications' local state only if it belongs to ``cluster_id``.

    The state (every folder under ``state_dir`` but ``kafka/`` and ``logs/``: ``supervisor/`` and the
    Dagster runs' ``run-*/``) refers to changelogs and offsets of the cluster recorded in
    ``kafka-cluster.json``; on another cluster (or a new broker when nothing was recorded)
    it is deleted. Records ``cluster_id``; returns what happened, for the terminal."""
    marker = state_dir / CLUSTER_FILE.name
    try:
        previous = json.loads(marker.read_text()).get("cluster_id")
    except (OSError, ValueError):
        previous = None
    stale = (
        [
            p
            for p in sorted(state_dir.iterdir())
            if p.is_dir() and p.name not in (KAFKA_DATA_DIR.name, LOG_DIR.name)
        ]
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


def _some(items: list[str], most: int = 12) -> str:
    """``items`` joined, at most ``most`` of them (then how many more)."""
    shown = ", ".join(items[:most])
    return shown + (f" and {len(items) - most} more" if len(items) > most else "")


def _report_broker(
    kafka: KafkaConnection, new: bool | None, data_dir: Path | None
) -> tuple[str | None, dict[str, int]]:
    """Say which cluster this is and what it holds."""
    try:
        cluster_id, topics = describe_topics(kafka)
    except Exception as exc:  # an external cluster that does not answer: create_topics says so
        _log(f"could not describe the Kafka cluster at {kafka.bootstrap_servers}: {exc}")
        return None, {}
    if new is None:
        kind = "external Kafka cluster"
    else:
        kind = "NEW local Kafka broker" if new else "RESUMED local Kafka broker"
    where = f", data in {data_dir}" if data_dir is not None else ""
    _log(f"{kind} at {kafka.bootstrap_servers}: cluster id {cluster_id}{where}")
    if topics:
        filled = _some([f"{name} ({n} records)" for name, n in topics.items() if n])
        empty = _some(sorted(name for name, n in topics.items() if not n))
        _log(
            f"topics found: {len(topics)}"
            + (f"; {filled}" if filled else "")
            + (f"; empty: {empty}" if empty else "")
        )
    else:
        _log("topics found: none")
    return cluster_id, topics


def generator_command(
    python: str, bootstrap: str, rate: float, catch_up_from: int | None = None
) -> list[str]:
    """The generator's command line: real time, events stamped from now on (no
    ``--start-ms``: records older than the topics' retention would be deleted at once), or
    from ``catch_up_from`` on (the backlog first, at the pace of the stream applications)."""
    command = [python, "-m", "pipelines.generator", "--bootstrap", bootstrap, "--rate", str(rate)]
    if catch_up_from is not None:
        command += ["--catch-up-from", str(catch_up_from)]
    return command


def _clock(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ms // 1000))


def previous_hour_start(now_ms: int | None = None) -> int:
    """Epoch ms of the start of the last complete hour: a new platform's data begins there,
    so that an hour is there to reconcile within minutes of the first start."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    return now_ms - now_ms % HOUR_MS - HOUR_MS


# -- the console: log files, a ready line once the UI answers, a compact status --------------

#: the code location and repository of ``workspace.yaml``
LOCATION = "streamplatform"
REPOSITORY = "__repository__"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
#: a level word, not a count (dbt's summary "PASS=17 WARN=0 ERROR=0" is no error)
_LOUD = re.compile(r"\b(WARNING|ERROR|CRITICAL|FATAL|Traceback)\b(?!=)")
#: Python warnings about APIs (Dagster's beta / preview / deprecation notices at start-up)
#: and the JVM's notice about the incubator modules Spark enables at each session start
_API_NOTICE = re.compile(
    r"\b\w*(Beta|Preview|Supersession|Deprecation|Experimental)Warning\b"
    r"|WARNING: Using incubator modules"
)
#: what Dagster logs at ERROR when a run is cancelled (from the UI, or by stopping make run):
#: the cancellation itself and its interrupted step; a failure has lines of its own
_CANCELLATION = re.compile(r" - RUN_CANCELED - |finished without success or failure event")


def console_worthy(line: str) -> bool:
    """Whether a child's output line belongs on the console too: a warning or an error (its
    level within the line's head), or a traceback's first line; not the notices about APIs
    Dagster logs as warnings when it loads the code. The rest is only in the child's log
    file. A cancelled run is not an error: Dagster's ERROR lines about one stay in the file."""
    return (
        bool(_LOUD.search(line[:200]))
        and not _API_NOTICE.search(line)
        and not _CANCELLATION.search(line)
    )


_NUMBERS = re.compile(r"\d+")


class LogPump(threading.Thread):
    """Copies a child's output to ``path`` (ANSI colours removed) and the lines ``echo``
    accepts to the console, prefixed with the child's name. A line of the same shape (equal
    but for its numbers: the same warning about another record) is shown once per
    ``repeat_s``; the others are counted (``take_hidden``) and stay in the file. Once
    ``quiet`` (the user stopped the platform), lines go to the file only and are counted
    (``held_while_stopping``): the errors of runs the stop interrupts are its consequence."""

    def __init__(
        self,
        name: str,
        stream: Any,
        path: Path,
        echo: Callable[[str], bool] = console_worthy,
        say: Callable[[str], None] | None = None,
        repeat_s: float = 60.0,
    ) -> None:
        super().__init__(name=f"log-{name}", daemon=True)
        self.child, self.stream, self.path, self.echo = name, stream, path, echo
        self.say = say or _log
        self.repeat_s = repeat_s
        self.lines = 0
        self._hidden = 0
        self._shown: dict[str, float] = {}
        self._quiet = False
        self.held_while_stopping = 0

    def quiet(self) -> None:
        """From now on, echo nothing to the console; count what would have been."""
        self._quiet = True

    def take_hidden(self) -> int:
        """Console lines held back as repeats since the last call."""
        hidden, self._hidden = self._hidden, 0
        return hidden

    def run(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as out:
            for raw in iter(self.stream.readline, b""):
                line = _ANSI.sub("", raw.decode("utf-8", errors="replace")).rstrip()
                out.write(line + "\n")
                out.flush()
                self.lines += 1
                if not line or not self.echo(line):
                    continue
                if self._quiet:
                    self.held_while_stopping += 1
                    continue
                shape, now = _NUMBERS.sub("#", line), time.monotonic()
                if now - self._shown.get(shape, -self.repeat_s) >= self.repeat_s:
                    self._shown[shape] = now
                    self.say(f"{self.child}: {line}")
                else:
                    self._hidden += 1


#: the log pumps of the children started, by name
PUMPS: dict[str, LogPump] = {}


def tail(path: Path, lines: int = 15) -> list[str]:
    """The last ``lines`` lines of ``path`` (none when it does not exist)."""
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
    except OSError:
        return []


def ui_answers(url: str, timeout: float = 2.0) -> bool:
    """Whether the Dagster webserver at ``url`` answers HTTP (``/server_info`` with 200)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{url}/server_info", timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def graphql(url: str, query: str, variables: dict | None = None, timeout: float = 30.0) -> dict:
    """``data`` of a GraphQL request to the webserver at ``url`` (raises on errors)."""
    import urllib.request

    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    request = urllib.request.Request(
        f"{url}/graphql", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        doc = json.loads(response.read())
    if doc.get("errors"):
        raise RuntimeError(f"GraphQL error: {doc['errors'][0].get('message')}")
    return doc["data"]


LOCATIONS_QUERY = """
query PlatformLocations {
  workspaceOrError {
    __typename
    ... on Workspace {
      locationEntries {
        name
        loadStatus
        locationOrLoadError { __typename ... on PythonError { message } }
      }
    }
  }
}
"""

INSTIGATORS_QUERY = """
query PlatformInstigators($selector: RepositorySelector!) {
  repositoryOrError(repositorySelector: $selector) {
    __typename
    ... on Repository {
      schedules {
        name
        canReset
        scheduleState { status }
        futureTicks(limit: 1) { results { timestamp } }
      }
      sensors { name sensorState { status } }
    }
  }
}
"""

IN_FLIGHT_RUNS_QUERY = """
query PlatformRunsInFlight {
  runsOrError(filter: {statuses: [QUEUED, NOT_STARTED, STARTING, STARTED, CANCELING]}) {
    __typename
    ... on Runs { results { runId jobName status tags { key value } } }
  }
}
"""

REEXECUTE_RUN_MUTATION = """
mutation PlatformResumeRun($parent: String!) {
  launchRunReexecution(
    reexecutionParams: {
      parentRunId: $parent
      strategy: ALL_STEPS
      extraTags: [{key: "platform/resumed", value: "after make run stopped"}]
    }
  ) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on Error { message }
  }
}
"""

#: in the state directory: the runs the last stop cancelled that the next start launches
RESUME_FILE = "resume-runs.json"


def resumable(run: dict[str, Any]) -> bool:
    """Whether the next start launches a run the stop cancelled again: an hour's run, or
    one a sensor or schedule launched (a stop during the first reconciliation would leave
    that hour unreconciled, the sensors having requested it once). Not a backfill's run
    (its daemon goes on with the backfill) nor a streaming asset's (it runs until someone
    stops it: the user starts it again)."""
    tags = {t["key"]: t["value"] for t in run.get("tags") or []}
    if "dagster/backfill" in tags:
        return False
    return any(
        k in tags for k in ("dagster/partition", "dagster/sensor_name", "dagster/schedule_name")
    )


def remember_runs_to_resume(runs: list[dict[str, Any]], state_dir: Path | None = None) -> list[str]:
    """Keep the ids of the ``resumable`` of ``runs`` (and of those a start that never got
    ready did not resume) for the next start; returns them."""
    path = (state_dir or STATE_DIR) / RESUME_FILE
    ids = [*_read_ids(path), *(r["runId"] for r in runs if resumable(r))]
    ids = list(dict.fromkeys(ids))
    if ids:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(ids))
    return ids


def take_runs_to_resume(state_dir: Path | None = None) -> list[str]:
    """The ids ``remember_runs_to_resume`` kept, forgotten once read."""
    path = (state_dir or STATE_DIR) / RESUME_FILE
    ids = _read_ids(path)
    path.unlink(missing_ok=True)
    return ids


def _read_ids(path: Path) -> list[str]:
    try:
        ids = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    return [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else []


def resume_runs(url: str, run_ids: list[str], timeout: float = 30.0) -> list[tuple[str, str]]:
    """Launch each of ``run_ids`` again (all steps, its tags); (old id, new id) of those
    launched, a ``WARNING`` line for each the webserver refused."""
    resumed = []
    for parent in run_ids:
        try:
            data = graphql(url, REEXECUTE_RUN_MUTATION, {"parent": parent}, timeout=timeout)
            result = data["launchRunReexecution"]
        except Exception as exc:
            _log(f"WARNING: could not launch run {parent[:8]} again: {exc}")
            continue
        if result["__typename"] != "LaunchRunSuccess":
            _log(f"WARNING: could not launch run {parent[:8]} again: {result.get('message')}")
            continue
        resumed.append((parent, result["run"]["runId"]))
    return resumed


TERMINATE_RUNS_MUTATION = """
mutation PlatformTerminateRuns($runIds: [String!]!) {
  terminateRuns(runIds: $runIds, terminatePolicy: SAFE_TERMINATE) {
    __typename
    ... on TerminateRunsResult {
      terminateRunResults { __typename ... on PythonError { message } }
    }
    ... on PythonError { message }
  }
}
"""


def runs_in_flight(url: str, timeout: float = 30.0) -> list[dict[str, Any]]:
    """The runs queued, starting, running or being cancelled (``runId``, ``jobName``,
    ``status``)."""
    data = graphql(url, IN_FLIGHT_RUNS_QUERY, timeout=timeout)["runsOrError"]
    return list(data.get("results") or [])


def _terminate(url: str, run_id: str, timeout: float) -> None:
    """Terminate one run. Dagster marks it CANCELING at once and then waits for the code
    server that launched it (busy while it starts another run): a request per run keeps
    that wait from holding up the other runs."""
    with contextlib.suppress(Exception):  # the run ended meanwhile, or the UI is gone
        graphql(url, TERMINATE_RUNS_MUTATION, {"runIds": [run_id]}, timeout=timeout)


def cancel_runs(url: str, timeout: float = 20.0, poll: float = 0.5) -> list[dict[str, Any]]:
    """Terminate every run in flight, and every run the daemon launches meanwhile (it goes
    on until the UI stops), and wait (at most ``timeout``) until none is in flight, so that
    stopping ``make run`` leaves them CANCELED, not FAILURE ("interrupted unexpectedly").
    Returns the runs it terminated or found cancelling (``settle_cancelled_runs`` marks
    those that had not finished when the UI stopped)."""
    deadline = time.monotonic() + timeout
    seen: dict[str, dict[str, Any]] = {}
    while True:
        left = max(deadline - time.monotonic(), 1.0)
        in_flight = runs_in_flight(url, timeout=left)
        for run in in_flight:
            if run["runId"] in seen:
                continue
            seen[run["runId"]] = run
            if run["status"] != "CANCELING":
                threading.Thread(
                    target=_terminate, args=(url, run["runId"], left), daemon=True
                ).start()
        if not in_flight or time.monotonic() >= deadline:
            return list(seen.values())
        time.sleep(poll)


def settle_cancelled_runs(
    run_ids: list[str], home: Path | None = None, *, since: float | None = None
) -> list[str]:
    """Mark CANCELED the runs of ``run_ids`` that had not finished cancelling when the UI
    stopped (their workers stopped with it), as Dagster's run monitoring would only at the
    next start, after its cancel timeout, and those that failed after ``make run`` asked
    to cancel them at ``since`` (epoch seconds): a run interrupted while it starts its
    resources (a Spark session) fails on the interruption, which is the cancel the user
    asked for, not a failure of the run. ``home`` is the Dagster home (``DAGSTER_HOME``
    when not given). Returns their ids."""
    from dagster import DagsterInstance, DagsterRunStatus

    instance = DagsterInstance.from_config(str(home or DAGSTER_HOME))
    settled = []
    try:
        for run_id in run_ids:
            record = instance.get_run_record_by_id(run_id)
            if record is None:
                continue
            run = record.dagster_run
            if not run.is_finished:
                message = "make run stopped before the run finished cancelling"
            elif (
                since is not None
                and run.status == DagsterRunStatus.FAILURE
                and record.end_time is not None
                and record.end_time >= since
            ):
                message = "make run was stopping: the run failed while it was being cancelled"
            else:
                continue
            instance.report_run_canceled(run, message=message)
            settled.append(run_id)
    finally:
        instance.dispose()
    return settled


def location_status(url: str, location: str = LOCATION) -> tuple[str, str | None]:
    """(load status, load error) of ``location`` in the webserver's workspace."""
    data = graphql(url, LOCATIONS_QUERY)["workspaceOrError"]
    for entry in data.get("locationEntries", []):
        if entry["name"] == location:
            error = entry.get("locationOrLoadError") or {}
            return entry["loadStatus"], error.get("message")
    return "MISSING", None


def instigators(url: str) -> dict[str, Any]:
    """The repository's schedules and sensors as the webserver reports them."""
    selector = {"repositoryLocationName": LOCATION, "repositoryName": REPOSITORY}
    data = graphql(url, INSTIGATORS_QUERY, {"selector": selector})["repositoryOrError"]
    if data["__typename"] != "Repository":
        raise RuntimeError(f"repository {REPOSITORY}@{LOCATION}: {data['__typename']}")
    return data


def _next_tick(schedule: dict[str, Any]) -> str:
    ticks = (schedule.get("futureTicks") or {}).get("results") or []
    if not ticks or ticks[0].get("timestamp") is None:
        return ""
    at = time.gmtime(ticks[0]["timestamp"])
    return f", next {time.strftime('%Y-%m-%d %H:%M', at)} UTC"


def ready_lines(
    url: str,
    waited_s: float,
    location: tuple[str, str | None],
    repo: dict[str, Any] | None,
    schedules_on: bool,
    log_dir: Path,
) -> list[str]:
    """The READY line (the UI answers; schedules and sensors) and where the logs are."""
    load, error = location
    if load == "LOADED" and not error:
        where = f"code location {LOCATION} loaded"
    elif error:
        where = f"code location {LOCATION} FAILED to load: {error.strip().splitlines()[-1]}"
    else:
        where = f"code location {LOCATION} {load} (not loaded yet)"
    lines = [f"READY: Dagster UI on {url} (answered after {waited_s:.0f} s, {where})"]
    if repo is not None:
        parts = []
        for s in repo["schedules"]:
            status = s["scheduleState"]["status"]
            note = ""
            if status != "RUNNING":
                note = " (--no-schedules)" if not schedules_on else " (stopped in the UI)"
            parts.append(
                f"{s['name']} {status}{note}{_next_tick(s) if status == 'RUNNING' else ''}"
            )
        lines.append("schedules: " + ("; ".join(parts) or "none"))
        sensors = [f"{s['name']} {s['sensorState']['status']}" for s in repo["sensors"]]
        lines.append("sensors: " + (", ".join(sensors) or "none"))
    lines.append(
        f"logs: {log_dir}/<dagster|stream-apps|generator>.log (the console shows warnings, "
        "errors and a status line); Ctrl-C stops everything"
    )
    return lines


def status_line(
    report: dict[str, Any] | None, alive: dict[str, bool], hidden: dict[str, int] | None = None
) -> str:
    """One compact line: each stream application's health, rate and lag (the supervisor's
    status file; None: not started), which children run, and how many repeated warnings
    each child's log holds that the console did not show (``hidden``)."""
    repeats = {n: k for n, k in (hidden or {}).items() if k}
    tail = ""
    if repeats:
        tail = " | repeated warnings in the logs only: " + ", ".join(
            f"{n} {k}" for n, k in repeats.items()
        )
    if report is None:
        return (
            "stream apps: not started (--no-stream-apps) | "
            + ", ".join(f"{n} {'up' if up else 'DOWN'}" for n, up in alive.items())
            + tail
        )
    apps = report.get("apps") or {}
    parts = []
    for name, s in apps.items():
        health = s.get("health") or s.get("state") or "?"
        text = f"{name} {health}"
        if health == "RUNNING":
            text += f" {float(s.get('records_per_second') or 0):.1f}/s lag {s.get('consumer_lag_max', 0)}"
        parts.append(text)
    line = "stream apps: " + (", ".join(parts) if parts else "no status yet")
    if report.get("broker_error"):
        line += f" | Kafka: {report['broker_error']}"
    line += " | " + ", ".join(f"{n} {'up' if up else 'DOWN'}" for n, up in alive.items())
    return line + tail


def read_stream_status() -> dict[str, Any]:
    """The supervisor's last status report (empty before its first)."""
    from pipelines.streams.supervisor import read_status

    return read_status(STATE_DIR)


def announce_ready(url: str, waited_s: float, schedules_on: bool, stop: threading.Event) -> None:
    """Print the READY line once the UI answers: whether the code location loaded (waiting
    for it up to 5 minutes), the schedules and sensors, and where the logs are."""
    location: tuple[str, str | None] = ("UNKNOWN", None)
    deadline = time.monotonic() + 300
    while not stop.is_set():
        try:
            location = location_status(url)
        except Exception as exc:  # the webserver is still starting its GraphQL
            location = ("UNKNOWN", str(exc))
        if location[0] == "LOADED" or time.monotonic() > deadline:
            break
        stop.wait(2.0)
    repo = None
    if location[0] == "LOADED" and not location[1]:
        try:
            repo = instigators(url)
        except Exception as exc:
            _log(f"WARNING: could not read the schedules: {exc}")
    log_dir = LOG_DIR.relative_to(REPO) if LOG_DIR.is_relative_to(REPO) else LOG_DIR
    for line in ready_lines(url, waited_s, location, repo, schedules_on, log_dir):
        _log(line)


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
    parser.add_argument(
        "--no-schedules",
        action="store_true",
        help="start the schedules and the sensors that launch runs stopped "
        "(PLATFORM_AUTOMATION=off; one started in the UI stays started)",
    )
    parser.add_argument(
        "--status-interval",
        type=float,
        default=60.0,
        help="seconds between status lines on the console (also printed when an app's "
        "health changes)",
    )
    parser.add_argument(
        "--ui-timeout",
        type=float,
        default=900.0,
        help="seconds to wait for the Dagster UI to answer before giving up",
    )
    args = parser.parse_args(argv)
    kafka_port = args.kafka_port if args.kafka_port is not None else default_kafka_port()
    local_broker = not os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    try:
        run_lock = hold_run_lock()  # noqa: F841 (held until the process ends)
        if args.fresh and not clean_state(fresh_paths(args.keep_lake), assume_yes=args.yes):
            return 1
        # what would fail later, half-started, fails now with what to change
        check_ports(
            args.port,
            kafka_port if local_broker else None,
            range(0) if args.no_stream_apps else query_ports(),
        )
        if local_broker:
            check_java()
    except StartRefused as exc:
        _log(str(exc))
        return 1

    stop = threading.Event()
    stop_asked: list[float] = []  # when the user asked to stop (a signal), if they did

    def ask_stop(*_: Any) -> None:
        stop_asked.append(time.time())
        for pump in PUMPS.values():
            pump.quiet()
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, ask_stop)

    cluster = None
    registry = None
    registry_url = os.environ.get("SCHEMA_REGISTRY_URL")
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    children: list[tuple[str, subprocess.Popen, int, float]] = []
    url = f"http://127.0.0.1:{args.port}"
    ready = False
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
        if not registry_url:
            registry = start_local_registry()
            registry_url = registry.url if registry is not None else None
        if os.environ.get("PLATFORM_VALUE_FORMAT") == "avro" and not registry_url:
            _log("PLATFORM_VALUE_FORMAT=avro needs a schema registry: set SCHEMA_REGISTRY_URL")
            return 1
        # an external cluster's TLS/SASL settings come from the environment, as the stream
        # applications, the generator and Dagster's resources read them
        kafka = KafkaConnection.from_env({**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap})
        cluster_id, _ = _report_broker(kafka, new, KAFKA_DATA_DIR if cluster else None)
        for note in follow_cluster(cluster_id, bool(new), STATE_DIR):
            _log(f"WARNING: {note}")
        _log(
            f"stream state in {STATE_DIR}, lake in {os.environ.get('LAKE_ROOT') or DEFAULT_LAKE}"
            f", Dagster (runs, sensor cursors) in {DAGSTER_HOME}"
        )
        from pipelines.topics import create_topics

        create_topics(kafka)
        # a new platform starts with the last complete hour of data, sent at the pace the
        # stream applications read it: an hour to reconcile within minutes
        catch_up_from = (
            previous_hour_start()
            if new and not args.no_generator and not args.no_stream_apps
            else None
        )
        if catch_up_from is not None:
            _log(
                f"a new broker: the generator sends the events from {_clock(catch_up_from)} "
                "on first (a few minutes), then goes on in real time"
            )
        env = {
            **os.environ,
            "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
            "DAGSTER_HOME": str(prepare_dagster_home(DAGSTER_HOME)),
            "STREAM_STATE_DIR": str(STATE_DIR),
            "PLATFORM_PARTITIONS_START": os.environ.get("PLATFORM_PARTITIONS_START")
            or partitions_start_hour(STATE_DIR, first_ms=catch_up_from),
            "GX_ANALYTICS_ENABLED": "false",
            **({"SCHEMA_REGISTRY_URL": registry_url} if registry_url else {}),
            **({"PLATFORM_AUTOMATION": "off"} if args.no_schedules else {}),
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
                        [py, "-m", "pipelines.streams.supervisor", "--bootstrap", bootstrap],
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
                    _start(
                        "generator",
                        generator_command(py, bootstrap, args.rate, catch_up_from),
                        env,
                    ),
                    signal.SIGTERM,
                    15.0,
                )
            )
        dg = str(Path(py).with_name("dg"))  # dagster-dg-cli: `dagster dev` is superseded
        children.append(
            (
                "dagster",
                _start(
                    "dagster",
                    [
                        dg,
                        "dev",
                        "-w",
                        "workspace.yaml",
                        "-p",
                        str(args.port),
                        "-h",
                        "127.0.0.1",
                        # the services' INFO lines go to the log file only; the run
                        # workers' console loggers are at INFO (definitions.py), not DEBUG
                        "--log-level",
                        "info",
                    ],
                    env,
                ),
                signal.SIGINT,
                60.0,
            )
        )
        _log(f"waiting for the Dagster UI on {url} to answer (it loads the code location first)")
        began = time.monotonic()
        last_note = last_status = began
        last_health: dict[str, Any] | None = None
        while not stop.wait(1.0):
            for name, proc, _, _ in children:
                if proc.poll() is not None and not stop.is_set():
                    _log(f"{name} exited with {proc.returncode}; stopping the platform")
                    for line in tail(log_path(name)):
                        _log(f"  {name}: {line}")
                    stop.set()
            if stop.is_set():
                break
            now = time.monotonic()
            if not ready:
                if ui_answers(url):
                    ready = True
                    announce_ready(url, now - began, not args.no_schedules, stop)
                    if resumed := resume_runs(url, take_runs_to_resume()):
                        _log(
                            f"launched again {len(resumed)} run(s) the last stop cancelled: "
                            + ", ".join(f"{old[:8]} as {new[:8]}" for old, new in resumed)
                        )
                    last_status = time.monotonic()
                elif now - began > args.ui_timeout:
                    _log(
                        f"the Dagster UI did not answer on {url} within {args.ui_timeout:.0f} s; "
                        f"stopping (see {log_path('dagster')})"
                    )
                    for line in tail(log_path("dagster")):
                        _log(f"  dagster: {line}")
                    stop.set()
                elif now - last_note >= 30:
                    _log(f"still waiting for the Dagster UI ({now - began:.0f} s)")
                    last_note = now
                continue
            report = None if args.no_stream_apps else read_stream_status()
            health = {n: a.get("health") for n, a in ((report or {}).get("apps") or {}).items()}
            changed = last_health is not None and health != last_health
            if changed or now - last_status >= args.status_interval:
                alive = {name: proc.poll() is None for name, proc, _, _ in children}
                hidden = {name: pump.take_hidden() for name, pump in PUMPS.items()}
                _log(status_line(report, alive, hidden))
                last_status, last_health = now, health
            elif last_health is None and health:
                last_health = health
    finally:
        cancelled: list[dict[str, Any]] = []
        cancel_asked = min([time.time(), *stop_asked])
        if ready:
            try:
                cancelled = cancel_runs(url)
            except Exception as exc:  # the webserver may be gone already
                _log(f"WARNING: could not cancel the runs in flight: {exc}")
            else:
                if cancelled:
                    _log(
                        f"cancelled {len(cancelled)} run(s) in flight: "
                        + ", ".join(f"{r['jobName']} {r['runId'][:8]}" for r in cancelled)
                    )
                    if again := remember_runs_to_resume(cancelled):
                        _log(f"the next start launches {len(again)} of them again")
        for name, proc, sig, timeout in reversed(children):
            _stop(name, proc, sig, timeout)
        if cancelled:
            try:
                settled = settle_cancelled_runs([r["runId"] for r in cancelled], since=cancel_asked)
            except Exception as exc:
                _log(f"WARNING: could not mark the cancelled runs CANCELED: {exc}")
            else:
                if settled:
                    _log(
                        f"marked {len(settled)} run(s) CANCELED that were still cancelling "
                        "when the UI stopped or failed while cancelling: "
                        + ", ".join(r[:8] for r in settled)
                    )
        if registry is not None:
            registry.stop()
        if cluster is not None:
            _log("stopping the Kafka broker")
            cluster.stop()
        held = {name: pump.held_while_stopping for name, pump in PUMPS.items()}
        if any(held.values()):
            _log(
                "while stopping, the children logged warnings or errors of the work the stop "
                "interrupted, in their logs only: "
                + ", ".join(f"{n} {c} line(s) ({log_path(n)})" for n, c in held.items() if c)
            )
        _log("stopped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
