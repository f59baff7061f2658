"""KafkaStreams end to end against a real broker: a count + copy topology under both
processing guarantees, local store queries, metrics, checkpoints and clean close."""

from __future__ import annotations

import pytest
from test_app_support import (
    count_and_copy,
    last_value_per_key,
    long_value,
    produce,
    read_all,
    unique,
    wait_for,
)

from streaming import serdes
from streaming.runtime.app import KafkaStreams, State
from streaming.runtime.state_directory import read_checkpoint

N = 2000
KEYS = 20


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_count_and_copy(kafka_cluster, tmp_path, guarantee):
    bootstrap = kafka_cluster.bootstrap_servers
    names = {k: unique(k) for k in ("in", "copy", "counts")}
    kafka_cluster.create_topic(names["in"], partitions=2)
    kafka_cluster.create_topic(names["copy"], partitions=2)
    kafka_cluster.create_topic(names["counts"], partitions=2)
    produce(
        bootstrap,
        names["in"],
        ((f"k{i % KEYS}".encode(), str(i).encode(), 1_000 + i) for i in range(N)),
    )
    app_id = unique("e2e")
    config = {
        "application.id": app_id,
        "bootstrap.servers": bootstrap,
        "processing.guarantee": guarantee,
        "state.dir": str(tmp_path / "state"),
        "commit.interval.ms": 200,
        "test.input": names["in"],
        "test.copy": names["copy"],
        "test.counts": names["counts"],
    }
    transitions = []
    app = KafkaStreams(count_and_copy(config), config)
    app.set_state_listener(lambda new, old: transitions.append((old, new)))
    app.start()
    try:
        assert app.wait_until(State.RUNNING, 60)

        def done(msgs):
            copies = sum(1 for m in msgs if m[0] == names["copy"])
            counts = last_value_per_key(msgs, names["counts"])
            return (
                copies >= N
                and len(counts) == KEYS
                and all(long_value(v) == N // KEYS for v in counts.values())
            )

        msgs = read_all(bootstrap, [names["copy"], names["counts"]], until=done, timeout=60)
        copies = [m for m in msgs if m[0] == names["copy"]]
        assert sorted(int(m[4]) for m in copies) == list(range(N))
        # the copy keeps keys and partitions (same default partitioner as the input)
        assert all(m[3] == f"k{int(m[4]) % KEYS}".encode() for m in copies)
        counts = last_value_per_key(msgs, names["counts"])
        assert {k.decode(): long_value(v) for k, v in counts.items()} == {
            f"k{i}": N // KEYS for i in range(KEYS)
        }
        # local interactive queries see the same counts
        store = app.store("counts")
        assert {f"k{i}": store.get(f"k{i}") for i in range(KEYS)} == {
            f"k{i}": N // KEYS for i in range(KEYS)
        }
        assert dict(store.all()) == {f"k{i}": N // KEYS for i in range(KEYS)}
        assert store.approximate_num_entries() >= 1
        meta = app.metadata_for_key("counts", "k3", serdes.String())
        assert meta.partition in (0, 1)
        metrics = app.metrics()
        assert metrics["process-total"] == N
        assert metrics["commit-total"] >= 1
        assert metrics["commit-latency-max"] >= metrics["commit-latency-avg"] > 0
        caught_up = {f"{names['in']}-0": 0, f"{names['in']}-1": 0}
        wait_for(lambda: app.metrics()["consumer-lag"] == caught_up, 10, "lag 0")
        assert sorted(metrics["tasks"]) == ["0_0", "0_1"]
    finally:
        assert app.close(timeout=60)
    assert app.state is State.NOT_RUNNING
    assert (State.CREATED, State.REBALANCING) in transitions
    assert (State.REBALANCING, State.RUNNING) in transitions
    assert transitions[-2:] == [
        (State.RUNNING, State.PENDING_SHUTDOWN),
        (State.PENDING_SHUTDOWN, State.NOT_RUNNING),
    ]
    # a clean close leaves a checkpoint per task, at the end of each changelog partition
    changelog = f"{app_id}-counts-changelog"
    for partition in (0, 1):
        checkpoint = read_checkpoint(tmp_path / "state" / app_id / f"0_{partition}")
        assert checkpoint is not None and checkpoint[(changelog, partition)] > 0
