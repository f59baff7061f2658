"""``StreamAppsResource``: how the platform runs its stream applications.

Defaults suit the embedded mode: exactly-once, state under ``.state/``, the supervisor's
status file read from there.
"""

import socket
from dataclasses import replace
from pathlib import Path
from typing import Any

from dagster import ConfigurableResource
from pydantic import Field

from pipelines.connection import Kafka
from pipelines.schemas import RawFormat
from pipelines.streams.apps import STREAM_APPS
from pipelines.streams.config import StreamAppConfig
from pipelines.streams.supervisor import (
    DEFAULT_STATE_ROOT,
    RunnerSettings,
    StreamAppRunner,
    read_status,
)
from streaming.runtime.config_keys import WINDOW_CLOSE_QUIET_MS


class StreamAppsResource(ConfigurableResource):
    """Settings for running stream applications and reading their status."""

    state_root: str = Field(
        default=str(DEFAULT_STATE_ROOT), description="state.dir root (one folder per instance)"
    )
    processing_guarantee: str = "exactly_once_v2"
    advertised_host: str = Field(
        default="127.0.0.1",
        description="host in application.server: where other instances reach this one's queries",
    )
    commit_interval_ms: int | None = None
    app_settings: dict[str, Any] = Field(
        default_factory=dict,
        description="StreamAppConfig overrides (topic names, window sizes) of every application",
    )
    streams_config: dict[str, Any] = Field(
        default_factory=dict, description="extra Kafka Streams config of every application"
    )
    window_close_quiet_ms: int | None = Field(
        default=None,
        description="window.close.quiet.ms of every application: once an input has been "
        "quiet this long, its windows close on the wall clock and their final results come "
        "out (unset: they wait for the next record, as in Kafka Streams)",
    )
    supervisor_instance: str = "supervisor"
    report_interval_s: float = 10.0
    max_healthy_lag: int = 10_000
    # supervision of the applications a run starts (see StreamAppRunner.watch)
    restart_backoff_s: float = Field(default=2.0, description="first restart delay, doubling")
    restart_backoff_max_s: float = 60.0
    stall_after_s: float = Field(
        default=60.0,
        description="seconds without committed progress (or not RUNNING) before STALLED",
    )
    restart_stuck_after_s: float = Field(
        default=300.0, description="seconds without committed progress before a restart"
    )
    #: a supervisor status file older than this is reported as stale by the health sensor
    status_stale_after_s: float = 120.0
    # applications the supervisor does not run (pods): the health sensor asks their
    # instances over HTTP (``/metadata``, then each instance's ``/health``)
    query_urls: dict[str, str] = Field(
        default_factory=dict, description="application -> base URL of its query servers"
    )
    query_url_template: str | None = Field(
        default=None,
        description="the same for every application, '{app}' replaced by its name, e.g. "
        "http://{app}.streamplatform.svc:7070 (a Kubernetes Service)",
    )

    query_token: str | None = Field(
        default=None,
        repr=False,
        description="the query servers' bearer token (interactive.queries.http.token), if set",
    )

    def query_url(self, app: str) -> str | None:
        """Where the instances of ``app`` answer queries, when configured."""
        if app in self.query_urls:
            return self.query_urls[app]
        return self.query_url_template.format(app=app) if self.query_url_template else None

    def app_config(self, raw_format: RawFormat | None = None) -> StreamAppConfig:
        """Topics and business parameters of the applications; ``raw_format``: how the raw
        topics are written (the kafka resource's ``raw_format``; JSON when not given)."""
        config = StreamAppConfig.of(self.app_settings)
        return config if raw_format is None else replace(config, raw_format=raw_format)

    def runner(
        self,
        app: str,
        kafka: Kafka,
        *,
        instance: str,
        application_id: str | None = None,
        config: StreamAppConfig | None = None,
        extra: dict[str, Any] | None = None,
        query_port: int | None = None,
        raw_format: RawFormat | None = None,
    ) -> StreamAppRunner:
        """A runner for application ``app`` with state under ``<state_root>/<instance>``.

        Every instance serves interactive queries (on ``query_port``, by default a free
        port) and registers it as ``application.server``: an instance sharing the
        supervisor's ``application.id`` answers for its partitions, and each forwards keys
        it does not host to their owner. ``raw_format``: how the raw topics are written
        (replaces ``config``'s)."""
        settings = RunnerSettings(
            bootstrap_servers=kafka,
            advertised_host=self.advertised_host,
            state_root=Path(self.state_root),
            instance=instance,
            processing_guarantee=self.processing_guarantee,
            commit_interval_ms=self.commit_interval_ms,
            extra={**self._quiet_close(), **self.streams_config, **(extra or {})},
            restart_backoff_s=self.restart_backoff_s,
            restart_backoff_max_s=self.restart_backoff_max_s,
            stall_after_s=self.stall_after_s,
            restart_stuck_after_s=self.restart_stuck_after_s,
        )
        return StreamAppRunner(
            STREAM_APPS[app],
            settings,
            self.app_config(raw_format)
            if config is None
            else (config if raw_format is None else replace(config, raw_format=raw_format)),
            application_id=application_id,
            query_port=query_port or free_port(),
        )

    def _quiet_close(self) -> dict[str, Any]:
        if self.window_close_quiet_ms is None:
            return {}
        return {WINDOW_CLOSE_QUIET_MS: self.window_close_quiet_ms}

    def supervisor_status(self) -> dict[str, Any]:
        """The supervisor's last status report (empty when it is not running)."""
        return read_status(Path(self.state_root), self.supervisor_instance)


def free_port() -> int:
    """A TCP port nothing listens on right now (for an instance's query server)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
