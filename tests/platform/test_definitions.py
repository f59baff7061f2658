"""The code location loads and holds every asset, check, job, sensor and schedule."""

from __future__ import annotations

import importlib

import pytest
from dagster import AssetKey, Definitions

import definitions
from assets import domain
from assets.streams.apps import STREAM_APPS

STREAM_TOPICS = [
    domain.REVENUE_5M,
    domain.REVENUE_HOPPING,
    domain.ENRICHED_ORDERS,
    domain.FRAUD_ALERTS,
    domain.CLICK_SESSIONS,
    domain.ORDERS_DEDUPED,
]


@pytest.fixture(scope="module")
def repo():
    defs = definitions.build_definitions()
    Definitions.validate_loadable(defs)
    return defs.get_repository_def()


def _keys(repo) -> set[AssetKey]:
    return set(repo.asset_graph.get_all_asset_keys())


def test_stream_side_is_complete(repo) -> None:
    keys = _keys(repo)
    for topic in (*domain.RAW_TOPICS, *STREAM_TOPICS):
        assert AssetKey(["kafka", topic]) in keys, topic
    assert AssetKey(["streams", "kappa_replay"]) in keys
    graph = repo.asset_graph
    # one long-running streaming asset per application, fed by its input topics
    for app in STREAM_APPS.values():
        node = graph.get(AssetKey(["kafka", app.output_topics(definitions_config())[0]]))
        parents = {k.path[-1] for k in node.parent_keys}
        assert set(app.input_topics(definitions_config())) <= parents, app.name
    jobs = {j.name for j in repo.get_all_jobs()}
    assert "kappa_replay_job" in jobs
    assert "stream_health_sensor" in {s.name for s in repo.sensor_defs}
    checks = {k.name for k in repo.asset_graph.asset_check_keys}
    assert "replay_agrees" in checks


def definitions_config():
    from assets.streams.config import StreamAppConfig

    return StreamAppConfig()


def test_resources_come_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "broker-1:9999")
    monkeypatch.setenv("STREAM_STATE_DIR", "/tmp/somewhere")
    from resources import default_resources

    res = default_resources()
    assert res["kafka"].bootstrap_servers == "broker-1:9999"
    assert res["stream_apps"].state_root == "/tmp/somewhere"
    # the batch recompute runs on dagster-pyspark's resource, configured for local[2]
    assert res["pyspark"].spark_config["spark.master"] == "local[2]"
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS")
    assert default_resources()["kafka"].bootstrap_servers == "localhost:9092"


def test_data_side_is_wired(repo) -> None:
    """Lake, batch, reconciliation, quality and dbt (``assets.data_defs``) with the hourly job,
    its schedules and the watermark / late-data sensors."""
    data = importlib.import_module("assets.data_defs")
    keys = _keys(repo)
    for a in data.ASSETS:
        for key in getattr(a, "keys", []):
            assert key in keys
    groups = {repo.asset_graph.get(k).group_name for k in keys}
    assert {"batch", "reconciliation"} <= groups
    jobs = {j.name: j for j in repo.get_all_jobs()}
    hourly = jobs["hourly_batch_reconcile"]
    assert hourly.partitions_def is not None
    assert {s.name for s in repo.schedule_defs} == {
        "hourly_batch_reconcile_schedule",
        "nightly_backfill_schedule",
    }
    assert {s.name for s in repo.sensor_defs} == {
        "stream_health_sensor",
        "stream_watermark_sensor",
        "late_data_sensor",
        "topic_materializations_sensor",
    }
    # lineage runs from the raw topics down to the marts
    graph = repo.asset_graph
    downstream = set()
    frontier = [AssetKey(["kafka", domain.ORDERS])]
    while frontier:
        key = frontier.pop()
        for child in graph.get(key).child_keys:
            if child not in downstream:
                downstream.add(child)
                frontier.append(child)
    groups_below = {graph.get(k).group_name for k in downstream}
    assert {"batch", "reconciliation"} <= groups_below


def test_stream_outputs_are_judged_fresh_or_stale(repo) -> None:
    graph = repo.asset_graph
    for topic in STREAM_TOPICS:
        policy = graph.get(AssetKey(["kafka", topic])).freshness_policy
        assert policy is not None and policy.fail_window.to_timedelta().total_seconds() > 0, topic
    for topic in domain.LATE_TOPICS:  # quiet when nothing is late: never stale
        assert graph.get(AssetKey(["kafka", topic])).freshness_policy is None
