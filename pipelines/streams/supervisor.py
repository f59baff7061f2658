"""Runs the platform's stream applications with ``KafkaStreams`` and reports on them.

``StreamAppRunner`` runs one application (exactly-once, RocksDB state under
``<state_root>/<instance>/<application.id>/``, undecodable records to ``<app>-dlq``);
``Supervisor`` runs several and writes their status (state, throughput, lag, closed windows,
health) to ``<state_root>/<instance>/status.json`` every few seconds, where the Dagster
health sensor reads it, and logs a one-line summary. Command line (``make run`` starts it)::

    python -m pipelines.streams.supervisor --bootstrap localhost:9092 [--apps a,b] [--state-dir .state]

Infrastructure faults are reported, not fatal: ``StreamAppRunner.watch`` (called every
couple of seconds by the supervisor's watchdog thread, and by a Dagster run's loop) sets the
application's ``health``:

- ``RUNNING``;
- ``STALLED`` since a time, with the reason: the broker does not answer (``BrokerProbe``),
  the runtime reports stalled stream threads, the application has not been running for
  ``stall_after_s``, or it died (``last_error``) and waits for its restart;
- ``restarts``: an application that died (state ERROR / NOT_RUNNING without a close) is
  closed and started again, after an exponential backoff (``restart_backoff_s`` doubling up
  to ``restart_backoff_max_s``, reset after ``backoff_reset_s`` of running), and not while
  the broker is unreachable. Nothing needs a person when the broker comes back.

SIGINT/SIGTERM close every application cleanly (commit, checkpoint) before exiting.
Several instances with the same application id share the partitions (Kafka's scale-out):
that is how a Dagster run of a streaming asset and the supervisor coexist.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipelines.connection import ENV_VARS, Kafka, KafkaConnection
from pipelines.schemas import raw_format_from_env
from pipelines.streams import monitor
from pipelines.streams.apps import STREAM_APPS, StreamApp
from pipelines.streams.bad_records import DeadLetterSummary
from pipelines.streams.config import StreamAppConfig

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
DEFAULT_STATE_ROOT = REPO / ".state"
STATUS_FILE = "status.json"
#: KafkaStreams states of an application that stopped without being closed
DEAD_STATES = ("ERROR", "PENDING_ERROR", "NOT_RUNNING")
RUNNING = "RUNNING"
STALLED = "STALLED"
STARTING = "STARTING"
STOPPED = "STOPPED"


def _iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


@dataclass
class RunnerSettings:
    """How applications run: broker, guarantee, where state lives, extra Streams config."""

    bootstrap_servers: Kafka
    state_root: Path = DEFAULT_STATE_ROOT
    instance: str = "supervisor"
    processing_guarantee: str = "exactly_once_v2"
    commit_interval_ms: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: first port of the apps' interactive-query servers (one port per app, in order), or None
    query_base_port: int | None = None
    #: the host other instances reach the query servers at (``application.server``)
    advertised_host: str = "127.0.0.1"
    #: first restart of a dead application after this many seconds, doubling per failure
    restart_backoff_s: float = 2.0
    restart_backoff_max_s: float = 60.0
    #: running this long without a failure resets the backoff
    backoff_reset_s: float = 120.0
    #: an application not RUNNING (rebalancing, restoring), or whose committed offsets did
    #: not move while records wait, for longer than this is stalled
    stall_after_s: float = 60.0
    #: ... and restarted after this long without committed progress (while not restoring)
    restart_stuck_after_s: float = 300.0
    #: how often the consumer group's committed offsets are read
    progress_check_s: float = 5.0
    #: a stalled application is RUNNING again once no cause was seen for this long and its
    #: committed offsets moved (or nothing waits)
    recover_after_s: float = 10.0

    @property
    def state_dir(self) -> Path:
        """``state.dir`` of this instance's applications."""
        return Path(self.state_root) / self.instance


