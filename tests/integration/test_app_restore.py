"""Restore: state rebuilt from the changelog after the local state is deleted (and resumed
from the checkpoint when it is kept); queries give the same answers."""

from __future__ import annotations

import pytest
from test_app_support import (
    T0,
    count_and_copy,
    last_value_per_key,
    long_value,
    produce,
    read_all,
    unique,
)

from streaming.app import KafkaStreams, State

N = 600
KEYS = 30


class Listener:
    def __init__(self) -> None:
        self.started = []
        self.batches = 0
        self.ended = {}

    def on_restore_start(self, tp, store, start, end):
        self.started.append((tp.topic, tp.partition, store, start, end))

    def on_batch_restored(self, tp, store, batch_end_offset, num_restored):
        self.batches += 1

    def on_restore_end(self, tp, store, total):
        self.ended[(tp.topic, tp.partition)] = total


def _run_until_counted(config, expected, listener=None):
    app = KafkaStreams(count_and_copy(config), config)
    if listener is not None:
        app.set_global_state_restore_listener(listener)
    app.start()
    assert app.wait_until(State.RUNNING, 60)
    return app


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_restore_after_state_deleted(kafka_cluster, tmp_path, guarantee):
    bootstrap = kafka_cluster.bootstrap_servers
    names = {k: unique(k) for k in ("in", "copy", "counts")}
    for topic in names.values():
        kafka_cluster.create_topic(topic, partitions=2)
    produce(bootstrap, names["in"], ((f"k{i % KEYS}".encode(), b"x", T0 + i) for i in range(N)))
    config = {
        "application.id": unique("restore"),
        "bootstrap.servers": bootstrap,
        "processing.guarantee": guarantee,
        "state.dir": str(tmp_path / "state"),
        "commit.interval.ms": 100,
        "statestore.cache.max.bytes": 0,  # every update reaches the changelog
        "app.test.input": names["in"],
        "app.test.copy": names["copy"],
        "app.test.counts": names["counts"],
    }
    expected = {f"k{i}": N // KEYS for i in range(KEYS)}

    def counted(msgs):
        counts = last_value_per_key(msgs, names["counts"])
        return len(counts) == KEYS and all(long_value(v) == N // KEYS for v in counts.values())

    app = _run_until_counted(config, expected)
    read_all(bootstrap, [names["counts"]], until=counted, timeout=60)
    before = dict(app.store("counts").all())
    assert before == expected
    assert app.close(60)

    # 1. restart with the local state kept: resumes from the checkpoint, nothing to restore
    listener = Listener()
    app = _run_until_counted(config, expected, listener)
    try:
        assert dict(app.store("counts").all()) == expected
        assert listener.started == []
        assert app.metrics()["restore-records-total"] == 0
    finally:
        assert app.close(60)

    # 2. delete the local state: the store is rebuilt from the changelog
    app.cleanup()
    listener = Listener()
    app = _run_until_counted(config, expected, listener)
    try:
        store = app.store("counts")
        assert dict(store.all()) == expected
        assert {k: store.get(k) for k in expected} == expected
        changelog = f"{config['application.id']}-counts-changelog"
        assert sorted((t, p) for t, p, *_ in listener.started) == [(changelog, 0), (changelog, 1)]
        # cache off: one changelog record per input record
        assert sum(listener.ended.values()) == N
        assert listener.batches >= 2
        metrics = app.metrics()
        assert metrics["restore-records-total"] == N
        assert all(p["done"] for p in metrics["restore-progress"].values())
        # new input continues from the restored counts
        produce(bootstrap, names["in"], ((b"k0", b"y", T0 + N),))

        def k0_done(msgs):
            return (
                long_value(last_value_per_key(msgs, names["counts"]).get(b"k0", b"\0" * 8))
                == N // KEYS + 1
            )

        read_all(bootstrap, [names["counts"]], until=k0_done, timeout=60)
        assert store.get("k0") == N // KEYS + 1
    finally:
        assert app.close(60)
