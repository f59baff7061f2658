"""A producer fenced by a newer instance while records are in flight: the flush that finds
out raises ``TaskMigratedException`` (the stream thread replaces its producer and closes its
tasks dirty), never the ``SystemError`` that confluent-kafka ends such a flush with when
more than one delivery report fails after the fatal error."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer

from streaming.runtime import errors
from streaming.runtime.failures import TaskMigratedException
from streaming.runtime.producer import RecordCollector
from streaming.testing import LocalKafkaCluster


def test_a_flush_that_finds_its_producer_fenced_raises_task_migrated(
    kafka_cluster: LocalKafkaCluster,
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    topic = f"fenced-{uuid.uuid4().hex[:8]}"
    kafka_cluster.create_topic(topic, partitions=1)
    conf = {
        "bootstrap.servers": bootstrap,
        "transactional.id": f"{topic}-txn",
        "linger.ms": 50,
        "delivery.report.only.error": True,  # as the runtime's producers
    }
    reports: list[str] = []
    collector: RecordCollector | None = None

    def on_delivery(err: object, msg: object) -> None:
        reports.append("error" if err is not None else "ok")
        assert collector is not None
        collector.on_delivery(err, msg)

    old = Producer({**conf, "on_delivery": on_delivery})
    collector = RecordCollector(
        old,
        production_handler=errors.log_and_fail,
        dead_letter_topic=None,
        partition_counts=lambda _topic: 1,
        exactly_once=True,
    )
    now = int(time.time() * 1000)
    old.init_transactions(30)
    old.begin_transaction()
    collector.send(topic, b"k", b"first", now)
    collector.flush(30)  # the partition is in the transaction
    assert reports == []

    newer = Producer(conf)
    newer.init_transactions(30)  # bumps the epoch: the old producer is fenced
    for i in range(50):
        collector.send(topic, b"k", f"late-{i}".encode(), now)
    with pytest.raises(TaskMigratedException):
        collector.flush(30)
    assert "error" in reports  # the fenced writes were reported
