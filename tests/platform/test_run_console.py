"""``make run``'s console (``pipelines.run``): each child's output goes whole to its log file and
only its warnings and errors to the console; the run workers log at INFO, not DEBUG; the
READY line comes once the Dagster UI answers HTTP, with the schedules (running) and
sensors; a compact status line follows. The last test runs ``python -m pipelines.run`` with a
real ``dg dev`` against the session broker."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from dagster import DagsterInstance, DagsterRunStatus, asset, materialize

from pipelines import run
from streaming.testing import free_port, free_port_pair

REPO = Path(__file__).resolve().parents[2]


def test_console_shows_warnings_and_errors_and_the_file_everything(tmp_path: Path) -> None:
    lines = [
        "2026-11-24 09:02:01 +0000 - dagster - DEBUG - job - 1234 - STEP_START - Started",
        "\x1b[32m2026-11-24 09:02:01 +0000 - dagster - INFO - Serving dagster-webserver\x1b[0m",
        "\x1b[33m2026-11-24 09:02:02 +0000 - dagster - WARNING - the daemon is slow\x1b[0m",
        "2026-11-24 09:02:03,001 pipelines.streams.supervisor INFO stream apps: windowed-revenue "
        "RUNNING (PENDING_ERROR never)",
        "2026-11-24 09:02:03,002 pipelines.streams.supervisor ERROR windowed-revenue died",
        "2026-11-24 09:11:23 +0000 - dagster - WARNING - /x/decorator_utils.py:232: "
        "BetaWarning: Parameter `backfill_policy` of function `asset` is currently in beta",
        "Traceback (most recent call last):",
        '  File "x.py", line 1, in <module>',
    ]
    stream = io.BytesIO("".join(line + "\n" for line in lines).encode())
    said: list[str] = []
    pump = run.LogPump("dagster", stream, tmp_path / "logs" / "dagster.log", say=said.append)
    pump.start()
    pump.join(10)
    written = (tmp_path / "logs" / "dagster.log").read_text().splitlines()
    assert written == [run._ANSI.sub("", line) for line in lines]  # whole, without colours
    assert said == [
        "dagster: 2026-11-24 09:02:02 +0000 - dagster - WARNING - the daemon is slow",
        "dagster: 2026-11-24 09:02:03,002 pipelines.streams.supervisor ERROR windowed-revenue died",
        "dagster: Traceback (most recent call last):",
    ]
    assert run.log_path("stream apps", tmp_path) == tmp_path / "stream-apps.log"


def test_a_repeated_warning_shows_once_per_interval(tmp_path: Path) -> None:
    """The same warning about record after record (a malformed order every few seconds)
    shows once a minute; the others are counted for the status line and kept in the file."""
    lines = [
        f"2026-11-24 09:13:{s:02d},470 streaming.runtime.task WARNING Skipping record "
        f"orders-0@{s * 7}: deserialization failed"
        for s in range(10)
    ] + ["2026-11-24 09:14:00,001 pipelines.streams.supervisor WARNING windowed-revenue STALLED"]
    stream = io.BytesIO("".join(line + "\n" for line in lines).encode())
    said: list[str] = []
    pump = run.LogPump("stream apps", stream, tmp_path / "s.log", say=said.append)
    pump.start()
    pump.join(10)
    assert said == [f"stream apps: {lines[0]}", f"stream apps: {lines[-1]}"]
    assert pump.take_hidden() == 9 and pump.take_hidden() == 0
    assert len((tmp_path / "s.log").read_text().splitlines()) == 11
    assert run.status_line(None, {"stream apps": True}, {"stream apps": 9, "dagster": 0}) == (
        "stream apps: not started (--no-stream-apps) | stream apps up | repeated warnings "
        "in the logs only: stream apps 9"
    )


def test_run_workers_log_info_not_debug_to_the_console(tmp_path: Path, capfd) -> None:
    """``platform/dagster.yaml`` (``make run``'s instance): the console of a run shows INFO
    and up; the event log still has every event."""
    shutil.copyfile(REPO / "platform" / "dagster.yaml", tmp_path / "dagster.yaml")

    @asset
    def chatty(context) -> None:
        context.log.info("an info line")
        context.log.debug("a debug line")

    with DagsterInstance.from_config(str(tmp_path)) as instance:
        result = materialize([chatty], instance=instance)
        stored = instance.all_logs(result.run_id)
    err = capfd.readouterr().err
    assert "an info line" in err
    assert " - DEBUG - " not in err and "STEP_START" not in err
    types = {e.dagster_event.event_type_value for e in stored if e.dagster_event}
    assert {"STEP_START", "STEP_SUCCESS", "ASSET_MATERIALIZATION"} <= types


def test_make_runs_instance_waits_minutes_for_its_code_location(tmp_path: Path) -> None:
    """A first ``make run`` on a loaded 2-core machine took over Dagster's default 180 s to
    import the code location, and the UI never came up: ``make run``'s instance waits 15
    minutes, whatever the machine."""
    home = run.prepare_dagster_home(tmp_path / "home")
    with DagsterInstance.from_config(str(home)) as instance:
        assert instance.code_server_process_startup_timeout >= 900


def test_once_the_user_stops_the_platform_errors_go_to_the_log_only(tmp_path: Path) -> None:
    """After Ctrl-C the runs the stop interrupts log errors (a Spark gateway gone): they are
    written to the file and counted, not shown; before it, an error shows."""
    stream = io.BytesIO(b"ERROR before\n")
    said: list[str] = []
    pump = run.LogPump("dagster", stream, tmp_path / "d.log", say=said.append)
    pump.start()
    pump.join(10)
    assert said == ["dagster: ERROR before"] and pump.held_while_stopping == 0
    stream = io.BytesIO(b"ERROR:root:Exception while sending command.\nTraceback (most\nok\n")
    pump = run.LogPump("dagster", stream, tmp_path / "d.log", say=said.append)
    pump.quiet()
    pump.start()
    pump.join(10)
    assert said == ["dagster: ERROR before"] and pump.held_while_stopping == 2
    assert len((tmp_path / "d.log").read_text().splitlines()) == 4


def test_the_jvm_notice_of_each_spark_start_and_dbts_summary_are_no_warnings() -> None:
    assert not run.console_worthy("WARNING: Using incubator modules: jdk.incubator.vector")
    assert run.console_worthy("WARNING: Using a broken thing")
    assert not run.console_worthy("Done. PASS=17 WARN=0 ERROR=0 SKIP=0 NO-OP=0 TOTAL=17")
    assert run.console_worthy("12:00:01  ERROR: Database Error in model marts_revenue")


def test_a_cancelled_run_is_no_error_on_the_console() -> None:
    head = "2026-11-28 18:39:47 +0000 - dagster - ERROR - __ASSET_JOB - cfd3fa47 - 8265 - "
    assert not run.console_worthy(head + 'RUN_CANCELED - Execution of run for "x" canceled.')
    assert not run.console_worthy(
        head + "Step orders_dedup finished without success or failure event. Downstream "
        "steps will not execute."
    )
    assert run.console_worthy(head + 'RUN_FAILURE - Execution of run for "x" failed.')
    assert run.console_worthy(head + "STEP_FAILURE - boom")


class _FakeWebserver:
    """The two GraphQL documents ``cancel_runs`` sends, answered as Dagster does: a
    terminate marks the run CANCELING at once, then waits for the run's code server (here:
    ``busy`` seconds for run A, whose server is starting another run) before the worker
    ends it CANCELED. Run B is launched by the daemon after the first query."""

    def __init__(self, busy: float) -> None:
        self.busy = busy
        self.runs = {"A": "STARTED"}
        self.queries = 0
        self.terminated: list[str] = []
        self.lock = threading.Lock()

    def graphql(self, url: str, query: str, variables: dict | None = None, timeout: float = 30):
        if query is run.IN_FLIGHT_RUNS_QUERY:
            with self.lock:
                self.queries += 1
                if self.queries == 2:
                    self.runs["B"] = "QUEUED"
                results = [
                    {"runId": r, "jobName": "job", "status": status}
                    for r, status in self.runs.items()
                    if status not in ("CANCELED", "SUCCESS")
                ]
            return {"runsOrError": {"results": results}}
        assert query is run.TERMINATE_RUNS_MUTATION
        (run_id,) = variables["runIds"]
        with self.lock:
            self.terminated.append(run_id)
            self.runs[run_id] = "CANCELING"
        time.sleep(self.busy if run_id == "A" else 0)
        with self.lock:
            self.runs[run_id] = "CANCELED"
        return {"terminateRuns": {"__typename": "TerminateRunsResult"}}


def test_cancel_runs_terminates_each_run_apart_and_the_runs_launched_meanwhile(
    monkeypatch,
) -> None:
    web = _FakeWebserver(busy=3.0)
    monkeypatch.setattr(run, "graphql", web.graphql)
    cancelled = run.cancel_runs("http://ui", timeout=20, poll=0.05)
    assert [r["runId"] for r in cancelled] == ["A", "B"]
    assert sorted(web.terminated) == ["A", "B"]
    assert web.runs == {"A": "CANCELED", "B": "CANCELED"}


def test_cancel_runs_gives_up_waiting_at_its_timeout(monkeypatch) -> None:
    web = _FakeWebserver(busy=5.0)  # longer than the timeout
    monkeypatch.setattr(run, "graphql", web.graphql)
    cancelled = run.cancel_runs("http://ui", timeout=1.0, poll=0.05)
    assert [r["runId"] for r in cancelled] == ["A", "B"]
    assert web.runs["A"] == "CANCELING" and web.runs["B"] == "CANCELED"


def test_runs_cancelling_when_the_ui_stopped_or_failing_on_the_cancel_end_canceled(
    tmp_path: Path,
) -> None:
    from dagster import DagsterRunStatus
    from dagster._core.storage.dagster_run import DagsterRun

    home = tmp_path / ".dagster"
    home.mkdir()
    shutil.copyfile(REPO / "platform" / "dagster.yaml", home / "dagster.yaml")
    instance = DagsterInstance.from_config(str(home))
    failed_before = instance.add_run(DagsterRun(job_name="job", status=DagsterRunStatus.STARTED))
    instance.report_run_failed(failed_before)
    asked = time.time() + 0.01
    while time.time() < asked:
        time.sleep(0.01)
    cancelling = instance.add_run(DagsterRun(job_name="job", status=DagsterRunStatus.STARTED))
    instance.report_run_canceling(cancelling)
    done = instance.add_run(DagsterRun(job_name="job", status=DagsterRunStatus.SUCCESS))
    # interrupted while starting its resources (Spark stopped under it): failed on the cancel
    failed_cancelling = instance.add_run(
        DagsterRun(job_name="job", status=DagsterRunStatus.STARTED)
    )
    instance.report_run_canceling(failed_cancelling)
    instance.report_run_failed(failed_cancelling)
    instance.dispose()
    ids = [r.run_id for r in (failed_before, cancelling, done, failed_cancelling)]
    settled = run.settle_cancelled_runs(ids, home=home, since=asked)
    assert settled == [cancelling.run_id, failed_cancelling.run_id]
    instance = DagsterInstance.from_config(str(home))
    status = {r: instance.get_run_by_id(r).status for r in ids}
    instance.dispose()
    assert status == {
        failed_before.run_id: DagsterRunStatus.FAILURE,  # it failed before anyone cancelled
        cancelling.run_id: DagsterRunStatus.CANCELED,
        done.run_id: DagsterRunStatus.SUCCESS,
        failed_cancelling.run_id: DagsterRunStatus.CANCELED,
    }


def _run(run_id: str, **tags: str) -> dict[str, Any]:
    return {"runId": run_id, "tags": [{"key": k, "value": v} for k, v in tags.items()]}


def test_runs_the_stop_cancelled_are_kept_for_the_next_start(tmp_path: Path) -> None:
    cancelled = [
        _run("hour", **{"dagster/partition": "2026-11-29-17:00"}),
        _run("sensor", **{"dagster/sensor_name": "dbt_after_the_lake"}),
        _run("schedule", **{"dagster/schedule_name": "nightly_backfill_schedule"}),
        _run("streaming"),  # a streaming asset started from the UI: the user starts it again
        _run("backfill", **{"dagster/partition": "x", "dagster/backfill": "abc"}),
    ]
    assert run.remember_runs_to_resume(cancelled, tmp_path) == ["hour", "sensor", "schedule"]
    # a start that never got ready resumed nothing: the next stop keeps those too
    assert run.remember_runs_to_resume([_run("later", **{"dagster/partition": "y"})], tmp_path) == [
        "hour",
        "sensor",
        "schedule",
        "later",
    ]
    assert run.take_runs_to_resume(tmp_path) == ["hour", "sensor", "schedule", "later"]
    assert run.take_runs_to_resume(tmp_path) == []  # launched once
    assert run.remember_runs_to_resume([_run("streaming")], tmp_path) == []
    assert not (tmp_path / run.RESUME_FILE).exists()


def test_the_graphql_documents_fit_the_webserver_schema() -> None:
    from dagster_graphql.schema import create_schema
    from graphql import parse, validate

    schema = create_schema().graphql_schema
    for document in (
        run.LOCATIONS_QUERY,
        run.INSTIGATORS_QUERY,
        run.IN_FLIGHT_RUNS_QUERY,
        run.TERMINATE_RUNS_MUTATION,
        run.REEXECUTE_RUN_MUTATION,
    ):
        assert validate(schema, parse(document)) == []


def test_ready_and_status_lines() -> None:
    repo = {
        "schedules": [
            {
                "name": "hourly_batch_reconcile_schedule",
                "canReset": True,
                "scheduleState": {"status": "RUNNING"},
                "futureTicks": {"results": [{"timestamp": 1_767_229_800.0}]},
            },
            {
                "name": "nightly_backfill_schedule",
                "canReset": True,
                "scheduleState": {"status": "STOPPED"},
                "futureTicks": {"results": []},
            },
        ],
        "sensors": [{"name": "stream_health_sensor", "sensorState": {"status": "RUNNING"}}],
    }
    lines = run.ready_lines(
        "http://127.0.0.1:3000",
        41.6,
        ("LOADED", None),
        repo,
        True,
        Path(".state/logs"),
    )
    assert lines[0] == (
        "READY: Dagster UI on http://127.0.0.1:3000 (answered after 42 s, code location "
        "streamplatform loaded)"
    )
    assert lines[1] == (
        "schedules: hourly_batch_reconcile_schedule RUNNING, next 2026-01-01 01:10 UTC; "
        "nightly_backfill_schedule STOPPED (stopped in the UI)"
    )
    assert lines[2] == "sensors: stream_health_sensor RUNNING"
    assert ".state/logs/<dagster|stream-apps|generator>.log" in lines[3]
    failed = run.ready_lines(
        "http://x", 1, ("LOADED", "Traceback ...\nImportError: no"), None, True, Path("l")
    )
    assert "code location streamplatform FAILED to load: ImportError: no" in failed[0]

    report = {
        "apps": {
            "windowed-revenue": {
                "health": "RUNNING",
                "records_per_second": 4.94,
                "consumer_lag_max": 3,
            },
            "orders-dedup": {"health": "STALLED", "records_per_second": 0.0},
        }
    }
    assert run.status_line(report, {"stream apps": True, "dagster": True}) == (
        "stream apps: windowed-revenue RUNNING 4.9/s lag 3, orders-dedup STALLED | "
        "stream apps up, dagster up"
    )
    assert run.status_line({}, {"dagster": False}) == "stream apps: no status yet | dagster DOWN"
    assert run.status_line(None, {"dagster": True}) == (
        "stream apps: not started (--no-stream-apps) | dagster up"
    )


def test_make_run_stops_when_another_ui_holds_its_port(own_run_lock: Path, capsys) -> None:
    """READY must be about this run's UI: a port already answering /server_info stops it."""
    import http.server

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/server_info" else 404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        assert run.ui_answers(f"http://127.0.0.1:{port}")
        assert run.main(["--port", str(port), "--kafka-port", str(free_port_pair())]) == 1
    finally:
        server.shutdown()
    out = capsys.readouterr().out
    assert (
        f"port {port}, needed by the Dagster UI, is in use by another process (a Dagster UI "
        "answers there: another platform?); stop it, or run with --port N" in out
    )
    assert not run.ui_answers(f"http://127.0.0.1:{free_port()}", timeout=0.5)


