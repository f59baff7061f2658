"""The cluster deployment's Dagster instance (``platform/cluster/dagster.yaml``) on a real
PostgreSQL: ``dagster-webserver`` and ``dagster-daemon`` as a cluster runs them, both served
by one code server (``dagster code-server start``, a ``grpc_server`` workspace entry: the
Kubernetes deployment's user-code server), every state in Postgres.

- the instance's run, event-log and schedule storages are Postgres, runs are queued;
- partitioned runs of the ``hourly_batch_reconcile`` job (its reconciliation step, for two
  hours of an empty lake) submitted from GraphQL wait in the queue until the daemon
  dequeues and launches them, and complete;
- runs tagged ``platform/compute: spark`` never run two at once: the second stays queued
  until the first has finished (the instance's tag concurrency limit);
- a sensor started from GraphQL is ticked by the daemon, the tick stored in Postgres;
  sensors stopped there are not ticked.

The PostgreSQL server is Debian's (``local_postgres.LocalPostgres``); the test fails when
it is not installed (``.ci/run`` installs it).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg2
import pytest
import requests
from dagster import AssetKey, DagsterEventType, DagsterInstance, DagsterRunStatus
from dagster._core.definitions.run_request import InstigatorType
from dagster._core.scheduler.instigation import InstigatorStatus, TickStatus
from local_postgres import LocalPostgres, free_port
from webserver_graphql import LOCATION, REPOSITORY, graphql, location_loaded, stop_sensor

from pipelines.run import resume_runs

REPO = Path(__file__).resolve().parents[2]
CLUSTER_YAML = REPO / "platform" / "cluster" / "dagster.yaml"
HOURLY_JOB = "hourly_batch_reconcile"
RECONCILIATION = AssetKey(["reconcile", "stream_vs_batch"])
#: the run tag every Spark job carries; the instance lets one such run go at a time
SPARK_TAG = {"key": "platform/compute", "value": "spark"}
PARTITIONS_START = "2025-01-01-00:00"
HOURS = ("2025-01-01-00:00", "2025-01-01-01:00")
#: the resources the code location builds: the cluster deployment's (resources/deployment.py)
DEPLOYMENT = "cluster"
HEALTH_SENSOR = "stream_health_sensor"
IN_PROGRESS = {DagsterRunStatus.STARTING, DagsterRunStatus.STARTED, DagsterRunStatus.CANCELING}
FINISHED = {DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED}
LOAD_TIMEOUT_S = 240
# each Spark run starts its own session: about 40 s alone, several times that while the
# other test workers load both cores
SPARK_RUNS_TIMEOUT_S = 480


@dataclass
class Platform:
    """The running deployment: Postgres, the instance, the webserver; the daemon once
    ``start_daemon()`` ran."""

    postgres: LocalPostgres
    instance: DagsterInstance
    env: dict[str, str]
    url: str
    logs: Path
    #: the workspace file naming the code server both services use
    workspace: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    #: the sensors running by default that the fixture stopped (PLATFORM_AUTOMATION=off
    #: starts the ones that launch runs stopped already)
    stopped_sensors: set[str] = field(default_factory=set)

    def start_daemon(self) -> None:
        """``dagster-daemon run`` (queued runs, sensors, schedules, run monitoring), once."""
        if "daemon" not in self.procs:
            self.procs["daemon"] = _spawn(
                "dagster-daemon", ["run", "-w", str(self.workspace)], self.env, self.logs
            )

    @property
    def daemon_started(self) -> bool:
        return "daemon" in self.procs

    def log_tail(self, name: str, lines: int = 40) -> str:
        path = self.logs / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return f"--- {name}.log\n" + "\n".join(text.splitlines()[-lines:])

    def check_alive(self) -> None:
        for name, proc in self.procs.items():
            assert proc.poll() is None, f"{name} exited ({proc.returncode})\n{self.log_tail(name)}"


def _spawn(
    exe: str, args: list[str], env: dict[str, str], logs: Path, name: str | None = None
) -> subprocess.Popen:
    name = name or exe.removeprefix("dagster-")
    with open(logs / f"{name}.log", "ab") as out:
        return subprocess.Popen(
            [str(Path(sys.executable).with_name(exe)), *args],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            # its code server and run workers join its session: stopped with it
            start_new_session=True,
        )


def _stop(procs: list[subprocess.Popen], timeout: float = 30.0) -> None:
    """SIGTERM to each process's session at once, SIGKILL to what is left after
    ``timeout`` (code servers, run workers)."""
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(max(0.1, deadline - time.monotonic()))
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def _code_server_serves(port: int) -> bool:
    """Whether the code server on ``port`` answers with the code location's repositories
    (it loaded the code)."""
    from dagster._grpc.client import DagsterGrpcClient
    from dagster._grpc.types import ListRepositoriesResponse
    from dagster._serdes import deserialize_value

    try:
        answer = DagsterGrpcClient(port=port, host="127.0.0.1").list_repositories()
    except Exception:  # not listening yet, or still loading the code
        return False
    return isinstance(deserialize_value(answer), ListRepositoriesResponse)


def _no_data_batch_results(lake: Path, keys: tuple[str, ...]) -> None:
    """An empty lake whose batch results for the hours ``keys`` are computed (and empty):
    what the reconciliation step needs to run without Spark."""
    from pipelines.batch.recompute import RESULTS
    from pipelines.batch.store import write_result
    from pipelines.lake.duck import read_topic_hours
    from pipelines.lake.paths import hour_of
    from pipelines.lake.writer import ensure_layout
    from sensors.hours import hour_start_ms

    ensure_layout(lake)
    for key in keys:
        hour = hour_of(hour_start_ms(key))
        for result, topic in RESULTS.items():
            # the stream topic's (empty) rows have the columns the batch result has
            write_result(result, hour, read_topic_hours(topic, [hour], lake), lake)


def _sensors(url: str) -> dict[str, dict[str, Any]]:
    data = graphql(
        url,
        "query($r: RepositorySelector!) { repositoryOrError(repositorySelector: $r) { "
        "__typename ... on Repository { sensors { id name sensorState { status } } } } }",
        {"r": {"repositoryName": REPOSITORY, "repositoryLocationName": LOCATION}},
    )["repositoryOrError"]
    assert data["__typename"] == "Repository", data
    return {s["name"]: s for s in data["sensors"]}


def _start_sensor(url: str, name: str) -> None:
    selector = {
        "repositoryName": REPOSITORY,
        "repositoryLocationName": LOCATION,
        "sensorName": name,
    }
    result = graphql(
        url,
        "mutation($s: SensorSelector!) { startSensor(sensorSelector: $s) { __typename "
        "... on Sensor { sensorState { status } } ... on PythonError { message } } }",
        {"s": selector},
    )["startSensor"]
    assert result["__typename"] == "Sensor", result
    assert result["sensorState"]["status"] == "RUNNING", result


def launch_partition_run(url: str, partition: str, tags: list[dict[str, str]]) -> str:
    """Submit the reconciliation of ``partition`` (the hourly job, that step) as the UI's
    launchpad does; returns the run id (the run is queued)."""
    result = graphql(
        url,
        """
        mutation($p: ExecutionParams!) {
          launchRun(executionParams: $p) {
            __typename
            ... on LaunchRunSuccess { run { runId status } }
            ... on RunConfigValidationInvalid { errors { message } }
            ... on PythonError { message stack }
            ... on Error { message }
          }
        }
        """,
        {
            "p": {
                "selector": {
                    "repositoryLocationName": LOCATION,
                    "repositoryName": REPOSITORY,
                    "jobName": HOURLY_JOB,
                    "assetSelection": [{"path": RECONCILIATION.path}],
                },
                "runConfigData": {},
                "executionMetadata": {
                    "tags": [{"key": "dagster/partition", "value": partition}, *tags]
                },
            }
        },
    )["launchRun"]
    assert result["__typename"] == "LaunchRunSuccess", result
    assert result["run"]["status"] == "QUEUED", result
    return result["run"]["runId"]


@pytest.fixture(scope="module")
def platform(tmp_path_factory) -> Iterator[Platform]:
    postgres = LocalPostgres()
    procs: dict[str, subprocess.Popen] = {}
    instance = None
    try:
        postgres.start()
        home = tmp_path_factory.mktemp("dagster-home")
        shutil.copyfile(CLUSTER_YAML, home / "dagster.yaml")
        logs = tmp_path_factory.mktemp("dagster-logs")
        lake = tmp_path_factory.mktemp("lake")
        _no_data_batch_results(lake, HOURS)
        env = {
            **os.environ,
            **postgres.dagster_env(),
            "DAGSTER_HOME": str(home),
            "DAGSTER_DEPLOYMENT": DEPLOYMENT,
            # no broker: nothing here reads Kafka but the health sensor, which reports it
            "KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{free_port()}",
            "LAKE_ROOT": str(lake),
            "STREAM_STATE_DIR": str(tmp_path_factory.mktemp("state")),
            "PLATFORM_PARTITIONS_START": PARTITIONS_START,
            "PLATFORM_AUTOMATION": "off",  # every run here is launched by a test
            "GX_ANALYTICS_ENABLED": "false",
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p
            ),
        }
        with pytest.MonkeyPatch.context() as mp:
            for key in (*postgres.dagster_env(), "DAGSTER_HOME"):
                mp.setenv(key, env[key])
            # the instance of dagster.yaml, as every service of the deployment loads it
            instance = DagsterInstance.get()
            # the code location's server, as the Kubernetes deployment runs it
            # (platform/kubernetes/base/dagster/user-code.yaml); the webserver and the daemon
            # both use it (their workspace's grpc_server entry), none starts one of its own
            code_port = free_port()
            procs["code-server"] = _spawn(
                "dagster",
                [
                    "code-server",
                    "start",
                    "--host=127.0.0.1",
                    f"--port={code_port}",
                    f"--working-directory={REPO}",
                    "--python-file=definitions.py",
                    f"--location-name={LOCATION}",
                ],
                env,
                logs,
                name="code-server",
            )
            workspace = home / "workspace.yaml"
            workspace.write_text(
                "load_from:\n  - grpc_server:\n      host: 127.0.0.1\n"
                f"      port: {code_port}\n      location_name: {LOCATION}\n"
            )
            port = free_port()
            procs["webserver"] = _spawn(
                "dagster-webserver",
                ["-h", "127.0.0.1", "-p", str(port), "-w", str(workspace)],
                env,
                logs,
            )
            deployment = Platform(
                postgres, instance, env, f"http://127.0.0.1:{port}", logs, workspace, procs
            )
            deadline = time.monotonic() + LOAD_TIMEOUT_S
            reloads: list[str] = []
            served = False
            while True:
                deployment.check_alive()
                # the webserver's first look may come before the code server loaded the
                # code (an unreachable location, reloaded once it is served)
                served = served or _code_server_serves(code_port)
                with contextlib.suppress(requests.RequestException):
                    if served and location_loaded(deployment.url, reloads):
                        break
                assert time.monotonic() < deadline, (
                    f"the code location did not load in {LOAD_TIMEOUT_S} s\n"
                    + deployment.log_tail("webserver")
                    + "\n"
                    + deployment.log_tail("code-server")
                )
                time.sleep(1)
            # quiet until a test starts one: every sensor is stopped before the daemon
            # runs (the stop is stored in Postgres)
            for name, sensor in _sensors(deployment.url).items():
                if sensor["sensorState"]["status"] == "RUNNING":
                    stop_sensor(deployment.url, sensor["id"])
                    deployment.stopped_sensors.add(name)
            yield deployment
    finally:
        _stop([proc for name, proc in procs.items() if name != "code-server"])
        # then the code server: on SIGTERM it waits up to a minute for the calls in flight
        # to end, and with its callers gone nothing is left to wait for
        _stop([proc for name, proc in procs.items() if name == "code-server"], timeout=5)
        if instance is not None:
            instance.dispose()
        postgres.stop()


def test_instance_storage_is_postgres_and_runs_are_queued(platform: Platform) -> None:
    from dagster._core.run_coordinator import QueuedRunCoordinator
    from dagster_postgres import (
        PostgresEventLogStorage,
        PostgresRunStorage,
        PostgresScheduleStorage,
    )

    instance = platform.instance
    assert isinstance(instance.run_storage, PostgresRunStorage)
    assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
    assert isinstance(instance.schedule_storage, PostgresScheduleStorage)
    assert isinstance(instance.run_coordinator, QueuedRunCoordinator)
    assert not instance.telemetry_enabled
    queue = instance.get_concurrency_config().run_queue_config
    assert queue is not None
    # the Spark limit holds runs back, not the overall one
    assert queue.max_concurrent_runs >= 2
    spark = [
        limit
        for limit in queue.tag_concurrency_limits
        if limit["key"] == SPARK_TAG["key"] and limit.get("value") == SPARK_TAG["value"]
    ]
    assert [limit["limit"] for limit in spark] == [1], queue.tag_concurrency_limits

    # the tables are in this server's database, and the webserver (another process) wrote
    # the sensors' stopped state into them
    with contextlib.closing(psycopg2.connect(platform.postgres.url)) as conn, conn.cursor() as cur:
        cur.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        tables = {row[0] for row in cur.fetchall()}
        cur.execute("SELECT count(*) FROM instigators WHERE instigator_type = 'SENSOR'")
        (stored_sensors,) = cur.fetchone()
    assert {"runs", "event_logs", "instigators", "job_ticks", "daemon_heartbeats"} <= tables
    assert stored_sensors >= 1
    stopped = {
        s.instigator_name
        for s in instance.all_instigator_state(instigator_type=InstigatorType.SENSOR)
        if s.status == InstigatorStatus.STOPPED
    }
    assert platform.stopped_sensors - {HEALTH_SENSOR}, platform.stopped_sensors
    assert platform.stopped_sensors - {HEALTH_SENSOR} <= stopped, stopped
    # the password of DAGSTER_PG_PASSWORD is the one that lets a client in
    wrong = platform.postgres.url.replace(platform.postgres.password, "wrong-password")
    with pytest.raises(psycopg2.OperationalError, match="password authentication failed"):
        psycopg2.connect(wrong)


def test_partitioned_spark_runs_queue_and_run_one_at_a_time(platform: Platform) -> None:
    instance = platform.instance
    queued_before_daemon = not platform.daemon_started
    # no tag given: the hourly job itself carries the Spark tag
    run_ids = [launch_partition_run(platform.url, hour, []) for hour in HOURS]
    if queued_before_daemon:
        time.sleep(2)
        statuses = [instance.get_run_by_id(r).status for r in run_ids]
        assert statuses == [DagsterRunStatus.QUEUED] * 2, "nothing launches without the daemon"
    platform.start_daemon()

    # watch the runs in Postgres: never two Spark runs in progress; at some point one runs
    # while the other waits in the queue
    held_back = False
    deadline = time.monotonic() + SPARK_RUNS_TIMEOUT_S
    while True:
        platform.check_alive()
        statuses = {r: instance.get_run_by_id(r).status for r in run_ids}
        running = [r for r, s in statuses.items() if s in IN_PROGRESS]
        assert len(running) <= 1, f"two Spark runs in progress at once: {statuses}"
        if running and DagsterRunStatus.QUEUED in statuses.values():
            held_back = True
        if all(s in FINISHED for s in statuses.values()):
            break
        assert time.monotonic() < deadline, (
            f"runs not finished in {SPARK_RUNS_TIMEOUT_S} s: {statuses}\n{platform.log_tail('daemon')}"
        )
        time.sleep(0.3)

    for run_id, hour in zip(run_ids, HOURS, strict=True):
        run = instance.get_run_by_id(run_id)
        assert run.status == DagsterRunStatus.SUCCESS, _run_failure(instance, run_id)
        assert run.job_name == HOURLY_JOB
        assert run.tags["dagster/partition"] == hour
        assert run.tags[SPARK_TAG["key"]] == SPARK_TAG["value"]
    assert held_back, "the second Spark run was never seen waiting while the first ran"

    # the event log in Postgres: each run was enqueued (GraphQL), then dequeued by the
    # daemon's queued run coordinator (RUN_STARTING, as it launches the run), then ran; the
    # second was dequeued only after the first had finished
    spans = {}
    for run_id in run_ids:
        events = {
            e.dagster_event.event_type: e.timestamp
            for e in instance.all_logs(run_id)
            if e.dagster_event is not None
        }
        for kind in (
            DagsterEventType.RUN_ENQUEUED,
            DagsterEventType.RUN_STARTING,
            DagsterEventType.RUN_START,
            DagsterEventType.RUN_SUCCESS,
        ):
            assert kind in events, f"{run_id}: no {kind.value} event"
        spans[run_id] = (
            events[DagsterEventType.RUN_STARTING],
            events[DagsterEventType.RUN_SUCCESS],
        )
    first, second = sorted(spans.values())
    assert second[0] >= first[1], (
        f"the second Spark run was dequeued before the first ended: {spans}"
    )

    # the partitions' materializations, stored in Postgres by the run workers
    assert set(HOURS) <= instance.get_materialized_partitions(RECONCILIATION)

    # a run that stopping make run cancelled is launched again at the next start, as the
    # same job, partition and steps
    ((parent, again),) = resume_runs(platform.url, [run_ids[0]])
    assert parent == run_ids[0]
    deadline = time.monotonic() + SPARK_RUNS_TIMEOUT_S
    while (status := instance.get_run_by_id(again).status) not in FINISHED:
        platform.check_alive()
        assert time.monotonic() < deadline, f"the run launched again did not finish: {status}"
        time.sleep(0.3)
    resumed = instance.get_run_by_id(again)
    assert resumed.status == DagsterRunStatus.SUCCESS, _run_failure(instance, again)
    assert resumed.parent_run_id == parent and resumed.job_name == HOURLY_JOB
    assert resumed.tags["dagster/partition"] == HOURS[0]
    assert resumed.tags["platform/resumed"] == "after make run stopped"


def _run_failure(instance: DagsterInstance, run_id: str) -> str:
    """The run's error lines, for the assertion message."""
    lines = [
        f"{e.dagster_event.event_type_value if e.dagster_event else 'log'}: {e.message}"
        for e in instance.all_logs(run_id)
        if e.level >= logging.ERROR
        or (e.dagster_event is not None and "FAILURE" in e.dagster_event.event_type_value)
    ]
    return f"run {run_id} did not succeed:\n" + "\n".join(lines)


