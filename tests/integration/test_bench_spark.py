"""``python -m bench.windowed_agg``'s Spark Structured Streaming runner (``bench.wa_spark``)
end to end on the real broker: a few thousand orders on 2 partitions through Spark's Kafka
source, the 5-minute tumbling sum and Spark's Kafka sink under at-least-once, until its
checkpoint has committed the whole input; the output, read back to its end offsets, must
hold the expected sum of every (region, window).

The Spark driver's JVM compiles with C1 only (``JAVA_TOOL_OPTIONS``): a run of a few
micro-batches is over before C2's compilations pay for their CPU time, and the runner's
results do not depend on the JIT. ``make bench`` runs it with the JVM's defaults."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from bench.wa_spark import SPARK_JARS
from bench.windowed_agg import expected_sums, make_orders, produce_orders, run_engine
from streaming.testing import LocalKafkaCluster

RECORDS = 3_000
#: for the Spark driver's JVM only (see the module docstring)
SHORT_RUN_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def test_pyspark_and_the_spark_kafka_jars_are_there() -> None:
    """A missing component is a failure, not a skip: ``make setup`` installs both."""
    assert importlib.util.find_spec("pyspark") is not None
    assert any(SPARK_JARS.glob("*.jar")), f"no Spark Kafka jars in {SPARK_JARS} (make setup)"


@pytest.mark.parametrize("max_offsets", [0, 1_500], ids=["one-batch", "1500-per-batch"])
def test_spark_runner_on_the_broker_is_verified(
    kafka_cluster: LocalKafkaCluster,
    tmp_path: Path,
    max_offsets: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # set after the session's broker started: only the runner's JVM gets it
    monkeypatch.setenv(
        "JAVA_TOOL_OPTIONS", f"{os.environ.get('JAVA_TOOL_OPTIONS', '')} {SHORT_RUN_JVM}".strip()
    )
    orders = make_orders(RECORDS, seed=3)
    topic = f"bench-spark-orders-{max_offsets}"
    kafka_cluster.create_topic(topic, partitions=2)
    produce_orders(kafka_cluster.bootstrap_servers, topic, orders)
    result = run_engine(
        "spark",
        "alos",
        kafka=kafka_cluster,
        input_topic=topic,
        partitions=2,
        n=RECORDS,
        expected=expected_sums(orders),
        commit_ms=1000,
        timeout=300,
        workdir=tmp_path,
        spark_max_offsets=max_offsets,
    )
    assert result.error == ""
    assert result.details == []
    assert result.correct
    assert result.windows == len(expected_sums(orders))
    assert result.startup_seconds is not None and result.startup_seconds > 0
    assert result.first_planning_seconds is not None  # the runner logged batch 0's progress
    assert result.seconds > 0 and result.cpu_seconds > 0
    if max_offsets:  # 2 micro-batches at least, each writing its updated windows
        assert result.output_records > result.windows


def test_spark_refuses_exactly_once(kafka_cluster: LocalKafkaCluster, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at-least-once"):
        run_engine(
            "spark",
            "eos",
            kafka=kafka_cluster,
            input_topic="unused",
            partitions=2,
            n=1,
            expected={},
            commit_ms=100,
            timeout=10,
            workdir=tmp_path,
        )
