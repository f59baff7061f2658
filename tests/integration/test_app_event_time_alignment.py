"""A backlog on four source partitions, worked off under exactly-once with event-time alignment
on (the default) and off.

Each partition holds an hour of clicks in event-time order, every click on time for a stream
read in event-time order. Rekeyed twice: by region into 5-minute windowed counts with one
minute of grace, and by user into 60-second sessions (30 s of grace) emitted once closed. Read
a partition at a time (alignment off), stream time downstream runs minutes ahead: windows
close early and drop records as late, and a user's session closes before the rest of its
clicks arrive, so it comes out split. Aligned, the results equal the in-order computation.
"""

from __future__ import annotations

import random
import time
from collections import Counter, defaultdict
from functools import partial
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from test_app_support import group_caught_up, produce, unique, wait_for

from streaming import EmitStrategy, SessionWindows, StreamsBuilder, TimeWindows, serdes
from streaming.app import KafkaStreams, State

PARTITIONS = 4
PER_PARTITION = 6_000
N = PARTITIONS * PER_PARTITION
SPAN_MS = 3_600_000
STEP_MS = SPAN_MS // PER_PARTITION
USERS = 2_000
REGIONS = ["EU", "NA", "APAC", "LATAM"]
WINDOW_MS, WINDOW_GRACE_MS = 300_000, 60_000
GAP_MS, SESSION_GRACE_MS = 60_000, 30_000
#: two hours ago, on the hour: behind the wall clock, so the backlog aligns, yet recent
#: enough for the changelogs of the window and session stores, whose time retention (the
#: store's plus a day, windowstore.changelog.additional.retention.ms) counts from
#: the record timestamps: older clicks are deleted by the broker's next retention check,
#: and a task that moves to the other instance restores less than was written
T_START = (int(time.time() * 1000) // SPAN_MS - 2) * SPAN_MS


#: users of the last clicks, far enough after the others to close every session; enough
#: of them that each repartition partition gets one
FLUSH_USERS = 16


def _clicks() -> list[tuple[int, str, str, int]]:
    """(partition, user, region, timestamp): per partition in event-time order, ending with
    clicks of users of their own, after all others by more than a session's gap and grace."""
    rng = random.Random(7)
    out = []
    flush_at = T_START + SPAN_MS + GAP_MS + SESSION_GRACE_MS + 60_000
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            ts = T_START + i * STEP_MS + rng.randrange(STEP_MS)
            out.append((p, f"u{rng.randrange(USERS)}", rng.choice(REGIONS), ts))
        out += [(p, f"flush{p}-{j}", "EU", flush_at) for j in range(FLUSH_USERS)]
    return out


def _topology(clicks: str, counts: str, sessions: str, *, slow: bool = False) -> Any:
    """``slow``: each click costs half a millisecond more (an instance on a busier machine)."""
    builder = StreamsBuilder()
    stream = builder.stream(clicks, key_serde=serdes.String(), value_serde=serdes.String())
    if slow:
        stream = stream.peek(lambda _k, _v: time.sleep(0.0005))
    (
        stream.select_key(lambda _k, v: v.split(",")[1])
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(WINDOW_MS, WINDOW_GRACE_MS))
        .count(materialized="region-counts")
        .to_stream()
        .map(lambda wk, n: (f"{wk.key}@{wk.window.start}", n))
        .to(counts, key_serde=serdes.String(), value_serde=serdes.Long())
    )
    (
        stream.select_key(lambda _k, v: v.split(",")[0])
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(GAP_MS, SESSION_GRACE_MS))
        .emit_strategy(EmitStrategy.on_window_close())
        .count(materialized="user-sessions")
        .to_stream()
        .map(lambda wk, n: (f"{wk.key}@{wk.window.start}-{wk.window.end}", n))
        .to(sessions, key_serde=serdes.String(), value_serde=serdes.Long())
    )
    return builder.build()


def _expected_counts(clicks: list[tuple[int, str, str, int]]) -> dict[str, int]:
    return dict(
        Counter(f"{region}@{ts - (ts - T_START) % WINDOW_MS}" for _p, _u, region, ts in clicks)
    )


