"""Engine hot-path benchmark, no broker: JSON orders -> rekey -> 5-minute windowed sum.

Drives a ``StreamTask`` directly with batches of serialised records (as the Kafka runtime
does), committing every ``commit_every`` records, and prints records/second per store
kind: the engine's ceiling without I/O. ``bench.windowed_agg`` measures the same topology on a
broker beside Quix Streams, Java Kafka Streams and a raw confluent-kafka loop.

    python -m bench.engine [--records N]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

import orjson

from examples.revenue import revenue_topology
from streaming.runtime import ConsumerRecord, StreamTask
from streaming.state import ThreadCache

REGIONS = ["EU", "US", "APAC", "LATAM", "MEA"]


def make_records(n: int, seed: int = 7) -> list[ConsumerRecord]:
    rng = random.Random(seed)
    out = []
    ts = 1_700_000_000_000
    for i in range(n):
        ts += rng.randint(0, 40)
        value = {
            "id": f"o{i}",
            "region": rng.choice(REGIONS),
            "amount": round(rng.random() * 100, 2),
        }
        out.append(ConsumerRecord("orders", 0, i, ts, f"o{i}".encode(), orjson.dumps(value)))
    return out


def run(records: list[ConsumerRecord], batch: int, commit_every: int) -> float:
    topology = revenue_topology()
    with tempfile.TemporaryDirectory() as state_dir:
        produced = []
        # Each sub-topology runs in its own task; the repartition topic connects them.
        tasks = []
        for sub_id, nodes in enumerate(topology.subtopologies()):
            tasks.append(
                StreamTask(
                    f"{sub_id}_0",
                    topology,
                    nodes,
                    application_id="bench",
                    config={},
                    send=lambda topic, k, v, ts, headers, *rest: produced.append((topic, k, v, ts)),
                    clock=lambda: int(time.time() * 1000),
                    state_dir=Path(state_dir),
                    cache=ThreadCache(10 * 1024 * 1024),
                )
            )
        for task in tasks:
            task.initialize()
        first, second = tasks
        start = time.perf_counter()
        since_commit = 0
        for i in range(0, len(records), batch):
            first.add_records(records[i : i + batch])
            first.process(len(records))
            repart = [
                ConsumerRecord(t, 0, j, ts, k, v)
                for j, (t, k, v, ts) in enumerate(produced)
                if t.endswith("-repartition")
            ]
            produced.clear()
            second.add_records(repart)
            second.process(len(repart))
            since_commit += batch
            if since_commit >= commit_every:
                first.commit()
                second.commit()
                produced.clear()
                since_commit = 0
        first.commit()
        second.commit()
        elapsed = time.perf_counter() - start
        for task in tasks:
            task.close()
    return len(records) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--commit-every", type=int, default=10_000)
    args = parser.parse_args()
    records = make_records(args.records)
    rate = run(records, args.batch, args.commit_every)
    print(
        f"windowed-agg engine-only (rocksdb, cached): ours {rate:,.0f} rec/s over {args.records:,} records"
    )


if __name__ == "__main__":
    main()
