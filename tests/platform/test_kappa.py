"""The kappa replay asset against the session broker: a live ``windowed-revenue`` run, then
``streams/kappa_replay`` reprocesses the same input under a new application id; its
``replay_agrees`` check passes, and fails once the live results differ."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka import Producer
from dagster import materialize

from assets import domain
from assets.generator import GeneratorConfig, produce
from assets.streams import kappa
from assets.streams.dagster_assets import kappa_replay
from resources.kafka import KafkaResource
from resources.stream_apps import StreamAppsResource
from streaming.dsl.processors.window_aggregate import (
    EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION as EMIT_INTERVAL,
)

APP = "windowed-revenue"


@pytest.fixture
def live_revenue(kafka_cluster, tmp_path: Path) -> dict[str, Any]:
    """Unique input topics with 20 minutes of events, and the live app's results."""
    suffix = uuid.uuid4().hex[:8]
    boot = kafka_cluster.bootstrap_servers
    raw = {t: f"{t}-kappa-{suffix}" for t in domain.RAW_TOPICS}
    for topic in raw.values():
        # one partition: live and replay see the records in the same order (deterministic)
        kafka_cluster.create_topic(topic, partitions=1)
    settings = {
        "orders_topic": raw[domain.ORDERS],
        "customers_topic": raw[domain.CUSTOMERS],
        "clicks_topic": raw[domain.CLICKS],
        "revenue_topic": f"{domain.REVENUE_5M}-kappa-{suffix}",
        "hopping_revenue_topic": f"{domain.REVENUE_HOPPING}-kappa-{suffix}",
    }
    config = GeneratorConfig(
        seed=5,
        start_ms=int(time.time() * 1000) - 25 * domain.MINUTE_MS,
        duration_s=20 * 60,
        orders_per_second=1.0,
        customers=100,
    )
    produce(config, boot, topics=raw)
    resource = StreamAppsResource(
        state_root=str(tmp_path / "state"),
        app_settings=settings,
        commit_interval_ms=200,
        # emit closed windows on every record: a backlog processed within the default 1 s
        # emit interval would otherwise hold its final results back until more input arrives
        streams_config={EMIT_INTERVAL: 0},
    )
    live = resource.runner(APP, boot, instance="live", application_id=f"{APP}-live-{suffix}")
    kappa.run_until_caught_up(live, boot, timeout_s=180, settle_s=2)
    results = kappa.read_all(boot, settings["revenue_topic"])
    assert len(results) >= 4  # closed 5-minute windows per region
    return {"boot": boot, "resource": resource, "settings": settings, "results": results}


def _replay(live: dict[str, Any], **config: Any) -> Any:
    return materialize(
        [kappa_replay],
        resources={
            "kafka": KafkaResource(bootstrap_servers=live["boot"]),
            "stream_apps": live["resource"],
        },
        run_config={
            "ops": {"streams__kappa_replay": {"config": {"app": APP, "timeout_s": 180, **config}}}
        },
        raise_on_error=False,
    )


def _check(result: Any) -> Any:
    (evaluation,) = result.get_asset_check_evaluations()
    assert evaluation.check_name == "replay_agrees"
    return evaluation


def _metadata(result: Any) -> dict[str, Any]:
    (event,) = result.get_asset_materialization_events()
    return {k: v.value for k, v in event.materialization.metadata.items()}


def test_replay_agrees_then_detects_an_injected_difference(live_revenue) -> None:
    first = _replay(live_revenue)
    assert first.success
    meta = _metadata(first)
    assert (
        meta["compared"]
        == meta["live_results"]
        == len({(v["region"], v["window_start"]) for _, v, _ in live_revenue["results"]})
    )
    assert meta["different"] == 0 and meta["agreement"] == 1.0
    assert meta["replay_topic"] != live_revenue["settings"]["revenue_topic"]
    assert _check(first).passed

    # a live result is overwritten with another value: the replay no longer agrees
    key, value, ts = live_revenue["results"][0]
    wrong = {**value, "revenue_cents": value["revenue_cents"] + 1}
    producer = Producer({"bootstrap.servers": live_revenue["boot"]})
    producer.produce(
        live_revenue["settings"]["revenue_topic"],
        key=None if key is None else key.encode(),
        value=orjson.dumps(wrong),
        timestamp=ts,
    )
    assert producer.flush(30) == 0
    second = _replay(live_revenue, min_agreement=1.0)
    meta = _metadata(second)
    assert meta["different"] == 1
    assert str((value["region"], value["window_start"])) in meta["differences"]
    evaluation = _check(second)
    assert not evaluation.passed
    assert evaluation.metadata["different"].value == 1