@pytest.fixture
def own_run_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``make run``'s lock in ``tmp_path`` (not the checkout's, which a developer's own
    ``make run`` may hold)."""
    monkeypatch.setattr(run, "RUN_LOCK", tmp_path / ".run.lock")
    return tmp_path / ".run.lock"


def _busy_after_two_free_ports() -> socket.socket:
    """A listening socket on a port whose two predecessors are free right now."""
    for _ in range(50):
        busy = socket.socket()
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        try:
            for before in (port - 2, port - 1):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", before))
            return busy
        except OSError:
            busy.close()
    raise AssertionError("no port with two free ports before it")


def test_make_run_names_a_busy_broker_port_before_starting_anything(
    own_run_lock: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    started: list[Any] = []
    monkeypatch.setattr(run, "_start", lambda *a, **k: started.append(a))
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        kafka_port = busy.getsockname()[1]
        assert run.main(["--port", str(free_port()), "--kafka-port", str(kafka_port)]) == 1
    out = capsys.readouterr().out
    assert (
        f"port {kafka_port}, needed by the Kafka broker, is in use by another process; stop "
        "it, or run with --kafka-port N (or KAFKA_PORT=N make run" in out
    )
    assert started == [] and "starting the local Kafka broker" not in out
    # the stream applications' query servers, from STREAM_QUERY_BASE_PORT on: the third
    # one's port is taken (the two before it free, or other tests' servers would be named)
    with _busy_after_two_free_ports() as busy:
        query_port = busy.getsockname()[1]
        monkeypatch.setenv("STREAM_QUERY_BASE_PORT", str(query_port - 2))
        assert run.main(["--port", str(free_port()), "--kafka-port", str(free_port_pair())]) == 1
    out = capsys.readouterr().out
    assert (
        f"port {query_port}, needed by a stream application's query server, is in use by "
        "another process; stop it, or run with STREAM_QUERY_BASE_PORT=N make run" in out
    )
    assert started == []


def test_a_second_make_run_in_the_checkout_names_the_first(own_run_lock: Path, capsys) -> None:
    first = run.hold_run_lock()
    try:
        assert own_run_lock.read_text().strip() == str(os.getpid())
        with pytest.raises(run.StartRefused, match=rf"another make run \(pid {os.getpid()}\)"):
            run.hold_run_lock()
        assert run.main(["--port", str(free_port())]) == 1
        out = capsys.readouterr().out
        assert f"another make run (pid {os.getpid()}) is running in this checkout" in out
        assert "--fresh" not in out and "--port" not in out
    finally:
        first.close()
    run.hold_run_lock().close()  # free again once the first has ended


def test_make_run_without_java_says_so_without_suggesting_fresh(
    own_run_lock: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setenv("STREAM_QUERY_BASE_PORT", "0")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert run.main(["--port", str(free_port()), "--kafka-port", str(free_port_pair())]) == 1
    out = capsys.readouterr().out
    assert "java was not found" in out and "KAFKA_BOOTSTRAP_SERVERS" in out
    assert "--fresh" not in out


LAUNCH = """
import sys
from pathlib import Path

