"""The platform on a secured cluster: a broker with only a SASL_SSL listener in use (TLS from
a CA made at test time, SCRAM-SHA-512 login), the ``cluster`` deployment's resources read
from the environment as a team would set them, and through them the topics (the
Kubernetes Job's command), the generator asset, a stream application (exactly-once), the
lake landing and Spark's Kafka source (the kappa batch). A wrong password fails the lake
asset within seconds, saying the cluster refused the login."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from dagster import DagsterInstance, materialize

from assets.batch import KAFKA_BATCH_ASSETS
from assets.lake import LAKE_ASSETS
from assets.streams import generator
from pipelines import domain
from pipelines.batch.recompute import recompute
from pipelines.batch.session import get_spark
from pipelines.batch.store import KAFKA, read_result
from pipelines.lake.duck import read_topic
from pipelines.lake.paths import HOUR_MS, hour_of
from resources import platform_resources
from streaming.testing import LocalKafkaCluster

USER, PASSWORD = "platform", "pl4tform-s3cret"
REPO = Path(__file__).resolve().parents[2]
APP = "orders-dedup"
# a recent complete hour (the broker keeps records this old)
HOUR_START = (int(time.time() * 1000) // HOUR_MS - 2) * HOUR_MS
HOUR = hour_of(HOUR_START)
PARTITION_KEY = f"{HOUR.replace('T', '-')}:00"


@pytest.fixture(scope="module")
def secure_cluster() -> Any:
    with LocalKafkaCluster(sasl_users={USER: PASSWORD}) as cluster:
        yield cluster


def cluster_env(cluster: LocalKafkaCluster, lake: Path, state: Path) -> dict[str, str]:
    """What a team sets for the cluster deployment (the password apart, as a secret)."""
    ca = cluster.sasl_ssl_client_config(USER, PASSWORD)["ssl.ca.location"]
    return {
        "DAGSTER_DEPLOYMENT": "cluster",
        "KAFKA_BOOTSTRAP_SERVERS": cluster.sasl_ssl_bootstrap_servers,
        "KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
        "KAFKA_SASL_USERNAME": USER,
        "KAFKA_SSL_CA_LOCATION": ca,
        "LAKE_ROOT": str(lake),
        "STREAM_STATE_DIR": str(state),
    }


def _kafka_batch_asset(result: str) -> Any:
    (asset,) = [a for a in KAFKA_BATCH_ASSETS if a.key.path[-1] == result]
    return asset


def _lake_asset(topic: str) -> Any:
    (asset,) = [a for a in LAKE_ASSETS if a.key.path[-1] == topic]
    return asset


def test_generator_stream_app_and_lake_through_sasl_ssl(
    secure_cluster: LocalKafkaCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = cluster_env(secure_cluster, tmp_path / "lake", tmp_path / "state")
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", PASSWORD)
    resources = platform_resources(env)
    kafka = resources["kafka"].process_config_and_initialize()
    assert kafka.connection.client_config()["security.protocol"] == "SASL_SSL"
    instance = DagsterInstance.ephemeral()

    # the topics, created as the Kubernetes Job creates them: `python -m pipelines.topics`
    # with the connection (and the password) in its environment
    created = subprocess.run(
        [sys.executable, "-m", "pipelines.topics"],
        env={**os.environ, **env, "KAFKA_SASL_PASSWORD": PASSWORD, "PYTHONPATH": str(REPO)},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert created.returncode == 0, created.stderr[-2000:]
    outcomes = dict(line.split(": ") for line in created.stdout.splitlines())
    assert outcomes[domain.ORDERS] == "created" and set(outcomes.values()) == {"created"}

    # the generator asset: a burst written through SASL_SSL, inside one hour (its late
    # orders are at most 12 minutes late)
    burst = materialize(
        [generator],
        instance=instance,
        resources=resources,
        run_config={
            "ops": {
                "generator": {
                    "config": {"duration_s": 120.0, "seed": 3, "start_ms": HOUR_START + 20 * 60_000}
                }
            }
        },
    )
    assert burst.success
    written = {
        e.asset_key.path[-1]: e.materialization.metadata["records_written"].value
        for e in burst.get_asset_materialization_events()
    }
    assert written[domain.ORDERS] > 100
    orders_in_kafka = sum(kafka.end_offsets(domain.ORDERS).values())
    assert orders_in_kafka == written[domain.ORDERS]

    # a stream application (exactly-once) through the same connection
    stream_apps = resources["stream_apps"]
    runner = stream_apps.runner(APP, kafka.connection, instance="secure")
    assert runner.streams_config()["sasl.mechanism"] == "SCRAM-SHA-512"
    runner.start()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            lag = kafka.consumer_lag(runner.application_id, [domain.ORDERS])
            if lag and sum(lag.values()) == 0:
                break
            time.sleep(1)
        assert lag and sum(lag.values()) == 0, lag
    finally:
        assert runner.close(60)
    deduped = sum(kafka.end_offsets(domain.ORDERS_DEDUPED).values())
    assert deduped > 0

    # the lake lands the raw and the derived topic through it
    landed = materialize(
        [_lake_asset(domain.ORDERS), _lake_asset(domain.ORDERS_DEDUPED)],
        instance=instance,
        resources=resources,
    )
    assert landed.success
    records = {
        e.asset_key.path[-1]: e.materialization.metadata["records_landed"].value
        for e in landed.get_asset_materialization_events()
    }
    # every order; the deduplicated ones end before the end offset (transaction markers)
    assert records[domain.ORDERS] == orders_in_kafka
    assert 0 < records[domain.ORDERS_DEDUPED] < deduped
    lake = resources["lake"].path
    orders = read_topic(domain.ORDERS, lake)
    valid = orders[orders["_valid"]]
    assert valid["order_id"].nunique() == len(read_topic(domain.ORDERS_DEDUPED, lake))

    # Spark's Kafka source reads the hour through SASL_SSL (the kappa batch) and computes
    # what the lake gives
    kappa = materialize(
        [_kafka_batch_asset("orders_deduped")],
        partition_key=PARTITION_KEY,
        instance=instance,
        resources=resources,
    )
    assert kappa.success
    from_kafka = read_result("orders_deduped", HOUR, lake, source=KAFKA)
    recompute("orders_deduped", HOUR, lake, get_spark(kafka=True))
    from_lake = read_result("orders_deduped", HOUR, lake)
    assert len(from_kafka) == valid["order_id"].nunique() > 100
    pd.testing.assert_frame_equal(
        from_kafka.sort_values("order_id").reset_index(drop=True),
        from_lake.sort_values("order_id").reset_index(drop=True),
    )


def test_a_wrong_password_fails_fast_saying_the_login_was_refused(
    secure_cluster: LocalKafkaCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = cluster_env(secure_cluster, tmp_path / "lake", tmp_path / "state")
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", "not-the-password")
    began = time.monotonic()
    result = materialize(
        [_lake_asset(domain.ORDERS)],
        instance=DagsterInstance.ephemeral(),
        resources=platform_resources(env),
        raise_on_error=False,
    )
    took = time.monotonic() - began
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    message = str(failure.event_specific_data.error)
    assert "refused the connection" in message and "sasl" in message, message
    assert took < 30, took
    assert not (tmp_path / "lake" / domain.ORDERS).exists()  # nothing landed
