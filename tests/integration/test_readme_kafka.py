"""The "Running against Kafka" example of the docs (getting-started/against-kafka.md) runs as
written against a real broker."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
from confluent_kafka import Producer

from streaming.testing import LocalKafkaCluster

PAGE = Path(__file__).resolve().parents[2] / "docs" / "getting-started" / "against-kafka.md"


def test_docs_kafka_example_runs_as_written(tmp_path, monkeypatch, capsys):
    """On a broker of its own: the example's topic names are fixed, and the session's shared
    broker has platform tests that count every record of "clicks"."""
    text = PAGE.read_text()
    block = re.search(r"# Running against Kafka\n\n```python\n(.*?)```", text, re.S).group(1)
    with LocalKafkaCluster(nodes=1) as kafka_cluster:
        _run(block, kafka_cluster, tmp_path, monkeypatch)
    assert capsys.readouterr().out.splitlines()[-1] == "u1 clicked 3 times"


def _run(block: str, kafka_cluster: LocalKafkaCluster, tmp_path, monkeypatch) -> None:
    for topic in ("clicks", "clicks-per-user"):
        if topic not in kafka_cluster.list_topics():
            kafka_cluster.create_topic(topic, partitions=2)
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    for page in ("home", "cart", "pay"):
        producer.produce("clicks", key=b"u1", value=orjson.dumps({"page": page}))
    producer.flush(10)
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka_cluster.bootstrap_servers)
    monkeypatch.setenv("STATE_DIR", str(tmp_path))
    exec(compile(block, "against-kafka.md", "exec"), {})