@dataclass
class AppHealth:
    """What ``StreamAppRunner.watch`` found: running, or stalled since when and why, how often
    the application was restarted, and its last error (times are epoch seconds)."""

    status: str = STARTING
    stalled_since: float | None = None
    stall_reason: str | None = None
    last_error: str | None = None
    last_error_at: float | None = None
    restarts: int = 0
    last_restart_at: float | None = None
    next_restart_at: float | None = None
    #: failed starts / deaths since the application last ran for ``backoff_reset_s``
    failures: int = 0
    running_since: float | None = None
    last_stall_s: float | None = None

    def as_dict(self, now: float | None = None) -> dict[str, Any]:
        """The status file's health fields (None where unknown)."""
        now = time.time() if now is None else now
        return {
            "health": self.status,
            "stalled_since": _iso(self.stalled_since),
            "stalled_for_s": None
            if self.stalled_since is None
            else round(now - self.stalled_since, 1),
            "stall_reason": self.stall_reason,
            "last_error": self.last_error,
            "last_error_at": _iso(self.last_error_at),
            "restarts": self.restarts,
            "last_restart_at": _iso(self.last_restart_at),
            "next_restart_in_s": None
            if self.next_restart_at is None
            else round(max(0.0, self.next_restart_at - now), 1),
            "last_stall_s": self.last_stall_s,
        }

    def summary(self, now: float | None = None) -> str:
        """``RUNNING``, ``STALLED since 12:00:01Z (42 s): why``, plus ``restarted n times``."""
        now = time.time() if now is None else now
        if self.status == STALLED and self.stalled_since is not None:
            since = datetime.fromtimestamp(self.stalled_since, UTC).strftime("%H:%M:%SZ")
            text = f"STALLED since {since} ({now - self.stalled_since:.0f} s): {self.stall_reason}"
        else:
            text = self.status
        if self.restarts:
            text += f", restarted {self.restarts} time{'s' if self.restarts > 1 else ''}"
        return text


