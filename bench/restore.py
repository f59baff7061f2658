"""Changelog restore: how fast a wiped instance rebuilds a RocksDB count store.

A count store's changelog (one partition, ``--keys`` distinct keys, String keys and Long
counts as ``count()`` writes them) is written straight to the broker; then a ``KafkaStreams``
instance with an empty ``state.dir`` starts and restores it. Reported per run: records
restored per second (first to last restored batch, from the restore listener) and the time
from ``start()`` to ``RUNNING``. Each round runs with the runtime's restore consumer settings
and with librdkafka's own ``fetch.queue.backoff.ms`` (1000 ms), so the ratio shows what the
default is worth on this machine.

    python -m bench.restore [--keys 500000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import struct
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Producer

from streaming import StreamsBuilder, serdes
from streaming.app import KafkaStreams
from streaming.testing import LocalKafkaCluster

APP_ID = "bench-restore"
STORE = "counts"
INPUT = "bench-restore-input"
CHANGELOG = f"{APP_ID}-{STORE}-changelog"
VARIANTS: dict[str, dict[str, Any]] = {
    "runtime default": {},
    "librdkafka default (1000 ms)": {"restore.consumer.fetch.queue.backoff.ms": 1000},
}


@dataclass
class Timing:
    """What a restore listener saw of one restoration."""

    restored: int = 0
    first_batch: float | None = None
    last_batch: float | None = None
    done: threading.Event = field(default_factory=threading.Event)

    def on_restore_start(self, topic_partition: Any, store_name: str, start: int, end: int) -> None:
        pass

    def on_batch_restored(
        self, topic_partition: Any, store_name: str, batch_end_offset: int, num_restored: int
    ) -> None:
        now = time.perf_counter()
        if self.first_batch is None:
            self.first_batch = now
        self.last_batch = now
        self.restored += num_restored

    def on_restore_end(self, topic_partition: Any, store_name: str, total_restored: int) -> None:
        self.done.set()


def write_changelog(bootstrap: str, keys: int) -> None:
    """``keys`` records of a count store's changelog, as ``count()`` writes them."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "acks": "all"})
    long_ = struct.Struct(">q")
    for i in range(keys):
        while True:
            try:
                producer.produce(CHANGELOG, key=f"key-{i:08d}".encode(), value=long_.pack(i % 97))
                break
            except BufferError:
                producer.poll(0.1)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0, "the changelog was not written completely"


def restore_once(
    bootstrap: str, state_dir: str, settings: dict[str, Any]
) -> tuple[float, float, int]:
    """(records/s, seconds from start() to RUNNING, records restored) of one fresh start."""
    builder = StreamsBuilder()
    builder.stream(
        INPUT, key_serde=serdes.String(), value_serde=serdes.String()
    ).group_by_key().count(materialized=STORE)
    config = {
        "application.id": APP_ID,
        "bootstrap.servers": bootstrap,
        "state.dir": state_dir,
        **settings,
    }
    timing = Timing()
    app = KafkaStreams(builder.build(), config)
    app.set_global_state_restore_listener(timing)
    running = threading.Event()
    app.set_state_listener(lambda new, old: running.set() if str(new).endswith("RUNNING") else None)
    started = time.perf_counter()
    app.start()
    try:
        if not running.wait(300) or not timing.done.wait(1):
            raise RuntimeError("the instance did not restore and reach RUNNING within 300 s")
        to_running = time.perf_counter() - started
    finally:
        app.close()
    assert timing.first_batch is not None and timing.last_batch is not None
    span = max(timing.last_batch - timing.first_batch, 1e-6)
    return timing.restored / span, to_running, timing.restored


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=500_000)
    parser.add_argument("--repeat", type=int, default=2, help="rounds; the best of each is kept")
    args = parser.parse_args(argv)
    best: dict[str, tuple[float, float]] = {}
    with LocalKafkaCluster() as kafka:
        kafka.create_topic(INPUT, partitions=1)
        kafka.create_topic(CHANGELOG, partitions=1, config={"cleanup.policy": "compact"})
        write_changelog(kafka.bootstrap_servers, args.keys)
        for round_no in range(args.repeat):
            for name, settings in VARIANTS.items():
                with tempfile.TemporaryDirectory(prefix="bench-restore-") as state_dir:
                    rate, to_running, restored = restore_once(
                        kafka.bootstrap_servers, state_dir, settings
                    )
                if restored != args.keys:
                    print(f"{name}: restored {restored} records, expected {args.keys}")
                    return 1
                print(
                    f"round {round_no + 1} {name:30s} {rate:>10,.0f} records/s  "
                    f"start to RUNNING {to_running:5.2f} s"
                )
                prev = best.get(name)
                best[name] = (
                    (max(rate, prev[0]), min(to_running, prev[1])) if prev else (rate, to_running)
                )
    print(f"\nchangelog restore of {args.keys:,} records into RocksDB (best of {args.repeat}):")
    for name, (rate, to_running) in best.items():
        print(f"  {name:30s} {rate:>10,.0f} records/s  start to RUNNING {to_running:5.2f} s")
    ours, base = best["runtime default"][0], best["librdkafka default (1000 ms)"][0]
    print(f"  ratio {ours / base:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
