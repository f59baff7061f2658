"""A streaming asset run that joins and leaves the supervisor's application while it runs.

The run shares the supervisor's ``application.id`` (the streaming asset's default): the
consumer group rebalances when it joins and again when it leaves. Checked afterwards:
every final 5-minute window was emitted once and holds exactly the orders of its window
(minus what the application reported dropping as late), and the supervisor's query port
answered every region throughout, whichever instance hosted it.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import orjson
import requests
from confluent_kafka import Producer
from dagster import materialize

from assets.streams import STREAM_ASSETS
from pipelines import domain
from pipelines.streams.apps import STREAM_APPS
from pipelines.streams.config import StreamAppConfig
from pipelines.streams.kappa import read_all
from pipelines.streams.revenue import APP, STORE_5M
from pipelines.streams.supervisor import RunnerSettings, StreamAppRunner
from resources.kafka import KafkaResource
from resources.stream_apps import StreamAppsResource, free_port

OP = "windowed_revenue"
TICK_EVENT_MS = 10_000  # event time per feeder tick (every region gets an order)
TICK_S = 0.25


def test_a_streaming_run_joining_and_leaving_never_reemits_a_final_window(
    kafka_cluster, tmp_path: Path
) -> None:
    boot = kafka_cluster.bootstrap_servers
    suffix = uuid.uuid4().hex[:8]
    config = StreamAppConfig(
        orders_topic=f"orders-sh-{suffix}",
        revenue_topic=f"revenue-5m-sh-{suffix}",
        hopping_revenue_topic=f"revenue-hop-sh-{suffix}",
        late_suffix=f"-late-sh-{suffix}",
        dead_letter_suffix=f"-dlq-sh-{suffix}",
    )
    kafka_cluster.create_topic(config.orders_topic, partitions=4)
    application_id = f"{APP}-sh-{suffix}"
    settings = RunnerSettings(boot, state_root=tmp_path / "supervisor", commit_interval_ms=200)
    query_port = free_port()
    supervised = StreamAppRunner(
        STREAM_APPS[APP],
        settings,
        config,
        application_id=application_id,
        query_port=query_port,
    )
    supervised.start()

    produced: list[dict[str, Any]] = []
    stop_feeding = threading.Event()
    t0 = (int(time.time() * 1000) // 3_600_000 - 3) * 3_600_000

    def feed() -> None:
        producer = Producer({"bootstrap.servers": boot, "linger.ms": 5})
        tick = 0
        while not stop_feeding.is_set():
            for region in domain.REGIONS:
                order = {
                    "order_id": f"o-{tick}-{region}",
                    "customer_id": f"c-{tick % 7}",
                    "amount": 1 + (tick % 13) / 4,
                    "region": region,
                    "location": "x",
                    "event_time": t0 + tick * TICK_EVENT_MS,
                }
                producer.produce(
                    config.orders_topic, value=orjson.dumps(order), timestamp=order["event_time"]
                )
                produced.append(order)
            producer.flush(10)
            tick += 1
            time.sleep(TICK_S)
        # one order far enough ahead to close every window fed so far
        last = {**produced[-1], "order_id": "closer", "event_time": produced[-1]["event_time"]}
        last["event_time"] += domain.REVENUE_WINDOW_MS + domain.REVENUE_GRACE_MS + 1
        producer.produce(
            config.orders_topic, value=orjson.dumps(last), timestamp=last["event_time"]
        )
        produced.append(last)
        producer.flush(10)

    answers: Counter[str] = Counter()
    unanswered: list[tuple[str, str]] = []
    stop_querying = threading.Event()

    def ask(region: str) -> None:
        """Ask the supervisor's port for ``region``; a 503 (rebalancing) is retried."""
        url = f"http://127.0.0.1:{query_port}/stores/{STORE_5M}/keys/{region}"
        deadline = time.monotonic() + 15
        while True:
            try:
                response = requests.get(url, timeout=5)
                status = str(response.status_code)
            except requests.RequestException as exc:
                status = type(exc).__name__
            answers[status] += 1
            if status == "200":
                return
            if time.monotonic() > deadline:
                unanswered.append((region, status))
                return
            time.sleep(0.2)

    def query() -> None:
        while not stop_querying.is_set():
            for region in domain.REGIONS:
                ask(region)
            time.sleep(0.2)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    querier = threading.Thread(target=query, daemon=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # every region has windows in the store
            if supervised.state == "RUNNING" and all(
                requests.get(
                    f"http://127.0.0.1:{query_port}/stores/{STORE_5M}/keys/{r}", timeout=5
                ).status_code
                == 200
                for r in domain.REGIONS
            ):
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"the supervised instance never answered ({supervised.state})")
        querier.start()

        (asset,) = [a for a in STREAM_ASSETS if a.op.name == OP]
        result = materialize(
            [asset],
            resources={
                "kafka": KafkaResource(bootstrap_servers=boot),
                "stream_apps": StreamAppsResource(
                    state_root=str(tmp_path / "run"),
                    app_settings={
                        "orders_topic": config.orders_topic,
                        "revenue_topic": config.revenue_topic,
                        "hopping_revenue_topic": config.hopping_revenue_topic,
                        "late_suffix": config.late_suffix,
                        "dead_letter_suffix": config.dead_letter_suffix,
                    },
                    commit_interval_ms=200,
                ),
            },
            run_config={
                "ops": {
                    OP: {
                        "config": {
                            "max_runtime_s": 25,
                            "report_interval_s": 2,
                            "application_id": application_id,
                        }
                    }
                }
            },
        )
        assert result.success
        observed = [
            {k: v.value for k, v in e.asset_observation_data.asset_observation.metadata.items()}
            for e in result.all_events
            if e.event_type_value == "ASSET_OBSERVATION"
        ]
        # the run's instance served queries too, and said where
        assert any(str(m.get("query_url", "")).startswith("http://127.0.0.1:") for m in observed)
        assert max(m["records_processed"] for m in observed) > 0  # it owned partitions

        time.sleep(5)  # the supervised instance alone again
        stop_feeding.set()
        feeder.join(30)
        lag_deadline = time.monotonic() + 60
        while time.monotonic() < lag_deadline:
            status = supervised.status()
            if status["consumer_lag_max"] == 0 and status["state"] == "RUNNING":
                break
            time.sleep(0.5)
        time.sleep(2)
    finally:
        stop_feeding.set()
        stop_querying.set()
        if querier.is_alive():
            querier.join(30)
        assert supervised.close(60)

    assert not unanswered, (unanswered, answers)
    assert answers["200"] > 50, answers

    windows = read_all(boot, config.revenue_topic)
    emitted = Counter((v["region"], v["window_start"]) for _, v, _ in windows)
    assert len(emitted) >= 4 * len(domain.REGIONS), emitted
    twice = {w: n for w, n in emitted.items() if n > 1}
    assert not twice, twice

    expected: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0])
    for order in produced:
        start = order["event_time"] - order["event_time"] % domain.REVENUE_WINDOW_MS
        cell = expected[(order["region"], start)]
        cell[0] += round(order["amount"] * 100)
        cell[1] += 1
    for _, value, _ in read_all(boot, config.late_topic(APP)):
        if value["result"] == "revenue_5m":
            cell = expected[(value["region"], value["window_start"])]
            cell[0] -= round(value["amount"] * 100)
            cell[1] -= 1
    for _, value, _ in windows:
        window = (value["region"], value["window_start"])
        assert [value["revenue_cents"], value["order_count"]] == expected[window], window