class StreamAppRunner:
    """One stream application under ``KafkaStreams``."""

    def __init__(
        self,
        app: StreamApp,
        settings: RunnerSettings,
        config: StreamAppConfig | None = None,
        *,
        application_id: str | None = None,
        query_port: int | None = None,
    ) -> None:
        self.app = app
        self.query_port = query_port
        self.settings = settings
        self.config = config or StreamAppConfig()
        self.application_id = application_id or app.name
        self.streams: Any = None
        self.started_at: float | None = None
        self.health = AppHealth()
        self._lock = threading.RLock()
        self._closing = False
        self._died_with: str | None = None  # set by the uncaught exception handler
        self._not_running_since: float | None = None
        self._last_windows: dict[str, Any] = {}  # closed windows of the last report
        # the consumer group's committed offsets, read every progress_check_s:
        self._progress_at: float | None = None  # start of the current no-progress window
        self._moved_at: float | None = None  # when they last moved (or nothing waited)
        self._progress_checked_at = 0.0
        self._committed = -1
        self._lag = 0
        self._clear_since: float | None = None  # since when no stall cause was seen

    def streams_config(self) -> dict[str, Any]:
        """The Kafka Streams configuration of the application."""
        s = self.settings
        cfg: dict[str, Any] = {
            "application.id": self.application_id,
            **KafkaConnection.of(s.bootstrap_servers).client_config(),
            "processing.guarantee": s.processing_guarantee,
            "state.dir": str(s.state_dir),
            # skipped to the dead-letter topic, told in one INFO line a minute
            "default.deserialization.exception.handler": DeadLetterSummary,
            "processing.exception.handler": DeadLetterSummary,
            "errors.dead.letter.queue.topic.name": self.config.dead_letter_topic(self.app.name),
        }
        if s.commit_interval_ms is not None:
            cfg["commit.interval.ms"] = s.commit_interval_ms
        if self.query_port is not None:
            # live values over HTTP: GET /stores/<store>/keys/<key> (streaming.query)
            cfg["application.server"] = f"{s.advertised_host}:{self.query_port}"
        cfg.update(s.extra)
        return cfg

    def ensure_topics(self) -> list[str]:
        """Create missing output and dead-letter topics (inputs must exist)."""
        boot = self.settings.bootstrap_servers
        missing_inputs = [
            t for t in self.app.input_topics(self.config) if not monitor.topic_partitions(boot, t)
        ]
        if missing_inputs:
            raise RuntimeError(
                f"{self.app.name}: input topics {missing_inputs} do not exist; create the "
                "platform topics first (pipelines.topics.create_topics)"
            )
        outputs = self.app.output_topics(self.config)
        wanted = {t: 1 if t.endswith(self.config.dead_letter_suffix) else 2 for t in outputs}
        return monitor.ensure_topics(boot, wanted)

    def start(self) -> None:
        """Build the topology and start the application."""
        from streaming.app import KafkaStreams
        from streaming.runtime.errors import StreamThreadExceptionResponse

        with self._lock:
            self._closing = False
            self.ensure_topics()
            topology = self.app.factory(self.config)
            streams = KafkaStreams(topology, self.streams_config())

            def died(exc: BaseException) -> StreamThreadExceptionResponse:
                # the whole client stops; watch() restarts it after a backoff
                self._died_with = f"{type(exc).__name__}: {exc}"
                return StreamThreadExceptionResponse.SHUTDOWN_CLIENT

            streams.set_uncaught_exception_handler(died)
            self._died_with = None
            self._progress_at = None
            try:
                streams.start()
            except BaseException:
                streams.close(timeout=10)  # releases what start() took
                raise
            self.streams = streams
            self.started_at = time.time()
            self._not_running_since = self.started_at
            log.info("started %s (application.id %s)", self.app.name, self.application_id)

    def close(self, timeout: float = 60.0) -> bool:
        """Stop the application (commit, checkpoint); True when it stopped in time."""
        with self._lock:
            self._closing = True
            self.health.status = STOPPED
            self.health.next_restart_at = None
            if self.streams is None:
                return True
            done = self.streams.close(timeout=timeout)
        log.info("closed %s: %s", self.application_id, "clean" if done else "timed out")
        return done

    # -- supervision -----------------------------------------------------------------------

    def _backoff(self) -> float:
        s = self.settings
        return min(s.restart_backoff_max_s, s.restart_backoff_s * 2 ** (self.health.failures - 1))

    def _error(self, message: str, now: float) -> None:
        self.health.last_error = message
        self.health.last_error_at = now

    def _stall(self, reason: str, now: float, since: float | None = None) -> None:
        h = self.health
        if h.status != STALLED:
            h.stalled_since = min(now, since) if since is not None else now
            h.running_since = None
            log.warning("%s STALLED: %s", self.app.name, reason)
        h.status = STALLED
        h.stall_reason = reason

    def _running(self, now: float, probe: Any) -> None:
        h = self.health
        clear_for = now - (self._clear_since or now)
        no_progress = probe is not None and (
            self._moved_at is None or self._moved_at < (self._clear_since or now)
        )
        if h.status == STALLED and (clear_for < self.settings.recover_after_s or no_progress):
            # the cause is gone; running again once the committed offsets moved (or nothing
            # waits) and no cause came back for recover_after_s: a stall that continues in
            # another form (the runtime retrying its transaction) is one stall, not two
            waiting = f", {self._lag} records waiting" if self._lag else ""
            h.stall_reason = f"recovering ({clear_for:.0f} s{waiting})"
            return
        if h.status == STALLED and h.stalled_since is not None:
            h.last_stall_s = round(now - h.stalled_since, 1)
            log.info("%s RUNNING again after a %.0f s stall", self.app.name, h.last_stall_s)
        if h.status != RUNNING:
            h.running_since = now
        h.status = RUNNING
        h.stalled_since = None
        h.stall_reason = None
        if (
            h.failures
            and h.running_since
            and now - h.running_since >= self.settings.backoff_reset_s
        ):
            h.failures = 0

    def _metrics(self) -> dict[str, Any]:
        try:
            return self.streams.metrics() if self.streams is not None else {}
        except Exception:  # a client being replaced: nothing to report this time
            return {}

    def _progress_stall(self, probe: Any, m: dict[str, Any], now: float) -> float | None:
        """Seconds the application's consumer group has had records waiting without its
        committed offsets moving (None: it is caught up or moving, or it is unknown).

        Committed offsets, not processed records: an application that processes and then
        fails every transaction (a record the broker refuses) makes no progress either."""
        if probe is None or probe.error is not None or self.state != RUNNING:
            # outage time is the broker's stall, and a rebalance (waiting out a dead
            # member's session, restoring) is reported as such: neither counts here
            self._progress_at = None
            return None
        if now - self._progress_checked_at >= self.settings.progress_check_s:
            self._progress_checked_at = now
            offsets = probe.group_offsets(self.application_id, self.app.input_topics(self.config))
            if offsets is not None:
                committed, lag = offsets
                moved = lag == 0 or (self._committed >= 0 and committed != self._committed)
                if moved:
                    self._moved_at = now
                if moved or self._progress_at is None:
                    self._progress_at = now
                self._committed, self._lag = committed, lag
        restoring = any(not p.get("done", True) for p in m.get("restore-progress", {}).values())
        if self._progress_at is None or not self._lag or restoring:
            return None
        return now - self._progress_at

    def watch(self, probe: Any = None, now: float | None = None) -> AppHealth:
        """Update ``health`` and restart the application if it died and its backoff passed.

        ``probe``: a ``monitor.BrokerProbe`` whose ``check()`` ran just before (its ``error``
        says whether the broker answered; its ``group_offsets`` measure progress), or None.
        Never raises: a failed restart is recorded and tried again later."""
        now = time.time() if now is None else now
        broker_error = None if probe is None else probe.error
        with self._lock:
            if self._closing:
                return self.health
            state = self.state
            h = self.health
            if self.streams is None or state in DEAD_STATES:
                if h.next_restart_at is None:  # it just died
                    h.failures += 1
                    self._error(self._died_with or f"the application stopped ({state})", now)
                    h.next_restart_at = now + self._backoff()
                    log.error(
                        "%s died (%s): %s; restarting in %.0f s",
                        self.app.name,
                        state,
                        h.last_error,
                        h.next_restart_at - now,
                    )
                waiting = (
                    f"broker unreachable ({broker_error})"
                    if broker_error
                    else f"restart in {max(0.0, h.next_restart_at - now):.0f} s"
                )
                self._stall(f"{state}: {h.last_error}; {waiting}", now)
                if now >= h.next_restart_at and broker_error is None:
                    self._restart(now)
                return h
            if state == RUNNING:
                self._not_running_since = None
            elif self._not_running_since is None:
                self._not_running_since = now
            m = self._metrics()
            stuck = self._progress_stall(probe, m, now)
            s = self.settings
            if m.get("stalled-threads"):
                since = now - float(m.get("stalled-seconds-max") or 0.0)
                reason = str(m.get("stall-reason") or "retrying")
                self._error(reason, now)
                self._stall(f"stream thread stalled: {reason}", now, since)
            elif broker_error:
                self._error(f"broker unreachable: {broker_error}", now)
                self._stall(f"broker unreachable: {broker_error}", now)
            elif stuck is not None and stuck >= s.restart_stuck_after_s:
                # like task.timeout.ms in the runtime: give up on this instance, start anew
                self._died_with = (
                    f"no committed progress for {stuck:.0f} s with {self._lag} records "
                    f"waiting (restart_stuck_after_s {s.restart_stuck_after_s:.0f})"
                )
                self._progress_at = None
                log.error("%s is stuck: %s; closing it", self.app.name, self._died_with)
                if not self.streams.close(timeout=30):
                    log.error("%s did not close within 30 s", self.app.name)
                    self.streams = None  # its threads are stuck: start a new client anyway
                return self.watch(probe, now)
            elif stuck is not None and stuck >= s.stall_after_s:
                reason = f"no committed progress for {stuck:.0f} s with {self._lag} records waiting"
                self._error(reason, now)
                self._stall(reason, now, now - stuck)
            elif (
                self._not_running_since is not None
                and now - self._not_running_since > s.stall_after_s
            ):
                self._stall(
                    f"{state} for {now - self._not_running_since:.0f} s",
                    now,
                    self._not_running_since,
                )
            elif state == RUNNING:
                if self._clear_since is None:
                    self._clear_since = now
                self._running(now, probe)
                return h
            self._clear_since = None
            return h

    def _restart(self, now: float) -> None:
        h = self.health
        old = self.streams
        try:
            if old is not None and not old.close(timeout=30):
                raise RuntimeError("the stopped application did not release its resources")
            self.streams = None
            self.start()
        except Exception as exc:
            h.failures += 1
            self._error(f"restart failed: {type(exc).__name__}: {exc}", now)
            h.next_restart_at = time.time() + self._backoff()
            log.warning(
                "%s: %s; next attempt in %.0f s",
                self.app.name,
                h.last_error,
                h.next_restart_at - time.time(),
            )
            return
        h.restarts += 1
        h.last_restart_at = time.time()
        h.next_restart_at = None
        log.warning("%s restarted (restart %d)", self.app.name, h.restarts)

    @property
    def state(self) -> str:
        """The KafkaStreams state name (``CREATED`` before start)."""
        return "CREATED" if self.streams is None else self.streams.state.name

    def final_topic(self) -> str | None:
        """The topic carrying one final record per closed window, if the app has one."""
        if self.app.windowed_store is None:
            return None
        return self.app.output_topics(self.config)[0]

    def status(self, *, watermark: bool = True, broker_ok: bool = True) -> dict[str, Any]:
        """State, throughput, lag, closed windows and health of the application
        (``broker_ok=False``: the closed windows of the last report, without asking Kafka)."""
        m = self._metrics()
        out: dict[str, Any] = {
            "app": self.app.name,
            "application_id": self.application_id,
            "state": self.state,
            "query_url": None
            if self.query_port is None
            else f"http://{self.settings.advertised_host}:{self.query_port}/stores",
            "uptime_s": round(time.time() - self.started_at, 1) if self.started_at else 0.0,
            "records_processed": m.get("process-total", 0),
            "records_per_second": round(float(m.get("process-rate", 0.0)), 2),
            "records_sent": m.get("records-sent-total", 0),
            "consumer_lag_max": m.get("consumer-lag-max", 0),
            "consumer_lag": m.get("consumer-lag", {}),
            "late_records_dropped": m.get("late-records-dropped-total", 0),
            "commits": m.get("commit-total", 0),
            "tasks": m.get("tasks", []),
            "updated_at": time.time(),
            **self.health.as_dict(),
        }
        topic = self.final_topic()
        if topic is not None:
            boot = self.settings.bootstrap_servers
            windows = self._last_windows
            try:
                if not broker_ok:
                    raise RuntimeError("broker unreachable")
                windows = {"closed_windows": sum(monitor.end_offsets(boot, topic).values())}
                if watermark:
                    windows["closed_window_watermark"] = monitor.closed_window_watermark(
                        boot, topic
                    )
                self._last_windows = windows
            except Exception as exc:  # the broker is unavailable: report, not raise
                out["closed_windows_error"] = str(exc)
            out.update(windows)
        return out


