"""``window.close.quiet.ms`` on a broker: two exactly-once applications count the same live
input in 2-second windows emitted on close, one with the quiet close (2 s) and one without.
When the input stops, the first emits the last windows on the wall clock; the second, as
Kafka Streams does, only the windows a later record closed. Each window comes out once, with
its exact count (read_committed)."""

from __future__ import annotations

import time
from collections import Counter

from test_app_support import produce, read_all, settle, unique

from streaming import EmitStrategy, StreamsBuilder, TimeWindows, serdes
from streaming.app import KafkaStreams, State

S = serdes.String()
WINDOW_MS = 2_000
QUIET_MS = 2_000


def _topology(source: str, sink: str):
    b = StreamsBuilder()
    (
        b.stream(source, key_serde=S, value_serde=S)
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(WINDOW_MS))
        .emit_strategy(EmitStrategy.on_window_close())
        .count()
        .to_stream()
        .map(lambda k, v: (f"{k.key}@{k.window.start}", str(v)))
        .to(sink, key_serde=S, value_serde=S)
    )
    return b.build()


def test_a_quiet_input_closes_its_last_window_only_with_the_setting(kafka_cluster, tmp_path):
    bootstrap = kafka_cluster.bootstrap_servers
    source, quiet_out, plain_out = unique("quiet-in"), unique("quiet-out"), unique("plain-out")
    for topic in (source, quiet_out, plain_out):
        kafka_cluster.create_topic(topic, partitions=1)
    apps = []
    for name, sink, extra in (
        ("quiet", quiet_out, {"window.close.quiet.ms": QUIET_MS}),
        ("plain", plain_out, {}),
    ):
        config = {
            "application.id": unique(name),
            "bootstrap.servers": bootstrap,
            "state.dir": str(tmp_path / name),
            "processing.guarantee": "exactly_once_v2",
            "commit.interval.ms": 100,
            **extra,
        }
        app = KafkaStreams(_topology(source, sink), config)
        app.start()
        apps.append(app)
    try:
        for app in apps:
            assert app.wait_until(State.RUNNING, 60)
        # a live input: records stamped with the wall clock, for about 5 s
        stamps = []
        for i in range(50):
            now = int(time.time() * 1000)
            produce(bootstrap, source, [(f"k{i % 3}".encode(), b"v", now)])
            stamps.append((f"k{i % 3}", now))
            time.sleep(0.1)
        stopped_at = time.monotonic()
        last = stamps[-1][1]
        expected = Counter(f"{key}@{ts - ts % WINDOW_MS}" for key, ts in stamps)
        closed_by_records = {w: n for w, n in expected.items() if _start(w) + WINDOW_MS <= last}
        assert 0 < len(closed_by_records) < len(expected)

        quiet = read_all(bootstrap, [quiet_out], until=lambda m: len(m) >= len(expected))
        waited = time.monotonic() - stopped_at
        # the last window ended at most WINDOW_MS after the last record: it closes once the
        # clock passed its end and the input was quiet for QUIET_MS (checked every 0.5 s)
        print(f"\nthe last window's final result came {waited:.1f} s after the input stopped")
        assert _counts(quiet) == dict(expected)

        plain = settle(bootstrap, [plain_out], quiet_s=QUIET_MS / 1000 + 2)
        assert _counts(plain) == closed_by_records
    finally:
        for app in apps:
            app.close(60)


def _start(window: str) -> int:
    return int(window.rsplit("@", 1)[1])


def _counts(msgs: list) -> dict[str, int]:
    windows = [m[3].decode() for m in msgs]
    assert len(windows) == len(set(windows)), f"a window came out twice: {windows}"
    return {m[3].decode(): int(m[4]) for m in msgs}
