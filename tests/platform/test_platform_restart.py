"""A user's first hour with the platform: what the README suggests, in the order a user does
it, then the hour reconciled.

The stream applications run as ``make run`` runs them (the supervisor, a process of its
own, exactly-once) over an hour of generated events fed in 5-minute slices, and meet:

- Ctrl-C of ``make run`` mid-hour: the supervisor stopped by SIGINT and the broker stopped,
  both started again (the broker resumes its storage on the same port);
- a burst right after that restart (the generator asset's "Materialize" in the UI: five
  minutes of orders at eight times the rate, produced at once);
- a streaming asset's run from the UI: a second instance of ``windowed-revenue`` joins the
  supervisor's application for a while and leaves (two rebalances);
- ``kill -9`` of the supervisor mid-hour, then a new one.

It covers the clean end-to-end path too (stream and batch agree for every on-time window,
the supervisor's status reports the closed windows). Checked afterwards: every record
produced is in the lake exactly once; every final result
(5-minute windows of the DSL and SQL applications, alerts, sessions) was written once; every
reconciliation of the hour passes with no unexplained key, and the late accounting is exact:
a window that matches had nothing reported late, and a window that differs differs by
exactly what was reported late for it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import pytest
from feeding import feed

from pipelines import domain
from pipelines.batch.recompute import recompute
from pipelines.generator import GeneratorConfig, iter_events
from pipelines.lake.paths import topic_dir
from pipelines.lake.sink import sink_topics
from pipelines.reconcile import sql as sql_reconcile
from pipelines.reconcile.compare import MATCH
from pipelines.reconcile.reconcile import reconcile_hour, stream_watermark
from pipelines.run import describe_topics, start_local_broker, stored_cluster_id
from pipelines.streams.apps import STREAM_APPS
from pipelines.streams.config import StreamAppConfig
from pipelines.streams.supervisor import RunnerSettings, StreamAppRunner, read_status
from pipelines.topics import create_topics
from sensors.hours import hour_key
from streaming.app import State
from streaming.testing import free_port_pair

REPO = Path(__file__).resolve().parents[2]
HOUR_MS = 3_600_000
MINUTE = 60_000
T0 = (int(time.time() * 1000) // HOUR_MS - 3) * HOUR_MS
HOUR = hour_key(T0)
TOPICS = [
    *domain.RAW_TOPICS,
    *dict.fromkeys(
        t for app in STREAM_APPS.values() for t in app.output_topics(StreamAppConfig())[:-1]
    ),
]


class Supervisor:
    """``python -m pipelines.streams.supervisor`` as ``make run`` starts it."""

    #: every one started, so that none outlives a failed test
    started: ClassVar[list[Supervisor]] = []

    def __init__(self, bootstrap: str, state: Path, log: Path) -> None:
        self.state = state
        self.log = log.open("ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pipelines.streams.supervisor",
                "--bootstrap",
                bootstrap,
                "--state-dir",
                str(state),
                "--query-base-port",
                "0",
            ],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        Supervisor.started.append(self)

    def running(self) -> dict[str, Any]:
        """The applications' states, once every one has reported RUNNING."""
        deadline = time.monotonic() + 120
        states: dict[str, Any] = {}
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"the supervisor exited ({self.proc.returncode})"
            status = read_status(self.state)
            if status.get("pid") != self.proc.pid:  # the last one's, killed or stopped
                time.sleep(0.5)
                continue
            states = {name: app.get("state") for name, app in status["apps"].items()}
            if len(states) == len(STREAM_APPS) and set(states.values()) == {"RUNNING"}:
                return states
            time.sleep(0.5)
        raise AssertionError(f"not every application is RUNNING: {states}")

    def stop(self, sig: int) -> int:
        self.proc.send_signal(sig)
        code = self.proc.wait(120)
        self.log.close()
        return code


@contextlib.contextmanager
def _landing_meanwhile(bootstrap: str, lake: Path, every: float = 2.0) -> Iterator[None]:
    """Land the raw topics again and again while the block writes to them, as the hourly
    runs land the lake under ``make run`` while the generator writes."""
    stop = threading.Event()
    errors: list[Exception] = []

    def land() -> None:
        while not stop.is_set():
            try:
                sink_topics(bootstrap, list(domain.RAW_TOPICS), lake)
            except Exception as exc:
                errors.append(exc)
                return
            stop.wait(every)

    lander = threading.Thread(target=land)
    lander.start()
    try:
        yield
    finally:
        stop.set()
        lander.join(120)
    assert not errors, errors