class Supervisor:
    """Runs several applications; writes their status to a JSON file while running."""

    def __init__(
        self,
        settings: RunnerSettings,
        apps: list[str] | None = None,
        config: StreamAppConfig | None = None,
        status_interval_s: float = 5.0,
        watch_interval_s: float = 2.0,
    ) -> None:
        names = apps or list(STREAM_APPS)
        unknown = [n for n in names if n not in STREAM_APPS]
        if unknown:
            raise ValueError(f"unknown stream apps {unknown}; known: {sorted(STREAM_APPS)}")
        self.settings = settings
        base = settings.query_base_port
        self.runners = [
            StreamAppRunner(
                STREAM_APPS[n], settings, config, query_port=None if base is None else base + i
            )
            for i, n in enumerate(names)
        ]
        self.status_interval_s = status_interval_s
        self.watch_interval_s = watch_interval_s
        self.probe = monitor.BrokerProbe(settings.bootstrap_servers)
        #: why the broker did not answer the last probe (None: it did)
        self.broker_error: str | None = None
        self._stop = threading.Event()
        self._reporter: threading.Thread | None = None
        self._watchdog: threading.Thread | None = None

    @property
    def status_path(self) -> Path:
        """Where the status JSON is written."""
        return self.settings.state_dir / STATUS_FILE

    def start(self) -> None:
        """Start every application, then the watchdog and the status reporter."""
        for runner in self.runners:
            runner.start()
        self._watchdog = threading.Thread(target=self._watch_loop, name="watchdog", daemon=True)
        self._watchdog.start()
        self._reporter = threading.Thread(target=self._report_loop, name="status", daemon=True)
        self._reporter.start()

    def watch(self) -> None:
        """Probe the broker, then update every application's health (restarting dead ones)."""
        self.broker_error = self.probe.check()
        for runner in self.runners:
            if self._stop.is_set():
                return
            runner.watch(self.probe)

    def status(self) -> dict[str, Any]:
        """The status of every application, by name."""
        ok = self.broker_error is None
        return {r.app.name: r.status(broker_ok=ok) for r in self.runners}

    def status_line(self) -> str:
        """One line: every application's health, throughput and lag."""
        parts = []
        for r in self.runners:
            m = r._metrics()
            text = f"{r.app.name} {r.health.summary()}"
            if r.health.status == RUNNING:
                text += (
                    f" ({float(m.get('process-rate', 0.0)):.1f} rec/s, "
                    f"lag {m.get('consumer-lag-max', 0)})"
                )
            parts.append(text)
        return "stream apps: " + " | ".join(parts)

    def write_status(self) -> None:
        """Write the status file atomically."""
        path = self.status_path
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        doc = {
            "pid": os.getpid(),
            "written_at": time.time(),
            "broker_error": self.broker_error,
            "apps": self.status(),
        }
        tmp.write_text(json.dumps(doc, indent=1))
        tmp.replace(path)

    def _watch_loop(self) -> None:
        while not self._stop.wait(self.watch_interval_s):
            try:
                self.watch()
            except Exception:
                log.exception("watching the stream apps failed")

    def _report_loop(self) -> None:
        while not self._stop.wait(self.status_interval_s):
            try:
                self.write_status()
            except Exception:
                log.exception("writing the stream app status failed")

    def close(self, timeout: float = 60.0) -> bool:
        """Stop the watchdog, the reporter and every application; True when all stopped."""
        self._stop.set()
        for thread in (self._watchdog, self._reporter):
            if thread is not None:
                thread.join(timeout=60)
        ok = all([r.close(timeout) for r in self.runners])
        self.probe.close()
        try:
            final = {
                r.app.name: {"app": r.app.name, "state": r.state, "health": r.health.status}
                for r in self.runners
            }
            self.status_path.write_text(json.dumps({"pid": None, "apps": final}, indent=1))
        except OSError:
            pass
        return ok

    def __enter__(self) -> Supervisor:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_status(state_root: Path = DEFAULT_STATE_ROOT, instance: str = "supervisor") -> dict:
    """The last status the supervisor wrote (empty when none)."""
    path = Path(state_root) / instance / STATUS_FILE
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _setting(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise SystemExit(f"--set takes KEY=VALUE, got {item!r}")
    return key.strip(), value.strip()


def main(argv: list[str] | None = None) -> int:
    """Command line entry point: run applications until SIGINT/SIGTERM."""
    parser = argparse.ArgumentParser(description="Run the platform's stream applications")
    env = os.environ
    parser.add_argument(
        "--bootstrap", default=env.get(ENV_VARS["bootstrap_servers"]) or "localhost:9092"
    )
    parser.add_argument(
        "--security-protocol",
        default=env.get(ENV_VARS["security_protocol"]) or "PLAINTEXT",
        help="with SASL: --sasl-mechanism, --sasl-username and $KAFKA_SASL_PASSWORD",
    )
    parser.add_argument("--sasl-mechanism", default=env.get(ENV_VARS["sasl_mechanism"]))
    parser.add_argument("--sasl-username", default=env.get(ENV_VARS["sasl_username"]))
    parser.add_argument("--ssl-ca-location", default=env.get(ENV_VARS["ssl_ca_location"]))
    parser.add_argument(
        "--advertised-host",
        default=os.environ.get("STREAM_ADVERTISED_HOST", "127.0.0.1"),
        help="host in application.server: where other instances reach this one's queries",
    )
    parser.add_argument("--apps", default="all", help="comma-separated names, or 'all'")
    parser.add_argument(
        "--state-dir", default=os.environ.get("STREAM_STATE_DIR", str(DEFAULT_STATE_ROOT))
    )
    parser.add_argument("--instance", default="supervisor")
    parser.add_argument("--guarantee", default="exactly_once_v2")
    parser.add_argument(
        "--query-base-port",
        type=int,
        default=int(os.environ.get("STREAM_QUERY_BASE_PORT", "7070")),
        help="interactive queries: app i answers on this port + i (0 turns them off)",
    )
    parser.add_argument("--status-interval", type=float, default=5.0, help="seconds")
    parser.add_argument(
        "--status-line-interval",
        type=float,
        default=30.0,
        help="seconds between status lines in the log (also logged when an app's health changes)",
    )
    parser.add_argument("--watch-interval", type=float, default=2.0, help="seconds")
    parser.add_argument("--restart-backoff", type=float, default=2.0, help="first, in seconds")
    parser.add_argument("--restart-backoff-max", type=float, default=60.0, help="seconds")
    parser.add_argument(
        "--stall-after",
        type=float,
        default=60.0,
        help="seconds without committed progress (or not RUNNING) before an app is STALLED",
    )
    parser.add_argument(
        "--restart-stuck-after",
        type=float,
        default=300.0,
        help="seconds without committed progress before a stuck app is restarted",
    )
    parser.add_argument(
        "--commit-interval-ms", type=int, default=None, help="default: Kafka Streams' own"
    )
    parser.add_argument(
        "--app-setting",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="StreamAppConfig override of every app (e.g. orders_topic=orders-2)",
    )
    parser.add_argument(
        "--format",
        choices=("json", "avro"),
        default=env.get("PLATFORM_VALUE_FORMAT") or "json",
        help="the raw topics' value format (avro: with the schema registry of SCHEMA_REGISTRY_URL)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Kafka Streams config of every app (e.g. task.timeout.ms=60000)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    names = None if args.apps == "all" else [a.strip() for a in args.apps.split(",") if a.strip()]
    try:
        kafka = KafkaConnection(
            bootstrap_servers=args.bootstrap,
            security_protocol=args.security_protocol,
            sasl_mechanism=args.sasl_mechanism,
            sasl_username=args.sasl_username,
            sasl_password=env.get(ENV_VARS["sasl_password"]),
            ssl_ca_location=args.ssl_ca_location,
        )
        raw_format = raw_format_from_env(env, args.format)
    except ValueError as exc:
        parser.error(str(exc))
    settings = RunnerSettings(
        bootstrap_servers=kafka,
        advertised_host=args.advertised_host,
        state_root=Path(args.state_dir),
        instance=args.instance,
        processing_guarantee=args.guarantee,
        query_base_port=args.query_base_port or None,
        commit_interval_ms=args.commit_interval_ms,
        restart_backoff_s=args.restart_backoff,
        restart_backoff_max_s=args.restart_backoff_max,
        extra=dict(_setting(item) for item in args.set),
        stall_after_s=args.stall_after,
        restart_stuck_after_s=args.restart_stuck_after,
    )
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    app_settings: dict[str, Any] = {}
    for item in args.app_setting:
        key, value = _setting(item)
        kind = {f.name: f.type for f in fields(StreamAppConfig)}.get(key)
        app_settings[key] = {"int": int, "float": float}.get(str(kind), str)(value)
    supervisor = Supervisor(
        settings,
        names,
        replace(StreamAppConfig.of(app_settings), raw_format=raw_format),
        status_interval_s=args.status_interval,
        watch_interval_s=args.watch_interval,
    )
    try:
        supervisor.start()
        log.info("stream apps running: %s", ", ".join(r.app.name for r in supervisor.runners))
        last_line = 0.0
        last_health: list[tuple[str, int]] = []
        while not stop.wait(1.0):
            health = [(r.health.status, r.health.restarts) for r in supervisor.runners]
            if health != last_health or time.monotonic() - last_line >= args.status_line_interval:
                log.info("%s", supervisor.status_line())
                last_health, last_line = health, time.monotonic()
    finally:
        closed = supervisor.close()
    return 0 if closed else 1


def exit_now(code: int) -> None:
    """Exit with ``code`` without waiting for non-daemon threads. After ``main`` the
    applications are closed (committed, checkpointed), but a runtime client thread can still
    be blocked inside librdkafka (a transaction call abandoned during an outage): the
    interpreter would wait for it at exit, possibly for ever."""
    stuck = [
        t.name
        for t in threading.enumerate()
        if t is not threading.main_thread() and t.is_alive() and not t.daemon
    ]
    if stuck:
        log.info("exiting; threads left behind: %s", ", ".join(sorted(stuck)))
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
