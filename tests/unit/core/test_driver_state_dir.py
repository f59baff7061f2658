"""TopologyTestDriver keeps persistent state where Kafka's driver does, and cleans up."""

from __future__ import annotations

import tempfile
from pathlib import Path

from streaming import Materialized, StreamsBuilder, TopologyTestDriver, serdes


def _counting_topology():
    b = StreamsBuilder()
    b.stream("in", key_serde=serdes.String(), value_serde=serdes.String()).group_by_key().count(
        materialized=Materialized.as_("counts")
    ).to_stream().to("out", key_serde=serdes.String(), value_serde=serdes.Long())
    return b.build()


def test_state_dir_config_is_honoured(tmp_path: Path) -> None:
    config = {"application.id": "app", "state.dir": str(tmp_path)}
    with TopologyTestDriver(_counting_topology(), config) as driver:
        driver.create_input_topic("in", serdes.String(), serdes.String()).pipe_input("k", "v")
        assert (tmp_path / "app" / "0_0" / "counts").is_dir()
        assert driver.get_key_value_store("counts").get("k") == 1


def test_default_state_dir_is_temporary_and_removed(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with TopologyTestDriver(_counting_topology()) as driver:
        driver.create_input_topic("in", serdes.String(), serdes.String()).pipe_input("k", "v")
        assert list(tmp_path.glob("kafka-streams-ttd-*/*/0_0/counts"))
    assert list(tmp_path.iterdir()) == []
