"""Runs the platform's stream applications with ``KafkaStreams`` and reports on them.

``StreamAppRunner`` runs one application (exactly-once, RocksDB state under
``<state_root>/<instance>/<application.id>/``, undecodable records to ``<app>-dlq``);
``Supervisor`` runs several and writes their status (state, throughput, lag, closed windows)
to ``<state_root>/<instance>/status.json`` every few seconds, where the Dagster health sensor
reads it. Command line (``make run`` starts it)::

    python -m assets.streams.supervisor --bootstrap localhost:9092 [--apps a,b] [--state-dir .state]

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
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assets.streams import monitor
from assets.streams.apps import STREAM_APPS, StreamApp
from assets.streams.config import StreamAppConfig

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
DEFAULT_STATE_ROOT = REPO / ".state"
STATUS_FILE = "status.json"


@dataclass
class RunnerSettings:
    """How applications run: broker, guarantee, where state lives, extra Streams config."""

    bootstrap_servers: str
    state_root: Path = DEFAULT_STATE_ROOT
    instance: str = "supervisor"
    processing_guarantee: str = "exactly_once_v2"
    commit_interval_ms: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: first port of the apps' interactive-query servers (one port per app, in order), or None
    query_base_port: int | None = None

    @property
    def state_dir(self) -> Path:
        """``state.dir`` of this instance's applications."""
        return Path(self.state_root) / self.instance


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

    def streams_config(self) -> dict[str, Any]:
        """The Kafka Streams configuration of the application."""
        s = self.settings
        cfg: dict[str, Any] = {
            "application.id": self.application_id,
            "bootstrap.servers": s.bootstrap_servers,
            "processing.guarantee": s.processing_guarantee,
            "state.dir": str(s.state_dir),
            "default.deserialization.exception.handler": "log_and_continue",
            "processing.exception.handler": "log_and_continue",
            "errors.dead.letter.queue.topic.name": self.config.dead_letter_topic(self.app.name),
        }
        if s.commit_interval_ms is not None:
            cfg["commit.interval.ms"] = s.commit_interval_ms
        if self.query_port is not None:
            # live values over HTTP: GET /stores/<store>/keys/<key> (streaming.query)
            cfg["application.server"] = f"127.0.0.1:{self.query_port}"
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
                "platform topics first (assets.topics.create_topics)"
            )
        outputs = self.app.output_topics(self.config)
        wanted = {t: 1 if t.endswith(self.config.dead_letter_suffix) else 2 for t in outputs}
        return monitor.ensure_topics(boot, wanted)

    def start(self) -> None:
        """Build the topology and start the application."""
        from streaming.runtime.app import KafkaStreams

        self.ensure_topics()
        # late records are counted by the runtime's metrics hook on this logger; one warning
        # per dropped record would drown the logs, so keep them out of the root handlers
        logging.getLogger("streaming.dsl").propagate = False
        topology = self.app.factory(self.config)
        self.streams = KafkaStreams(topology, self.streams_config())
        self.streams.start()
        self.started_at = time.time()
        log.info("started %s (application.id %s)", self.app.name, self.application_id)

    def close(self, timeout: float = 60.0) -> bool:
        """Stop the application (commit, checkpoint); True when it stopped in time."""
        if self.streams is None:
            return True
        done = self.streams.close(timeout=timeout)
        log.info("closed %s: %s", self.application_id, "clean" if done else "timed out")
        return done

    @property
    def state(self) -> str:
        """The KafkaStreams state name (``CREATED`` before start)."""
        return "CREATED" if self.streams is None else self.streams.state.name

    def final_topic(self) -> str | None:
        """The topic carrying one final record per closed window, if the app has one."""
        if self.app.windowed_store is None:
            return None
        return self.app.output_topics(self.config)[0]

    def status(self, *, watermark: bool = True) -> dict[str, Any]:
        """State, throughput, lag and closed windows of the application."""
        m = self.streams.metrics() if self.streams is not None else {}
        out: dict[str, Any] = {
            "app": self.app.name,
            "application_id": self.application_id,
            "state": self.state,
            "query_url": None
            if self.query_port is None
            else f"http://127.0.0.1:{self.query_port}/stores",
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
        }
        topic = self.final_topic()
        if topic is not None:
            boot = self.settings.bootstrap_servers
            try:
                out["closed_windows"] = sum(monitor.end_offsets(boot, topic).values())
                if watermark:
                    out["closed_window_watermark"] = monitor.closed_window_watermark(boot, topic)
            except Exception as exc:  # the broker is briefly unavailable: report, not raise
                out["closed_windows_error"] = str(exc)
        return out


class Supervisor:
    """Runs several applications; writes their status to a JSON file while running."""

    def __init__(
        self,
        settings: RunnerSettings,
        apps: list[str] | None = None,
        config: StreamAppConfig | None = None,
        status_interval_s: float = 5.0,
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
        self._stop = threading.Event()
        self._reporter: threading.Thread | None = None

    @property
    def status_path(self) -> Path:
        """Where the status JSON is written."""
        return self.settings.state_dir / STATUS_FILE

    def start(self) -> None:
        """Start every application, then the status reporter."""
        for runner in self.runners:
            runner.start()
        self._reporter = threading.Thread(target=self._report_loop, name="status", daemon=True)
        self._reporter.start()

    def status(self) -> dict[str, Any]:
        """The status of every application, by name."""
        return {r.app.name: r.status() for r in self.runners}

    def write_status(self) -> None:
        """Write the status file atomically."""
        path = self.status_path
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"pid": os.getpid(), "apps": self.status()}, indent=1))
        tmp.replace(path)

    def _report_loop(self) -> None:
        while not self._stop.wait(self.status_interval_s):
            try:
                self.write_status()
            except Exception:
                log.exception("writing the stream app status failed")

    def close(self, timeout: float = 60.0) -> bool:
        """Stop the reporter and every application; True when all stopped in time."""
        self._stop.set()
        if self._reporter is not None:
            self._reporter.join(timeout=30)
        ok = all([r.close(timeout) for r in self.runners])
        try:
            final = {r.app.name: {"app": r.app.name, "state": r.state} for r in self.runners}
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


def main(argv: list[str] | None = None) -> int:
    """Command line entry point: run applications until SIGINT/SIGTERM."""
    parser = argparse.ArgumentParser(description="Run the platform's stream applications")
    parser.add_argument(
        "--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "localhost:9092")
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
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    names = None if args.apps == "all" else [a.strip() for a in args.apps.split(",") if a.strip()]
    settings = RunnerSettings(
        bootstrap_servers=args.bootstrap,
        state_root=Path(args.state_dir),
        instance=args.instance,
        processing_guarantee=args.guarantee,
        query_base_port=args.query_base_port or None,
    )
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    supervisor = Supervisor(settings, names)
    try:
        supervisor.start()
        log.info("stream apps running: %s", ", ".join(r.app.name for r in supervisor.runners))
        while not stop.wait(1.0):
            pass
    finally:
        supervisor.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
