"""Stream applications survive a broker outage, on a single-node cluster of this module (not
the session's: it is stopped). One outage of about 20 s is seen by three subjects at once,
each on topics of its own, and each test checks one of them:

- the supervisor (``python -m pipelines.streams.supervisor``, as ``make run`` starts it) runs
  ``orders-dedup``: the process stays alive, its status file and status line report the
  application STALLED since a time with the reason; once the broker is back, without anyone
  acting, new orders come out and the status returns to RUNNING;
- a second supervisor whose application gives up during the outage (``task.timeout.ms`` of
  3 s) while orders keep coming: it is restarted once the broker is back, every order once;
- a Dagster run of the ``orders_dedup`` streaming asset: the run does not fail, its
  observations report the stall, and it finishes with every order written.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Consumer, Producer

from pipelines import domain
from streaming.testing import LocalKafkaCluster

pytestmark = pytest.mark.kafka

REPO = Path(__file__).resolve().parents[2]
APP = "orders-dedup"
# the test's own clients retry quietly while the broker is away
QUIET = logging.getLogger("tests.supervisor_faults.librdkafka")
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False


def _wait(
    what: str, check: Callable[[], Any], timeout: float, proc: subprocess.Popen | None = None
) -> Any:
    """Poll ``check`` until it returns something truthy; fail after ``timeout`` seconds or
    when the process (if any) has exited without ``check`` holding. A process that ends by
    itself once its work is done (a streaming run that stops when caught up) passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        exited = proc is not None and proc.poll() is not None
        result = check()
        if result:
            return result
        assert not exited, f"the process exited ({proc.returncode}) before {what}"
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


def _send(bootstrap: str, orders: list[dict[str, Any]], topic: str = domain.ORDERS) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", "logger": QUIET}
    )
    for o in orders:
        producer.produce(topic, key=o["order_id"].encode(), value=orjson.dumps(o))
    assert producer.flush(30) == 0


class _Output:
    """Reads the committed order ids the application wrote (one consumer for the test),
    counting each id's records: an order written twice shows. Counted once per record
    (partition, offset): the consumer commits nothing, so when the broker's restart makes
    its group rebalance it reads the topic again from the start."""

    def __init__(self, bootstrap: str, topic: str = domain.ORDERS_DEDUPED) -> None:
        self.ids: Counter[str] = Counter()
        self._read: set[tuple[int, int]] = set()
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
        self.consumer.subscribe([topic])

    def count(self) -> int:
        for msg in self.consumer.consume(num_messages=500, timeout=0.5):
            if msg.error() is None and (msg.partition(), msg.offset()) not in self._read:
                self._read.add((msg.partition(), msg.offset()))
                self.ids[orjson.loads(msg.value())["order_id"]] += 1
        return len(self.ids)


@pytest.fixture(scope="module")
def broker() -> Iterator[LocalKafkaCluster]:
    with LocalKafkaCluster(nodes=1) as cluster:
        yield cluster


def _outage(cluster: LocalKafkaCluster, seconds: float, alive: Callable[[], Any]) -> None:
    """Stop the broker, call ``alive()`` every half second for ``seconds``, restart it."""
    node = cluster.nodes[0].node_id
    stopped_at = time.monotonic()
    cluster.stop_node(node)
    try:
        while time.monotonic() - stopped_at < seconds:
            alive()
            time.sleep(0.5)
    finally:
        cluster.restart_node(node)


