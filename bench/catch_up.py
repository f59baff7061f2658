"""Catch-up of a backlog with event-time alignment on and off.

Four partitions each hold an hour of orders in event-time order (``--per-partition`` each,
every order on time for a stream read in event-time order), written before the application
starts; it rekeys them by region into 5-minute windowed counts with one minute of grace,
under exactly-once, from the earliest offsets. Reported per run: how many orders were
dropped as late and the time from ``start()`` until every order was processed (source and
repartition topic), alignment on (``event.time.alignment.max.drift.ms`` default) and off.

    python -m bench.catch_up [--per-partition 36000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from typing import Any

from confluent_kafka import Producer

from streaming import StreamsBuilder, TimeWindows, serdes
from streaming.app import KafkaStreams, State
from streaming.testing import LocalKafkaCluster

PARTITIONS = 4
SPAN_MS = 3_600_000
REGIONS = ["EU", "NA", "APAC", "LATAM"]
T_START = 1_767_225_600_000  # 2026-01-01 00:00 UTC


def write_backlog(bootstrap: str, topic: str, per_partition: int) -> int:
    """Each partition: ``per_partition`` orders over an hour, in event-time order."""
    rng = random.Random(7)
    step = SPAN_MS // per_partition
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for p in range(PARTITIONS):
        for i in range(per_partition):
            ts = T_START + i * step + rng.randrange(step)
            while True:
                try:
                    producer.produce(topic, rng.choice(REGIONS).encode(), partition=p, timestamp=ts)
                    break
                except BufferError:
                    producer.poll(0.1)
    assert producer.flush(60) == 0
    return PARTITIONS * per_partition


def topology(source: str, sink: str) -> Any:
    builder = StreamsBuilder()
    (
        builder.stream(source, key_serde=serdes.String(), value_serde=serdes.String())
        .select_key(lambda _k, region: region)
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(300_000, 60_000))
        .count(materialized="counts")
        .to_stream()
        .map(lambda wk, n: (f"{wk.key}@{wk.window.start}", n))
        .to(sink, key_serde=serdes.String(), value_serde=serdes.Long())
    )
    return builder.build()


def catch_up(cluster: LocalKafkaCluster, source: str, orders: int, drift: int | None) -> str:
    """Run the application over the backlog once; a line of what it measured."""
    sink = f"bench-catch-up-out-{time.monotonic_ns()}"
    cluster.create_topic(sink, partitions=1)
    config: dict[str, Any] = {
        "application.id": f"bench-catch-up-{time.monotonic_ns()}",
        "bootstrap.servers": cluster.bootstrap_servers,
        "processing.guarantee": "exactly_once_v2",
        "state.dir": tempfile.mkdtemp(),
    }
    if drift is not None:
        config["event.time.alignment.max.drift.ms"] = drift
    app = KafkaStreams(topology(source, sink), config)
    started = time.monotonic()
    cpu = time.process_time()
    app.start()
    try:
        if not app.wait_until(State.RUNNING, 60):
            raise RuntimeError("the application did not reach RUNNING in 60 s")
        while app.metrics()["process-total"] < 2 * orders:
            time.sleep(0.05)
        seconds = time.monotonic() - started
        cpu = time.process_time() - cpu
        late = app.metrics()["late-records-dropped-total"]
    finally:
        app.close(timeout=30)
    mode = "aligned  " if drift is None else "unaligned"
    return (
        f"{mode}  {orders:>9,} orders  {late:>9,} dropped as late ({late / orders:6.1%})  "
        f"caught up in {seconds:5.1f} s ({cpu:5.1f} CPU s, {orders / seconds:>8,.0f} orders/s)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--per-partition", type=int, default=36_000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    with LocalKafkaCluster(nodes=1) as cluster:
        source = "bench-catch-up-orders"
        cluster.create_topic(source, partitions=PARTITIONS)
        orders = write_backlog(cluster.bootstrap_servers, source, args.per_partition)
        for _ in range(args.repeat):
            for drift in (-1, None):
                print(catch_up(cluster, source, orders, drift), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
