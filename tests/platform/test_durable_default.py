"""The embedded default keeps its data: ``make run``'s broker resumes on its data dir and port,
and what remembers Kafka offsets (the lake's manifests, the late-data sensor's cursor, the
stream state) notices when the cluster is another one and re-reads from the earliest offset,
saying so, instead of reporting "landed 0".

Real components: ``LocalKafkaCluster`` brokers (the session's, plus one of this module with
its own data dir standing for "a new broker after a restart"), the lake sink, Dagster, DuckDB.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import duckdb
import orjson
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from dagster import (
    DagsterInstance,
    HourlyPartitionsDefinition,
    SensorResult,
    build_sensor_context,
    materialize,
)

from assets.lake import lake_asset
from pipelines import domain
from pipelines.lake.manifest import Manifest, locked
from pipelines.lake.paths import part_file_name, topic_dir
from pipelines.lake.records import KafkaRecord
from pipelines.lake.sink import sink_topic
from pipelines.lake.writer import land_partition
from pipelines.run import (
    BrokerStartError,
    clean_state,
    follow_cluster,
    partitions_start_hour,
    start_local_broker,
    stored_cluster_id,
)
from pipelines.topics import create_topics, load_topic_specs
from resources import KafkaResource, platform_resources
from sensors import build_late_data_sensor
from streaming.testing import LocalKafkaCluster, free_port_pair
from streaming.testing.kafka_cluster import PortInUseError

M = 60_000
T0 = 1_735_689_600_000  # 2025-01-01T00:00:00Z
PARTITIONS = HourlyPartitionsDefinition(start_date="2025-01-01-00:00")
RELAND = "re-landing from the earliest offset"


def _cluster_id_of(bootstrap: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_cluster(request_timeout=10).result(timeout=15).cluster_id


def _produce_values(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, value in enumerate(values):
        producer.produce(topic, key=f"k{i}".encode(), value=value)
    assert producer.flush(30) == 0


def _consume_all(bootstrap: str, topic: str, expected: int, timeout: float = 30.0) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(values) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=500, timeout=0.5):
                if msg.error() is None:
                    values.append(msg.value())
    finally:
        consumer.close()
    return values


def _order(order_id: str, t: int) -> bytes:
    return orjson.dumps(
        {
            "order_id": order_id,
            "customer_id": "c-00001",
            "amount": 10.0,
            "region": "EU",
            "location": "Berlin",
            "event_time": t,
        }
    )


# --------------------------------------------------------------------- the broker itself


def test_a_kept_broker_resumes_on_the_same_port_with_its_data(tmp_path: Path) -> None:
    port = free_port_pair()
    data = tmp_path / "kafka"
    topic = "durable-orders"
    values = [f"record-{i}".encode() for i in range(40)]
    committed = {0: 7, 1: 3}
    with LocalKafkaCluster(data_dir=data, port=port) as first:
        assert first.bootstrap_servers == f"127.0.0.1:{port}"
        assert first.nodes[0].controller_port == port + 1
        first.create_topic(topic, partitions=2)
        _produce_values(first.bootstrap_servers, topic, values)
        group = Consumer({"bootstrap.servers": first.bootstrap_servers, "group.id": "durable"})
        group.commit(
            offsets=[TopicPartition(topic, p, o) for p, o in committed.items()],
            asynchronous=False,
        )
        group.close()
        cluster_id = first.cluster_id
        assert cluster_id and _cluster_id_of(first.bootstrap_servers) == cluster_id
        # the port is taken while it runs: a clear error, nothing formatted elsewhere
        with pytest.raises(PortInUseError, match=f"port {port} is in use by another process"):
            LocalKafkaCluster(data_dir=tmp_path / "other", port=port).start()
        assert not (tmp_path / "other").exists()
        with pytest.raises(BrokerStartError) as info:
            start_local_broker(port, tmp_path / "other")
        assert f"port {port} is in use by another process; stop it or run with" in str(info.value)
        assert "--kafka-port" in str(info.value) and "KAFKA_PORT" in str(info.value)
    assert stored_cluster_id(data) == cluster_id

    with LocalKafkaCluster(data_dir=data, port=port) as second:
        assert second.bootstrap_servers == f"127.0.0.1:{port}"
        assert second.nodes[0].controller_port == port + 1  # the stored quorum's voter
        assert second.cluster_id == cluster_id
        assert _cluster_id_of(second.bootstrap_servers) == cluster_id
        meta = second.admin().list_topics(topic=topic, timeout=10)
        assert meta.cluster_id == cluster_id
        assert sorted(meta.topics[topic].partitions) == [0, 1]
        assert sorted(_consume_all(second.bootstrap_servers, topic, len(values))) == sorted(values)
        group = Consumer({"bootstrap.servers": second.bootstrap_servers, "group.id": "durable"})
        try:
            found = group.committed([TopicPartition(topic, p) for p in committed], timeout=15)
        finally:
            group.close()
        assert {tp.partition: tp.offset for tp in found} == committed


# --------------------------------------------------------------------- a new cluster


@pytest.fixture(scope="module")
def new_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafkaCluster]:
    """Another broker with its own data dir: what a restart on a new, empty broker gives."""
    with LocalKafkaCluster(data_dir=tmp_path_factory.mktemp("new-kafka")) as cluster:
        yield cluster


def _lake_values(lake: Path, topic: str) -> list[tuple[str, str]]:
    """(file name, value) of every row of ``topic`` in the lake."""
    glob = str(topic_dir(lake, topic) / "event_hour=*" / "part-*.parquet")
    con = duckdb.connect()
    try:
        rows = con.execute(
            f"select filename, value from read_parquet('{glob}', filename = true)"
        ).fetchall()
    finally:
        con.close()
    return [(Path(f).name, v) for f, v in rows]


def test_the_lake_relands_everything_of_a_new_cluster_once(
    kafka_cluster: LocalKafkaCluster, new_cluster: LocalKafkaCluster, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    old_id, new_id = kafka_cluster.cluster_id, new_cluster.cluster_id
    assert old_id and new_id and old_id != new_id
    suffix = uuid.uuid4().hex[:6]
    # fewer records on the new cluster (the reported bug: offsets past its end, "landed 0"),
    # and more (a silent gap: only the offsets past the old manifest would have landed)
    counts = {f"durable-fewer-{suffix}": (30, 8), f"durable-more-{suffix}": (6, 25)}
    for topic, (n_old, n_new) in counts.items():
        kafka_cluster.create_topic(topic, partitions=2)
        new_cluster.create_topic(topic, partitions=2)
        _produce_values(
            kafka_cluster.bootstrap_servers,
            topic,
            [json.dumps({"id": f"old-{i}"}).encode() for i in range(n_old)],
        )
        _produce_values(
            new_cluster.bootstrap_servers,
            topic,
            [json.dumps({"id": f"new-{i}"}).encode() for i in range(n_new)],
        )

    for topic, (n_old, _) in counts.items():
        first = sink_topic(kafka_cluster.bootstrap_servers, topic, lake, timeout=30)
        assert first.records == n_old
        assert first.cluster_id == old_id and first.cluster_change is None
        assert Manifest.load(lake, topic).cluster_id == old_id

    for topic, (n_old, n_new) in counts.items():
        result = sink_topic(new_cluster.bootstrap_servers, topic, lake, timeout=30)
        assert result.cluster_change is not None
        assert f"cluster changed from {old_id} to {new_id}: {RELAND}" in result.cluster_change
        assert result.records == n_new  # everything of the new cluster, from offset 0
        assert result.cluster_id == new_id
        assert "cluster changed from" in result.summary()
        manifest = Manifest.load(lake, topic)
        assert manifest.cluster_id == new_id and manifest.generation == 1
        assert manifest.previous[0]["cluster_id"] == old_id
        assert manifest.previous[0]["rows"] == n_old
        assert manifest.current_rows() == n_new and manifest.total_rows() == n_old + n_new

        rows = _lake_values(lake, topic)
        new_rows = [json.loads(v)["id"] for f, v in rows if f.endswith("-g1.parquet")]
        old_rows = [json.loads(v)["id"] for f, v in rows if not f.endswith("-g1.parquet")]
        # every record of the new cluster exactly once; the old cluster's landed rows kept
        assert sorted(new_rows) == sorted(f"new-{i}" for i in range(n_new))
        assert sorted(old_rows) == sorted(f"old-{i}" for i in range(n_old))

        # the next landing on the same cluster: nothing new, and it says where the lake is
        again = sink_topic(new_cluster.bootstrap_servers, topic, lake, timeout=30)
        assert again.records == 0 and again.cluster_change is None
        assert "nothing new: the lake holds offsets up to" in again.summary()
        assert sum(again.next_offsets.values()) == n_new == sum(again.end_offsets.values())
        assert len(_lake_values(lake, topic)) == n_old + n_new


def test_the_lake_says_what_retention_deleted_before_it_landed(
    kafka_cluster: LocalKafkaCluster, tmp_path: Path
) -> None:
    lake, topic = tmp_path / "lake", f"durable-gap-{uuid.uuid4().hex[:6]}"
    bootstrap = kafka_cluster.bootstrap_servers
    kafka_cluster.create_topic(topic, partitions=1)
    _produce_values(bootstrap, topic, [b'{"n": %d}' % i for i in range(10)])
    assert sink_topic(bootstrap, topic, lake, timeout=30).records == 10
    _produce_values(bootstrap, topic, [b'{"n": %d}' % i for i in range(10, 20)])
    admin = kafka_cluster.admin()  # held: its futures resolve only while it lives
    deleted = admin.delete_records(
        [TopicPartition(topic, 0, 15)], request_timeout=15, operation_timeout=15
    )
    for future in deleted.values():
        future.result(timeout=20)
    result = sink_topic(bootstrap, topic, lake, timeout=30)
    assert result.records == 5 and result.gaps == {0: (10, 14)}
    assert "deleted by retention first: {0: (10, 14)}" in result.summary()


def test_the_lake_asset_says_the_cluster_changed(
    kafka_cluster: LocalKafkaCluster,
    new_cluster: LocalKafkaCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lake = tmp_path / "lake"
    orders_spec = [s for s in load_topic_specs() if s.name == domain.ORDERS]
    asset = lake_asset(domain.ORDERS)
    instance = DagsterInstance.ephemeral()

    def land(bootstrap: str) -> tuple[dict, list[str]]:
        env = {"LAKE_ROOT": str(lake), "KAFKA_BOOTSTRAP_SERVERS": bootstrap}
        result = materialize([asset], instance=instance, resources=platform_resources(env))
        assert result.success
        (event,) = result.get_asset_materialization_events()
        metadata = {k: v.value for k, v in event.materialization.metadata.items()}
        warnings = [
            e.user_message
            for e in instance.all_logs(result.run_id)
            if e.level >= 30 and "cluster changed" in (e.user_message or "")
        ]
        return metadata, warnings

    create_topics(kafka_cluster.bootstrap_servers, specs=orders_spec)
    _produce_values(
        kafka_cluster.bootstrap_servers,
        domain.ORDERS,
        [_order(f"old-{i}", T0 + i * M) for i in range(12)],
    )
    first, warnings = land(kafka_cluster.bootstrap_servers)
    assert first["records_landed"] >= 12  # the session's broker: other tests' orders too
    assert first["kafka_cluster_id"] == kafka_cluster.cluster_id
    assert "cluster_change" not in first and warnings == []

    create_topics(new_cluster.bootstrap_servers, specs=orders_spec)
    new_ids = [f"new-{uuid.uuid4().hex[:6]}-{i}" for i in range(5)]
    _produce_values(
        new_cluster.bootstrap_servers,
        domain.ORDERS,
        [_order(oid, T0 + i * M) for i, oid in enumerate(new_ids)],
    )
    second, warnings = land(new_cluster.bootstrap_servers)
    change = (
        f"cluster changed from {kafka_cluster.cluster_id} to {new_cluster.cluster_id}: {RELAND}"
    )
    assert change in second["cluster_change"]
    assert any(change in w for w in warnings)  # a warning in the run's log
    assert second["records_landed"] == len(new_ids)
    assert second["kafka_cluster_id"] == new_cluster.cluster_id
    assert second["total_rows"] == first["total_rows"] + len(new_ids)

    con = duckdb.connect()
    try:
        glob = str(topic_dir(lake, domain.ORDERS) / "event_hour=*" / "part-*.parquet")
        found = con.execute(
            f"select order_id, count(*) from read_parquet('{glob}') "
            "where order_id like 'new-%' group by 1"
        ).fetchall()
    finally:
        con.close()
    assert dict(found) == dict.fromkeys(new_ids, 1)


def test_the_late_data_sensor_rereads_a_new_cluster(
    kafka_cluster: LocalKafkaCluster, new_cluster: LocalKafkaCluster
) -> None:
    topic = f"orders-durable-{uuid.uuid4().hex[:6]}"
    kafka_cluster.create_topic(topic, partitions=1)
    new_cluster.create_topic(topic, partitions=1)
    sensor = build_late_data_sensor(topic=topic, partitions_def=PARTITIONS, quiet_seconds=0)
    instance = DagsterInstance.ephemeral()

    def tick(bootstrap: str, cursor: str | None):
        kafka = KafkaResource(bootstrap_servers=bootstrap)
        ctx = build_sensor_context(instance=instance, cursor=cursor, resources={"kafka": kafka})
        return sensor(ctx)

    _produce_values(
        kafka_cluster.bootstrap_servers,
        topic,
        [_order(f"o{i}", T0 + i * M) for i in range(0, 80, 5)],  # 16 on time
    )
    first = tick(kafka_cluster.bootstrap_servers, None)
    assert not first.run_requests
    cursor = json.loads(first.cursor)
    assert cursor["cluster_id"] == kafka_cluster.cluster_id
    assert cursor["offsets"] == {"0": 16}

    # the new cluster: 6 orders (fewer than the cursor's offset), the last one late
    on_time = [_order(f"n{i}", T0 + i * 18 * M) for i in range(5)]  # through 01:12
    _produce_values(new_cluster.bootstrap_servers, topic, [*on_time, _order("late", T0 + 2 * M)])
    second = tick(new_cluster.bootstrap_servers, first.cursor)
    assert isinstance(second, SensorResult)
    cursor = json.loads(second.cursor)
    assert cursor["cluster_id"] == new_cluster.cluster_id
    assert cursor["offsets"] == {"0": 6}  # read from the earliest offset, all 6
    (request,) = second.run_requests  # the late order of 00:02 was seen
    assert request.partition_key == "2025-01-01-00:00"
    expected = (
        f"cluster changed from {kafka_cluster.cluster_id} to {new_cluster.cluster_id}: "
        "re-reading from the earliest offset"
    )
    assert request.tags["cluster_change"] == expected[:200]

    third = tick(new_cluster.bootstrap_servers, second.cursor)
    assert not third.run_requests
    assert "cluster changed" not in third.skip_reason.skip_message
    assert f"read 0 orders from cluster {new_cluster.cluster_id}" in (
        third.skip_reason.skip_message
    )


# --------------------------------------------------------------------- without a broker


def _land(lake: Path, topic: str, partition: int, offsets: range) -> None:
    with locked(lake, topic) as manifest:
        records = [KafkaRecord(partition, o, T0 + o, b"k", b'{"id": 1}') for o in offsets]
        land_partition(lake, manifest, partition, records, offsets.stop)


def test_manifest_follows_the_cluster(tmp_path: Path) -> None:
    lake, topic = tmp_path / "lake", "t"
    _land(lake, topic, 0, range(0, 10))
    manifest = Manifest.load(lake, topic)
    assert manifest.cluster_id is None  # landed without a broker (fixtures)
    # a manifest without a cluster id whose offsets fit: the cluster is adopted, silently
    check = manifest.follow_cluster("A", {0: 12})
    assert check.changed and check.message is None and manifest.cluster_id == "A"
    assert manifest.follow_cluster("A", {0: 12}) == type(check)()
    # the same cluster, but the partition ends below the lake: the topic was re-created
    check = manifest.follow_cluster("A", {0: 4})
    assert check.message and "re-created" in check.message and RELAND in check.message
    assert manifest.generation == 1 and manifest.next_offsets == {}
    manifest.save(lake)
    _land(lake, topic, 0, range(0, 4))
    reloaded = Manifest.load(lake, topic)
    assert reloaded.total_rows() == 14 and reloaded.current_rows() == 4
    names = sorted(p.name for p in topic_dir(lake, topic).glob("event_hour=*/*.parquet"))
    assert part_file_name(0, 0, 9) in names and part_file_name(0, 0, 3, 1) in names
    # a leftover of an interrupted run of this generation goes; older generations stay
    leftover = topic_dir(lake, topic) / "event_hour=x" / part_file_name(0, 4, 5, 1)
    leftover.parent.mkdir(parents=True)
    leftover.write_bytes(b"partial")
    with locked(lake, topic):
        pass
    assert not leftover.exists()
    assert len(list(topic_dir(lake, topic).glob("event_hour=*/*.parquet"))) == 2
    # a manifest without a cluster id whose offsets do not fit: another cluster
    legacy = Manifest(topic, {0: 50}, {0: [[0, 49, 50]]})
    check = legacy.follow_cluster("B", {0: 3})
    assert check.message and "cluster changed from an unrecorded one to B" in check.message


def test_run_keeps_stream_state_only_for_its_cluster(tmp_path: Path) -> None:
    state = tmp_path / ".state"
    (state / "kafka" / "node-1").mkdir(parents=True)
    (state / "supervisor" / "windowed-revenue").mkdir(parents=True)
    # a new broker with state of an unrecorded earlier one: the state goes
    notes = follow_cluster("A", True, state)
    assert not (state / "supervisor").exists() and (state / "kafka" / "node-1").exists()
    assert any("dropped the stream applications' local state" in n for n in notes)
    assert json.loads((state / "kafka-cluster.json").read_text())["cluster_id"] == "A"
    # the same cluster resumed: the state stays
    (state / "supervisor" / "windowed-revenue").mkdir(parents=True)
    assert follow_cluster("A", False, state) == []
    assert (state / "supervisor" / "windowed-revenue").exists()
    # another cluster (e.g. KAFKA_BOOTSTRAP_SERVERS moved): it goes, and the run says so
    notes = follow_cluster("B", False, state)
    assert any("the Kafka cluster changed from A to B" in n for n in notes)
    assert not (state / "supervisor").exists() and (state / "kafka").exists()


def test_fresh_deletes_only_after_a_confirmation(tmp_path: Path) -> None:
    paths = [tmp_path / ".state", tmp_path / ".dagster"]
    for p in paths:
        (p / "x").mkdir(parents=True)
    assert not clean_state(paths, assume_yes=False, interactive=False)  # nobody to ask
    assert not clean_state(paths, assume_yes=False, ask=lambda _: "n", interactive=True)
    assert all(p.exists() for p in paths)
    assert clean_state(paths, assume_yes=False, ask=lambda _: "yes", interactive=True)
    assert not any(p.exists() for p in paths)
    (paths[0] / "x").mkdir(parents=True)
    assert clean_state(paths, assume_yes=True)
    assert not paths[0].exists()


def test_partitions_start_at_the_first_data_hour_and_stay(tmp_path: Path) -> None:
    # 10:05 UTC: late events of the first minutes may belong to 09:xx
    now = 1_767_261_900_000  # 2026-01-01T10:05:00Z
    assert partitions_start_hour(tmp_path, now) == "2026-01-01-09:00"
    # later starts keep the first hour (a restart does not move the partitions)
    assert partitions_start_hour(tmp_path, now + 5 * 3_600_000) == "2026-01-01-09:00"
    assert partitions_start_hour(tmp_path / "fresh", now + 3_600_000) == "2026-01-01-10:00"
    # a new platform that starts with a backlog: its first hour
    backlog = partitions_start_hour(tmp_path / "backlog", now, first_ms=now - 2 * 3_600_000)
    assert backlog == "2026-01-01-08:00"
