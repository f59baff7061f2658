"""A broker outage longer than ``task.timeout.ms``: the application keeps trying and reports
the stall (metrics) until then, then fails through the uncaught exception handler with an
error that names the setting, as Kafka Streams' ``TaskTimeoutExceptions`` do."""

from __future__ import annotations

import threading
import time

from confluent_kafka import Producer
from test_app_support import count_and_copy, unique, wait_for

from streaming.app import KafkaStreams, State
from streaming.runtime.failures import TaskTimeoutException
from streaming.testing import LocalKafkaCluster

TASK_TIMEOUT_MS = 20_000


def test_outage_longer_than_task_timeout_fails_with_a_clear_error(tmp_path):
    with LocalKafkaCluster(nodes=1) as cluster:
        bootstrap = cluster.bootstrap_servers
        names = {k: unique(k) for k in ("in", "copy", "counts")}
        for topic in names.values():
            cluster.create_topic(topic, partitions=1)
        settings = {
            f"app.test.{k}": v
            for k, v in (
                ("input", names["in"]),
                ("copy", names["copy"]),
                ("counts", names["counts"]),
            )
        }
        app = KafkaStreams(
            count_and_copy(settings).build(),
            {
                "application.id": unique("timeout"),
                "bootstrap.servers": bootstrap,
                "processing.guarantee": "exactly_once_v2",
                "state.dir": str(tmp_path),
                "commit.interval.ms": 100,
                "task.timeout.ms": TASK_TIMEOUT_MS,
                **settings,
            },
        )
        transitions: list[tuple[float, State]] = []
        app.set_state_listener(lambda new, old: transitions.append((time.monotonic(), new)))
        failures: list[BaseException] = []
        app.set_uncaught_exception_handler(lambda exc: failures.append(exc) or "shutdown_client")
        app.start()
        stop = threading.Event()
        producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 60_000})

        def feed() -> None:
            i = 0
            while not stop.is_set() and i < 100_000:
                producer.produce(names["in"], key=f"k{i % 7}".encode(), value=str(i).encode())
                producer.poll(0)
                i += 1
                time.sleep(0.002)

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        try:
            assert app.wait_until(State.RUNNING, timeout=60)
            wait_for(lambda: app.metrics()["process-total"] > 200, 60, "processing")
            down_at = time.monotonic()
            cluster.stop_node(cluster.nodes[0].node_id, kill=True)
            # keeps trying, and says so, before task.timeout.ms has passed
            wait_for(lambda: app.metrics()["stalled-threads"] == 1, 15, "a stall to be reported")
            assert app.state is State.RUNNING
            assert time.monotonic() - down_at < TASK_TIMEOUT_MS / 1000
            assert app.wait_until(State.ERROR, timeout=60)
            failed_at = next(t for t, s in transitions if s is State.PENDING_ERROR)
        finally:
            stop.set()
            feeder.join(10)
            app.close(30)
    assert failed_at - down_at >= TASK_TIMEOUT_MS / 1000
    assert len(failures) == 1 and isinstance(failures[0], TaskTimeoutException)
    assert f"task.timeout.ms={TASK_TIMEOUT_MS}" in str(failures[0])
