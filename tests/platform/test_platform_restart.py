"""The platform stopped and started again mid-hour, broker included (what a second
``make run`` does): the broker resumes its storage on the same port, the stream
applications their state, the lake its manifests.

Checked afterwards: every record produced before and after the restart is in the lake
exactly once, and the stream results of the hour reconcile with the batch recompute with
zero unexplained differences.
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
from feeding import feed
from test_durable_default import _free_port_pair

from pipelines import domain
from pipelines.batch.recompute import recompute
from pipelines.generator import GeneratorConfig, iter_events
from pipelines.lake.paths import topic_dir
from pipelines.lake.sink import sink_topics
from pipelines.reconcile.reconcile import reconcile_hour, stream_watermark
from pipelines.run import start_local_broker, stored_cluster_id
from pipelines.streams.apps import STREAM_APPS
from pipelines.streams.config import StreamAppConfig
from pipelines.streams.supervisor import RunnerSettings, Supervisor
from pipelines.topics import create_topics
from sensors.hours import hour_key

HOUR_MS = 3_600_000
T0 = (int(time.time() * 1000) // HOUR_MS - 3) * HOUR_MS
HOUR = hour_key(T0)
RESTART_AT = T0 + 35 * 60_000  # mid-hour, with windows open in every application
TOPICS = [
    *domain.RAW_TOPICS,
    *dict.fromkeys(
        t for app in STREAM_APPS.values() for t in app.output_topics(StreamAppConfig())[:-1]
    ),
]


def _run(data_dir: Path, port: int, state: Path, lake: Path, events: list, start_ms: int) -> bool:
    """Start broker and applications, feed ``events``, land the lake, stop everything;
    returns whether the broker was new."""
    cluster, new = start_local_broker(port, data_dir)
    try:
        bootstrap = cluster.bootstrap_servers
        create_topics(bootstrap)
        supervisor = Supervisor(RunnerSettings(bootstrap, state_root=state))
        supervisor.start()
        try:
            feed(bootstrap, events, start_ms)
            status = supervisor.status()
        finally:
            assert supervisor.close(90)
        assert all(s["state"] == "RUNNING" for s in status.values()), status
        sink_topics(bootstrap, TOPICS, lake)
    finally:
        cluster.stop()
    return new


def test_a_restart_mid_hour_loses_nothing_and_reconciles(tmp_path: Path) -> None:
    data_dir, state, lake = tmp_path / "kafka", tmp_path / "state", tmp_path / "lake"
    port = _free_port_pair()
    gen = GeneratorConfig(
        seed=11, start_ms=T0, duration_s=70 * 60, orders_per_second=1.0, customers=60
    )
    events = list(iter_events(gen))
    before = [e for e in events if e.emit_ms < RESTART_AT]
    after = [e for e in events if e.emit_ms >= RESTART_AT]
    assert len(before) > 1000 and len(after) > 1000

    assert _run(data_dir, port, state, lake, before, T0) is True
    cluster_id = stored_cluster_id(data_dir)
    assert _run(data_dir, port, state, lake, after, RESTART_AT) is False
    assert stored_cluster_id(data_dir) == cluster_id

    # every produced raw record is in the lake once (valid or not: the lake keeps both)
    for topic in domain.RAW_TOPICS:
        landed = pd.read_parquet(topic_dir(lake, topic), columns=["_partition", "_offset"])
        produced = sum(1 for e in events if e.topic == topic)
        assert not landed.duplicated().any(), topic
        assert len(landed) == produced, (topic, len(landed), produced)
    # the derived topics too: one row per committed record, none twice
    for topic in TOPICS[len(domain.RAW_TOPICS) :]:
        landed = pd.read_parquet(topic_dir(lake, topic), columns=["_partition", "_offset"])
        assert not landed.duplicated().any(), topic

    for result in ("revenue_5m", "revenue_hopping", "fraud_alerts", "click_sessions"):
        recompute(result, HOUR, lake)
    reports = reconcile_hour(HOUR, lake, watermark_ms=stream_watermark(lake))
    print("\n".join(r.summary() for r in reports.values()))
    for name, report in reports.items():
        assert report.stats["unexplained"] == 0, (name, report.worst)
        assert report.stats["matched"] >= 5, report.summary()
    revenue = reports["revenue_5m"]
    assert revenue.stats["batch_rows"] == revenue.stats["stream_rows"] >= 12 * len(domain.REGIONS)
    # no final window was emitted twice across the restart
    windows = pd.read_parquet(
        topic_dir(lake, domain.REVENUE_5M), columns=["region", "window_start"]
    )
    assert not windows.duplicated().any()
