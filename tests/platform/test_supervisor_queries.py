"""The supervisor gives each stream application its own interactive-query address."""

from __future__ import annotations

from pipelines.streams.apps import STREAM_APPS
from pipelines.streams.supervisor import RunnerSettings, Supervisor


def test_each_app_answers_queries_on_its_own_port(tmp_path) -> None:
    settings = RunnerSettings("127.0.0.1:9", state_root=tmp_path, query_base_port=7300)
    supervisor = Supervisor(settings)
    servers = [r.streams_config()["application.server"] for r in supervisor.runners]
    assert servers == [f"127.0.0.1:{7300 + i}" for i in range(len(STREAM_APPS))]


def test_queries_can_be_turned_off(tmp_path) -> None:
    settings = RunnerSettings("127.0.0.1:9", state_root=tmp_path)
    supervisor = Supervisor(settings)
    assert all("application.server" not in r.streams_config() for r in supervisor.runners)
