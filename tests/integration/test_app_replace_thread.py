"""A processing failure with the REPLACE_THREAD response under exactly-once: the failed
thread's transaction is aborted, its tasks are rebuilt from the changelog by the new thread,
and the output still holds every record exactly once."""

from __future__ import annotations

import threading
from collections import Counter

from test_app_support import T0, last_value_per_key, long_value, produce, read_all, unique

from streaming import StreamsBuilder, serdes
from streaming.app import KafkaStreams, State
from streaming.runtime.errors import StreamThreadExceptionResponse

N = 500
KEYS = 5


class FailOnce:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.failed = False

    def __call__(self, value: str) -> str:
        with self.lock:
            if value == "250" and not self.failed:
                self.failed = True
                raise RuntimeError("transient failure")
        return value


def test_replace_thread_keeps_exactly_once(kafka_cluster, tmp_path):
    bootstrap = kafka_cluster.bootstrap_servers
    src, copy, counts = unique("in"), unique("copy"), unique("counts")
    for topic in (src, copy, counts):
        kafka_cluster.create_topic(topic, partitions=1)
    produce(bootstrap, src, ((f"k{i % KEYS}".encode(), str(i).encode(), T0 + i) for i in range(N)))
    fail_once = FailOnce()
    builder = StreamsBuilder()
    stream = builder.stream(src, key_serde=serdes.String(), value_serde=serdes.String())
    stream.group_by_key().count(materialized="counts").to_stream().to(
        counts, value_serde=serdes.Long()
    )
    stream.map_values(fail_once).to(copy, value_serde=serdes.String())
    app = KafkaStreams(
        builder.build(),
        {
            "application.id": unique("replace"),
            "bootstrap.servers": bootstrap,
            "processing.guarantee": "exactly_once_v2",
            "commit.interval.ms": 50,
            "state.dir": str(tmp_path),
            "statestore.cache.max.bytes": 0,
        },
    )
    seen = []

    def handler(exc):
        seen.append(exc)
        return StreamThreadExceptionResponse.REPLACE_THREAD

    app.set_uncaught_exception_handler(handler)
    app.start()
    try:
        expected = {f"k{i}": N // KEYS for i in range(KEYS)}

        def done(msgs):
            last = last_value_per_key(msgs, counts)
            return (
                sum(1 for m in msgs if m[0] == copy) >= N
                and {k.decode(): long_value(v) for k, v in last.items()} == expected
            )

        msgs = read_all(bootstrap, [copy, counts], until=done, timeout=90)
        assert len(seen) == 1 and "transient failure" in str(seen[0])
        assert app.wait_until(State.RUNNING, 30)
        assert [t.name for t in app.threads] == [f"{app.config.application_id}-StreamThread-2"]
        copies = Counter(int(m[4]) for m in msgs if m[0] == copy)
        assert sorted(copies) == list(range(N)) and max(copies.values()) == 1
        series: dict[bytes, list[int]] = {}
        for t, _p, _o, k, v, _h in msgs:
            if t == counts:
                series.setdefault(k, []).append(long_value(v))
        # cache off: one update per record, each count exactly once, in order
        assert all(values == list(range(1, N // KEYS + 1)) for values in series.values())
    finally:
        assert app.close(60)