@pytest.fixture(autouse=True)
def _no_supervisor_outlives_the_test() -> Iterator[None]:
    """A failed test leaves no stream applications running behind it."""
    yield
    for supervisor in Supervisor.started:
        if supervisor.proc.poll() is None:
            supervisor.proc.kill()
            supervisor.proc.wait(30)
    Supervisor.started.clear()


def _status_once(
    state: Path, ready: Callable[[dict[str, Any]], bool], timeout: float = 60.0
) -> dict[str, Any]:
    """The applications' statuses from the supervisor's status file once ``ready`` holds for
    them (the last ones read, when it never did within ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        apps = read_status(state).get("apps", {})
        if (apps and ready(apps)) or time.monotonic() > deadline:
            return apps
        time.sleep(0.5)


def _all_caught_up(state: Path, timeout: float = 180.0) -> None:
    """Wait until every application has consumed all its input (no consumer lag) and
    processed nothing more over a whole status interval (5 s): by then each emit-on-close
    stage, throttled to one look a second, has let out every window and session its input
    closed, and its commit has followed. The click sessions close on the last minutes of
    the hour's input, so the sessions application may still be at it when windowed-revenue
    already reports the hour closed."""
    deadline = time.monotonic() + timeout
    previous: dict[str, Any] = {}
    apps: dict[str, Any] = {}
    while time.monotonic() < deadline:
        apps = read_status(state).get("apps", {})
        idle = {
            name: (app.get("records_processed"), app.get("updated_at"))
            for name, app in apps.items()
            if app.get("consumer_lag_max") == 0
        }
        if len(idle) == len(STREAM_APPS):
            if previous and all(
                idle[name][0] == previous[name][0] and idle[name][1] != previous[name][1]
                for name in idle
            ):
                return
            if not previous or any(idle[n][1] != previous[n][1] for n in idle):
                previous = idle
        else:
            previous = {}
        time.sleep(0.5)
    lags = {name: app.get("consumer_lag_max") for name, app in apps.items()}
    raise AssertionError(f"the applications did not catch up in {timeout:.0f} s: {lags}")


def _slice(events: list, start_ms: int, end_ms: int) -> list:
    return [e for e in events if start_ms <= e.emit_ms < end_ms]


def test_a_users_first_hour_with_restarts_a_burst_and_a_ui_run_reconciles(
    tmp_path: Path,
) -> None:
    data_dir, state, lake = tmp_path / "kafka", tmp_path / "state", tmp_path / "lake"
    log = tmp_path / "supervisor.log"
    port = free_port_pair()
    gen = GeneratorConfig(
        seed=11, start_ms=T0, duration_s=70 * 60, orders_per_second=1.0, customers=60
    )
    events = list(iter_events(gen))
    burst = list(
        iter_events(
            GeneratorConfig(
                seed=12,
                start_ms=T0 + 20 * MINUTE,
                duration_s=5 * 60,
                orders_per_second=8.0,
                customers=60,
            )
        )
    )
    produced = [*events, *burst]

    # the first start: a new broker, the applications, 20 minutes of events
    cluster, new = start_local_broker(port, data_dir)
    assert new
    cluster_id = stored_cluster_id(data_dir)
    try:
        bootstrap = cluster.bootstrap_servers
        create_topics(bootstrap)
        supervisor = Supervisor(bootstrap, state, log)
        supervisor.running()
        feed(bootstrap, _slice(events, 0, T0 + 20 * MINUTE), T0)  # profiles come first
        assert supervisor.stop(signal.SIGINT) == 0  # Ctrl-C of make run
    finally:
        cluster.stop()

    cluster, new = start_local_broker(port, data_dir)
    assert not new and stored_cluster_id(data_dir) == cluster_id
    try:
        bootstrap = cluster.bootstrap_servers
        # make run describes the resumed broker at once, while it may still load partitions
        described_id, records = describe_topics(bootstrap)
        assert described_id == cluster_id
        fed = Counter(e.topic for e in _slice(events, 0, T0 + 20 * MINUTE))
        assert {topic: records[topic] for topic in fed} == dict(fed)
        supervisor = Supervisor(bootstrap, state, log)
        supervisor.running()
        with _landing_meanwhile(bootstrap, lake):  # the hourly runs land while it is written
            # the UI's burst: produced at once, in one slice
            feed(bootstrap, burst, T0 + 20 * MINUTE, slice_ms=HOUR_MS)
            feed(bootstrap, _slice(events, T0 + 20 * MINUTE, T0 + 30 * MINUTE), T0 + 20 * MINUTE)
            # a streaming asset's run from the UI: another instance of windowed-revenue
            app = STREAM_APPS["windowed-revenue"]
            ui_run = StreamAppRunner(
                app, RunnerSettings(bootstrap, state_root=tmp_path / "ui-run", instance="ui-run")
            )
            ui_run.start()
            try:
                # it has joined the group and holds its share before the data comes
                assert ui_run.streams.wait_until(State.RUNNING, 120), ui_run.state
                feed(
                    bootstrap,
                    _slice(events, T0 + 30 * MINUTE, T0 + 40 * MINUTE),
                    T0 + 30 * MINUTE,
                )
                assert ui_run.streams.wait_until(State.RUNNING, 60), ui_run.state
            finally:
                assert ui_run.close(60)
        feed(bootstrap, _slice(events, T0 + 40 * MINUTE, T0 + 45 * MINUTE), T0 + 40 * MINUTE)
        assert supervisor.stop(signal.SIGKILL) == -signal.SIGKILL  # kill -9, mid-transaction
        supervisor = Supervisor(bootstrap, state, log)
        supervisor.running()
        feed(bootstrap, _slice(events, T0 + 45 * MINUTE, 2 * T0), T0 + 45 * MINUTE)  # the rest
        # the supervisor's status (rewritten every few seconds) catches up with the fed hour
        revenue_status = _status_once(
            state,
            lambda apps: apps["windowed-revenue"].get("closed_window_watermark", 0) >= T0 + HOUR_MS,
        )["windowed-revenue"]
        # every application has read all its input and emitted what closed: the checks
        # compare the stream with the batch up to the lake's event time, for each result
        _all_caught_up(state)
        assert supervisor.stop(signal.SIGTERM) == 0
        sink_topics(bootstrap, TOPICS, lake)
    finally:
        cluster.stop()

    # every produced raw record is in the lake once (valid or not: the lake keeps both)
    for topic in domain.RAW_TOPICS:
        landed = pd.read_parquet(topic_dir(lake, topic), columns=["_partition", "_offset"])
        count = sum(1 for e in produced if e.topic == topic)
        assert not landed.duplicated().any(), topic
        assert len(landed) == count, (topic, len(landed), count)
    # the derived topics too: one row per committed record, none twice
    for topic in TOPICS[len(domain.RAW_TOPICS) :]:
        landed = pd.read_parquet(topic_dir(lake, topic), columns=["_partition", "_offset"])
        assert not landed.duplicated().any(), topic

    for result in ("revenue_5m", "revenue_hopping", "fraud_alerts", "click_sessions"):
        recompute(result, HOUR, lake)
    watermark = stream_watermark(lake)
    reports = {
        **reconcile_hour(HOUR, lake, watermark_ms=watermark),
        "revenue_5m_sql": sql_reconcile.vs_batch(HOUR, lake, watermark_ms=watermark),
        "revenue_5m_sql_vs_duckdb": sql_reconcile.vs_duckdb(HOUR, lake, watermark_ms=watermark),
    }
    print("\n".join(r.summary() for r in reports.values()))
    for name, report in reports.items():
        assert report.passed, report.summary()
        assert report.stats["unexplained"] == 0, (name, report.worst)
        assert report.stats["duplicates"] == 0, name
        assert report.stats["matched"] >= 5, report.summary()
    for name in ("revenue_5m", "revenue_hopping", "revenue_5m_sql", "revenue_5m_sql_vs_duckdb"):
        table = reports[name].table
        # nothing was reported late for a window the stream counted in full ...
        assert (table.loc[table["status"] == MATCH, "late_count"] == 0).all(), name
        # ... and a window that differs, differs by exactly what was reported late for it
        differs = table[table["status"] != MATCH]
        deficit = differs["order_count_batch"].fillna(0) - differs["order_count_stream"].fillna(0)
        assert (deficit == differs["late_count"]).all(), (name, differs)
    for name in ("revenue_5m", "revenue_hopping"):
        stats = reports[name].stats
        assert stats["batch_rows"] == stats["stream_rows"] >= 12 * len(domain.REGIONS), name
    assert reports["revenue_5m"].stats["late_records"] > 0  # the generator's, and the burst's
    # only bursts differ among the alerts: without the orders the stream reported late, the
    # window held no more than the limit
    fraud = reports["fraud_alerts"]
    assert fraud.stats["matched"] >= 100
    assert set(fraud.table.loc[fraud.table["status"] != MATCH, "rule"]) <= {"rapid_burst"}
    # the supervisor's status says how far the windows are final
    assert revenue_status["closed_windows"] >= 12 * len(domain.REGIONS) - 4
    assert revenue_status["closed_window_watermark"] >= T0 + HOUR_MS
    # no final window was emitted twice across the restarts, the kill and the rebalances
    for topic in (domain.REVENUE_5M, domain.REVENUE_5M_SQL):
        windows = pd.read_parquet(topic_dir(lake, topic), columns=["region", "window_start"])
        assert not windows.duplicated().any(), topic
