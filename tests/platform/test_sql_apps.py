"""The SQL stream applications on a real broker, run by the supervisor like the DSL ones.

The generator's events flow through ``windowed-revenue`` (DSL) and the SQL applications
``windowed-revenue-sql`` and ``enriched-orders-sql`` (exactly-once, RocksDB state, query
servers); the lake lands the topics; then

- the SQL revenue agrees with the batch recompute (PySpark) and with the DSL application
  for every on-time window (differences only where the reported late data explains them);
- the SQL revenue agrees with its own SELECT run by DuckDB over the lake's orders
  (``streaming.sql.batch``), also as the blocking Dagster check
  ``revenue_5m_sql_matches_duckdb``;
- the SQL enrichment wrote every usable order exactly once, and a pull query on the SQL
  revenue application's store answers from the running application.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
from dagster import DagsterInstance, materialize
from feeding import feed

from pipelines import domain
from pipelines.streams.sql import REVENUE_SQL
from pipelines.streams.supervisor import RunnerSettings, Supervisor
from sensors.hours import hour_key
from streaming.testing import LocalKafkaCluster

HOUR_MS = 3_600_000
# a recent hour: topics delete records whose timestamps are older than their retention
T0 = (int(time.time() * 1000) // HOUR_MS - 3) * HOUR_MS
HOUR = hour_key(T0)
APPS = ["windowed-revenue", "windowed-revenue-sql", "enriched-orders-sql"]


@pytest.fixture(scope="module")
def broker():
    # its own broker: the fixed platform topic names must start empty
    with LocalKafkaCluster(nodes=1) as cluster:
        yield cluster


def test_sql_apps_agree_with_batch_dsl_and_duckdb(broker, tmp_path: Path) -> None:
    from assets.reconcile import sql_vs_duckdb
    from pipelines.batch.recompute import recompute
    from pipelines.generator import GeneratorConfig, iter_events
    from pipelines.lake.duck import read_topic
    from pipelines.lake.sink import sink_topics
    from pipelines.reconcile import sql as sql_reconcile
    from pipelines.reconcile.reconcile import stream_watermark
    from pipelines.topics import create_topics
    from resources import platform_resources
    from streaming.sql import pull

    bootstrap = broker.bootstrap_servers
    create_topics(bootstrap)
    lake = tmp_path / "lake"
    gen = GeneratorConfig(
        seed=11, start_ms=T0, duration_s=35 * 60, orders_per_second=1.0, customers=60
    )
    events = list(iter_events(gen))

    settings = RunnerSettings(bootstrap, state_root=tmp_path / "state", query_base_port=None)
    supervisor = Supervisor(settings, apps=APPS)
    supervisor.start()
    try:
        feed(bootstrap, events, T0, apps=APPS)
        status = supervisor.status()
        # the SQL app's store answers a pull query (the catalog is registered) for the
        # newest EU window (older windows leave the store after window size + grace)
        sql_runner = next(r for r in supervisor.runners if r.app.name == REVENUE_SQL.name)
        parsed = (domain.parse_record(e.topic, e.value) for e in events if e.topic == domain.ORDERS)
        last_eu = max(o["event_time"] for o in parsed if o is not None and o["region"] == "EU")
        window = last_eu - last_eu % domain.REVENUE_WINDOW_MS
        answer = pull(
            sql_runner.streams,
            f"SELECT * FROM revenue_5m WHERE region = 'EU' AND window_start = {window}",
        )
    finally:
        assert supervisor.close(90)
    assert all(s["state"] == "RUNNING" for s in status.values()), status
    sql_status = status[REVENUE_SQL.name]
    assert sql_status["closed_windows"] >= 6 * len(domain.REGIONS)
    assert sql_status["application_id"] == REVENUE_SQL.name
    assert [(r["region"], r["window_start"]) for r in answer] == [("EU", window)]

    topics = [
        *domain.RAW_TOPICS,
        domain.REVENUE_5M,
        domain.REVENUE_LATE,
        domain.REVENUE_5M_SQL,
        domain.ENRICHED_ORDERS_SQL,
    ]
    sink_topics(bootstrap, topics, lake)
    recompute("revenue_5m", HOUR, lake)
    watermark = stream_watermark(lake)

    reports = {
        "vs_batch": sql_reconcile.vs_batch(HOUR, lake, watermark_ms=watermark),
        "vs_dsl": sql_reconcile.vs_dsl(HOUR, lake, watermark_ms=watermark),
        "vs_duckdb": sql_reconcile.vs_duckdb(HOUR, lake, watermark_ms=watermark),
    }
    print("\n".join(r.summary() for r in reports.values()))
    for name, report in reports.items():
        assert report.stats["unexplained"] == 0, (name, report.worst)
        assert report.stats["matched"] >= 8, name
        assert report.passed, name
    for name in ("vs_batch", "vs_duckdb"):  # every closed window of the hour's first 35 min
        assert reports[name].stats["batch_rows"] >= 5 * len(domain.REGIONS), name
    # the generator's late orders were dropped by the stream and explain the differences
    assert reports["vs_batch"].stats["late_records"] > 0
    assert reports["vs_batch"].stats["explained_by_late_data"] > 0
    assert reports["vs_dsl"].stats["windows_with_late_data"] > 0

    # the blocking Dagster check over the same lake
    result = materialize(
        [sql_vs_duckdb],
        partition_key=HOUR,
        instance=DagsterInstance.ephemeral(),
        resources=platform_resources({"LAKE_ROOT": str(lake)}),
    )
    assert result.success
    (check,) = result.get_asset_check_evaluations()
    assert check.check_name == "revenue_5m_sql_matches_duckdb" and check.passed, check.description

    # every usable order was enriched exactly once (a re-sent order twice, as it came)
    orders = read_topic(domain.ORDERS, lake)
    enriched = read_topic(domain.ENRICHED_ORDERS_SQL, lake)
    assert Counter(enriched["order_id"]) == Counter(orders["order_id"])
    known = enriched[enriched["customer_known"]]
    assert len(known) > 0.9 * len(enriched)
    assert (~enriched[~enriched["customer_known"]]["within_credit_limit"]).all()
