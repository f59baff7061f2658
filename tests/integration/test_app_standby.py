"""Standby replicas: each of two instances keeps a warm copy of the other's task; when one
leaves, the survivor takes the task over from its standby copy (almost nothing to restore)."""

from __future__ import annotations

from test_app_support import (
    T0,
    count_and_copy,
    last_value_per_key,
    long_value,
    produce,
    read_all,
    unique,
    wait_for,
)

from streaming import serdes
from streaming.app import KafkaStreams, State
from streaming.runtime.metadata import HostInfo

N = 2000
KEYS = 40


def test_standby_takes_over_warm(kafka_cluster, tmp_path):
    bootstrap = kafka_cluster.bootstrap_servers
    names = {k: unique(k) for k in ("in", "copy", "counts")}
    for topic in names.values():
        kafka_cluster.create_topic(topic, partitions=2)
    app_id = unique("standby")
    apps: dict[HostInfo, KafkaStreams] = {}
    for i, port in enumerate((7201, 7202)):
        config = {
            "application.id": app_id,
            "bootstrap.servers": bootstrap,
            "processing.guarantee": "exactly_once_v2",
            "num.standby.replicas": 1,
            "statestore.cache.max.bytes": 0,
            "state.dir": str(tmp_path / f"i{i}"),
            "application.server": f"localhost:{port}",
            "app.test.input": names["in"],
            "app.test.copy": names["copy"],
            "app.test.counts": names["counts"],
        }
        app = KafkaStreams(count_and_copy(config), config)
        app.start()
        apps[HostInfo("localhost", port)] = app
    a, b = apps.values()
    try:
        wait_for(
            lambda: all(len(x.local_tasks()) == 1 and x.state is State.RUNNING for x in (a, b)),
            60,
            "one task per instance",
        )
        produce(bootstrap, names["in"], ((f"k{i % KEYS}".encode(), b"v", T0 + i) for i in range(N)))
        expected = {f"k{i}": N // KEYS for i in range(KEYS)}

        def counted(msgs):
            last = last_value_per_key(msgs, names["counts"])
            return {k.decode(): long_value(v) for k, v in last.items()} == expected

        read_all(bootstrap, [names["counts"]], until=counted, timeout=60)
        # each instance keeps the other's task as a standby, caught up with the changelog
        wait_for(
            lambda: a.metrics()["standby-tasks"] == sorted(b.local_tasks())
            and b.metrics()["standby-tasks"] == sorted(a.local_tasks()),
            30,
            "standby tasks",
        )
        wait_for(
            lambda: sum(t.applied for x in (a, b) for t in x.standby.tasks.values()) == N,
            30,
            "standbys to apply every changelog record",
        )
        key = "k1"
        meta = a.metadata_for_key("counts", key, serdes.String())
        assert meta.standby_hosts == frozenset(set(apps) - {meta.active_host})
        leaving, staying = (a, b) if apps[meta.active_host] is a else (b, a)
        moved = next(iter(leaving.local_tasks()))
        assert leaving.close(60)
        wait_for(lambda: len(staying.local_tasks()) == 2, 60, "the survivor to take over")
        assert staying.wait_until(State.RUNNING, 30)
        store = staying.store("counts")
        assert {k: store.get(k) for k in expected} == expected
        partition = int(moved.split("_")[1])
        progress = staying.metrics()["restore-progress"].get(
            f"{app_id}-counts-changelog-{partition}"
        )
        # restored from the standby's checkpoint, not from the beginning of the changelog
        assert progress is not None and progress["start-offset"] > 0, progress
        assert progress["restored"] < N // 4, progress
        assert staying.metrics()["standby-tasks"] == []
    finally:
        for app in (a, b):
            app.close(60)
