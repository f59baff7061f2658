"""The kappa path's batch: the hour read straight from Kafka with Spark's Kafka source
(``pipelines.batch.kafka_source``) gives exactly the results the lake-based recompute gives.

Against the session's real broker (``kafka_cluster``) and local Spark: an hour of generator
events (late, out-of-order, duplicate and malformed records included) is produced to
uniquely named copies of the raw topics, landed in a temporary lake as the platform
topics (``sink_topics`` with a mapping), and every result is computed both ways.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pytest

from pipelines import domain
from pipelines.lake.paths import HOUR_MS, hour_of

MINUTE = domain.MINUTE_MS
# a recent hour, as under make run (whose broker deletes records older than its retention)
HOUR_START = (int(time.time() * 1000) // HOUR_MS - 3) * HOUR_MS
HOUR = hour_of(HOUR_START)
PARTITION_KEY = f"{HOUR.replace('T', '-')}:00"
RESULTS = ("revenue_5m", "revenue_hopping", "fraud_alerts", "click_sessions", "orders_deduped")


def _spark() -> Any:
    from pipelines.batch.session import get_spark, spark_jars

    if not spark_jars():
        pytest.fail("Spark's Kafka source jars are missing (make setup fetches .jars/spark)")
    return get_spark(kafka=True)


@pytest.fixture(scope="module")
def hour_in_kafka(kafka_cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """Two hours of events around ``HOUR`` in fresh topics, landed in a fresh lake."""
    from pipelines.generator import GeneratorConfig, produce
    from pipelines.lake.sink import sink_topics

    bootstrap = kafka_cluster.bootstrap_servers
    prefix = f"kb-{uuid.uuid4().hex[:8]}-"
    topics = {t: prefix + t for t in domain.RAW_TOPICS}
    for name in topics.values():
        kafka_cluster.create_topic(name, partitions=4)
    config = GeneratorConfig(
        seed=11,
        start_ms=HOUR_START - 30 * MINUTE,
        duration_s=2 * 3600,
        orders_per_second=1.0,
        customers=60,
        late_share=0.03,  # more records sent long after their event time than by default
    )
    began = time.monotonic()
    sent = produce(config, bootstrap, topics=topics)
    lake = tmp_path_factory.mktemp("lake")
    landed = sink_topics(bootstrap, {name: t for t, name in topics.items()}, lake)
    assert landed[topics[domain.ORDERS]].records > 7000
    print(f"produced {sent} events and landed them in {time.monotonic() - began:.1f} s")
    yield {"bootstrap": bootstrap, "topics": topics, "lake": lake, "sent": sent}


def _same(kafka: pd.DataFrame, lake: pd.DataFrame) -> None:
    columns = list(lake.columns)
    assert list(kafka.columns) == columns
    pd.testing.assert_frame_equal(
        kafka.sort_values(columns, kind="stable").reset_index(drop=True),
        lake.sort_values(columns, kind="stable").reset_index(drop=True),
        check_exact=True,
    )


def test_results_from_kafka_equal_the_lakes(hour_in_kafka: dict) -> None:
    from pipelines.batch.kafka_source import AFTER_MS, BEFORE_MS, KafkaSource, resolve_offsets
    from pipelines.batch.recompute import compute_result, recompute
    from pipelines.batch.store import read_result

    spark = _spark()
    lake, topics = hour_in_kafka["lake"], hour_in_kafka["topics"]
    all_orders = resolve_offsets(hour_in_kafka["bootstrap"], topics[domain.ORDERS])
    for result in RESULTS:
        began = time.monotonic()
        from_lake = recompute(result, HOUR, lake, spark)
        source = KafkaSource(hour_in_kafka["bootstrap"], topics)
        from_kafka = recompute(result, HOUR, lake, spark, source=source)
        print(
            f"{result}: {len(from_lake.frame)} rows, both ways in {time.monotonic() - began:.1f} s"
        )
        assert len(from_lake.frame) > 0, result
        _same(from_kafka.frame, from_lake.frame)
        # stored apart: the lake-based result is untouched
        assert from_kafka.source == "kafka" and from_lake.source == "lake"
        assert from_kafka.path != from_lake.path
        assert from_kafka.path.parent.parent.name == f"{result}_from_kafka"
        _same(read_result(result, HOUR, lake, source="kafka"), read_result(result, HOUR, lake))

        # every partition listed; timestamps -> offsets with slack around what is needed
        for offsets in source.ranges:
            options = {k: json.loads(v) for k, v in offsets.spark_options().items()}
            assert options["assign"] == {offsets.topic: [0, 1, 2, 3]}
            for key in ("startingOffsets", "endingOffsets"):
                assert set(options[key][offsets.topic]) == {"0", "1", "2", "3"}
        if result in ("revenue_5m", "revenue_hopping"):
            (orders,) = source.ranges
            assert orders.topic == topics[domain.ORDERS]
            assert orders.start_ms == HOUR_START - BEFORE_MS
            needed_end = HOUR_START + HOUR_MS + (10 * MINUTE if result == "revenue_hopping" else 0)
            assert orders.end_ms == needed_end + AFTER_MS
            # the hour's records are a slice of the topic, not all of it
            assert all(o > 0 for o in orders.start.values())
            assert 0 < orders.records < 0.8 * all_orders.records

    fraud = read_result("fraud_alerts", HOUR, lake, source="kafka")
    assert set(fraud["rule"]) == set(domain.FRAUD_RULES)

    # without the slack after the hour, the orders sent late (after records of the next
    # hour) are missed
    no_slack = KafkaSource(hour_in_kafka["bootstrap"], topics, before_ms=0, after_ms=0)
    short = compute_result("revenue_5m", HOUR, lake, spark, source=no_slack).toPandas()
    full = read_result("revenue_5m", HOUR, lake)
    assert short["order_count"].sum() < full["order_count"].sum()


def test_reconciliation_takes_the_kafka_batch(hour_in_kafka: dict) -> None:
    """The stream side (here: the lake-based batch results landed as the stream topics)
    reconciles with the batch read from Kafka, through the Dagster assets of the kappa
    path (run config names the renamed topics)."""
    from dagster import AssetKey, DagsterInstance, materialize

    from assets.batch import KAFKA_BATCH_ASSETS
    from assets.reconcile import KAFKA_CHECK_NAMES, KAFKA_RECONCILE_ASSETS
    from pipelines.batch.store import read_result
    from pipelines.generator import Event
    from pipelines.lake.writer import land_events
    from pipelines.reconcile.reconcile import reconcile_hour
    from resources import platform_resources

    _spark()
    lake, topics = hour_in_kafka["lake"], hour_in_kafka["topics"]
    for result, topic, key in (
        ("revenue_5m", domain.REVENUE_5M, "region"),
        ("revenue_hopping", domain.REVENUE_HOPPING, "region"),
        ("fraud_alerts", domain.FRAUD_ALERTS, "customer_id"),
        ("click_sessions", domain.CLICK_SESSIONS, "user_id"),
    ):
        frame = read_result(result, HOUR, lake)
        assert frame is not None, f"{result} was not computed from the lake"
        rows = frame.astype(object).where(frame.notna(), None).to_dict("records")
        events = [
            Event(
                topic,
                str(row[key]),
                orjson.dumps(row),
                int(row.get("window_start") or row.get("event_time") or row["session_start"]),
                0,
            )
            for row in rows
        ]
        land_events(lake, events, partitions=2)

    environ = {"LAKE_ROOT": str(lake), "KAFKA_BOOTSTRAP_SERVERS": hour_in_kafka["bootstrap"]}
    began = time.monotonic()
    run = materialize(
        [*KAFKA_BATCH_ASSETS, *KAFKA_RECONCILE_ASSETS],
        partition_key=PARTITION_KEY,
        instance=DagsterInstance.ephemeral(),
        resources=platform_resources(environ),
        run_config={
            "ops": {
                f"kappa_batch__{a.key.path[-1]}": {"config": {"topics": topics}}
                for a in KAFKA_BATCH_ASSETS
            }
        },
    )
    print(f"kappa batch assets + reconciliation in {time.monotonic() - began:.1f} s")
    assert run.success
    checks = {c.check_name: c for c in run.get_asset_check_evaluations()}
    assert set(checks) == set(KAFKA_CHECK_NAMES.values())
    assert all(c.passed for c in checks.values()), {
        n: c.description for n, c in checks.items() if not c.passed
    }
    materialized = {e.asset_key for e in run.get_asset_materialization_events()}
    assert AssetKey(["kappa_batch", "revenue_5m"]) in materialized
    event = next(
        e
        for e in run.get_asset_materialization_events()
        if e.asset_key == AssetKey(["kappa_batch", "fraud_alerts"])
    )
    offsets = event.materialization.metadata["kafka_offsets"].value
    assert [r["topic"] for r in offsets] == [topics[domain.ORDERS], topics[domain.CUSTOMERS]]

    reports = reconcile_hour(HOUR, lake, source="kafka")
    for name, report in reports.items():
        assert report.passed and report.stats["unexplained"] == 0, (name, report.summary())
        assert report.stats["matched"] > 0, name
    # the lake-based batch is reconciled as before (the default source)
    assert all(r.passed for r in reconcile_hour(HOUR, lake).values())


def test_offsets_by_timestamp_and_decoding(kafka_cluster) -> None:
    """Per partition: the first record at or after each timestamp, the partition's end when
    there is none (an empty partition too); undecodable records and records missing a
    required column are dropped; ``_partition`` / ``_offset`` give the arrival order."""
    from confluent_kafka import Producer

    from pipelines.batch.kafka_source import KafkaSource, resolve_offsets

    bootstrap = kafka_cluster.bootstrap_servers
    topic = f"kb-offsets-{uuid.uuid4().hex[:8]}"
    kafka_cluster.create_topic(topic, partitions=3)

    def order(order_id: str, ts: int, **extra: Any) -> bytes:
        value = {"order_id": order_id, "customer_id": "c", "amount": 1.5, "region": "EU"}
        return orjson.dumps({**value, "event_time": ts, **extra})

    records = [  # partition, timestamp, value
        (0, 1_000, order("a", 1_000, location="Paris")),
        (0, 2_000, order("b", 2_000)),
        (0, 3_000, b'{"order_id": "x", "amount": '),  # undecodable
        (0, 4_000, order("d", 4_000)),
        (1, 1_500, order("e", 1_500)),
        (1, 2_500, orjson.dumps({"order_id": "y", "event_time": 2_500})),  # no customer
        (1, 2_600, order("g", 2_600)),
        (1, 2_700, b"[1, 2]"),  # not an object
        (1, 2_800, None),  # a tombstone
        (1, 2_900, order("h", 2_900, extra=1)),
    ]
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, ts, value in records:
        producer.produce(topic, key=b"k", value=value, partition=partition, timestamp=ts)
    assert producer.flush(30) == 0

    offsets = resolve_offsets(bootstrap, topic, 1_600, 2_650)
    assert offsets.start == {0: 1, 1: 1, 2: 0}
    assert offsets.end == {0: 2, 1: 3, 2: 0}
    late = resolve_offsets(bootstrap, topic, 5_000, 9_000)  # no record that late
    assert late.start == late.end == {0: 4, 1: 6, 2: 0}
    everything = resolve_offsets(bootstrap, topic)
    assert everything.start == {0: 0, 1: 0, 2: 0} and everything.end == {0: 4, 1: 6, 2: 0}
    assert json.loads(offsets.spark_options()["endingOffsets"]) == {topic: {"0": 2, "1": 3, "2": 0}}

    spark = _spark()
    source = KafkaSource(bootstrap, {domain.ORDERS: topic}, before_ms=0, after_ms=0)
    rows = source.read_all(spark, domain.ORDERS).toPandas()
    assert list(rows.columns) == [
        *domain.SCHEMAS[domain.ORDERS],
        "_key",
        "_partition",
        "_offset",
        "_timestamp",
        "_valid",
        "_raw",
        "event_hour",
    ]
    got = sorted(zip(rows["order_id"], rows["_partition"], rows["_offset"], strict=True))
    assert got == [("a", 0, 0), ("b", 0, 1), ("d", 0, 3), ("e", 1, 0), ("g", 1, 2), ("h", 1, 5)]
    assert rows["_valid"].all() and rows["_raw"].isna().all()
    assert rows.set_index("order_id").loc["a", "location"] == "Paris"
    assert (rows["event_hour"] == "1970-01-01T00").all()
    # an event-time range: the records of its offsets, filtered by event time
    hour = source.read_hours(spark, domain.ORDERS, 1_500, 2_700).toPandas()
    assert sorted(hour["order_id"]) == ["b", "e", "g"]
    assert source.ranges[-1].start == {0: 1, 1: 0, 2: 0}
    assert source.ranges[-1].end == {0: 2, 1: 3, 2: 0}


_LAKE_SESSION_FIRST = """
import sys, threading
from pipelines import domain
from pipelines.batch.kafka_source import KafkaSource
from pipelines.batch.session import get_spark, has_kafka_source

