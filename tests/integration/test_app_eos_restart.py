"""Exactly-once restarts without wiping state: the count + copy application (thousands of
keys of RocksDB state) runs as a child process, is killed with SIGKILL mid-transaction
several times while input keeps arriving, and restarted on the same ``state.dir``.

Its count store is transactional: each restart resumes from the changelog offsets stored in
the store and restores only the changelog records after them, never from the beginning (a
wiped store would restore its whole changelog from offset 0). The outputs stay exact: read
``read_committed``, the copy holds every input record once, and the last count of each key
is its number of input records.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition
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

KEYS = 3000
PREFILL = 3 * KEYS
KILLS = 3
RUNNING = "state REBALANCING -> RUNNING"
RESTORING = re.compile(r"Restoring store counts from (\S+)-(\d+) offsets (\d+)\.\.(\d+)")
RESTORED = re.compile(r"Restored store counts from \S+: (\d+) records")
RESUMED = re.compile(r"Task (\S+) resumes its transactional stores .*: counts at (\d+)$", re.M)


def _record(i: int) -> tuple[bytes, bytes, int]:
    return f"k{i % KEYS}".encode(), str(i).encode(), T0 + i


class _Committed:
    """The sum of a group's committed offsets of a topic's two partitions (0 before any
    commit), read with a consumer of the group that never joins it (the admin client's
    ``list_consumer_group_offsets`` of confluent-kafka 2.16 can crash the process while the
    group has no offsets yet)."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
        )
        self.partitions = [TopicPartition(topic, p) for p in (0, 1)]

    def __call__(self) -> int:
        deadline = time.monotonic() + 30
        while True:
            try:
                committed = self.consumer.committed(self.partitions, timeout=10)
                return sum(max(tp.offset, 0) for tp in committed if tp.error is None)
            except KafkaException:  # e.g. the group coordinator still loading
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def close(self) -> None:
        self.consumer.close()


def test_exactly_once_restarts_resume_state_instead_of_wiping_it(kafka_cluster, tmp_path):
    bootstrap = kafka_cluster.bootstrap_servers
    names = {k: unique(k) for k in ("in", "copy", "counts")}
    for topic in names.values():
        kafka_cluster.create_topic(topic, partitions=2)
    app_id = unique("eos-restart")
    settings: dict[str, Any] = {
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
    produce(bootstrap, names["in"], (_record(i) for i in range(PREFILL)))
    committed = _Committed(bootstrap, app_id, names["in"])

    stop_feeding = threading.Event()
    fed = [PREFILL]

    def feed() -> None:  # 400 records a second until told to stop
        while not stop_feeding.is_set():
            start = fed[0]
            produce(bootstrap, names["in"], (_record(i) for i in range(start, start + 100)))
            fed[0] = start + 100
            stop_feeding.wait(0.25)

    feeder = threading.Thread(target=feed, daemon=True)
    log_path = tmp_path / "app.log"
    open_transaction = OpenTransaction(bootstrap, names["copy"])
    runs: list[int] = []  # the log's length when each run started
    try:
        for kill in range(KILLS):
            runs.append(len(log_path.read_text()) if log_path.exists() else 0)
            committed_before = committed()
            proc = spawn_app("test_app_support:count_and_copy", settings, log_path=log_path)
            wait_for(
                lambda n=kill, p=proc: log_path.read_text().count(RUNNING) > n
                or p.poll() is not None,
                timeout=120,
                what=f"instance {kill + 1} running",
            )
            if kill == 0:
                feeder.start()
            # it committed new input of its own (its stores recorded offsets), and a
            # transaction of it holds records when the kill lands
            wait_for(
                lambda before=committed_before: committed() >= before + 1000,
                timeout=120,
                what=f"instance {kill + 1} committing",
            )
            assert open_transaction.wait(timeout=10), "no transaction was open to kill"
            assert proc.poll() is None, log_path.read_text()[-3000:]
            stop_app(proc, kill=True)
    finally:
        stop_feeding.set()
        open_transaction.close()
        committed.close()
    feeder.join(30)
    assert not feeder.is_alive()
    total = fed[0]
    expected = Counter(f"k{i % KEYS}" for i in range(total))
    runs.append(len(log_path.read_text()))
    proc = spawn_app("test_app_support:count_and_copy", settings, log_path=log_path)
    code = None
    try:

        def complete(msgs: list[Any]) -> bool:
            copies = sum(1 for m in msgs if m[0] == names["copy"])
            return copies >= total and _final_counts(msgs, names["counts"]) == expected

        msgs = read_all(bootstrap, [names["copy"], names["counts"]], until=complete, timeout=180)
        code = stop_app(proc)
    finally:
        if code is None:
            stop_app(proc, kill=True)
    log_text = log_path.read_text()
    assert code == 0, log_text[-3000:]

    # the outputs are exact
    copies = Counter(int(m[4]) for m in msgs if m[0] == names["copy"])
    duplicates = sorted(v for v, c in copies.items() if c > 1)
    missing = sorted(set(range(total)) - set(copies))
    assert not duplicates, f"duplicated in the copy: {duplicates[:20]}"
    assert not missing, f"missing from the copy: {missing[:20]}"
    assert _final_counts(msgs, names["counts"]) == expected

    # every restart resumed the count store of both tasks from its own committed offsets,
    # never from the start of the changelog
    restarts = [log_text[begin:end] for begin, end in zip(runs[1:], [*runs[2:], None], strict=True)]
    assert len(restarts) == KILLS
    for text in restarts:
        resumed = {task: int(offset) for task, offset in RESUMED.findall(text)}
        assert sorted(resumed) == ["0_0", "0_1"], text
        assert all(offset > 0 for offset in resumed.values()), resumed
    starts = [
        (int(m.group(2)), int(m.group(3)), int(m.group(4)))
        for text in restarts
        for m in RESTORING.finditer(text)
    ]
    assert all(start > 0 for _, start, _ in starts), f"a restore started from 0: {starts}"
    restored = [int(n) for text in restarts for n in RESTORED.findall(text)]
    changelog_records = sum(end for _, _, end in starts)
    assert sum(restored) < changelog_records, (restored, starts)
    assert "No checkpoint in" not in log_text  # no store directory was deleted
    assert log_text.count("state CREATED -> REBALANCING") == KILLS + 1


def _final_counts(msgs: list[Any], topic: str) -> Counter[str]:
    out: Counter[str] = Counter()
    for t, _p, _o, k, v, _h in msgs:
        if t == topic:
            out[k.decode()] = long_value(v)
    return out
