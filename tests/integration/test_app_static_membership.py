"""Group membership of the stream threads with librdkafka's default session.timeout.ms
(45 s): each thread is a static member named after the instance's process id (kept in its
state.dir), which leaves the group when the instance closes.

- a cleanly stopped instance hands its partitions over at once (a static member that did
  not leave would keep them for the 45 s of its session);
- a SIGKILLed instance started again takes its old place at once (a dynamic member would
  wait for its old session to expire, as after a broker outage longer than the session)."""

from __future__ import annotations

import time

from test_app_support import (
    T0,
    group_assignment,
    produce,
    read_all,
    spawn_app,
    stop_app,
    unique,
    wait_for,
)

#: well below librdkafka's session.timeout.ms (45 s), which the tests leave as it is
PROMPT_S = 20


def _members(admin, group):
    try:
        desc = admin.describe_consumer_groups([group], request_timeout=10)[group].result(10)
    except Exception:
        return []
    return list(desc.members)


def _setup(kafka_cluster, tmp_path):
    names = {k: unique(k) for k in ("in", "copy", "counts")}
    for topic in names.values():
        kafka_cluster.create_topic(topic, partitions=4)
    base = {
        "application.id": unique("static"),
        "bootstrap.servers": kafka_cluster.bootstrap_servers,
        "commit.interval.ms": 100,
        "app.test.input": names["in"],
        "app.test.copy": names["copy"],
        "app.test.counts": names["counts"],
    }
    return names, base


def _owns_all(admin, app_id, topic):
    members = group_assignment(admin, app_id)
    owned = {tp for tps in members.values() for tp in tps if tp[0] == topic}
    return len(members) == 1 and owned == {(topic, p) for p in range(4)}


def test_a_stopped_instance_leaves_the_group_at_once(kafka_cluster, tmp_path):
    names, base = _setup(kafka_cluster, tmp_path)
    app_id = base["application.id"]
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

        wait_for(shared, 90, "both instances to own two input partitions each")
        instance_ids = sorted(m.group_instance_id or "" for m in _members(admin, app_id))
        assert all(i.endswith("-1") and len(i) == 38 for i in instance_ids), instance_ids
        assert stop_app(procs["a"]) == 0
        stopped = time.monotonic()
        wait_for(lambda: _owns_all(admin, app_id, names["in"]), 60, "b to own every partition")
        handover = time.monotonic() - stopped
        assert handover < PROMPT_S, f"the partitions moved {handover:.1f}s after the stop"
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                stop_app(proc, kill=True)


def test_a_killed_instance_started_again_takes_its_place_at_once(kafka_cluster, tmp_path):
    names, base = _setup(kafka_cluster, tmp_path)
    app_id = base["application.id"]
    admin = kafka_cluster.admin()
    bootstrap = base["bootstrap.servers"]
    settings = {**base, "state.dir": tmp_path / "state"}
    log = tmp_path / "app.log"
    proc = spawn_app("test_app_support:count_and_copy", settings, log_path=log)
    try:
        wait_for(lambda: _owns_all(admin, app_id, names["in"]), 90, "the instance to join")
        before = {m.group_instance_id for m in _members(admin, app_id)}
        stop_app(proc, kill=True)
        proc = spawn_app("test_app_support:count_and_copy", settings, log_path=log)
        started = time.monotonic()
        produce(bootstrap, names["in"], [(b"k", b"after the restart", T0)])
        read_all(
            bootstrap,
            [names["copy"]],
            until=lambda msgs: any(m[4] == b"after the restart" for m in msgs),
            timeout=60,
        )
        resumed = time.monotonic() - started
        assert {m.group_instance_id for m in _members(admin, app_id)} == before
        assert resumed < PROMPT_S, f"output resumed {resumed:.1f}s after the restart"
        assert stop_app(proc) == 0
    finally:
        if proc.poll() is None:
            stop_app(proc, kill=True)