class _Supervisor:
    """``python -m pipelines.streams.supervisor`` running ``orders-dedup`` on ``orders_topic``
    (output ``<orders_topic>-deduped``), fast watch and status intervals, logging to a file."""

    def __init__(self, boot: str, tmp: Path, orders_topic: str, *extra: str) -> None:
        self.status_file = tmp / "state" / "supervisor" / "status.json"
        self.log_path = tmp / "supervisor.log"
        self.out_topic = f"{orders_topic}-deduped"
        options = {
            "--bootstrap": boot,
            "--apps": APP,
            "--state-dir": str(tmp / "state"),
            "--query-base-port": "0",
            "--status-interval": "1",
            "--status-line-interval": "5",
            "--watch-interval": "1",
            "--restart-backoff": "1",
            "--restart-backoff-max": "5",
            "--stall-after": "20",
            "--restart-stuck-after": "60",
            "--commit-interval-ms": "200",
        }
        settings = [f"orders_topic={orders_topic}", f"dedup_topic={self.out_topic}"]
        cmd = [sys.executable, "-m", "pipelines.streams.supervisor", *sum(options.items(), ())]
        cmd += [arg for s in settings for arg in ("--app-setting", s)] + list(extra)
        env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONFAULTHANDLER": "1"}
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT
            )

    def status(self) -> dict[str, Any]:
        try:
            return json.loads(self.status_file.read_text())["apps"][APP]
        except (OSError, ValueError, KeyError):
            return {}

    def wait(self, what: str, check: Callable[[], Any], timeout: float) -> Any:
        return _wait(what, check, timeout, self.proc)

    def stop(self) -> int:
        """SIGTERM, then the exit code (killed after 90 s)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(90)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


# Runs the streaming asset in a process of its own (like a Dagster run worker) and writes
# what the run reported to a JSON file. It leaves with os._exit: a runtime thread still
# blocked inside librdkafka would otherwise keep the interpreter (and so pytest) waiting.
RUN_ASSET = """
import json, os, sys, threading
from dagster import materialize
from assets.keys import kafka_key
from assets.streams import STREAM_ASSETS
from resources.kafka import KafkaResource
from resources.stream_apps import StreamAppsResource

args = json.loads(sys.argv[1])
(asset,) = [a for a in STREAM_ASSETS if a.op.name == "orders_dedup"]
result = materialize(
    [asset],
    resources={
        "kafka": KafkaResource(bootstrap_servers=args["bootstrap"]),
        "stream_apps": StreamAppsResource(**args["resource"]),
    },
    run_config={"ops": {"orders_dedup": {"config": args["run"]}}},
    raise_on_error=False,
)
key = kafka_key(args["asset_topic"])
report = {
    "success": result.success,
    "observations": [
        {k: v.value for k, v in e.asset_observation_data.asset_observation.metadata.items()}
        for e in result.all_events
        if e.event_type_value == "ASSET_OBSERVATION"
        and e.asset_observation_data.asset_observation.asset_key == key
    ],
    "materializations": [
        {k: v.value for k, v in e.materialization.metadata.items()}
        for e in result.get_asset_materialization_events()
        if e.materialization.asset_key == key
    ],
    "threads_left": sorted(
        t.name for t in threading.enumerate()
        if t.is_alive() and t is not threading.main_thread() and not t.daemon
    ),
}
with open(args["report"], "w") as f:
    json.dump(report, f, default=str)
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
"""


class _Feeder:
    """Orders sent every 20 ms from a thread until stopped, buffered by the producer while
    the broker is away; the ids the broker acknowledged and the delivery errors."""

    def __init__(self, boot: str, topic: str) -> None:
        self.boot, self.topic = boot, topic
        self.delivered: set[str] = set()
        self.failed: list[Any] = []
        self.sent = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="feeder", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.boot,
                "partitioner": "murmur2_random",
                "message.timeout.ms": 180_000,
                "logger": QUIET,
            }
        )

        def report(err: Any, msg: Any) -> None:
            if err is not None:
                self.failed.append(err)
            else:
                self.delivered.add(msg.key().decode())

        i = 0
        while not self.stop.is_set() and i < 20_000:
            (o,) = _orders(f"f{i}-", 1)
            producer.produce(
                self.topic, key=o["order_id"].encode(), value=orjson.dumps(o), on_delivery=report
            )
            producer.poll(0)
            i += 1
            self.sent = i
            time.sleep(0.02)
        producer.flush(180)


class _Sampler:
    """A supervisor's status every 0.3 s until stopped."""

    def __init__(self, sup: _Supervisor) -> None:
        self.seen: list[dict[str, Any]] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="sampler", daemon=True)
        self.sup = sup
        self.thread.start()

    def _run(self) -> None:
        while not self.done.wait(0.3):
            self.seen.append(self.sup.status())


