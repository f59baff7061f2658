"""LocalKafkaCluster against the real Apache Kafka broker: round trips, transactions with
read_committed, a 3-node cluster losing a node, clean shutdown, and useful startup errors."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from streaming.testing import KafkaClusterError, LocalKafkaCluster

pytestmark = pytest.mark.kafka

REPO = Path(__file__).resolve().parents[2]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def consume(cluster: LocalKafkaCluster, topic: str, count: int, *, timeout: float = 30.0, **conf):
    """Read ``count`` records of ``topic`` from the start with a fresh consumer group."""
    consumer = Consumer(
        cluster.client_config(
            **{
                "group.id": unique("reader"),
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                **conf,
            }
        )
    )
    consumer.subscribe([topic])
    records = []
    deadline = time.monotonic() + timeout
    try:
        while len(records) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            records.append(msg)
        # Anything beyond ``count`` would be a bug (duplicates, aborted records): look a bit.
        extra_deadline = time.monotonic() + 1.0
        while time.monotonic() < extra_deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                records.append(msg)
    finally:
        consumer.close()
    return records


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) is not running either.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_dead(pids, timeout: float = 20.0) -> list[int]:
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if pid_alive(p)]
        time.sleep(0.1)
    return alive


# --------------------------------------------------------------------- single node


def test_produce_consume_round_trip(kafka_cluster):
    topic = unique("round-trip")
    kafka_cluster.create_topic(topic, partitions=3)
    producer = Producer(kafka_cluster.client_config(**{"enable.idempotence": True}))
    sent = []
    for i in range(300):
        key, value, ts = f"k{i % 7}".encode(), f"v{i}".encode(), 1_000_000 + i
        producer.produce(topic, key=key, value=value, timestamp=ts, headers=[("h", b"x")])
        sent.append((key, value, ts))
    assert producer.flush(30) == 0

    records = consume(kafka_cluster, topic, len(sent))
    got = [(m.key(), m.value(), m.timestamp()[1]) for m in records]
    assert sorted(got) == sorted(sent)
    assert all(m.headers() == [("h", b"x")] for m in records)
    # Per key, order is preserved (one key -> one partition).
    for key in {k for k, _, _ in sent}:
        assert [v for k, v, _ in got if k == key] == [v for k, v, _ in sent if k == key]


def test_transactions_and_read_committed(kafka_cluster):
    topic, source = unique("txn-out"), unique("txn-in")
    kafka_cluster.create_topic(topic, partitions=2)
    kafka_cluster.create_topic(source, partitions=1)
    group = unique("txn-group")

    producer = Producer(
        kafka_cluster.client_config(**{"transactional.id": unique("txn"), "linger.ms": 5})
    )
    producer.init_transactions(30)

    # Committed, together with a consumer group's input offset (what EOS does).
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, key=b"c", value=f"committed-{i}".encode())
    consumer = Consumer(kafka_cluster.client_config(**{"group.id": group}))
    producer.send_offsets_to_transaction(
        [TopicPartition(source, 0, 42)], consumer.consumer_group_metadata(), 30
    )
    producer.commit_transaction(30)

    # Aborted: invisible to read_committed.
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, key=b"a", value=f"aborted-{i}".encode())
    producer.flush(30)
    producer.abort_transaction(30)

    producer.begin_transaction()
    producer.produce(topic, key=b"c", value=b"committed-last")
    producer.commit_transaction(30)

    committed = consume(kafka_cluster, topic, 11, **{"isolation.level": "read_committed"})
    assert sorted(m.value() for m in committed) == sorted(
        [f"committed-{i}".encode() for i in range(10)] + [b"committed-last"]
    )
    everything = consume(kafka_cluster, topic, 16, **{"isolation.level": "read_uncommitted"})
    assert sum(m.value().startswith(b"aborted") for m in everything) == 5

    offsets = consumer.committed([TopicPartition(source, 0)], timeout=30)
    assert offsets[0].offset == 42
    consumer.close()


def test_create_topic_with_config(kafka_cluster):
    topic = unique("compacted")
    kafka_cluster.create_topic(
        topic, partitions=2, config={"cleanup.policy": "compact", "segment.ms": 60_000}
    )
    from confluent_kafka.admin import ConfigResource

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    admin = kafka_cluster.admin()  # keep a reference: a collected client cancels its futures
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["segment.ms"].value == "60000"
    assert topic in kafka_cluster.list_topics()
    with pytest.raises(KafkaClusterError, match="already exists"):
        kafka_cluster.create_topic(topic)


def retention_ms(cluster: LocalKafkaCluster, topic: str) -> str:
    from confluent_kafka.admin import ConfigResource

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    admin = cluster.admin()
    return admin.describe_configs([resource])[resource].result(timeout=30)["retention.ms"].value


def test_a_throwaway_cluster_keeps_records_whatever_their_timestamp(kafka_cluster):
    """Tests write fixed event times long past: time-based retention would delete them at
    its next check, between a write and the read after it. A topic's own setting stays."""
    default, own = unique("default-retention"), unique("own-retention")
    kafka_cluster.create_topic(default)
    kafka_cluster.create_topic(own, config={"retention.ms": 3_600_000})
    assert retention_ms(kafka_cluster, default) == "-1"
    assert retention_ms(kafka_cluster, own) == "3600000"
    # ... and the broker runs no retention check while tests run, so a window store's
    # changelog (a retention of its own) keeps old event times for a restore to read
    from confluent_kafka.admin import ConfigResource

    admin = kafka_cluster.admin()
    (node,) = {b.id for b in admin.list_topics(timeout=10).brokers.values()}
    broker = ConfigResource(ConfigResource.Type.BROKER, str(node))
    configs = admin.describe_configs([broker])[broker].result(timeout=30)
    assert int(configs["log.retention.check.interval.ms"].value) >= 24 * 3_600_000


