"""The batch recompute beyond local Spark: one hour partition on a standalone cluster.

A Spark standalone master and one worker run on loopback, started from pyspark's own
scripts (``spark_standalone.StandaloneSpark``). The hour's batch assets are materialized
through Dagster with the platform's Spark resource pointed at the master; the work must run
on the worker's executor, and the results must equal the same hour recomputed on
``local[2]`` (and the hand computation of ``test_batch_reconcile``).

The process has one Spark session (``session.get_spark``): a local session runs before the
assets, and the resource must stop it rather than join it (``getOrCreate`` would).
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from dagster import DagsterInstance, materialize
from data_fixture import HOUR, PARTITION_KEY, START_MS, build_lake, valid_orders
from spark_standalone import StandaloneSpark

from assets.batch import BATCH_ASSETS
from pipelines import domain
from pipelines.batch.recompute import RESULTS, recompute
from pipelines.batch.session import DEFAULT_CONF, get_spark, stop_spark
from pipelines.batch.store import read_result
from resources import platform_resources


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneSpark]:
    with StandaloneSpark(tmp_path_factory.mktemp("spark-standalone")) as spark_cluster:
        yield spark_cluster


@pytest.fixture
def lake(tmp_path: Path) -> tuple[Path, list]:
    root = tmp_path / "lake"
    events = build_lake(root)
    return root, events


@pytest.fixture
def local_session_first() -> Iterator[None]:
    # a local session already runs in the process: the resource must not join it
    assert get_spark().sparkContext.master == "local[2]"
    yield
    stop_spark()


def _reference_revenue(orders: list[dict]) -> dict[tuple[str, int], tuple[int, int]]:
    """(region, window start) -> (revenue cents, order count) of the hour, by hand."""
    out: dict[tuple[str, int], tuple[int, int]] = {}
    for order in orders:
        start = domain.window_start(order["event_time"], domain.REVENUE_WINDOW_MS)
        if START_MS <= start < START_MS + 3_600_000:
            cents, count = out.get((order["region"], start), (0, 0))
            out[(order["region"], start)] = (cents + round(order["amount"] * 100), count + 1)
    return out


def _executors(spark: Any) -> list[dict[str, Any]]:
    """The application's executors (the driver included) from Spark's status store."""
    summaries = spark.sparkContext._jsc.sc().statusStore().executorList(False)
    out = []
    for i in range(summaries.size()):
        e = summaries.apply(i)
        out.append(
            {
                "id": e.id(),
                "host_port": e.hostPort(),
                "total_tasks": e.totalTasks(),
                "completed_tasks": e.completedTasks(),
            }
        )
    return out


def test_batch_partition_runs_on_a_standalone_cluster(
    cluster: StandaloneSpark, lake: tuple[Path, list], local_session_first: None, tmp_path: Path
) -> None:
    root, events = lake
    app_name = f"streamplatform-batch-standalone-{uuid.uuid4().hex[:8]}"
    # the cluster deployment, as a team configures it: the master and its deploy settings
    settings = cluster.driver_conf(app_name)
    config = tmp_path / "platform.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "kafka": {"bootstrap_servers": "kafka.unused:9092"},
                "lake": {"root": str(root)},
                "spark": {"master": settings.pop("spark.master"), "settings": settings},
            }
        )
    )
    resources = platform_resources(
        {"DAGSTER_DEPLOYMENT": "cluster", "PLATFORM_CONFIG": str(config)}
    )
    assert resources["pyspark"].spark_config["spark.master"] == cluster.master_url

    result = materialize(
        BATCH_ASSETS,
        partition_key=PARTITION_KEY,
        instance=DagsterInstance.ephemeral(),
        resources=resources,
    )
    assert result.success

    # (a) the session the resource created is on the standalone master...
    from pyspark.sql import SparkSession

    # the resource's session (getOrCreate): this thread's active one, else the process's
    spark = SparkSession.getActiveSession() or SparkSession._instantiatedSession
    assert spark is not None
    assert spark.sparkContext.master == cluster.master_url
    assert spark.sparkContext.appName == app_name
    # ...and the tasks ran on the worker's executor: on a cluster the driver runs none
    executors = _executors(spark)
    workers = [e for e in executors if e["id"] != "driver"]
    assert workers, executors
    assert all(e["host_port"].startswith("127.0.0.1:") for e in workers), executors
    assert sum(e["completed_tasks"] for e in workers) > 0, executors
    assert all(e["total_tasks"] == 0 for e in executors if e["id"] == "driver"), executors

    app = cluster.wait_for_app(app_name, "RUNNING")
    assert app["cores"] == cluster.cores
    worker = cluster.worker_state()
    assert [x["appid"] for x in worker["executors"]] == [app["id"]]

    # Python tasks run on the executor, in this virtualenv's Python, in another process
    here = os.getpid()
    ran = (
        spark.sparkContext.parallelize([0], 1)
        .map(lambda _: (__import__("sys").executable, __import__("os").getpid()))
        .collect()
    )
    assert ran[0][0] == sys.executable and ran[0][1] != here

    standalone = {name: read_result(name, HOUR, root) for name in RESULTS}
    assert all(len(frame) > 0 for frame in standalone.values()), standalone

    spark.stop()
    assert cluster.wait_for_app(app_name, "FINISHED")["id"] == app["id"]

    # (b) the same hour on local[2] gives the same results
    local = get_spark()
    assert local.sparkContext.master == DEFAULT_CONF["spark.master"] == "local[2]"
    for name in RESULTS:
        recompute(name, PARTITION_KEY, root, local)
        pd.testing.assert_frame_equal(read_result(name, HOUR, root), standalone[name])

    revenue = standalone["revenue_5m"]
    got = {
        (r.region, int(r.window_start)): (int(r.revenue_cents), int(r.order_count))
        for r in revenue.itertuples()
    }
    assert got == _reference_revenue(valid_orders(events))
