"""End to end against a real broker: the generator's events flow through the stream
applications (KafkaStreams, exactly-once, RocksDB); the lake sink lands raw and derived
topics; PySpark recomputes the hour; the reconciliation finds stream and batch equal for
every on-time window (differences only where late data explains them).

Events are produced in 30-second slices of event time, each once the applications have
caught up with the previous one (``feeding.feed``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from feeding import feed

from pipelines import domain
from pipelines.streams.apps import STREAM_APPS
from pipelines.streams.config import StreamAppConfig
from pipelines.streams.supervisor import RunnerSettings, Supervisor
from sensors.hours import hour_key
from streaming.testing import LocalKafkaCluster

HOUR_MS = 3_600_000
# a recent hour: topics delete records whose timestamps are older than their retention
T0 = (int(time.time() * 1000) // HOUR_MS - 3) * HOUR_MS
HOUR = hour_key(T0)


@pytest.fixture(scope="module")
def broker():
    # its own broker: the fixed platform topic names must start empty
    with LocalKafkaCluster(nodes=1) as cluster:
        yield cluster


def test_stream_and_batch_agree_for_the_hour(broker, tmp_path: Path) -> None:
    from pipelines.batch.recompute import recompute
    from pipelines.generator import GeneratorConfig, iter_events
    from pipelines.lake.sink import sink_topics
    from pipelines.reconcile.reconcile import reconcile_hour, stream_watermark
    from pipelines.topics import create_topics

    bootstrap = broker.bootstrap_servers
    create_topics(bootstrap)
    lake = Path(os.environ.get("E2E_LAKE", tmp_path / "lake"))
    gen = GeneratorConfig(
        seed=7, start_ms=T0, duration_s=70 * 60, orders_per_second=1.0, customers=60
    )
    events = list(iter_events(gen))
    assert len(events) > 3000

    supervisor = Supervisor(RunnerSettings(bootstrap, state_root=tmp_path / "state"))
    supervisor.start()
    try:
        feed(bootstrap, events, T0)
        status = supervisor.status()
    finally:
        assert supervisor.close(90)
    assert all(s["state"] == "RUNNING" for s in status.values()), status
    revenue = status["windowed-revenue"]
    assert revenue["closed_windows"] >= 12 * len(domain.REGIONS) - 4
    assert revenue["closed_window_watermark"] >= T0 + 3_600_000

    derived = [t for app in STREAM_APPS.values() for t in app.output_topics(StreamAppConfig())[:-1]]
    assert set(domain.LATE_TOPICS) <= set(derived)
    sink_topics(bootstrap, [*domain.RAW_TOPICS, *derived], lake)
    for result in ("revenue_5m", "revenue_hopping", "fraud_alerts", "click_sessions"):
        recompute(result, HOUR, lake)
    reports = reconcile_hour(HOUR, lake, watermark_ms=stream_watermark(lake))
    print("\n".join(r.summary() for r in reports.values()))

    # on-time windows agree; windows that differ are explained by late data
    for name in ("revenue_5m", "revenue_hopping"):
        rev = reports[name]
        assert rev.stats["batch_rows"] == rev.stats["stream_rows"] >= 12 * len(domain.REGIONS)
        assert rev.stats["unexplained"] == 0, (name, rev.worst)
        assert rev.stats["matched"] >= 10
        assert rev.passed
    assert reports["click_sessions"].stats["unexplained"] == 0, reports["click_sessions"].worst
    assert reports["click_sessions"].stats["matched"] >= 5

    # the stream reported what it dropped as late, and that explains every burst only
    # the batch raised (the injected late orders arrive minutes after their event time)
    assert reports["revenue_5m"].stats["late_records"] > 0
    fraud = reports["fraud_alerts"]
    assert fraud.stats["matched"] >= 100
    assert fraud.stats["unexplained"] == 0, fraud.worst
    differing = fraud.table[fraud.table["status"] != "match"]
    assert set(differing["rule"]) <= {"rapid_burst"}
