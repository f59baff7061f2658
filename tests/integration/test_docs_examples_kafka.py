"""The tutorials' topologies (docs/examples/) run against a real broker as in the test
driver: each DSL and SQL topology of a tutorial with one input topic runs in
``KafkaStreams`` (exactly-once, no record cache) over the tutorial's input and writes what
its page says.

The tutorials name their topics as the platform does (``orders``, ``clicks``) and give them
different contents: each runs on a broker of this module's own, its topics created afresh.
The two-input tutorials (the enrichment join, the fraud amount rule) are left to the test
driver: which input a broker task reads first depends on its fetches; the fraud velocity
rule is the windowed revenue's machinery again."""

from __future__ import annotations

import importlib.util
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from streaming import KafkaStreams, Topology
from streaming.testing import LocalKafkaCluster

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


def _example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"docs_example_{name}", EXAMPLES / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: (example, input topic, its records' name, [(topology factory, output topic, expected)])
CASES = {
    "filter_enrich": (
        "orders",
        "ORDERS",
        [
            ("dsl_topology", "high-value-orders", "EXPECTED"),
            ("sql_topology", "high-value-orders", "EXPECTED"),
        ],
    ),
    "count_per_region": (
        "orders",
        "ORDERS",
        [
            ("dsl_topology", "orders-per-region", "EXPECTED"),
            ("sql_topology", "orders-per-region", "EXPECTED"),
        ],
    ),
    "windowed_revenue": (
        "orders",
        "ORDERS",
        [
            ("dsl_tumbling", "revenue-5m", "EXPECTED_TUMBLING"),
            ("sql_tumbling", "revenue-5m", "EXPECTED_TUMBLING"),
            ("dsl_hopping", "revenue-10m-every-5m", "EXPECTED_HOPPING"),
            ("sql_hopping", "revenue-10m-every-5m", "EXPECTED_HOPPING"),
        ],
    ),
    "sessions": (
        "clicks",
        "CLICKS",
        [
            ("dsl_topology", "click-sessions", "EXPECTED_DSL"),
            ("sql_topology", "click-sessions", "EXPECTED_SQL"),
        ],
    ),
    "dedup": (
        "orders",
        "ORDERS",
        [
            ("dsl_topology", "orders-deduped", "EXPECTED"),
            ("sql_topology", "orders-deduped", "EXPECTED"),
        ],
    ),
    "table_changelog": (
        "customers",
        "CUSTOMERS",
        [
            ("dsl_topology", "gold-customers", "EXPECTED"),
            ("sql_topology", "gold-customers", "EXPECTED"),
        ],
    ),
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalKafkaCluster]:
    with LocalKafkaCluster(nodes=1) as started:
        yield started


def _create_afresh(cluster: LocalKafkaCluster, topic: str, timeout: float = 30.0) -> None:
    """Create ``topic`` with one partition, deleting another tutorial's topic of that name."""
    if topic in cluster.list_topics():
        cluster.delete_topic(topic)
        deadline = time.monotonic() + timeout
        while topic in cluster.list_topics():  # deletion completes asynchronously
            assert time.monotonic() < deadline, f"{topic} was not deleted"
            time.sleep(0.1)
    cluster.create_topic(topic, partitions=1)


def _end_offset(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"end-{uuid.uuid4().hex[:8]}"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        consumer.close()


def _read(bootstrap: str, topic: str, start: int, count: int, timeout: float = 90.0) -> list[Any]:
    """The committed records of ``topic`` from ``start`` on, until ``count`` came (and then
    whatever else comes within a second, so that an extra record shows up too)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    out: list[Any] = []
    try:
        consumer.assign([TopicPartition(topic, 0, start)])
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            out += [m for m in consumer.consume(100, timeout=0.5) if m.error() is None]
        settle = time.monotonic() + 1.0
        while time.monotonic() < settle:
            out += [m for m in consumer.consume(100, timeout=0.5) if m.error() is None]
    finally:
        consumer.close()
    return [(m.key().decode(), None if m.value() is None else orjson.loads(m.value())) for m in out]


def _run_on_broker(
    topology: Topology, bootstrap: str, output: str, expected: list[Any], state_dir: Path
) -> list[Any]:
    start = _end_offset(bootstrap, output)
    config = {
        "application.id": f"docs-{uuid.uuid4().hex[:8]}",
        "bootstrap.servers": bootstrap,
        "processing.guarantee": "exactly_once_v2",
        "statestore.cache.max.bytes": 0,
        "state.dir": str(state_dir),
    }
    with KafkaStreams(topology, config):
        return _read(bootstrap, output, start, len(expected))


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_tutorial_writes_on_a_broker_what_it_writes_in_the_test_driver(
    name: str, cluster: LocalKafkaCluster, tmp_path: Path
) -> None:
    example = _example(name)
    source, records_name, runs = CASES[name]
    bootstrap = cluster.bootstrap_servers
    for topic in {source} | {output for _, output, _ in runs}:
        _create_afresh(cluster, topic)
    producer = Producer({"bootstrap.servers": bootstrap})
    for key, value in getattr(example, records_name):
        timestamp = value["ts"] if value and "ts" in value else None
        producer.produce(
            source,
            key=key.encode(),
            value=None if value is None else orjson.dumps(value),
            **({"timestamp": timestamp} if timestamp is not None else {}),
        )
    assert producer.flush(30) == 0
    for build, output, expected_name in runs:
        expected = getattr(example, expected_name)
        written = _run_on_broker(
            getattr(example, build)(), bootstrap, output, expected, tmp_path / build
        )
        assert written == expected, build
