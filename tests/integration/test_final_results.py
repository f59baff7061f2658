"""Final results stay final (Kafka's KIP-825 processor metadata and changelogged buffers).

A windowed ``emit_strategy(EmitStrategy.on_window_close())`` count and a windowed count with
``suppress(Suppressed.until_window_closes(...))`` run under exactly_once_v2 in child processes
(``python -m streaming run``) while input flows: a second instance joins the group and
leaves it again, a third joins, the first is killed with SIGKILL and restarted. Each window's
final result must appear exactly once in a read_committed consumer, with the exact count, and
per key in window order. The emit-on-close aggregation only knows which windows it already
emitted from the processor metadata committed with the input offsets; the suppression buffer
lives in its changelog (replayed whole: it is an in-memory store). Both guarantees commit the
metadata: it is read back from the group's committed offsets.

The stream-table join's grace buffer must survive a SIGKILL as well: a stream record that
waits in it (its input offset already committed) is joined and emitted after the restart,
exactly once.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from test_app_support import (
    T0,
    group_assignment,
    long_value,
    produce,
    read_all,
    settle,
    spawn_app,
    stop_app,
    unique,
    wait_for,
)

KEYS = 6
N = 3000
STEP_MS = 10  # event time between two input records: 100 records per window
WINDOW_MS = 1000
GRACE_MS = 5000  # long enough for final results to wait through a task migration
#: event time of the records that close the last windows (their own windows stay open)
END = T0 + N * STEP_MS + WINDOW_MS + GRACE_MS + 2000


# ---------------------------------------------------------------------------- topologies


def windowed_finals(config: dict[str, Any]) -> Any:
    """Per key and 1 s window: an emit-on-window-close count and a suppressed count."""
    from streaming import (
        EmitStrategy,
        Materialized,
        StreamsBuilder,
        Suppressed,
        TimeWindows,
        serdes,
    )
    from streaming.dsl import BufferConfig

    builder = StreamsBuilder()
    stream = builder.stream(
        config["app.test.input"], key_serde=serdes.String(), value_serde=serdes.String()
    )
    windows = TimeWindows.of_size_and_grace(WINDOW_MS, GRACE_MS)
    grouped = stream.group_by_key()

    def flat(wk: Any, count: int) -> tuple[str, int]:
        return f"{wk.key}@{wk.window.start}", count

    # the default retention (size + grace): catching up after a rebalance moves stream time
    # more than a window past its close within one throttled second of emit-on-close, and
    # every window must still come out (Kafka Streams would lose it)
    (
        grouped.windowed_by(windows)
        .emit_strategy(EmitStrategy.on_window_close())
        .count(materialized=Materialized.as_("emit-final-counts"))
        .to_stream()
        .map(flat)
        .to(config["app.test.emit"], key_serde=serdes.String(), value_serde=serdes.Long())
    )
    (
        grouped.windowed_by(windows)
        .count(materialized="suppressed-counts")
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .map(flat)
        .to(config["app.test.suppressed"], key_serde=serdes.String(), value_serde=serdes.Long())
    )
    return builder


def grace_join(config: dict[str, Any]) -> Any:
    """Orders joined with the customer's tier as of the order's time, with a grace period."""
    from streaming import Joined, Materialized, StreamsBuilder, serdes

    builder = StreamsBuilder()
    s = {"key_serde": serdes.String(), "value_serde": serdes.String()}
    customers = builder.table(
        config["app.test.table"],
        materialized=Materialized.as_versioned("customers-versioned", 60_000),
        **s,
    )
    orders = builder.stream(config["app.test.input"], **s)
    orders.join(
        customers,
        lambda order, tier: f"{order}+{tier}",
        joined=Joined.with_(serdes.String(), serdes.String(), serdes.String(), "grace", 10_000),
    ).to(config["app.test.output"], **s)
    return builder


def session_finals(config: dict[str, Any]) -> Any:
    """Per key: an emit-on-window-close count of sessions with a 1 s gap and no grace."""
    from streaming import EmitStrategy, SessionWindows, StreamsBuilder, serdes

    builder = StreamsBuilder()
    (
        builder.stream(
            config["app.test.input"], key_serde=serdes.String(), value_serde=serdes.String()
        )
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(1000, 0))
        .emit_strategy(EmitStrategy.on_window_close())
        .count()
        .to_stream()
        .map(lambda wk, n: (f"{wk.key}@{wk.window.start}-{wk.window.end}", n))
        .to(config["app.test.emit"], key_serde=serdes.String(), value_serde=serdes.Long())
    )
    return builder


# ---------------------------------------------------------------------------- helpers


def _partition_of(key: bytes | None) -> int:
    return int(key.decode()[1:]) % 2  # type: ignore[union-attr]


def _expected() -> dict[str, int]:
    out: Counter[str] = Counter()
    for i in range(N):
        ts = T0 + i * STEP_MS
        out[f"k{i % KEYS}@{T0 + (ts - T0) // WINDOW_MS * WINDOW_MS}"] += 1
    return dict(out)


def _finals(msgs: list[Any], topic: str) -> list[tuple[str, int]]:
    return [(m[3].decode(), long_value(m[4])) for m in msgs if m[0] == topic]


def _members_with_input(admin: Any, group: str, topic: str) -> list[set[tuple[str, int]]]:
    members = group_assignment(admin, group)
    return [{tp for tp in tps if tp[0] == topic} for tps in members.values()]


# ---------------------------------------------------------------------------- tests


def test_final_results_exactly_once_across_rebalances_and_sigkill(kafka_cluster, tmp_path):
    bootstrap = kafka_cluster.bootstrap_servers
    names = {k: unique(k) for k in ("in", "emit", "suppressed")}
    kafka_cluster.create_topic(names["in"], partitions=2)
    kafka_cluster.create_topic(names["emit"], partitions=1)
    kafka_cluster.create_topic(names["suppressed"], partitions=1)
    app_id = unique("final-results")
    base = {
        "application.id": app_id,
        "bootstrap.servers": bootstrap,
        "processing.guarantee": "exactly_once_v2",
        "commit.interval.ms": 100,
        "consumer.session.timeout.ms": 6000,
        "consumer.heartbeat.interval.ms": 500,
        "app.test.input": names["in"],
        "app.test.emit": names["emit"],
        "app.test.suppressed": names["suppressed"],
    }
    admin = kafka_cluster.admin()
    factory = "test_final_results:windowed_finals"

    def spawn(name: str) -> Any:
        settings = {**base, "state.dir": tmp_path / name}
        return spawn_app(factory, settings, log_path=tmp_path / f"{name}.log")

    def members() -> list[set[tuple[str, int]]]:
        return _members_with_input(admin, app_id, names["in"])

    procs: dict[str, Any] = {}
    started = time.monotonic()
    phases: list[tuple[float, str]] = []

    def phase(label: str) -> None:
        phases.append((round(time.monotonic() - started, 1), label))

    # the last records wait for the kill: on a loaded machine the rebalances before it can
    # take longer than the feed, and the input must still be flowing when the kill comes
    killed = threading.Event()

    def feed() -> None:  # about 100 records per second of wall time, 30 s in all
        producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
        for start in range(0, N, 20):
            if start + 20 >= N:
                killed.wait(300)
            for i in range(start, min(N, start + 20)):
                key = f"k{i % KEYS}".encode()
                producer.produce(
                    names["in"],
                    key=key,
                    value=str(i).encode(),
                    timestamp=T0 + i * STEP_MS,
                    partition=_partition_of(key),
                )
            producer.flush(30)
            time.sleep(0.2)
        assert producer.flush(30) == 0

    def wait_members(sizes: list[int], what: str) -> None:
        wait_for(lambda: sorted(len(m) for m in members()) == sizes, 40, what, step=0.3)
        phase(what)

    expected = _expected()
    outputs = [names["emit"], names["suppressed"]]

    def complete(msgs: list[Any]) -> bool:
        return all(len(set(_finals(msgs, t))) >= len(expected) for t in outputs)

    feeder = threading.Thread(target=feed, daemon=True)
    try:
        procs["a"] = spawn("a")
        feeder.start()
        wait_members([2], "a owns both partitions")
        time.sleep(2)
        # a second instance joins and takes one partition, emits, and leaves again: its task
        # goes back to the first instance, which must not emit the closed windows again
        procs["b"] = spawn("b")
        wait_members([1, 1], "b joined")
        time.sleep(3)
        assert stop_app(procs.pop("b")) == 0, (tmp_path / "b.log").read_text()[-3000:]
        wait_members([2], "b left")
        time.sleep(2)
        # a third instance joins, then the first one is killed mid-flight and restarted
        procs["c"] = spawn("c")
        wait_members([1, 1], "c joined")
        time.sleep(3)
        assert procs["a"].poll() is None, (tmp_path / "a.log").read_text()[-3000:]
        stop_app(procs.pop("a"), kill=True)
        phase("a killed")
        killed.set()
        procs["a"] = spawn("a")
        feeder.join(60)
        assert not feeder.is_alive()
        phase("input complete")
        # records beyond the last window close it on both partitions, sent again until every
        # final result is out: emit-on-close emits at most once per second of wall-clock time
        first: list[Any] = []
        for extra in range(40):
            produce(
                bootstrap,
                names["in"],
                ((f"k{p}".encode(), b"end", END + extra) for p in range(2)),
                partition_of=_partition_of,
            )
            first = read_all(bootstrap, outputs, until=complete, timeout=1.5)
            if complete(first):
                break
        phase("final results complete")
        assert complete(first), (
            {t: sorted(set(expected) - {k for k, _ in _finals(first, t)}) for t in outputs},
            phases,
        )
        for name in list(procs):
            assert stop_app(procs.pop(name)) == 0, (tmp_path / f"{name}.log").read_text()[-3000:]
        phase("stopped")
    finally:
        killed.set()
        for proc in procs.values():
            stop_app(proc, kill=True)
    # everything the instances wrote is committed now
    msgs = settle(bootstrap, outputs, quiet_s=2.0, timeout=30)
    assert len(msgs) >= len(first)
    for topic in outputs:
        finals = _finals(msgs, topic)
        windows = Counter(key for key, _count in finals)
        duplicated = sorted(key for key, n in windows.items() if n > 1)
        assert not duplicated, (
            f"{topic}: {len(duplicated)} windows emitted twice: {duplicated[:10]}",
            phases,
        )
        assert dict(finals) == expected, (topic, phases)
        # per key, windows close (and come out) in order, whichever instance emitted them
        starts: dict[str, list[int]] = {}
        for key, _count in finals:
            name, start = key.split("@")
            starts.setdefault(name, []).append(int(start))
        for name, series in starts.items():
            assert series == sorted(series), (topic, name, [(s - T0) // 1000 for s in series])
    print("phases:", phases)
    logs = {name: (tmp_path / f"{name}.log").read_text() for name in ("a", "b", "c")}
    # the second run of a really restored its state (and was assigned partitions)
    assert logs["a"].count("state CREATED -> REBALANCING") == 2, logs["a"][-3000:]


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_processor_metadata_is_committed_with_the_offsets(kafka_cluster, tmp_path, guarantee):
    from streaming.runtime import processor_metadata

    bootstrap = kafka_cluster.bootstrap_servers
    names = {k: unique(k) for k in ("in", "emit", "suppressed")}
    for topic in names.values():
        kafka_cluster.create_topic(topic, partitions=1)
    app_id = unique("metadata")
    settings = {
        "application.id": app_id,
        "bootstrap.servers": bootstrap,
        "processing.guarantee": guarantee,
        "state.dir": tmp_path / "state",
        "commit.interval.ms": 100,
        "app.test.input": names["in"],
        "app.test.emit": names["emit"],
        "app.test.suppressed": names["suppressed"],
    }
    log_path = tmp_path / "app.log"
    proc = spawn_app("test_final_results:windowed_finals", settings, log_path=log_path)
    code = None
    try:
        admin = kafka_cluster.admin()
        wait_for(lambda: any(group_assignment(admin, app_id).values()), 60, "an assignment")
        # 12 s of event time in three parts 1.5 s apart (one emit pass per second at most)
        for part in range(3):
            produce(
                bootstrap,
                names["in"],
                ((b"k0", b"v", T0 + i * 100) for i in range(part * 40, part * 40 + 40)),
            )
            time.sleep(1.5)
        emitted = read_all(bootstrap, [names["emit"]], until=lambda m: len(m) >= 2, timeout=60)
        assert len(emitted) >= 2, log_path.read_text()[-3000:]
        time.sleep(1.0)  # a few more commits
        code = stop_app(proc)
    finally:
        if code is None:
            stop_app(proc, kill=True)
    assert code == 0, log_path.read_text()[-3000:]
    group = Consumer({"bootstrap.servers": bootstrap, "group.id": app_id})
    try:
        (committed,) = group.committed([TopicPartition(names["in"], 0)], timeout=30)
    finally:
        group.close()
    assert committed.offset == 120
    partition_time, metadata = processor_metadata.decode(committed.metadata)
    assert partition_time == T0 + 119 * 100
    last_close = metadata.get("emit-final-counts")
    assert last_close is not None, committed.metadata
    # the last emit pass emitted every window closed at that time, and only those
    ends = [int(m[3].decode().split("@")[1]) + WINDOW_MS for m in emitted]
    assert max(ends) <= last_close <= partition_time - GRACE_MS
    assert last_close - WINDOW_MS < max(ends)


def test_stream_table_join_grace_buffer_survives_sigkill(kafka_cluster, tmp_path):
    bootstrap = kafka_cluster.bootstrap_servers
    names = {k: unique(k) for k in ("orders", "customers", "joined")}
    for topic in names.values():
        kafka_cluster.create_topic(topic, partitions=1)
    app_id = unique("grace-join")
    settings = {
        "application.id": app_id,
        "bootstrap.servers": bootstrap,
        "processing.guarantee": "exactly_once_v2",
        "state.dir": tmp_path / "state",
        "commit.interval.ms": 100,
        "consumer.group.instance.id": f"{app_id}-instance",
        "consumer.session.timeout.ms": 10000,
        "app.test.input": names["orders"],
        "app.test.table": names["customers"],
        "app.test.output": names["joined"],
    }
    log_path = tmp_path / "app.log"
    factory = "test_final_results:grace_join"
    produce(bootstrap, names["customers"], [(b"c1", b"gold", T0)])
    producer = Producer({"bootstrap.servers": bootstrap})
    # waits in the grace buffer: stream time is T0 + 1000, the grace period 10 s
    producer.produce(
        names["orders"], key=b"c1", value=b"o1", timestamp=T0 + 1000, headers=[("h", b"o1")]
    )
    assert producer.flush(30) == 0
    group = Consumer({"bootstrap.servers": bootstrap, "group.id": app_id})
    proc = spawn_app(factory, settings, log_path=log_path)
    try:

        def order_committed() -> bool:
            try:
                tp = group.committed([TopicPartition(names["orders"], 0)], timeout=5)[0]
            except KafkaException:  # the group coordinator is not ready yet
                return False
            return tp.offset == 1

        wait_for(order_committed, 60, "the buffered order's offset to be committed")
        assert proc.poll() is None, log_path.read_text()[-3000:]
        stop_app(proc, kill=True)
        time.sleep(0.5)
        # nothing was joined yet: o1 is only in the buffer (and its changelog)
        early = read_all(bootstrap, [names["joined"]], until=lambda m: False, timeout=3)
        assert early == []
        proc = spawn_app(factory, settings, log_path=log_path)
        # stream time T0 + 12000 ends o1's grace period; o2 waits in turn
        produce(bootstrap, names["orders"], [(b"c1", b"o2", T0 + 12_000)])
        msgs = read_all(bootstrap, [names["joined"]], until=lambda m: len(m) >= 1, timeout=60)
        assert [(m[3], m[4]) for m in msgs] == [(b"c1", b"o1+gold")], log_path.read_text()[-3000:]
        assert msgs[0][5] == [("h", b"o1")]  # the buffered record context came back too
        produce(bootstrap, names["orders"], [(b"c1", b"o3", T0 + 30_000)])
        msgs = read_all(bootstrap, [names["joined"]], until=lambda m: len(m) >= 2, timeout=60)
        code = stop_app(proc)
        proc = None
    finally:
        group.close()
        if proc is not None:
            stop_app(proc, kill=True)
    assert code == 0, log_path.read_text()[-3000:]
    final = settle(bootstrap, [names["joined"]], quiet_s=2.0, timeout=30)
    assert [(m[3], m[4]) for m in final] == [(b"c1", b"o1+gold"), (b"c1", b"o2+gold")]
    assert len(msgs) == 2


def test_a_final_result_held_back_by_the_throttle_comes_out_without_more_input(
    kafka_cluster, tmp_path
):
    """The record that closes a session comes within a second of the previous look for
    closed sessions, and nothing follows it: the session still comes out, committed, a
    throttle interval later (Kafka would wait for the next record)."""
    bootstrap = kafka_cluster.bootstrap_servers
    names = {k: unique(k) for k in ("in", "emit")}
    for topic in names.values():
        kafka_cluster.create_topic(topic, partitions=1)
    # mid-segment (60 s segments): closing the session does not drop the segment it is in,
    # so only the throttle holds it back
    base = T0 - T0 % 60_000 + 30_000
    settings = {
        "application.id": unique("held-back"),
        "bootstrap.servers": bootstrap,
        "processing.guarantee": "exactly_once_v2",
        "commit.interval.ms": 100,
        "state.dir": tmp_path / "state",
        "app.test.input": names["in"],
        "app.test.emit": names["emit"],
    }
    # all three are read in one poll: the first looks for closed sessions, the third closes
    # k0's session within the same second
    produce(
        bootstrap,
        names["in"],
        [(b"k0", b"x", base), (b"k0", b"x", base + 400), (b"k1", b"x", base + 1_401)],
    )
    proc = spawn_app("test_final_results:session_finals", settings, log_path=tmp_path / "app.log")
    try:
        msgs = read_all(bootstrap, [names["emit"]], until=lambda m: len(m) >= 1, timeout=60)
        assert _finals(msgs, names["emit"]) == [(f"k0@{base}-{base + 400}", 2)], (
            tmp_path / "app.log"
        ).read_text()[-3000:]
    finally:
        assert stop_app(proc) == 0, (tmp_path / "app.log").read_text()[-3000:]
