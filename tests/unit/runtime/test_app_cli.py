"""The ``python -m streaming run`` command line without a broker: topology loading and
configuration errors."""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from streaming import StreamsBuilder
from streaming.cli import _load_config, load_topology, parse_sets

REPO = Path(__file__).resolve().parents[3]


def factory(config):
    builder = StreamsBuilder()
    builder.stream(config.get("test.input", "in")).to("out")
    return builder


def plain_factory():
    return factory({}).build()


TOPOLOGY = plain_factory()


@pytest.mark.parametrize("attr", ["factory", "plain_factory", "TOPOLOGY"])
def test_load_topology_forms(attr):
    topology = load_topology(f"{__name__}:{attr}", {"test.input": "in"})
    assert [n.topics for n in topology.source_nodes()] == [["in"]]


def test_parse_sets():
    assert parse_sets(["a.b=1", " c = x=y "]) == {"a.b": "1", "c": "x=y"}
    with pytest.raises(SystemExit):
        parse_sets(["novalue"])


@pytest.mark.parametrize(
    ("sets", "level"),
    [
        ([], logging.WARNING),
        (["consumer.debug=cgrp"], logging.DEBUG),
        (["debug=eos"], logging.DEBUG),
    ],
)
def test_a_client_debug_setting_lets_librdkafkas_debug_log_through(sets, level):
    # main() keeps librdkafka at WARNING; asking a client for its debug log overrides it
    logger = logging.getLogger("streaming.runtime.librdkafka")
    before = logger.level
    logger.setLevel(logging.WARNING)
    try:
        _load_config(argparse.Namespace(config=None, set=sets))
        assert logger.level == level
    finally:
        logger.setLevel(before)


def test_configuration_error_exits_2(tmp_path):
    config = tmp_path / "app.properties"
    config.write_text("application.id=bad name\nbootstrap.servers=localhost:1\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "streaming",
            "run",
            "streaming.cli:parse_sets",  # never reached: the config fails first
            "--config",
            str(config),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "configuration error" in proc.stderr and "application.id" in proc.stderr