import pipelines.run as run

root = Path(sys.argv[1])
run.DAGSTER_HOME = root / ".dagster"
run.STATE_DIR = root / ".state"
run.KAFKA_DATA_DIR = run.STATE_DIR / "kafka"
run.CLUSTER_FILE = run.STATE_DIR / "kafka-cluster.json"
run.LOG_DIR = run.STATE_DIR / "logs"
run.RUN_LOCK = root / ".run.lock"
raise SystemExit(run.main(sys.argv[2:]))
"""


@pytest.mark.timeout(900)
def test_make_run_says_ready_once_the_ui_answers(kafka_cluster, tmp_path: Path) -> None:
    """``python -m pipelines.run`` (the broker: the session's; no generator nor stream apps):
    READY comes once the UI answers, the schedules are on, the console is compact and the
    child's output is in its log file; Ctrl-C stops everything."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": kafka_cluster.bootstrap_servers,
        "LAKE_ROOT": str(tmp_path / "lake"),
        "PYTHONPATH": str(REPO),
    }
    # the platform's first hour: the last complete one, so an hourly run can be launched
    first_hour = time.strftime("%Y-%m-%d-%H:00", time.gmtime(time.time() - 3600))
    (tmp_path / ".state").mkdir()
    (tmp_path / ".state" / "first-hour.txt").write_text(first_hour)
    cmd = [sys.executable, "-c", LAUNCH, str(tmp_path)]
    cmd += ["--port", str(port), "--no-generator", "--no-stream-apps", "--status-interval", "3"]
    started = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    console: list[str] = []
    answered_at_ready: list[bool] = []

    def read() -> None:
        for line in proc.stdout:
            console.append(line.rstrip("\n"))
            if "READY:" in line:
                answered_at_ready.append(run.ui_answers(url))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            if any(line.startswith("[run] stream apps:") for line in console):
                break  # READY, then a status line
            time.sleep(0.5)
        assert proc.poll() is None, "\n".join(console)
        text = "\n".join(console)
        assert answered_at_ready == [True], text
        ready = next(line for line in console if "READY:" in line)
        assert f"READY: Dagster UI on {url}" in ready
        assert "code location streamplatform loaded" in ready
        schedules = next(line for line in console if line.startswith("[run] schedules:"))
        assert "hourly_batch_reconcile_schedule RUNNING, next " in schedules
        assert "nightly_backfill_schedule RUNNING, next " in schedules
        sensors = next(line for line in console if line.startswith("[run] sensors:"))
        assert "stream_health_sensor RUNNING" in sensors
        # the UI agrees: the schedules are on
        repo = run.instigators(url)
        assert {s["scheduleState"]["status"] for s in repo["schedules"]} == {"RUNNING"}
        with urllib.request.urlopen(f"{url}/server_info", timeout=10) as response:
            assert response.status == 200
        # compact: no DEBUG flood, nothing of dg dev's own INFO start-up lines
        assert " - DEBUG - " not in text and "Serving dagster-webserver" not in text
        assert "BetaWarning" not in text
        log = (tmp_path / ".state" / "logs" / "dagster.log").read_text()
        assert "Serving dagster-webserver" in log
        assert "superseded" not in log  # `dg dev`, not the deprecated `dagster dev`
        # a streaming asset runs until it is stopped: Ctrl-C of make run cancels it
        streaming_run = _launch_asset_run(url, ["kafka", "orders-deduped"])
        deadline = time.monotonic() + 240
        while _run_status(url, streaming_run) != "STARTED" and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _run_status(url, streaming_run) == "STARTED"
        # and an hourly reconciliation, stopped while it starts its resources (a Spark session)
        batch_run = _launch_hourly_run(url, first_hour)
        deadline = time.monotonic() + 240
        while "ResourceInitStartedEvent" not in _run_events(url, batch_run):
            assert time.monotonic() < deadline, _run_events(url, batch_run)
            time.sleep(0.2)
        assert "ResourceInitSuccessEvent" not in _run_events(url, batch_run)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGINT)
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        reader.join(10)
    assert proc.returncode == 0, "\n".join(console)
    assert console[-1] == "[run] stopped"
    # compact: apart from the status line every --status-interval (3 s) and the health
    # sensor's alerts, one line each (the shared broker holds other modules' lagging groups),
    # a few lines of start and stop
    alerts = [line for line in console if "ALERT: " in line]
    status = [line for line in console if line.startswith("[run] stream apps:")]
    assert len(status) <= (time.monotonic() - started) / 3 + 2, "\n".join(console)
    assert len(console) - len(alerts) - len(status) < 25, "\n".join(console)
    text = "\n".join(console)
    # both runs, and any run the hourly schedule started meanwhile (its :10 tick)
    cancelled = next(line for line in console if "run(s) in flight:" in line)
    runs = cancelled.split("in flight: ", 1)[1].split(", ")
    assert f"__ASSET_JOB {streaming_run[:8]}" in runs, cancelled
    assert f"hourly_batch_reconcile {batch_run[:8]}" in runs, cancelled
    assert all(r.startswith(("__ASSET_JOB", "hourly_batch_reconcile ")) for r in runs), cancelled
    # what the interrupted runs logged (a Spark gateway gone, resources not started) is in
    # the log file, not on the console: the user asked for the stop
    # (the shared broker's other topics may make the health sensor warn before the stop)
    stopping = "\n".join(line for line in console[console.index(cancelled) :] if line not in alerts)
    assert "ERROR" not in text and "Traceback" not in text and "WARNING" not in stopping, text
    # the next start launches the hour's run again, not the streaming asset's
    remembered = json.loads((tmp_path / ".state" / run.RESUME_FILE).read_text())
    assert batch_run in remembered and streaming_run not in remembered, remembered
    assert all(f" {r[:8]}" in cancelled for r in remembered), (remembered, cancelled)
    instance = DagsterInstance.from_config(str(tmp_path / ".dagster"))
    for run_id in (streaming_run, batch_run):
        record = instance.get_run_by_id(run_id)
        assert record is not None and record.status == DagsterRunStatus.CANCELED, record
    instance.dispose()