def test_topics_are_not_created_implicitly(kafka_cluster):
    topic = unique("missing")
    producer = Producer(kafka_cluster.client_config(**{"message.timeout.ms": 2000}))
    errors = []
    producer.produce(topic, value=b"x", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(10)
    assert errors and errors[0] is not None
    assert topic not in kafka_cluster.list_topics()


# --------------------------------------------------------------------- three nodes


def test_three_node_cluster_survives_losing_a_node():
    with LocalKafkaCluster(nodes=3) as cluster:
        assert cluster.replication_factor == 3
        assert cluster.min_insync_replicas == 2
        assert len(cluster.bootstrap_servers.split(",")) == 3
        topic = unique("replicated")
        cluster.create_topic(topic, partitions=3)
        admin = cluster.admin()
        meta = admin.list_topics(topic=topic, timeout=10).topics[topic]
        assert all(len(p.replicas) == 3 for p in meta.partitions.values())

        producer = Producer(
            cluster.client_config(**{"acks": "all", "enable.idempotence": True, "linger.ms": 5})
        )
        for i in range(100):
            producer.produce(topic, key=str(i % 10).encode(), value=f"before-{i}".encode())
        assert producer.flush(30) == 0

        victim = meta.partitions[0].leader
        pid = cluster.node(victim).pid
        cluster.stop_node(victim, kill=True)
        assert not pid_alive(pid)

        # acks=all still succeeds with two in-sync replicas left (min.insync.replicas=2).
        errors = []
        for i in range(100):
            producer.produce(
                topic,
                key=str(i % 10).encode(),
                value=f"after-{i}".encode(),
                on_delivery=lambda err, _msg: errors.append(err) if err else None,
            )
        assert producer.flush(60) == 0
        assert errors == []
        records = consume(cluster, topic, 200, timeout=60)
        values = sorted(m.value() for m in records)
        expected = sorted(
            [f"before-{i}".encode() for i in range(100)]
            + [f"after-{i}".encode() for i in range(100)]
        )
        assert values == expected, (len(values), set(expected) - set(values))
        meta = admin.list_topics(topic=topic, timeout=10).topics[topic]
        leaders = {p.id: p.leader for p in meta.partitions.values()}
        assert victim not in leaders.values(), (victim, leaders)

        # Transactions work with a node down (transaction log RF 3, min ISR 2).
        txn = Producer(cluster.client_config(**{"transactional.id": unique("txn3")}))
        txn.init_transactions(60)
        txn.begin_transaction()
        txn.produce(topic, key=b"t", value=b"txn")
        txn.commit_transaction(60)

        cluster.restart_node(victim)
        assert cluster.node(victim).is_running()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            meta = admin.list_topics(topic=topic, timeout=10).topics[topic]
            if all(len(p.isrs) == 3 for p in meta.partitions.values()):
                break
            time.sleep(0.2)
        assert all(len(p.isrs) == 3 for p in meta.partitions.values())
        pids = [n.pid for n in cluster.nodes]
        directory = cluster.directory
        producer.flush(5)
    assert wait_dead(pids) == []
    assert not directory.exists()


# --------------------------------------------------------------------- lifecycle


def test_stop_leaves_no_process_or_directory_even_after_an_exception():
    cluster = LocalKafkaCluster()
    with pytest.raises(KeyboardInterrupt), cluster:
        pids = [n.pid for n in cluster.nodes]
        directory = cluster.directory
        assert all(pid_alive(p) for p in pids)
        assert directory.is_dir()
        raise KeyboardInterrupt
    assert wait_dead(pids) == []
    assert not directory.exists()
    assert cluster.nodes == []
    with pytest.raises(KafkaClusterError, match="not started"):
        _ = cluster.bootstrap_servers


CHILD = textwrap.dedent(
    """
    import sys, time
    from streaming.testing import LocalKafkaCluster
    cluster = LocalKafkaCluster().start()
    print(cluster.directory, *[n.pid for n in cluster.nodes], flush=True)
    if sys.argv[1] == "hang":
        time.sleep(600)
    """
)


def start_child(ending: str, procs: list) -> tuple[subprocess.Popen, Path, list[int]]:
    """A Python process owning a cluster (added to ``procs``), its directory and broker
    pids, once its cluster started; ``ending`` "hang" keeps it running, "exit" ends it."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, ending], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    procs.append(proc)
    line = proc.stdout.readline().split()
    assert line, "the child did not start a cluster"
    return proc, Path(line[0]), [int(p) for p in line[1:]]


def test_a_dying_owner_leaves_no_broker_behind():
    """Leaving without stop(): SIGKILL of the owner kills its broker, and the next cluster
    started sweeps the directory it could not clean up; atexit stops the broker and removes
    the directory. The second owner's cluster is the next one started after the first."""
    procs: list[subprocess.Popen] = []
    try:
        killed, killed_dir, killed_pids = start_child("hang", procs)
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=60)
        assert wait_dead(killed_pids) == []

        exiting, directory, pids = start_child("exit", procs)
        assert not killed_dir.exists()  # swept by the start of the second owner's cluster
        exiting.wait(timeout=60)
        assert wait_dead(pids) == []
        assert not directory.exists()
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_kept_data_dir_survives_a_restart(tmp_path):
    topic = unique("kept")
    with LocalKafkaCluster(data_dir=tmp_path / "kafka") as cluster:
        cluster.create_topic(topic)
        assert retention_ms(cluster, topic) == str(24 * 3_600_000)  # server.properties
        producer = Producer(cluster.client_config())
        producer.produce(topic, key=b"k", value=b"kept")
        assert producer.flush(30) == 0
        cluster_id = cluster.cluster_id
    assert (tmp_path / "kafka").is_dir()
    with LocalKafkaCluster(data_dir=tmp_path / "kafka") as cluster:
        assert cluster.cluster_id == cluster_id
        assert [m.value() for m in consume(cluster, topic, 1)] == [b"kept"]


# --------------------------------------------------------------------- errors


def test_a_bad_broker_config_fails_with_the_log_tail():
    with pytest.raises(KafkaClusterError) as info:
        LocalKafkaCluster(broker_config={"num.io.threads": "many"}).start()
    message = str(info.value)
    assert "broker_config" in message
    assert "--- tail of" in message
    assert "Invalid value many for configuration num.io.threads" in message


def test_a_broker_that_dies_at_startup_fails_with_the_log_tail():
    # Formatting accepts it (a string setting), the broker fails to load the class at start.
    cluster = LocalKafkaCluster(broker_config={"authorizer.class.name": "no.such.Authorizer"})
    with pytest.raises(KafkaClusterError) as info:
        cluster.start()
    message = str(info.value)
    assert "exited with code" in message
    assert "--- tail of" in message
    assert "no.such.Authorizer" in message
    assert cluster.nodes == []


def test_missing_jars_say_run_make_setup(tmp_path):
    with pytest.raises(KafkaClusterError, match="make setup"):
        LocalKafkaCluster(jars_dir=tmp_path).start()


def test_missing_java_says_so(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(KafkaClusterError, match="Java 17"):
        LocalKafkaCluster().start()
