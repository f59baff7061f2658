"""Interactive queries from two instances: local store views answer for the keys of their
own tasks, and metadata_for_key / all_metadata_for_store agree on who hosts what."""

from __future__ import annotations

from test_app_support import T0, last_value_per_key, long_value, produce, read_all, unique, wait_for

from streaming import StreamsBuilder, TimeWindows, serdes
from streaming.app import KafkaStreams, State
from streaming.runtime.metadata import HostInfo
from streaming.runtime.partitioner import default_partition

KEYS = 24
PER_KEY = 5


def _topology(source, counts):
    builder = StreamsBuilder()
    stream = builder.stream(source, key_serde=serdes.String(), value_serde=serdes.String())
    grouped = stream.group_by_key()
    grouped.count(materialized="counts").to_stream().to(counts, value_serde=serdes.Long())
    grouped.windowed_by(TimeWindows.of_size_with_no_grace(1_000)).count(materialized="windows")
    return builder.build()


def test_queries_and_metadata_from_two_instances(kafka_cluster, tmp_path):
    bootstrap = kafka_cluster.bootstrap_servers
    source, counts = unique("in"), unique("counts")
    kafka_cluster.create_topic(source, partitions=4)
    kafka_cluster.create_topic(counts, partitions=4)
    app_id = unique("iq")
    apps = {}
    for i, port in enumerate((7101, 7102)):
        config = {
            "application.id": app_id,
            "bootstrap.servers": bootstrap,
            "state.dir": str(tmp_path / f"i{i}"),
            "application.server": f"localhost:{port}",
            "commit.interval.ms": 100,
            "consumer.session.timeout.ms": 6000,
        }
        app = KafkaStreams(_topology(source, counts), config)
        app.start()
        apps[HostInfo("localhost", port)] = app
    try:
        for app in apps.values():
            assert app.wait_until(State.RUNNING, 60)

        def balanced():
            tasks = [set(a.local_tasks()) for a in apps.values()]
            return all(len(t) == 2 for t in tasks) and all(
                a.state is State.RUNNING for a in apps.values()
            )

        wait_for(balanced, 60, "two tasks on each instance")
        keys = [f"key-{i}" for i in range(KEYS)]
        produce(
            bootstrap,
            source,
            ((k.encode(), b"v", T0 + j) for j in range(PER_KEY) for k in keys),
        )

        def counted(msgs):
            last = last_value_per_key(msgs, counts)
            return len(last) == KEYS and all(long_value(v) == PER_KEY for v in last.values())

        read_all(bootstrap, [counts], until=counted, timeout=60)
        a, b = apps.values()
        for key in keys:
            meta_a = a.metadata_for_key("counts", key, serdes.String())
            meta_b = b.metadata_for_key("counts", key, serdes.String())
            assert meta_a == meta_b
            assert meta_a.partition == default_partition(key.encode(), 4)
            owner = apps[meta_a.active_host]
            other = b if owner is a else a
            assert owner.store("counts").get(key) == PER_KEY
            assert other.store("counts").get(key) is None
            # window store: all five records fall in the window [T0, T0 + 1000)
            assert owner.store("windows").fetch(key, T0) == PER_KEY
            assert owner.store("windows").fetch(key, T0 - 5_000, T0 + 5_000) == [(T0, PER_KEY)]
            assert other.store("windows").fetch(key, T0) is None
        total = sum(len(app.store("counts").all()) for app in apps.values())
        assert total == KEYS
        for store in ("counts", "windows"):
            hosts = sorted(m.host_info for m in a.all_metadata_for_store(store))
            assert hosts == sorted(apps)
        metadata = {m.host_info: m for m in a.all_metadata()}
        for host, app in apps.items():
            assert metadata[host].tasks == set(app.local_tasks())
            assert {"counts", "windows"} <= metadata[host].state_store_names
    finally:
        for app in apps.values():
            app.close(60)
