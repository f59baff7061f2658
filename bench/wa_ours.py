"""The windowed-aggregation workload in this engine (``KafkaStreams``), run by ``bench.windowed_agg``.

    orders (JSON) -> select_key(region) -> repartition -> 5-minute tumbling sum (RocksDB,
    write-back cache) -> output (key = region + 8-byte window start, value = JSON sum)

Prints ``READY`` right before ``KafkaStreams.start()``; SIGTERM closes it cleanly.
"""

from __future__ import annotations

import argparse
import logging

from bench.broker import serve
from bench.wa_common import GRACE, WINDOW
from streaming import StreamsBuilder, TimeWindows, serdes


def topology(input_topic: str, output_topic: str):
    """The benchmark topology (the README's revenue example with its own topic names)."""
    builder = StreamsBuilder()
    orders = builder.stream(input_topic, key_serde=serdes.String(), value_serde=serdes.Json())
    revenue = (
        orders.select_key(lambda k, v: v["region"])
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(WINDOW, GRACE))
        .aggregate(lambda: 0.0, lambda k, v, agg: agg + v["amount"], materialized="revenue-store")
    )
    revenue.to_stream().to(output_topic)
    return builder.build()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--guarantee", choices=["eos", "alos"], required=True)
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--commit-interval-ms", type=int, required=True)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    config = {
        "application.id": args.group,
        "bootstrap.servers": args.bootstrap,
        "processing.guarantee": "exactly_once_v2" if args.guarantee == "eos" else "at_least_once",
        "commit.interval.ms": args.commit_interval_ms,
        "state.dir": args.state_dir,
        "default.key.serde": "string",
    }
    config.update(item.split("=", 1) for item in args.set)  # experiments: --ours-set k=v
    serve(topology(args.input, args.output), config)


if __name__ == "__main__":
    main()