spark = get_spark()  # the lake path's session: no Kafka jars
assert not spark.conf.get("spark.jars", ""), spark.conf.get("spark.jars")
assert not has_kafka_source(spark)
source = KafkaSource(sys.argv[1], {domain.ORDERS: sys.argv[2]})
counts = []
def read():
    counts.append(source.read_all(spark, domain.ORDERS).count())
read()
thread = threading.Thread(target=read)  # another thread: its own ADD JAR
thread.start()
thread.join()
print("rows", counts)
"""


def test_the_kafka_path_on_a_session_created_without_its_jars(kafka_cluster) -> None:
    """A process whose one session came from the lake path (no Kafka jars) still reads
    from Kafka: the jars are added to the running session, from any thread."""
    import subprocess
    import sys

    from confluent_kafka import Producer

    _spark()
    topic = f"kb-late-jars-{uuid.uuid4().hex[:8]}"
    kafka_cluster.create_topic(topic, partitions=2)
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    for n in range(5):
        value = {"order_id": f"o{n}", "customer_id": "c", "amount": 1.0, "region": "EU"}
        producer.produce(topic, value=orjson.dumps({**value, "event_time": n}), timestamp=n + 1)
    assert producer.flush(30) == 0
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", _LAKE_SESSION_FIRST, kafka_cluster.bootstrap_servers, topic],
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rows [5, 5]" in done.stdout


def test_only_the_kafka_path_loads_the_kafka_jars() -> None:
    from pipelines.batch.session import spark_config, spark_jars
    from resources.spark import kafka_spark_resource, spark_resource

    assert "spark.jars" not in spark_config()
    assert "spark.jars" not in spark_resource().spark_config
    jars = spark_jars()
    if not jars:
        pytest.fail("Spark's Kafka source jars are missing (make setup fetches .jars/spark)")
    assert spark_config(kafka=True)["spark.jars"].split(",") == jars
    assert kafka_spark_resource().spark_config["spark.jars"].split(",") == jars
    mine = spark_config({"spark.jars": "/x/mine.jar"}, kafka=True)["spark.jars"]
    assert mine.split(",") == ["/x/mine.jar", *jars]
