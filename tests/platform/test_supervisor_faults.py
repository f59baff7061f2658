"""The supervisor survives a broker outage: with its own single-node cluster, the supervisor
(``python -m assets.streams.supervisor``, as ``make run`` starts it) runs ``orders-dedup``;
the broker is stopped for about 20 s: the process stays alive and its status file and status
line report the application STALLED since a time with the reason; the broker comes back:
without anyone acting, new orders come out and the status returns to RUNNING."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Consumer, Producer

from assets import domain
from streaming.testing import LocalKafkaCluster

REPO = Path(__file__).resolve().parents[2]
APP = "orders-dedup"
# the test's own clients retry quietly while the broker is away
QUIET = logging.getLogger("tests.supervisor_faults.librdkafka")
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False


def _wait(what: str, check: Callable[[], Any], timeout: float, proc: subprocess.Popen) -> Any:
    """Poll ``check`` until it returns something truthy; fail after ``timeout`` seconds or
    when the supervisor process exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the supervisor exited ({proc.returncode}) waiting for {what}"
        result = check()
        if result:
            return result
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _orders(prefix: str, n: int) -> list[dict[str, Any]]:
    now = int(time.time() * 1000)
    return [
        {
            "order_id": f"{prefix}{i}",
            "customer_id": f"c{i % 5}",
            "amount": 1.0 + i,
            "region": "EU",
            "location": "Berlin",
            "event_time": now - 60_000 + i,
        }
        for i in range(n)
    ]


def _send(bootstrap: str, orders: list[dict[str, Any]]) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", "logger": QUIET}
    )
    for o in orders:
        producer.produce(domain.ORDERS, key=o["order_id"].encode(), value=orjson.dumps(o))
    assert producer.flush(30) == 0


class _Output:
    """Reads the committed order ids the application wrote (one consumer for the test)."""

    def __init__(self, bootstrap: str) -> None:
        self.ids: set[str] = set()
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"out-{uuid.uuid4().hex[:6]}",
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "logger": QUIET,
            }
        )
        self.consumer.subscribe([domain.ORDERS_DEDUPED])

    def count(self) -> int:
        for msg in self.consumer.consume(num_messages=500, timeout=0.5):
            if msg.error() is None:
                self.ids.add(orjson.loads(msg.value())["order_id"])
        return len(self.ids)


@pytest.mark.kafka
def test_supervisor_reports_a_broker_outage_and_recovers(tmp_path: Path) -> None:
    state = tmp_path / "state"
    status_file = state / "supervisor" / "status.json"
    log_path = tmp_path / "supervisor.log"

    def app_status() -> dict[str, Any]:
        try:
            return json.loads(status_file.read_text())["apps"][APP]
        except (OSError, ValueError, KeyError):
            return {}

    with LocalKafkaCluster(nodes=1) as cluster:
        boot = cluster.bootstrap_servers
        node = cluster.nodes[0].node_id
        cluster.create_topic(domain.ORDERS, partitions=2)
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "assets.streams.supervisor",
                    "--bootstrap",
                    boot,
                    "--apps",
                    APP,
                    "--state-dir",
                    str(state),
                    "--query-base-port",
                    "0",
                    "--status-interval",
                    "1",
                    "--status-line-interval",
                    "5",
                    "--watch-interval",
                    "1",
                    "--restart-backoff",
                    "1",
                    "--restart-backoff-max",
                    "5",
                    "--stall-after",
                    "20",
                    "--restart-stuck-after",
                    "60",
                    "--commit-interval-ms",
                    "200",
                ],
                cwd=REPO,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        output = _Output(boot)
        try:
            first = _orders("a", 100)
            _send(boot, first)
            _wait("the first 100 orders", lambda: output.count() >= 100, 90, proc)
            _wait("health RUNNING", lambda: app_status().get("health") == "RUNNING", 30, proc)

            stopped_at = time.time()
            cluster.stop_node(node)
            stalled = _wait(
                "a STALLED report",
                lambda: (s := app_status()).get("health") == "STALLED" and s,
                30,
                proc,
            )
            assert stalled["stalled_since"] is not None
            assert stalled["stall_reason"], stalled
            assert stalled["last_error"], stalled
            # keep the broker away for ~20 s: the supervisor stays up, the app stays stalled
            while time.time() - stopped_at < 20:
                assert proc.poll() is None, "the supervisor died while the broker was down"
                time.sleep(0.5)
            during = app_status()
            assert during["health"] == "STALLED", during
            assert during["stalled_for_s"] >= 5, during
            assert proc.poll() is None

            cluster.restart_node(node)
            second = _orders("b", 100)
            _send(boot, second)
            _wait("all 200 orders", lambda: output.count() >= 200, 180, proc)
            assert output.ids == {o["order_id"] for o in first + second}
            back = _wait(
                "health RUNNING again",
                lambda: (s := app_status()).get("health") == "RUNNING" and s,
                60,
                proc,
            )
            assert back["stalled_since"] is None
            assert back["last_stall_s"] >= 15, back
            assert back["last_error"], back  # the outage is still on record
            print("\nstatus during the outage:", json.dumps(during, indent=1))
            print("status after it:", json.dumps(back, indent=1))
        finally:
            output.consumer.close()
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(90)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
        assert proc.returncode == 0
    text = log_path.read_text(errors="replace")
    assert f"stream apps: {APP} STALLED since" in text
    assert f"stream apps: {APP} RUNNING" in text