def _start_run(boot: str, tmp: Path, orders_topic: str, out_topic: str) -> tuple[Any, Path, Path]:
    """The streaming asset's run in a process of its own; (process, report, log)."""
    suffix = out_topic.rsplit("-", 1)[-1]
    report_path, log_path = tmp / "report.json", tmp / "run.log"
    args = {
        "bootstrap": boot,
        "asset_topic": domain.ORDERS_DEDUPED,  # the asset key names the default topic
        "report": str(report_path),
        "resource": {
            "state_root": str(tmp / "run-state"),
            "app_settings": {"orders_topic": orders_topic, "dedup_topic": out_topic},
            "commit_interval_ms": 200,
            "stall_after_s": 20,
            "restart_stuck_after_s": 60,
            "restart_backoff_max_s": 5,
        },
        "run": {
            "report_interval_s": 2,
            "watch_interval_s": 1,
            "application_id": f"orders-dedup-fa-{suffix}",
            # ends once every order is processed and committed (lag 0 for 15 s: the outage
            # starts as soon as the run has its first batch)
            "stop_when_caught_up": True,
            "settle_s": 15,
            "max_runtime_s": 300,
        },
    }
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONFAULTHANDLER": "1"}
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", RUN_ASSET, json.dumps(args)],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    return proc, report_path, log_path


@pytest.fixture(scope="module")
def outage(broker, tmp_path_factory) -> dict[str, Any]:
    """The three subjects started, one broker outage, what each saw and wrote."""
    boot = broker.bootstrap_servers
    suffix = uuid.uuid4().hex[:6]
    topics = {name: f"orders-{name}-{suffix}" for name in ("sv", "rs", "fa")}
    for topic in topics.values():
        broker.create_topic(topic, partitions=2)
    tmp = {name: tmp_path_factory.mktemp(name) for name in topics}
    reporting = _Supervisor(boot, tmp["sv"], topics["sv"])
    # it dies only if the outage finds it with work to commit (an idle application waits
    # out any outage): with orders every 20 ms and a commit every 5 s, the outage misses that
    # only if it begins within 20 ms after a commit
    dying = _Supervisor(
        boot,
        tmp["rs"],
        topics["rs"],
        "--set",
        "task.timeout.ms=3000",
        "--commit-interval-ms",
        "5000",
    )
    run_out = f"orders-deduped-fa-{suffix}"
    run = None
    outputs = {
        "sv": _Output(boot, reporting.out_topic),
        "rs": _Output(boot, dying.out_topic),
        "fa": _Output(boot, run_out),
    }
    first = {name: _orders(f"a-{name}-", 100) for name in ("sv", "fa")}
    second = {name: _orders(f"b-{name}-", 100) for name in ("sv", "fa")}
    stalls: list[dict[str, Any]] = []
    sampler = _Sampler(dying)
    feeder = _Feeder(boot, topics["rs"])
    result: dict[str, Any] = {"first": first, "second": second, "outputs": outputs}
    try:
        _send(boot, first["sv"], topics["sv"])
        reporting.wait("the first 100 orders", lambda: outputs["sv"].count() >= 100, 90)
        reporting.wait("health RUNNING", lambda: reporting.status().get("health") == "RUNNING", 30)
        dying.wait("orders flowing", lambda: outputs["rs"].count() >= 100, 90)
        # the run starts last, its first orders waiting, and the outage follows at once: a
        # run without lag for settle_s ends by itself and would miss the orders after it
        _send(boot, first["fa"], topics["fa"])
        run, report_path, run_log = _start_run(boot, tmp["fa"], topics["fa"], run_out)
        _wait("the run's first 100 orders", lambda: outputs["fa"].count() >= 100, 180, run)

        def alive() -> None:
            assert reporting.proc.poll() is None, "the supervisor died while the broker was down"
            assert dying.proc.poll() is None, "the supervisor died while the broker was down"
            if (s := reporting.status()).get("health") == "STALLED":
                stalls.append(s)

        _outage(broker, 20, alive)
        result["stalls"] = stalls
        for name in ("sv", "fa"):
            _send(boot, second[name], topics[name])
        resumed_at = feeder.sent
        # orders sent after the outage too (each 20 ms)
        _wait("100 orders sent after the outage", lambda: feeder.sent >= resumed_at + 100, 60)
        feeder.stop.set()
        feeder.thread.join(200)
        result["feeder"] = feeder
        reporting.wait("all 200 orders", lambda: outputs["sv"].count() >= 200, 180)
        result["back"] = reporting.wait(
            "health RUNNING again",
            lambda: (s := reporting.status()).get("health") == "RUNNING" and s,
            60,
        )
        dying.wait(
            f"all {len(feeder.delivered)} orders",
            lambda: outputs["rs"].count() >= len(feeder.delivered),
            180,
        )
        result["restarted"] = dying.wait(
            "health RUNNING again",
            lambda: (s := dying.status()).get("health") == "RUNNING" and s,
            60,
        )
        _wait("the run's 200 orders", lambda: outputs["fa"].count() >= 200, 180, run)
        run.wait(240)  # the run stops once caught up (settle_s) or at max_runtime_s
    finally:
        feeder.stop.set()
        sampler.done.set()
        for output in outputs.values():
            output.consumer.close()
        result["exit"] = {"sv": reporting.stop(), "rs": dying.stop()}
        if run is not None and run.poll() is None:
            run.kill()
            run.wait(10)
    result["dying_seen"] = sampler.seen
    result["logs"] = {"sv": reporting.log(), "rs": dying.log()}
    result["run"] = (run.returncode, report_path, run_log)
    return result


