"""The windowed-aggregation workload in Quix Streams (run by ``bench.windowed_agg``).

Runs in the separate ``.venv-quix`` environment: quixstreams 3.28 pins confluent-kafka < 2.13
and pydantic < 2.14, which do not install beside this project's pins. It imports nothing
from ``streaming``.

    orders (JSON) -> group_by region (repartition) -> 5-minute tumbling sum (RocksDB) -> output

Output: key = region, value = {"start", "end", "value"}, one record per update (``current()``).
Prints ``READY`` right before ``Application.run()``; SIGTERM stops it cleanly.
"""

from __future__ import annotations

import argparse
import logging

from quixstreams import Application

from bench.wa_common import GRACE, WINDOW


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--guarantee", choices=["eos", "alos"], required=True)
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--commit-interval-ms", type=int, required=True)
    args = parser.parse_args()

    app = Application(
        broker_address=args.bootstrap,
        consumer_group=args.group,
        auto_offset_reset="earliest",
        commit_interval=args.commit_interval_ms / 1000.0,
        processing_guarantee="exactly-once" if args.guarantee == "eos" else "at-least-once",
        state_dir=args.state_dir,
        loglevel=logging.WARNING,
    )
    orders = app.topic(args.input, key_deserializer="str", value_deserializer="json")
    output = app.topic(args.output, key_serializer="str", value_serializer="json")
    sdf = app.dataframe(orders)
    sdf = sdf.group_by("region")
    sdf = sdf.apply(lambda order: order["amount"])
    sdf = sdf.tumbling_window(WINDOW, grace_ms=GRACE).sum().current()
    sdf.to_topic(output)
    print("READY", flush=True)
    app.run()


if __name__ == "__main__":
    main()
