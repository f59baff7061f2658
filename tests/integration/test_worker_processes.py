"""``num.stream.threads = 2`` runs two worker processes (``stream.workers = processes``):
both take tasks, their stores answer through the client's handle and HTTP server, a restart
continues the counts, and a worker killed with SIGKILL is replaced (or ends the client)
without a record lost or counted twice under exactly-once."""

from __future__ import annotations

import os
import signal
import urllib.request

import orjson
from test_app_support import (
    T0,
    count_and_copy,
    last_value_per_key,
    long_value,
    produce,
    read_all,
    spawn_app,
    stop_app,
    unique,
    wait_for,
)

from streaming import Grouped, StreamsBuilder, serdes
from streaming.app import KafkaStreams, State
from streaming.runtime.errors import StreamThreadExceptionResponse
from streaming.runtime.worker_process import WorkerDied
from streaming.testing import free_port

N = 6000
KEYS = 40


def _count_by_key(source: str, counts: str):
    """Values name a key: rekey by value (repartition ``by-key``), count into ``counts``."""
    builder = StreamsBuilder()
    (
        builder.stream(source, key_serde=serdes.String(), value_serde=serdes.String())
        .select_key(lambda _k, v: v)
        .group_by_key(Grouped.as_("by-key").with_key_serde(serdes.String()))
        .count(materialized="counts")
        .to_stream()
        .to(counts, key_serde=serdes.String(), value_serde=serdes.Long())
    )
    return builder.build()


def _produce(bootstrap: str, topic: str, first: int, n: int) -> None:
    produce(
        bootstrap,
        topic,
        ((f"o{i}".encode(), f"k{i % KEYS}".encode(), T0 + i) for i in range(first, first + n)),
    )


def _totals(bootstrap: str, counts: str, total: int) -> dict[str, int]:
    """The last count per key once they add up to ``total`` (read committed)."""

    def reached(msgs):
        return sum(long_value(v) for v in last_value_per_key(msgs, counts).values()) >= total

    msgs = read_all(bootstrap, [counts], until=reached, timeout=120)
    return {k.decode(): long_value(v) for k, v in last_value_per_key(msgs, counts).items()}


def _topics(kafka_cluster) -> tuple[str, str]:
    source, counts = unique("wp-in"), unique("wp-counts")
    kafka_cluster.create_topic(source, partitions=2)
    kafka_cluster.create_topic(counts, partitions=2)
    return source, counts


def _config(bootstrap: str, tmp_path, **extra) -> dict:
    return {
        "application.id": unique("workers"),
        "bootstrap.servers": bootstrap,
        "processing.guarantee": "exactly_once_v2",
        "num.stream.threads": 2,
        "commit.interval.ms": 100,
        "state.dir": str(tmp_path),
        **extra,
    }


def test_two_workers_share_the_tasks_answer_queries_and_restart(kafka_cluster, tmp_path):
    bootstrap = kafka_cluster.bootstrap_servers
    source, counts = _topics(kafka_cluster)
    port = free_port()
    config = _config(bootstrap, tmp_path, **{"application.server": f"127.0.0.1:{port}"})
    _produce(bootstrap, source, 0, N)
    per_key = N // KEYS

    app = KafkaStreams(_count_by_key(source, counts), config)
    app.start()
    try:
        assert app.wait_until(State.RUNNING, 90)
        assert _totals(bootstrap, counts, N) == {f"k{i}": per_key for i in range(KEYS)}
        workers = list(app.workers)
        pids = {w.process.pid for w in workers}
        assert app.threads == [] and len(workers) == 2
        assert len(pids) == 2 and os.getpid() not in pids
        # each worker runs tasks of both sub-topologies' partitions, none twice
        wait_for(lambda: app.wait_until(State.RUNNING, 1), 60, "RUNNING")
        per_worker = [set(w.status().tasks) for w in workers]
        assert all(per_worker) and not per_worker[0] & per_worker[1]
        assert per_worker[0] | per_worker[1] == {"0_0", "0_1", "1_0", "1_1"}
        metrics = app.metrics()
        assert metrics["threads"] == 2 and metrics["tasks"] == ["0_0", "0_1", "1_0", "1_1"]
        assert metrics["process-total"] >= 2 * N  # source and aggregation tasks

        # interactive queries through the client: its view reads the workers' stores
        view = app.store("counts")
        assert view.get("k7") == per_key
        assert dict(view.all()) == {f"k{i}": per_key for i in range(KEYS)}
        assert view.approximate_num_entries() >= KEYS
        meta = app.metadata_for_key("counts", "k7", serdes.String())
        assert str(meta.active_host) == f"127.0.0.1:{port}"
        # ... and its HTTP server
        base = f"http://127.0.0.1:{port}"
        with urllib.request.urlopen(f"{base}/stores/counts/keys/k7", timeout=30) as reply:
            assert orjson.loads(reply.read())["value"] == per_key
        with urllib.request.urlopen(f"{base}/stores/counts/all", timeout=30) as reply:
            entries = orjson.loads(reply.read())["entries"]
        assert {e["key"]: e["value"] for e in entries} == {f"k{i}": per_key for i in range(KEYS)}
        # pages of 7, read in chunks inside the workers, each key exactly once
        paged, cursor = [], None
        while True:
            query = "limit=7" + (f"&cursor={cursor}" if cursor else "")
            with urllib.request.urlopen(f"{base}/stores/counts/all?{query}", timeout=30) as r:
                page = orjson.loads(r.read())
            assert len(page["entries"]) <= 7
            paged.extend(e["key"] for e in page["entries"])
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert sorted(paged) == sorted(f"k{i}" for i in range(KEYS))
    finally:
        assert app.close(60)
    assert app.state is State.NOT_RUNNING
    assert [w.process.poll() for w in workers] == [0, 0], "a worker did not exit cleanly"

    # the second run continues from the committed offsets and the local state
    _produce(bootstrap, source, N, N)
    app = KafkaStreams(_count_by_key(source, counts), config)
    app.start()
    try:
        assert _totals(bootstrap, counts, 2 * N) == {f"k{i}": 2 * per_key for i in range(KEYS)}
        assert app.wait_until(State.RUNNING, 60)
        assert app.store("counts").get("k0") == 2 * per_key
    finally:
        assert app.close(60)