def test_supervisor_reports_a_broker_outage_and_recovers(outage) -> None:
    stalls = outage["stalls"]
    assert stalls, "no STALLED report while the broker was down"
    during = stalls[-1]
    assert during["stalled_since"] is not None
    assert during["stall_reason"] and during["last_error"], during
    assert during["stalled_for_s"] >= 10, during
    assert {s["stalled_since"] for s in stalls} == {during["stalled_since"]}  # one stall
    first, second = outage["first"]["sv"], outage["second"]["sv"]
    # each once
    assert outage["outputs"]["sv"].ids == Counter(o["order_id"] for o in first + second)
    back = outage["back"]
    assert back["stalled_since"] is None
    assert back["last_stall_s"] > 0, back  # the stall that just ended
    assert back["last_error"], back  # the outage is still on record
    assert outage["exit"]["sv"] == 0
    text = outage["logs"]["sv"]
    assert f"stream apps: {APP} STALLED since" in text
    assert f"stream apps: {APP} RUNNING" in text


def test_supervisor_restarts_an_app_that_dies_in_an_outage(outage) -> None:
    # task.timeout.ms of 3 s: the runtime gives up during the outage (TaskTimeoutException)
    # and the application stops; the supervisor restarts it once the broker is back.
    # Orders keep coming throughout (the producer buffers them while the broker is away).
    feeder = outage["feeder"]
    assert not feeder.failed, feeder.failed[:3]
    assert len(feeder.delivered) > 100
    # every order once: nothing lost over the restart, nothing written twice
    assert outage["outputs"]["rs"].ids == Counter(feeder.delivered)
    # it died (task.timeout.ms) and said so, then was restarted
    seen = outage["dying_seen"]
    dead = [s for s in seen if s.get("state") in ("ERROR", "NOT_RUNNING", "PENDING_ERROR")]
    assert dead, sorted({str(s.get("state")) for s in seen})
    assert all(s["health"] == "STALLED" for s in dead), dead
    assert any("TaskTimeoutException" in (s.get("last_error") or "") for s in dead), dead
    back = outage["restarted"]
    assert back["restarts"] >= 1, back
    assert back["last_restart_at"], back
    assert outage["exit"]["rs"] == 0
    assert "restarted (restart 1)" in outage["logs"]["rs"]


def test_streaming_asset_run_reports_a_broker_outage_and_carries_on(outage) -> None:
    first, second = outage["first"]["fa"], outage["second"]["fa"]
    # each once
    assert outage["outputs"]["fa"].ids == Counter(o["order_id"] for o in first + second)
    code, report_path, log_path = outage["run"]
    assert code == 0, log_path.read_text(errors="replace")[-3000:]
    report = json.loads(report_path.read_text())
    assert report["success"], "the run failed"

    metas = report["observations"]
    stalled = [m for m in metas if m.get("health") == "STALLED"]
    assert stalled, [m.get("health") for m in metas]
    assert all(m.get("stalled_since") and m.get("stall_reason") for m in stalled)
    assert len({m["stalled_since"] for m in stalled}) == 1, stalled  # one stall
    assert metas[-1]["health"] == "RUNNING", metas[-1]
    final = report["materializations"][-1]
    assert final["state"] == "NOT_RUNNING"
    assert final["end_offsets"] >= 200  # (plus transaction markers)
    assert final["last_stall_s"] >= 15
    print("\nthreads left behind by the run:", report["threads_left"])
