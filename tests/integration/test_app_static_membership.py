"""Group membership of the stream threads with librdkafka's default session.timeout.ms
(45 s): each thread is a static member named after the instance's process id (kept in its
state.dir), which leaves the group when the instance closes.

- a cleanly stopped instance hands its partitions over at once (a static member that did
  not leave would keep them for the 45 s of its session);
- a SIGKILLed instance started again takes its old place at once (a dynamic member would
  wait for its old session to expire, as after a broker outage longer than the session);
- a member fenced off once rejoins with a new consumer and its output stays exactly once
  (librdkafka fences a static member by itself when its session times out while the group
  coordinator moves, as a broker failure of the chaos suite showed: the thread then sat in
  REBALANCING for good); one fenced again within a session fails and says what to fix."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, KafkaError
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


def _intruder(bootstrap: str, app_id: str, instance_id: str, topic: str) -> Any:
    """A consumer joining the application's group under one of its members' instance ids."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": app_id,
            "group.instance.id": instance_id,
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    return consumer


def _fenced(consumer: Any, timeout: float) -> bool:
    """Polls ``consumer`` until it reports being fenced (True) or the timeout (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for msg in consumer.consume(num_messages=100, timeout=0.2):
            err = msg.error()
            if err is not None and err.code() == KafkaError._FATAL:
                return True
    return False


def _join_as_the_member(kafka_cluster, tmp_path):
    names, base = _setup(kafka_cluster, tmp_path)
    settings = {
        **base,
        "state.dir": tmp_path / "state",
        "processing.guarantee": "exactly_once_v2",
    }
    log = tmp_path / "app.log"
    proc = spawn_app("test_app_support:count_and_copy", settings, log_path=log)
    admin = kafka_cluster.admin()
    wait_for(lambda: _owns_all(admin, base["application.id"], names["in"]), 90, "the join")
    (member,) = _members(admin, base["application.id"])
    return names, base, proc, log, member.group_instance_id


def test_a_fenced_member_rejoins_once_and_stays_exactly_once_then_fails_saying_what_to_fix(
    kafka_cluster, tmp_path
):
    names, base, proc, log, instance_id = _join_as_the_member(kafka_cluster, tmp_path)
    bootstrap = base["bootstrap.servers"]
    intruders = []

    def intrude() -> Any:
        intruder = _intruder(bootstrap, base["application.id"], instance_id, names["in"])
        intruders.append(intruder)
        return intruder

    try:
        produce(bootstrap, names["in"], [(b"k", b"before", T0)])
        read_all(bootstrap, [names["copy"]], until=lambda m: len(m) == 1, timeout=60)
        # the intruder's join fences the application's consumer; the application's new
        # consumer takes the place back and fences the intruder in turn
        assert _fenced(intrude(), 60), "the application never took its place back"
        produce(bootstrap, names["in"], [(b"k", b"after", T0 + 1)])
        msgs = read_all(
            bootstrap,
            [names["copy"], names["counts"]],
            until=lambda m: sum(x[0] == names["counts"] for x in m) >= 2,
            timeout=60,
        )
        assert proc.poll() is None, log.read_text()[-3000:]
        assert [x[4] for x in msgs if x[0] == names["copy"]] == [b"before", b"after"]
        assert [long_value(x[4]) for x in msgs if x[0] == names["counts"]] == [1, 2]
        assert "rejoining with a new consumer" in log.read_text()
        # a second instance under the same id keeps joining: fenced again within its
        # session (45 s) the application fails (a slow run may see one more rejoin first)
        for _ in range(3):
            if not _fenced(intrude(), 30):
                break
        wait_for(lambda: proc.poll() is not None, 60, "the application to fail")
        assert proc.returncode != 0
        assert "each instance needs its own state.dir" in log.read_text(), log.read_text()[-3000:]
    finally:
        for intruder in intruders:
            intruder.close()
        if proc.poll() is None:
            stop_app(proc, kill=True)
