"""The SQL stream applications on a real broker, run by the supervisor like the DSL ones.

The generator's events flow through ``windowed-revenue`` (DSL) and the SQL applications
``windowed-revenue-sql``, ``enriched-orders-sql`` and ``fraud-alerts-sql`` (exactly-once,
RocksDB state, query servers); the lake lands the topics; then

- the SQL revenue agrees with the batch recompute (PySpark) and with the DSL application
  for every on-time window (differences only where the reported late data explains them);
- the SQL revenue agrees with its own SELECT run by DuckDB over the lake's orders
  (``streaming.sql.batch``), also as the blocking Dagster check
  ``revenue_5m_sql_matches_duckdb``;
- the SQL fraud alerts (both MATCH_RECOGNIZE rules) agree with the same SQL run by DuckDB
  over the lake's orders for every alert the stream's watermark has passed, also as the
  Dagster check ``fraud_alerts_sql_matches_duckdb`` (a warning: see docs/platform);
- the SQL enrichment wrote every usable order exactly once, and a pull query on the SQL
  revenue application's store answers from the running application.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
from dagster import AssetCheckSeverity, DagsterInstance, materialize
from feeding import feed

from pipelines import domain
from pipelines.generator import Event, GeneratorConfig, iter_events
from pipelines.streams.sql import REVENUE_SQL
from pipelines.streams.supervisor import RunnerSettings, Supervisor
from sensors.hours import hour_key
from streaming.testing import LocalKafkaCluster

HOUR_MS = 3_600_000
# a recent hour: topics delete records whose timestamps are older than their retention
T0 = (int(time.time() * 1000) // HOUR_MS - 3) * HOUR_MS
HOUR = hour_key(T0)
APPS = ["windowed-revenue", "windowed-revenue-sql", "enriched-orders-sql", "fraud-alerts-sql"]


@pytest.fixture(scope="module")
def broker():
    # its own broker: the fixed platform topic names must start empty
    with LocalKafkaCluster(nodes=1) as cluster:
        yield cluster


def test_sql_apps_agree_with_batch_dsl_and_duckdb(broker, tmp_path: Path) -> None:
    from assets.reconcile import fraud_sql_vs_duckdb, sql_vs_duckdb
    from pipelines.batch.recompute import recompute
    from pipelines.lake.duck import read_topic
    from pipelines.lake.sink import sink_topics
    from pipelines.reconcile import sql as sql_reconcile
    from pipelines.reconcile import sql_fraud
    from pipelines.reconcile.reconcile import stream_watermark
    from pipelines.topics import create_topics
    from resources import platform_resources
    from streaming.sql import pull

    bootstrap = broker.bootstrap_servers
    create_topics(bootstrap)
    lake = tmp_path / "lake"
    # seed 11's 35 minutes hold both fraud.sql patterns: impossible travel (the generator's
    # orders from another region) and card testing (its amounts under CARD_TESTING_SMALL
    # then at least CARD_TESTING_LARGE from one customer within CARD_TESTING_WITHIN)
    gen = GeneratorConfig(
        seed=11, start_ms=T0, duration_s=35 * 60, orders_per_second=1.0, customers=60
    )
    events = list(iter_events(gen))

    settings = RunnerSettings(bootstrap, state_root=tmp_path / "state", query_base_port=None)
    supervisor = Supervisor(settings, apps=APPS)
    supervisor.start()
    try:
        # 30 s of events at a time: no order is read more than the WATERMARK delay (a
        # minute) behind another than the generator's late ones (3-12 minutes behind), which
        # the fraud reconciliation tells from the lake (fraud-alerts-sql reports no late
        # orders; with 5-minute slices the apps also drop orders of a partition read later)
        feed(bootstrap, events, T0, apps=APPS, slice_ms=30_000)
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
        domain.REVENUE_SQL_LATE,
        domain.REVENUE_5M_SQL,
        domain.ENRICHED_ORDERS_SQL,
        domain.FRAUD_ALERTS_SQL,
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

    # the SQL fraud alerts vs the same SQL run by DuckDB: every alert the watermark passed
    fraud = sql_fraud.vs_duckdb(HOUR, lake, watermark_ms=watermark)
    print(fraud.summary(), fraud.stats)
    assert fraud.passed and fraud.stats["unexplained"] == 0, fraud.worst
    assert fraud.stats["matched_small_then_large"] >= 1
    assert fraud.stats["matched_impossible_travel"] >= 1
    assert fraud.stats["possibly_late_orders"] > 0  # the generator's late orders

    # the Dagster checks over the same lake (the fraud one a warning)
    result = materialize(
        [sql_vs_duckdb, fraud_sql_vs_duckdb],
        partition_key=HOUR,
        instance=DagsterInstance.ephemeral(),
        resources=platform_resources({"LAKE_ROOT": str(lake)}),
    )
    assert result.success
    checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
    assert set(checks) == {"revenue_5m_sql_matches_duckdb", "fraud_alerts_sql_matches_duckdb"}
    for check in checks.values():
        assert check.passed, (check.check_name, check.description)
    assert checks["fraud_alerts_sql_matches_duckdb"].severity == AssetCheckSeverity.WARN

    # every usable order was enriched exactly once (a re-sent order twice, as it came)
    orders = read_topic(domain.ORDERS, lake)
    enriched = read_topic(domain.ENRICHED_ORDERS_SQL, lake)
    assert Counter(enriched["order_id"]) == Counter(orders["order_id"])
    known = enriched[enriched["customer_known"]]
    assert len(known) > 0.9 * len(enriched)
    assert (~enriched[~enriched["customer_known"]]["within_credit_limit"]).all()


def test_sql_app_runs_as_a_streaming_asset(broker, tmp_path: Path) -> None:
    """``windowed-revenue-sql`` as its long-running Dagster asset, on topics renamed by the
    resource's app settings (the SQL file's tables follow them): it stops once caught up
    and wrote the windows its query computes (DuckDB over the same orders)."""
    import uuid

    import duckdb
    import pandas as pd

    from assets.keys import kafka_key
    from assets.streams import STREAM_ASSETS
    from pipelines.generator import produce
    from pipelines.reconcile.sql import revenue_batch_query
    from pipelines.streams import kappa
    from resources.kafka import KafkaResource
    from resources.stream_apps import StreamAppsResource

    suffix = uuid.uuid4().hex[:8]
    bootstrap = broker.bootstrap_servers
    raw = {t: f"{t}-sqlasset-{suffix}" for t in domain.RAW_TOPICS}
    for topic in raw.values():
        broker.create_topic(topic, partitions=1)  # one partition: no late drops on a backlog
    out_topic = f"{domain.REVENUE_5M_SQL}-{suffix}"
    gen = GeneratorConfig(
        seed=5,
        start_ms=int(time.time() * 1000) - 40 * domain.MINUTE_MS,
        duration_s=30 * 60,
        orders_per_second=0.5,
        customers=40,
        late_share=0.0,
    )
    produce(gen, bootstrap, topics=raw)
    (asset,) = [a for a in STREAM_ASSETS if a.op.name == "windowed_revenue_sql"]
    result = materialize(
        [asset],
        resources={
            "kafka": KafkaResource(bootstrap_servers=bootstrap),
            "stream_apps": StreamAppsResource(
                state_root=str(tmp_path / "state"),
                app_settings={"orders_topic": raw[domain.ORDERS], "revenue_sql_topic": out_topic},
                commit_interval_ms=200,
            ),
        },
        run_config={
            "ops": {
                "windowed_revenue_sql": {
                    "config": {
                        "stop_when_caught_up": True,
                        "settle_s": 3,
                        "report_interval_s": 2,
                        "max_runtime_s": 240,
                        "application_id": f"{REVENUE_SQL.name}-{suffix}",
                    }
                }
            }
        },
    )
    assert result.success
    (final,) = [
        e.materialization
        for e in result.get_asset_materialization_events()
        if e.materialization.asset_key == kafka_key(domain.REVENUE_5M_SQL)
        and e.materialization.metadata["state"].value == "NOT_RUNNING"
    ]
    assert final.metadata["end_offsets"].value > 0
    assert final.metadata["consumer_lag_max"].value == 0

    rows = [v for _, v, _ in kappa.read_all(bootstrap, out_topic) if isinstance(v, dict)]
    written = {(v["region"], v["window_start"]): v for v in rows}
    assert len(written) == len(rows), "a window was written twice (a window aggregation is final)"
    orders = [domain.parse_record(e.topic, e.value) for e in iter_orders(gen)]
    frame = pd.DataFrame([o for o in orders if o is not None])
    con = duckdb.connect()
    try:
        batch = revenue_batch_query().run(con, {"orders": frame})
    finally:
        con.close()
    expected = {(r["region"], r["window_start"]): r for r in batch}
    assert len(written) >= 5 * len(domain.REGIONS)
    for key, value in written.items():
        assert value == expected[key], key
    # and no closed window is missing (its end plus the watermark delay is behind the
    # application's stream time, the last order's event time)
    stream_time = int(frame["event_time"].max())
    closed = {
        key
        for key, row in expected.items()
        if row["window_end"] + domain.REVENUE_GRACE_MS <= stream_time
    }
    assert closed <= set(written), sorted(closed - set(written))


def iter_orders(gen: GeneratorConfig) -> list[Event]:
    """The generator's order events of ``gen``."""
    return [e for e in iter_events(gen) if e.topic == domain.ORDERS]