def test_sensor_tick_is_stored_in_postgres(platform: Platform) -> None:
    instance = platform.instance
    platform.start_daemon()
    _start_sensor(platform.url, HEALTH_SENSOR)

    def ticks(name: str) -> list:
        states = {
            s.instigator_name: s
            for s in instance.all_instigator_state(instigator_type=InstigatorType.SENSOR)
        }
        state = states.get(name)
        if state is None:
            return []
        return list(instance.get_ticks(state.instigator_origin_id, state.selector_id))

    deadline = time.monotonic() + 180
    while True:
        platform.check_alive()
        done = [t for t in ticks(HEALTH_SENSOR) if t.status != TickStatus.STARTED]
        if done:
            break
        assert time.monotonic() < deadline, (
            f"no {HEALTH_SENSOR} tick in 180 s\n{platform.log_tail('daemon')}"
        )
        time.sleep(1)
    tick = done[0]
    # the sensor's own evaluation: with no broker it reports that, observing every app
    assert tick.status == TickStatus.SKIPPED, (tick.status, tick.error)
    assert tick.skip_reason and tick.skip_reason.startswith("Observed "), tick.skip_reason
    assert "Kafka does not answer" in tick.skip_reason
    # the sensors stopped in Postgres were not evaluated
    for name in _sensors(platform.url):
        if name != HEALTH_SENSOR:
            assert ticks(name) == [], f"{name} is stopped but was ticked"
    # the daemon's heartbeats are in Postgres too
    heartbeats = instance.get_daemon_heartbeats()
    assert {"SENSOR", "QUEUED_RUN_COORDINATOR"} <= set(heartbeats), sorted(heartbeats)
