"""The windowed-aggregation workload in Spark Structured Streaming (run by ``bench.windowed_agg``).

    orders (Kafka source, JSON) -> watermark (record timestamp, the others' grace) ->
    group by (5-minute tumbling window, region) -> sum(amount) (RocksDB state store) ->
    update output mode -> Kafka sink (key = region + 8-byte window start, value = JSON sum)

The same output format as ``bench.wa_ours``, so ``windowed_agg.final_sums`` reads it as it
reads ours. Only built-in SQL functions: no Python worker runs, the work is all in the JVM.

``local[N]`` with N = ``--partitions`` (the input's partition count), as many shuffle
partitions (stateful tasks), a checkpoint directory under ``--state-dir``. At-least-once
only: Spark's Kafka sink is not transactional (a micro-batch replayed after a failure writes
its output again), so ``--guarantee eos`` is refused.

Spark commits the input to its checkpoint (``offsets/N`` then ``commits/N`` once the batch's
output is written), not to a consumer group: the harness watches the checkpoint, see
``bench.windowed_agg.CheckpointMonitor``.

Prints ``STARTUP <seconds>`` (Python start to the query started: JVM, SparkSession, the
query's analysis) and then ``READY``; SIGTERM stops the query and the session.
"""

from __future__ import annotations

import time

T0 = time.monotonic()  # before pyspark's import and the JVM's launch

import argparse  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from bench.wa_common import GRACE_MS, WINDOW_MS  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SPARK_JARS = REPO / ".jars" / "spark"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def kafka_jars() -> list[str]:
    """Spark's Kafka source and sink (the spark-sql-kafka jars ``make setup`` copies)."""
    folder = Path(os.environ.get("SPARK_KAFKA_JARS") or SPARK_JARS)
    jars = sorted(str(p) for p in folder.glob("*.jar")) if folder.is_dir() else []
    if not jars:
        raise SystemExit(f"Spark's Kafka jars are missing from {folder}: run `make setup`")
    return jars


def session(partitions: int) -> Any:
    from pyspark.sql import SparkSession

    conf = {
        "spark.master": f"local[{partitions}]",
        "spark.app.name": "bench-windowed-agg",
        "spark.jars": ",".join(kafka_jars()),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": "1g",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(partitions),
        "spark.default.parallelism": str(partitions),
        # no AQE in a stateful query (Spark disables it there anyway)
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        "spark.driver.extraJavaOptions": "-Dio.netty.tryReflectionSetAccessible=true",
    }
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def start_query(
    spark: Any,
    *,
    bootstrap: str,
    input_topic: str,
    output_topic: str,
    checkpoint: Path,
    max_offsets: int | None,
) -> Any:
    """Start the windowed sum; returns the ``StreamingQuery``."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, StringType, StructField, StructType

    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", input_topic)
        .option("startingOffsets", "earliest")
    )
    if max_offsets:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets))
    schema = StructType([StructField("region", StringType()), StructField("amount", DoubleType())])
    orders = reader.load().select(
        F.from_json(F.col("value").cast("string"), schema).alias("order"),
        F.col("timestamp"),  # the record's timestamp: the event time of every engine
    )
    sums = (
        orders.withWatermark("timestamp", f"{GRACE_MS} milliseconds")
        .groupBy(F.window("timestamp", f"{WINDOW_MS} milliseconds"), F.col("order.region"))
        .agg(F.sum("order.amount").alias("total"))
    )
    start_ms = F.unix_millis(F.col("window.start"))
    out = sums.select(
        # region bytes + 8-byte big-endian window start (non-negative: 16 hex digits)
        F.concat(
            F.encode(F.col("region"), "UTF-8"), F.unhex(F.lpad(F.hex(start_ms), 16, "0"))
        ).alias("key"),
        F.col("total").cast("string").alias("value"),  # a JSON number (Java's toString)
    )
    return (
        out.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", output_topic)
        .option("checkpointLocation", str(checkpoint))
        .outputMode("update")
        .trigger(processingTime="0 seconds")
        .queryName("windowed_agg")
        .start()
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)  # unused: Spark commits to its checkpoint
    parser.add_argument("--guarantee", choices=["eos", "alos"], required=True)
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--commit-interval-ms", type=int, required=True)  # no such setting
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--max-offsets", type=int, default=0, help="maxOffsetsPerTrigger")
    args = parser.parse_args()
    if args.guarantee != "alos":
        raise SystemExit("Spark's Kafka sink is not transactional: at-least-once (alos) only")

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    spark = session(args.partitions)
    query = start_query(
        spark,
        bootstrap=args.bootstrap,
        input_topic=args.input,
        output_topic=args.output,
        checkpoint=Path(args.state_dir) / "checkpoint",
        max_offsets=args.max_offsets or None,
    )
    print(f"STARTUP {time.monotonic() - T0:.3f}", flush=True)
    print("READY", flush=True)
    try:
        last_batch = -1
        while not stop.is_set() and query.isActive:
            stop.wait(0.5)
            # also once stopped: a run whose one micro-batch ended just before the stop
            # still logs that batch's progress
            last_batch = log_progress(query, last_batch)
        if not query.isActive and query.exception() is not None:
            print(f"query failed: {query.exception()}", file=sys.stderr, flush=True)
            sys.exit(1)
    finally:
        try:
            query.stop()
            spark.stop()
        except Exception as exc:  # the JVM got the group's SIGTERM too
            print(f"stopping Spark: {str(exc).splitlines()[0]}", file=sys.stderr, flush=True)


def log_progress(query: Any, last_batch: int) -> int:
    """Log the micro-batches after ``last_batch`` (the log's record of each); the last one
    logged. Quiet when the JVM is gone (it gets the process group's SIGTERM too)."""
    try:
        progresses = query.recentProgress
    except Exception:
        return last_batch
    for progress in progresses:
        if progress["batchId"] > last_batch:
            last_batch = progress["batchId"]
            print(
                f"batch {last_batch}: {progress['numInputRows']} rows, "
                f"durationMs {progress['durationMs']}",
                file=sys.stderr,
                flush=True,
            )
    return last_batch


if __name__ == "__main__":
    main()