def _expected_sessions(clicks: list[tuple[int, str, str, int]]) -> Counter:
    """The sessions of clicks read in event-time order (the flush users' stay open)."""
    times: dict[str, list[int]] = defaultdict(list)
    for _p, user, _r, ts in clicks:
        if not user.startswith("flush"):
            times[user].append(ts)
    out: Counter = Counter()
    for user, stamps in times.items():
        stamps.sort()
        start = end = stamps[0]
        count = 0
        for ts in stamps:
            if ts - end > GAP_MS:
                out[(user, start, end)] = count
                start, count = ts, 0
            end = ts
            count += 1
        out[(user, start, end)] = count
    return Counter({f"{u}@{s}-{e}": n for (u, s, e), n in out.items()})


def _processed_at_least(app: KafkaStreams, records: int) -> bool:
    return app.metrics()["process-total"] >= records


def _read_to_end(bootstrap: str, topic: str) -> list[tuple[str, int]]:
    """Every committed record of ``topic`` as (key, long value), read up to its end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("reader"),
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    parts = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
    consumer.assign([TopicPartition(topic, p, 0) for p in parts])
    out: list[tuple[str, int]] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while len(at_end) < len(parts) and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                err = msg.error()
                if err is not None and err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                elif err is None:
                    at_end.discard(msg.partition())
                    out.append((msg.key().decode(), int.from_bytes(msg.value(), "big")))
    finally:
        consumer.close()
    assert len(at_end) == len(parts), f"{topic} not read to its end in 60 s"
    return out


def _work_off_backlog(
    kafka_cluster: Any,
    tmp_path: Any,
    clicks: list[tuple[int, str, str, int]],
    drift: int | None,
    workers: int = 1,
    fence_mid_backlog: bool = False,
    instances: int = 1,
    across_instances: bool = True,
) -> dict[str, Any]:
    """Produce the backlog, run the application over it; its outputs and counters (summed
    over its instances).

    ``fence_mid_backlog``: a third of the way in, a newer producer with the first thread's
    transactional id fences its producer, as a broker that stops answering does (the
    transaction aborts and the thread rebuilds its tasks from the last commit).
    ``instances`` > 1: that many instances of the application, one slower (as on a busier
    machine) and started first, so that the others run ahead unless the instances align."""
    bootstrap = kafka_cluster.bootstrap_servers
    topic, counts, sessions = unique("clicks"), unique("region-counts"), unique("sessions")
    kafka_cluster.create_topic(topic, partitions=PARTITIONS)
    kafka_cluster.create_topic(counts, partitions=1)
    kafka_cluster.create_topic(sessions, partitions=1)
    by_key = {f"c{i}".encode(): p for i, (p, _u, _r, _t) in enumerate(clicks)}
    produce(
        bootstrap,
        topic,
        ((f"c{i}".encode(), f"{u},{r}".encode(), ts) for i, (_p, u, r, ts) in enumerate(clicks)),
        partition_of=by_key.__getitem__,
    )
    app_id = unique("aligned")
    apps = []
    for i in range(instances):
        config: dict[str, Any] = {
            "application.id": app_id,
            "bootstrap.servers": bootstrap,
            "processing.guarantee": "exactly_once_v2",
            "state.dir": str(tmp_path / f"instance-{i}"),
            "num.stream.threads": workers,
            "statestore.cache.max.bytes": 0,
            "event.time.alignment.across.instances": across_instances,
            # every session is emitted as soon as it closes (no wall-clock throttle)
            "__emit.interval.ms.kstreams.windowed.aggregation__": 0,
        }
        if drift is not None:
            config["event.time.alignment.max.drift.ms"] = drift
        apps.append(KafkaStreams(_topology(topic, counts, sessions, slow=i == 1), config))
    started = time.monotonic()
    cpu = time.process_time()
    # the slower instance first: it works alone on all partitions for a while, then the
    # faster one joins and takes half of them, from where the slower one got to
    apps.reverse()
    try:
        for app in apps:
            app.start()
            assert app.wait_until(State.RUNNING, 60)
            if app is not apps[-1]:
                wait_for(partial(_processed_at_least, app, 2_000), 60, "a head start")
        if fence_mid_backlog:
            first = apps[-1]
            wait_for(lambda: first.metrics()["process-total"] >= len(clicks), 120, "a third done")
            newer = Producer(
                {
                    "bootstrap.servers": bootstrap,
                    "transactional.id": f"{app_id}-{first.process_id}-1",
                }
            )
            newer.init_transactions(30)
        repartition = (t for t in kafka_cluster.list_topics() if t.startswith(f"{app_id}-"))
        sources = [topic, *sorted(t for t in repartition if t.endswith("-repartition"))]
        assert len(sources) == 3
        wait_for(
            lambda: group_caught_up(bootstrap, app_id, sources), 180, "the backlog committed", 0.5
        )
        caught_up = time.monotonic() - started
        cpu = time.process_time() - cpu
        metrics = [app.metrics() for app in apps]
    finally:
        for app in apps:
            app.close(timeout=30)  # commits what was processed
    emitted = _read_to_end(bootstrap, sessions)

    def total(name: str) -> int:
        return sum(m[name] for m in metrics)

    return {
        "counts": dict(_read_to_end(bootstrap, counts)),
        "sessions": Counter(dict(emitted)),
        "sessions emitted": len(emitted),
        "late": total("late-records-dropped-total"),
        "waits": total("alignment-waits-total"),
        "producer replacements": total("producer-replacements-total"),
        "processed": total("process-total"),
        "seconds": caught_up,
        "cpu": cpu,
    }


@pytest.fixture(scope="module")
def clicks() -> list[tuple[int, str, str, int]]:
    return _clicks()


@pytest.mark.parametrize(
    ("workers", "fence"),
    [(1, True), (2, False)],
    ids=["one process, its producer fenced mid-backlog", "two worker processes"],
)
def test_aligned_backlog_equals_the_in_order_result(
    kafka_cluster, tmp_path, clicks, capsys, workers, fence
):
    result = _work_off_backlog(
        kafka_cluster, tmp_path, clicks, drift=None, workers=workers, fence_mid_backlog=fence
    )
    expected_sessions = _expected_sessions(clicks)
    with capsys.disabled():
        print(
            f"\naligned ({workers} process(es)): {N} clicks worked off in {result['seconds']:.1f} s "
            f"({result['cpu']:.1f} CPU s), "
            f"{result['late']} dropped as late, {result['waits']} rounds waited for alignment, "
            f"{result['processed']} records processed"
        )
    assert result["late"] <= N * 0.005
    assert result["counts"] == _expected_counts(clicks)
    assert result["sessions"] == expected_sessions
    assert result["sessions emitted"] == len(expected_sessions)  # each session once
    assert sum(expected_sessions.values()) == N
    assert result["waits"] > 0
    if fence:
        assert result["producer replacements"] >= 1  # the fenced producer was replaced


def test_unaligned_backlog_drops_and_splits(kafka_cluster, tmp_path, clicks, capsys):
    result = _work_off_backlog(kafka_cluster, tmp_path, clicks, drift=-1)
    expected_sessions = _expected_sessions(clicks)
    split = sum((result["sessions"] - expected_sessions).values())
    with capsys.disabled():
        print(
            f"\nunaligned: {N} clicks worked off in {result['seconds']:.1f} s "
            f"({result['cpu']:.1f} CPU s), "
            f"{result['late']} dropped as late, {split} clicks in sessions the in-order "
            "result does not have"
        )
    assert result["waits"] == 0
    assert result["late"] > N * 0.05
    assert result["counts"] != _expected_counts(clicks)
    assert result["sessions"] != expected_sessions


#: in the long suite (make test-chaos): it takes a minute or more, and the setting is opt-in
@pytest.mark.chaos
@pytest.mark.parametrize("across", [True, False], ids=["aligned across", "each on its own"])
def test_two_instances_align_with_each_other(kafka_cluster, tmp_path, clicks, capsys, across):
    """Two instances of the application, each with two of the four partitions, the second
    slower: aligned with each other, the results equal the in-order computation; each
    aligning only its own partitions, the faster one runs ahead and its records make the
    slower one's late downstream."""
    result = _work_off_backlog(
        kafka_cluster, tmp_path, clicks, drift=None, instances=2, across_instances=across
    )
    expected_sessions = _expected_sessions(clicks)
    split = sum((result["sessions"] - expected_sessions).values())
    with capsys.disabled():
        print(
            f"\ntwo instances, {'aligned across' if across else 'each on its own'}: {N} clicks "
            f"worked off in {result['seconds']:.1f} s, {result['late']} dropped as late, "
            f"{split} clicks in sessions the in-order result does not have"
        )
    if across:
        assert result["late"] <= N * 0.005
        assert result["counts"] == _expected_counts(clicks)
        assert result["sessions"] == expected_sessions
        assert result["sessions emitted"] == len(expected_sessions)
    else:
        assert result["late"] > N * 0.05
        assert result["sessions"] != expected_sessions
