"""``StreamAppsResource`` settings reach every application's Kafka Streams config."""

from __future__ import annotations

import pytest

from resources.stream_apps import StreamAppsResource
from streaming.errors import ConfigException
from streaming.runtime.config import StreamsConfig


def _streams_config(resource: StreamAppsResource) -> dict:
    runner = resource.runner("windowed-revenue", "127.0.0.1:9", instance="i", query_port=7399)
    return runner.streams_config()


def test_window_close_quiet_ms_reaches_every_application(tmp_path) -> None:
    resource = StreamAppsResource(state_root=str(tmp_path), window_close_quiet_ms=5_000)
    config = StreamsConfig.from_mapping(_streams_config(resource))
    assert config.window_close_quiet_ms == 5_000
    # unset, the applications keep Kafka's behaviour: windows wait for the next record
    unset = StreamAppsResource(state_root=str(tmp_path))
    assert StreamsConfig.from_mapping(_streams_config(unset)).window_close_quiet_ms == -1


def test_streams_config_overrides_the_setting_and_a_bad_value_fails_fast(tmp_path) -> None:
    resource = StreamAppsResource(
        state_root=str(tmp_path),
        window_close_quiet_ms=5_000,
        streams_config={"window.close.quiet.ms": 2_000},
    )
    assert StreamsConfig.from_mapping(_streams_config(resource)).window_close_quiet_ms == 2_000
    bad = StreamAppsResource(state_root=str(tmp_path), window_close_quiet_ms=-5)
    with pytest.raises(ConfigException, match=r"window\.close\.quiet\.ms"):
        StreamsConfig.from_mapping(_streams_config(bad))
