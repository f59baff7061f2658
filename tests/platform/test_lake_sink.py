"""The lake sink against a real broker: everything lands once, re-runs add only what is new."""

from __future__ import annotations

import itertools
import uuid
from pathlib import Path

from data_fixture import START_MS

from pipelines import domain
from pipelines.generator import GeneratorConfig, iter_events, produce
from pipelines.lake import duck
from pipelines.lake.manifest import Manifest
from pipelines.lake.paths import hour_dir, part_file_name, topic_dir
from pipelines.lake.sink import sink_topic
from pipelines.topics import create_topics
from streaming.testing import LocalKafkaCluster


def _expected(config: GeneratorConfig) -> dict[str, int]:
    counts: dict[str, int] = {}
    for event in iter_events(config):
        counts[event.topic] = counts.get(event.topic, 0) + 1
    return counts


def test_sink_is_idempotent_and_incremental(
    kafka_cluster: LocalKafkaCluster, tmp_path: Path
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    first = create_topics(bootstrap)
    assert first[domain.ORDERS] in ("created", "exists")
    assert set(create_topics(bootstrap).values()) == {"exists"}  # idempotent

    # the events go to copies of the raw topics of this test's own (other tests write to
    # the platform's, and those delete 2025's records), landed as the platform topics
    prefix = f"lake-sink-{uuid.uuid4().hex[:8]}-"
    topics = {t: prefix + t for t in domain.RAW_TOPICS}
    for name in topics.values():
        kafka_cluster.create_topic(name, partitions=4)
    config = GeneratorConfig(seed=3, start_ms=START_MS, duration_s=120, orders_per_second=10)
    produce(config, bootstrap, topics=topics)
    expected = _expected(config)
    lake = tmp_path / "lake"

    def land(topic: str) -> int:
        return sink_topic(bootstrap, topics[topic], lake, timeout=30, lake_topic=topic).records

    for topic in domain.RAW_TOPICS:
        assert land(topic) == expected[topic], topic
    con = duck.connect(lake)
    assert con.execute("select count(*) from orders").fetchone()[0] == expected[domain.ORDERS]
    invalid = con.execute("select count(*) from orders where not _valid").fetchone()[0]
    assert invalid > 0  # malformed records are kept, flagged
    # (partition, offset) is unique: nothing landed twice
    assert (
        con.execute(
            "select count(*) from (select _partition, _offset from orders group by 1, 2 having count(*) > 1)"
        ).fetchone()[0]
        == 0
    )
    con.close()

    # A re-run lands nothing.
    for topic in domain.RAW_TOPICS:
        assert land(topic) == 0

    # More events: only they land.
    more = config.with_(seed=4, start_ms=START_MS + 120_000)
    produce(more, bootstrap, topics=topics)
    extra = _expected(more)
    assert land(domain.ORDERS) == extra[domain.ORDERS]
    total = expected[domain.ORDERS] + extra[domain.ORDERS]
    assert Manifest.load(lake, domain.ORDERS).total_rows() == total
    assert len(duck.read_topic(domain.ORDERS, lake, valid_only=False)) == total


def test_leftovers_of_an_interrupted_run_are_removed(
    kafka_cluster: LocalKafkaCluster, tmp_path: Path
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    topic = "sink-crash-test"
    kafka_cluster.create_topic(topic, partitions=2)
    config = GeneratorConfig(seed=5, start_ms=START_MS, duration_s=30, orders_per_second=10)
    events = [e for e in iter_events(config) if e.topic == domain.ORDERS]
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for e in events:
        producer.produce(topic, key=e.key.encode(), value=e.value, timestamp=e.timestamp)
    producer.flush(30)
    lake = tmp_path / "lake"
    # A file written by a run that died before updating the manifest.
    orphan = hour_dir(topic_dir(lake, topic), "2025-01-01T00") / part_file_name(0, 0, 9)
    orphan.parent.mkdir(parents=True)
    orphan.write_bytes(b"not parquet")
    result = sink_topic(bootstrap, topic, lake, timeout=30)
    assert result.records == len(events)
    assert not orphan.exists() or orphan in result.files
    assert len(duck.read_topic(topic, lake, valid_only=False)) == len(events)


def test_a_topic_written_while_it_lands_loses_no_record(
    kafka_cluster: LocalKafkaCluster, tmp_path: Path
) -> None:
    """As under ``make run``, where the generator writes while the hourly run lands the lake:
    records past the run's end offsets arrive in the same fetch, before the partition's
    end-of-partition event. They belong to the next landing, which must start at the first
    of them (the event's offset lies beyond them)."""
    import threading

    from confluent_kafka import Producer

    topic = f"lake-live-{uuid.uuid4().hex[:8]}"
    kafka_cluster.create_topic(topic, partitions=2)
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "linger.ms": 1})
    stop = threading.Event()
    written = [0]

    def write() -> None:
        while not stop.is_set():
            for _ in range(200):
                value = f'{{"order_id": "o-{written[0]}", "amount": 1.0}}'.encode()
                producer.produce(topic, key=str(written[0] % 7).encode(), value=value)
                written[0] += 1
            producer.poll(0)
            producer.flush(10)
        producer.flush(30)

    writer = threading.Thread(target=write)
    writer.start()
    lake = tmp_path / "lake"
    try:
        while written[0] < 2_000:
            stop.wait(0.05)
        for _ in range(5):  # landings while the topic grows
            sink_topic(kafka_cluster.bootstrap_servers, topic, lake, timeout=30)
    finally:
        stop.set()
        writer.join(60)
    sink_topic(kafka_cluster.bootstrap_servers, topic, lake, timeout=30)
    manifest = Manifest.load(lake, topic)
    landed = sum(count for ranges in manifest.ranges.values() for _, _, count in ranges)
    assert landed == written[0]
    for partition, ranges in manifest.ranges.items():
        for (_, last, _), (first, _, _) in itertools.pairwise(ranges):
            assert first == last + 1, (partition, ranges)  # no offset skipped
