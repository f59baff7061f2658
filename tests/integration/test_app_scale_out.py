"""Scale-out: two processes with the same application.id share a 4-partition input; one is
killed; the other takes over every task with the state restored from the changelogs and the
outputs stay exact (exactly-once)."""

from __future__ import annotations

from collections import Counter

from test_app_support import (
    T0,
    group_assignment,
    long_value,
    produce,
    read_all,
    spawn_app,
    stop_app,
    unique,
    wait_for,
)

KEYS = 16
PHASE = 800


def _records(start, stop):
    return ((f"k{i % KEYS}".encode(), str(i).encode(), T0 + i) for i in range(start, stop))


def test_two_instances_share_and_take_over(kafka_cluster, tmp_path):
    bootstrap = kafka_cluster.bootstrap_servers
    names = {k: unique(k) for k in ("in", "copy", "counts")}
    for topic in names.values():
        kafka_cluster.create_topic(topic, partitions=4)
    app_id = unique("scale")
    base = {
        "application.id": app_id,
        "bootstrap.servers": bootstrap,
        "processing.guarantee": "exactly_once_v2",
        "commit.interval.ms": 100,
        "consumer.session.timeout.ms": 6000,
        "consumer.heartbeat.interval.ms": 500,
        "app.test.input": names["in"],
        "app.test.copy": names["copy"],
        "app.test.counts": names["counts"],
    }
    admin = kafka_cluster.admin()
    procs = {
        name: spawn_app(
            "test_app_support:count_and_copy",
            {**base, "state.dir": tmp_path / name},
            log_path=tmp_path / f"{name}.log",
        )
        for name in ("a", "b")
    }
    try:

        def shared():
            members = group_assignment(admin, app_id)
            inputs = [{tp for tp in tps if tp[0] == names["in"]} for tps in members.values()]
            return len(inputs) == 2 and sorted(len(i) for i in inputs) == [2, 2]

        wait_for(shared, 60, "both instances to own two input partitions each")
        produce(bootstrap, names["in"], _records(0, PHASE))

        def copied(n):
            return lambda msgs: sum(1 for m in msgs if m[0] == names["copy"]) >= n

        read_all(bootstrap, [names["copy"]], until=copied(PHASE), timeout=60)
        # both instances did part of the work
        for name in ("a", "b"):
            assert "REBALANCING -> RUNNING" in (tmp_path / f"{name}.log").read_text()
        stop_app(procs["a"], kill=True)
        produce(bootstrap, names["in"], _records(PHASE, 2 * PHASE))

        def took_over():
            members = group_assignment(admin, app_id)
            return len(members) == 1 and {
                tp for tps in members.values() for tp in tps if tp[0] == names["in"]
            } == {(names["in"], p) for p in range(4)}

        wait_for(took_over, 60, "the survivor to own all four partitions")
        expected = {f"k{i}": 2 * PHASE // KEYS for i in range(KEYS)}

        def complete(msgs):
            return copied(2 * PHASE)(msgs) and _final_counts(msgs, names["counts"]) == expected

        msgs = read_all(bootstrap, [names["copy"], names["counts"]], until=complete, timeout=90)
        assert procs["b"].poll() is None
        assert stop_app(procs["b"]) == 0
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                stop_app(proc, kill=True)
    copies = Counter(int(m[4]) for m in msgs if m[0] == names["copy"])
    assert sorted(copies) == list(range(2 * PHASE))
    # where each instance started its partitions, and their state changes, if it fails
    starts = [
        f"{name}: {line}"
        for name in ("a", "b")
        for line in (tmp_path / f"{name}.log").read_text().splitlines()
        if " starts " in line or "state" in line or "WARNING" in line
    ]
    assert max(copies.values()) == 1, "\n".join(starts)
    assert _final_counts(msgs, names["counts"]) == expected
    log_b = (tmp_path / "b.log").read_text()
    assert "Restoring store counts" in log_b, "the survivor did not restore the moved tasks"


def _final_counts(msgs, topic):
    out = {}
    for t, _p, _o, k, v, _h in msgs:
        if t == topic:
            out[k.decode()] = long_value(v)
    return out
