"""Exactly-once under crashes: the count + copy application runs as a child process
(``python -m streaming run``), is killed with SIGKILL at random moments several times while
input keeps arriving, and restarted. A read_committed consumer must find every input record
exactly once in the copy, and per key a strictly increasing series of counts ending at the
exact count."""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter

from test_app_support import (
    T0,
    OpenTransaction,
    long_value,
    produce,
    read_all,
    spawn_app,
    stop_app,
    unique,
    wait_for,
)

N = 3000
KEYS = 10
KILLS = 3
RUNNING = "state REBALANCING -> RUNNING"


def _log_count(log_path, line: str) -> int:
    return log_path.read_text().count(line) if log_path.exists() else 0


def test_exactly_once_survives_sigkill(kafka_cluster, tmp_path):
    bootstrap = kafka_cluster.bootstrap_servers
    names = {k: unique(k) for k in ("in", "copy", "counts")}
    for topic in names.values():
        kafka_cluster.create_topic(topic, partitions=2)
    app_id = unique("eos-crash")
    settings = {
        "application.id": app_id,
        "bootstrap.servers": bootstrap,
        "processing.guarantee": "exactly_once_v2",
        "state.dir": tmp_path / "state",
        "commit.interval.ms": 100,
        # a restarted instance takes its partitions back at once (no session timeout wait)
        "consumer.group.instance.id": f"{app_id}-instance",
        "consumer.session.timeout.ms": 10000,
        "app.test.input": names["in"],
        "app.test.copy": names["copy"],
        "app.test.counts": names["counts"],
    }
    seed = int(os.environ.get("STREAMING_CRASH_SEED", "20261122"))
    rng = random.Random(seed)

    killed = threading.Event()
    fed: list[int] = []

    def feed():  # at least N records, 200 a second, until 500 came after the last kill
        start, after_kills = 0, 0
        while start < N or after_kills < 500:
            produce(
                bootstrap,
                names["in"],
                (
                    (f"k{i % KEYS}".encode(), str(i).encode(), T0 + i)
                    for i in range(start, start + 50)
                ),
            )
            start += 50
            after_kills += 50 if killed.is_set() else 0
            time.sleep(0.25)
        fed.append(start)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    log_path = tmp_path / "app.log"
    open_transaction = OpenTransaction(bootstrap, names["copy"])
    try:
        for kill in range(KILLS):
            proc = spawn_app("test_app_support:count_and_copy", settings, log_path=log_path)
            # the instance processes (its own transactions, not the last one's aborted
            # leftovers) before the kill's random moment
            wait_for(
                lambda n=kill, p=proc: _log_count(log_path, RUNNING) > n or p.poll() is not None,
                timeout=120,
                what=f"instance {kill + 1} running",
            )
            time.sleep(rng.uniform(2.0, 4.0))
            # the kill lands while the application's transaction holds records in the log
            assert open_transaction.wait(timeout=10), "no transaction was open to kill"
            assert proc.poll() is None, log_path.read_text()[-3000:]
            stop_app(proc, kill=True)
    finally:
        killed.set()
        open_transaction.close()
    proc = spawn_app("test_app_support:count_and_copy", settings, log_path=log_path)
    code = None
    try:
        feeder.join(120)
        assert not feeder.is_alive()
        total = fed[0]

        def complete(msgs):
            return sum(1 for m in msgs if m[0] == names["copy"]) >= total and _final_counts(
                msgs, names["counts"]
            ) == {f"k{i}": total // KEYS for i in range(KEYS)}

        msgs = read_all(bootstrap, [names["copy"], names["counts"]], until=complete, timeout=120)
        code = stop_app(proc)
    finally:
        if code is None:
            stop_app(proc, kill=True)
    log_text = log_path.read_text()
    assert code == 0, log_text[-3000:]
    copies_seen = [m for m in msgs if m[0] == names["copy"]]
    copies = Counter(int(m[4]) for m in copies_seen)
    duplicates = {v: c for v, c in copies.items() if c > 1}
    assert not duplicates, f"duplicated in the copy (seed {seed}): {sorted(duplicates)[:20]}"
    missing = sorted(set(range(total)) - set(copies))
    assert sorted(copies) == list(range(total)), f"missing: {missing[:20]}"
    series: dict[str, list[int]] = {}
    for t, _p, _o, k, v, _h in msgs:
        if t == names["counts"]:
            series.setdefault(k.decode(), []).append(long_value(v))
    for key, values in series.items():
        assert values == sorted(set(values)), f"counts of {key} repeat or go back: {values}"
    assert _final_counts(msgs, names["counts"]) == {f"k{i}": total // KEYS for i in range(KEYS)}
    # the instance was really killed mid-flight: it restored or resumed state
    assert log_text.count("state CREATED -> REBALANCING") == KILLS + 1
    assert log_text.count(RUNNING) >= KILLS + 1
    # ... with a transaction open: a read_uncommitted consumer also sees the copies of the
    # transactions the kills cut off, which read_committed never returned
    uncommitted = read_all(
        bootstrap,
        [names["copy"]],
        until=lambda m: len(m) > len(copies_seen),
        timeout=30,
        read_committed=False,
    )
    assert len(uncommitted) > total, f"the aborted transactions left no record (seed {seed})"


def _final_counts(msgs, topic):
    out = {}
    for t, _p, _o, k, v, _h in msgs:
        if t == topic:
            out[k.decode()] = long_value(v)
    return out
