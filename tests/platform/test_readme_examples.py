"""The docs' examples against Kafka (getting-started/against-kafka.md, sql/queries.md) run as
written against what ``make run`` provides:
its platform topics filled by its generator (with the malformed records it injects) on a
broker that creates no topic on first write. ``make run``'s broker is the session broker
here, and the example's ports and directories are moved with the settings the page names."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from committed_reads import read_committed

from streaming.testing import free_port

REPO = Path(__file__).resolve().parents[2]
PAGE = (REPO / "docs" / "getting-started" / "against-kafka.md").read_text()


def _python_block_after(heading: str) -> str:
    """The first ```python block after ``heading`` in the page."""
    rest = PAGE[PAGE.index(heading) :]
    match = re.search(r"```python\n(.*?)```", rest, re.S)
    assert match, f"no python block after {heading!r}"
    return match.group(1)


@pytest.fixture(scope="module")
def platform_topics(kafka_cluster) -> str:
    """The platform topics with three minutes of generated events up to now (malformed
    records included, as make run's generator sends them)."""
    from pipelines.generator import GeneratorConfig, produce
    from pipelines.topics import create_topics

    bootstrap = kafka_cluster.bootstrap_servers
    create_topics(bootstrap)
    now = int(time.time() * 1000)
    config = GeneratorConfig(
        seed=5, start_ms=now - 180_000, duration_s=180, orders_per_second=5, malformed_share=0.05
    )
    assert produce(config, bootstrap) > 500
    return bootstrap


def test_the_kafka_streams_example_counts_the_generators_clicks(
    platform_topics: str, tmp_path: Path
) -> None:
    code = _python_block_after("# Running against Kafka")
    port = free_port()
    assert "127.0.0.1:7080" in code  # a port make run's own applications leave free
    code = code.replace("127.0.0.1:7080", f"127.0.0.1:{port}")
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": platform_topics,
        "STATE_DIR": str(tmp_path / "state"),
        "PYTHONPATH": str(REPO),
    }
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr[-3000:]
    user, clicks = re.fullmatch(r"(\S+) clicked (\d+) times\n", done.stdout).groups()
    assert user.startswith("c-") and int(clicks) >= 1
    # the generator's undecodable clicks were skipped to the dead-letter topic, not fatal
    dead = read_committed(platform_topics, "clicks-counter-dlq", lambda ms: len(ms) >= 1, 30)
    assert dead and all("__streams.errors.exception" in dict(m.headers()) for m in dead)


def _wait_running(url: str, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    """Until the application's query server says RUNNING."""
    import requests

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the application exited"
        try:
            if requests.get(f"{url}/health", timeout=2).json().get("state") == "RUNNING":
                return
        except requests.RequestException:
            pass
        time.sleep(0.5)
    raise AssertionError(f"{url} was not RUNNING in {timeout} s")


def test_the_sql_file_example_writes_final_windows(platform_topics: str, tmp_path: Path) -> None:
    """Started beside a running platform, it reads the orders written from then on
    ('latest-offset') and writes one final row per region and minute."""
    from pipelines.generator import GeneratorConfig, produce
    from pipelines.streams.monitor import BrokerProbe, wait_for_no_lag

    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "streaming",
        "sql",
        "examples/sql/revenue_per_region.sql",
        "--config",
        "examples/sql/app.properties",
        "--create-topics",
        "--set",
        f"bootstrap.servers={platform_topics}",
        "--set",
        f"state.dir={tmp_path / 'state'}",
        "--set",
        f"application.server=localhost:{port}",
    ]
    log = tmp_path / "app.log"
    with log.open("wb") as sink:  # a file: a pipe nobody reads would block the application
        proc = subprocess.Popen(
            cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=sink, stderr=sink
        )
    try:
        _wait_running(f"http://127.0.0.1:{port}", proc)
        # four minutes of orders up to now, sent as make run's generator catches up: 30 s
        # of event time at a time, each once the application has read the last
        probe = BrokerProbe(platform_topics, timeout=10.0)
        groups = {"example-revenue-per-region": ["orders"]}
        now = int(time.time() * 1000)
        config = GeneratorConfig(seed=9, start_ms=now - 240_000, duration_s=240)
        produce(config, platform_topics, keep_up=lambda: wait_for_no_lag(probe, groups, 60))
        rows = read_committed(
            platform_topics, "example-revenue-per-region", lambda ms: len(ms) >= 8, 60
        )
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
    out = log.read_text()
    assert proc.returncode == 0, out[-3000:]
    assert rows, out[-3000:]
    values = [orjson.loads(m.value()) for m in rows]
    assert {"region", "window_start", "window_end", "revenue", "orders"} <= set(values[0])
    assert all(v["window_end"] - v["window_start"] == 60_000 and v["orders"] >= 1 for v in values)
    # one final row per region and window
    assert len({(v["region"], v["window_start"]) for v in values}) == len(values)