def test_a_killed_worker_is_replaced_without_loss_or_duplicates(kafka_cluster, tmp_path):
    bootstrap = kafka_cluster.bootstrap_servers
    source, counts = _topics(kafka_cluster)
    _produce(bootstrap, source, 0, N)
    app = KafkaStreams(_count_by_key(source, counts), _config(bootstrap, tmp_path))
    seen: list[BaseException] = []

    def replace(exc: BaseException) -> StreamThreadExceptionResponse:
        seen.append(exc)
        return StreamThreadExceptionResponse.REPLACE_THREAD

    app.set_uncaught_exception_handler(replace)
    app.start()
    try:
        assert app.wait_until(State.RUNNING, 90)
        _totals(bootstrap, counts, N // 4)  # well under way
        victim = app.workers[0]
        os.kill(victim.process.pid, signal.SIGKILL)
        _produce(bootstrap, source, N, N)
        per_key = 2 * N // KEYS
        assert _totals(bootstrap, counts, 2 * N) == {f"k{i}": per_key for i in range(KEYS)}
        assert len(seen) == 1 and isinstance(seen[0], WorkerDied)
        assert "signal 9" in str(seen[0])
        wait_for(lambda: app.state is State.RUNNING, 60, "RUNNING again")
        assert len(app.workers) == 2 and victim not in app.workers
        assert sorted(w.index for w in app.workers) == [1, 2]
        assert app.store("counts").get("k1") == per_key
    finally:
        assert app.close(60)


def test_a_killed_worker_ends_the_client_by_default(kafka_cluster, tmp_path):
    bootstrap = kafka_cluster.bootstrap_servers
    source, counts = _topics(kafka_cluster)
    _produce(bootstrap, source, 0, 200)
    app = KafkaStreams(_count_by_key(source, counts), _config(bootstrap, tmp_path))
    app.start()
    try:
        assert app.wait_until(State.RUNNING, 90)
        workers = list(app.workers)
        os.kill(workers[1].process.pid, signal.SIGKILL)
        assert app.wait_until(State.ERROR, 60)
        # the other worker was closed with the client
        assert workers[0].process.wait(30) == 0
    finally:
        app.close(30)


def test_workers_threads_keeps_one_process(kafka_cluster, tmp_path):
    bootstrap = kafka_cluster.bootstrap_servers
    source, counts = _topics(kafka_cluster)
    _produce(bootstrap, source, 0, 400)
    config = _config(bootstrap, tmp_path, **{"stream.workers": "threads"})
    app = KafkaStreams(_count_by_key(source, counts), config)
    app.start()
    try:
        assert _totals(bootstrap, counts, 400) == {f"k{i}": 400 // KEYS for i in range(KEYS)}
        assert app.workers == [] and len(app.threads) == 2
    finally:
        assert app.close(60)


def test_a_worker_takes_over_from_the_clients_standby(kafka_cluster, tmp_path):
    """Instance ``a`` runs two workers, ``b`` one thread, each keeping standbys of the other's
    tasks (``a``'s in its own process). When ``b`` leaves, ``a``'s workers take its tasks
    over: the standby copy is handed to the worker, and restoring starts at its checkpoint."""
    bootstrap = kafka_cluster.bootstrap_servers
    names = {k: unique(k) for k in ("in", "copy", "counts")}
    for topic in names.values():
        kafka_cluster.create_topic(topic, partitions=4)
    app_id = unique("wp-standby")
    n, keys = 4000, 40

    def start(name: str, threads: int) -> KafkaStreams:
        config = {
            "application.id": app_id,
            "bootstrap.servers": bootstrap,
            "processing.guarantee": "exactly_once_v2",
            "num.stream.threads": threads,
            "num.standby.replicas": 1,
            "statestore.cache.max.bytes": 0,
            "state.dir": str(tmp_path / name),
            "app.test.input": names["in"],
            "app.test.copy": names["copy"],
            "app.test.counts": names["counts"],
        }
        app = KafkaStreams(count_and_copy(config), config)
        app.start()
        return app

    a, b = start("a", 2), start("b", 1)
    try:
        wait_for(
            lambda: all(x.state is State.RUNNING for x in (a, b))
            and len(a.local_tasks()) + len(b.local_tasks()) == 4
            and b.local_tasks(),
            90,
            "the four tasks spread over both instances",
        )
        produce(bootstrap, names["in"], ((f"k{i % keys}".encode(), b"v", T0 + i) for i in range(n)))
        expected = {f"k{i}": n // keys for i in range(keys)}

        def counted(msgs):
            last = last_value_per_key(msgs, names["counts"])
            return {k.decode(): long_value(v) for k, v in last.items()} == expected

        read_all(bootstrap, [names["counts"]], until=counted, timeout=90)
        moved = sorted(b.local_tasks())
        wait_for(lambda: a.metrics()["standby-tasks"] == moved, 60, "a's standbys of b's tasks")
        wait_for(
            lambda: sum(t.applied for t in a.standby.tasks.values()) > 0,
            60,
            "a's standbys to follow the changelog",
        )
        assert b.close(60)
        wait_for(lambda: len(a.local_tasks()) == 4, 90, "a to take every task over")
        assert a.wait_until(State.RUNNING, 60)
        assert {k: a.store("counts").get(k) for k in expected} == expected
        progress = a.metrics()["restore-progress"]
        for tid in moved:
            entry = progress.get(f"{app_id}-counts-changelog-{tid.split('_')[1]}")
            # restored from the standby's checkpoint, not from the start of the changelog
            assert entry is not None and entry["start-offset"] > 0, (tid, entry)
        assert a.metrics()["standby-tasks"] == []
    finally:
        for app in (a, b):
            app.close(60)


def _workers_of(pid: int) -> list[int]:
    """The worker processes whose parent is ``pid``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid and b"streaming.runtime.worker" in cmdline:
            found.append(int(entry))
    return found


def test_a_killed_client_takes_its_workers_with_it(kafka_cluster, tmp_path):
    """SIGKILL of the client process (``python -m streaming run``, two workers): its workers
    end too (none keeps consuming as an orphan), and the restarted client counts on from
    the committed state, nothing lost and nothing twice."""
    bootstrap = kafka_cluster.bootstrap_servers
    names = {k: unique(k) for k in ("in", "copy", "counts")}
    for topic in names.values():
        kafka_cluster.create_topic(topic, partitions=2)
    settings = {
        "application.id": unique("wp-kill"),
        "bootstrap.servers": bootstrap,
        "processing.guarantee": "exactly_once_v2",
        "num.stream.threads": 2,
        "state.dir": str(tmp_path / "state"),
        "app.test.input": names["in"],
        "app.test.copy": names["copy"],
        "app.test.counts": names["counts"],
    }
    n, keys = 2000, 20

    def counts_reach(total: int) -> dict[str, int]:
        def done(msgs):
            last = last_value_per_key(msgs, names["counts"])
            return sum(long_value(v) for v in last.values()) >= total

        msgs = read_all(bootstrap, [names["counts"]], until=done, timeout=120)
        last = last_value_per_key(msgs, names["counts"])
        return {k.decode(): long_value(v) for k, v in last.items()}

    client = spawn_app("test_app_support:count_and_copy", settings, log_path=tmp_path / "a.log")
    try:
        produce(bootstrap, names["in"], ((f"k{i % keys}".encode(), b"v", T0 + i) for i in range(n)))
        assert counts_reach(n) == {f"k{i}": n // keys for i in range(keys)}
        workers = _workers_of(client.pid)
        assert len(workers) == 2, (tmp_path / "a.log").read_text()[-3000:]
        stop_app(client, kill=True)

        def gone() -> bool:
            return not any(os.path.exists(f"/proc/{pid}") for pid in workers)

        wait_for(gone, 30, "the killed client's workers to end")
    finally:
        stop_app(client, kill=True)

    produce(bootstrap, names["in"], ((f"k{i % keys}".encode(), b"v", T0 + n + i) for i in range(n)))
    client = spawn_app("test_app_support:count_and_copy", settings, log_path=tmp_path / "b.log")
    try:
        assert counts_reach(2 * n) == {f"k{i}": 2 * n // keys for i in range(keys)}
        copies = read_all(
            bootstrap, [names["copy"]], until=lambda msgs: len(msgs) >= 2 * n, timeout=60
        )
        assert len(copies) == 2 * n  # every input record copied once
    finally:
        assert stop_app(client) == 0