_LAUNCH_RUN = """
mutation($p: ExecutionParams!) {
  launchRun(executionParams: $p) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on Error { message }
  }
}
"""


def _launch_run(url: str, selector: dict[str, Any], tags: dict[str, str] | None = None) -> str:
    """Launch the job of ``selector`` (in this repository) as the UI does; its run id."""
    params: dict[str, Any] = {
        "selector": {
            "repositoryLocationName": run.LOCATION,
            "repositoryName": run.REPOSITORY,
            **selector,
        },
        "runConfigData": {},
    }
    if tags:
        params["executionMetadata"] = {"tags": [{"key": k, "value": v} for k, v in tags.items()]}
    result = run.graphql(url, _LAUNCH_RUN, {"p": params})["launchRun"]
    assert result["__typename"] == "LaunchRunSuccess", result
    return result["run"]["runId"]


def _launch_asset_run(url: str, path: list[str]) -> str:
    """Materialize the asset at ``path`` as the UI's button does; its run id."""
    return _launch_run(url, {"jobName": "__ASSET_JOB", "assetSelection": [{"path": path}]})


def _launch_hourly_run(url: str, partition: str) -> str:
    """Launch the hourly reconciliation of ``partition`` as the UI's job page does; its id."""
    return _launch_run(url, {"jobName": "hourly_batch_reconcile"}, {"dagster/partition": partition})


def _run_events(url: str, run_id: str) -> list[str]:
    """The GraphQL types of the events of run ``run_id`` so far."""
    data = run.graphql(
        url,
        """
        query($id: ID!) {
          logsForRun(runId: $id) {
            __typename
            ... on EventConnection { events { __typename } }
          }
        }
        """,
        {"id": run_id},
    )["logsForRun"]
    return [event["__typename"] for event in data.get("events", [])]


def _run_status(url: str, run_id: str) -> str | None:
    data = run.graphql(
        url,
        "query($id: ID!) { runOrError(runId: $id) { __typename ... on Run { status } } }",
        {"id": run_id},
    )["runOrError"]
    return data.get("status")
