"""A long-running streaming asset run in process against the session broker: it starts
``click-sessions``, reports throughput and lag as observations, writes sessions, and stops
cleanly at its ``max_runtime_s`` (application NOT_RUNNING, no stream thread left)."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

from dagster import materialize

from assets import domain
from assets.generator import GeneratorConfig, produce
from assets.streams.dagster_assets import STREAM_ASSETS, topic_key
from resources.kafka import KafkaResource
from resources.stream_apps import StreamAppsResource
from streaming.dsl.processors.window_aggregate import (
    EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION as EMIT_INTERVAL,
)

APP = "click-sessions"
OP = "click_sessions"


def test_streaming_asset_reports_and_stops_cleanly(kafka_cluster, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:8]
    boot = kafka_cluster.bootstrap_servers
    raw = {t: f"{t}-sa-{suffix}" for t in domain.RAW_TOPICS}
    for topic in raw.values():
        kafka_cluster.create_topic(topic, partitions=2)
    sessions_topic = f"{domain.CLICK_SESSIONS}-sa-{suffix}"
    config = GeneratorConfig(
        seed=9,
        start_ms=int(time.time() * 1000) - 90 * domain.MINUTE_MS,
        duration_s=80 * 60,
        orders_per_second=0.3,
        customers=40,
    )
    produce(config, boot, topics=raw)
    (asset,) = [a for a in STREAM_ASSETS if a.op.name == OP]
    application_id = f"{APP}-sa-{suffix}"
    before = {t.ident for t in threading.enumerate()}

    result = materialize(
        [asset],
        resources={
            "kafka": KafkaResource(bootstrap_servers=boot),
            "stream_apps": StreamAppsResource(
                state_root=str(tmp_path / "state"),
                app_settings={"clicks_topic": raw[domain.CLICKS], "sessions_topic": sessions_topic},
                commit_interval_ms=200,
                # a backlog processed within the 1 s emit interval would hold closed
                # sessions back until more clicks arrive
                streams_config={EMIT_INTERVAL: 0},
            ),
        },
        run_config={
            "ops": {
                OP: {
                    "config": {
                        "max_runtime_s": 12,
                        "report_interval_s": 2,
                        "application_id": application_id,
                    }
                }
            }
        },
    )
    assert result.success
    key = topic_key(domain.CLICK_SESSIONS)
    observations = [
        e.asset_observation_data.asset_observation
        for e in result.all_events
        if e.event_type_value == "ASSET_OBSERVATION"
    ]
    observations = [o for o in observations if o.asset_key == key]
    assert len(observations) >= 3  # every 2 s over 12 s
    metas = [{k: v.value for k, v in o.metadata.items()} for o in observations]
    for meta in metas:
        assert {"records_per_second", "consumer_lag_max", "records_processed"} <= set(meta)
        assert meta["application_id"] == application_id
    assert max(m["records_processed"] for m in metas) > 0
    assert max(m["records_per_second"] for m in metas) > 0
    assert metas[-1]["consumer_lag_max"] == 0  # caught up with the small input

    materializations = [
        e.materialization
        for e in result.get_asset_materialization_events()
        if e.materialization.asset_key == key
    ]
    assert len(materializations) >= 2  # sessions written while running + the final one
    final = {k: v.value for k, v in materializations[-1].metadata.items()}
    assert final["state"] == "NOT_RUNNING"
    assert final["end_offsets"] > 0  # sessions landed on this run's topic
    assert final["records_processed"] > 0

    left = [
        t.name
        for t in threading.enumerate()
        if t.ident not in before and t.is_alive() and t.name.startswith(application_id)
    ]
    assert left == []
