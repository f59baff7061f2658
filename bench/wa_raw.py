"""The windowed-aggregation workload as a hand-written confluent-kafka loop (the ceiling).

Run by ``bench.windowed_agg``; imports nothing from ``streaming``. One consumer reads the
input and the repartition topic, one producer (transactional under exactly-once) writes the
repartition topic, the changelog and the output:

- input record: parse the JSON, produce it keyed by region to ``<group>-repartition``;
- repartition record: 5-minute window of its timestamp, drop it if the window closed
  (end + grace <= stream time), add the amount to a write-back dict;
- every commit interval: write the dirty windows to RocksDB (rocksdict), the compacted
  changelog and the output (key = region + 8-byte window start, value = JSON sum), then
  commit the offsets (in the transaction under exactly-once).

The consumer fetches again 10 ms after its queue of prefetched records fills
(``fetch.queue.backoff.ms``, librdkafka's default 1 s), as this engine's stream threads do:
with the default the loop waited for input most of the time (56,000 rec/s at 1,000,000
records using a fifth of a core; 168,000 rec/s with it).

Prints ``READY`` right before it creates its topics and subscribes; SIGTERM stops it.
"""

from __future__ import annotations

import argparse
import signal
import struct
import time
from typing import Any

import orjson
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from rocksdict import Rdict

from bench.wa_common import GRACE_MS, WINDOW_MS

_LONG = struct.Struct(">q")


def _create_topics(bootstrap: str, topics: list[NewTopic]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics(topics, operation_timeout=30).values():
        future.result(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--guarantee", choices=["eos", "alos"], required=True)
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--commit-interval-ms", type=int, required=True)
    parser.add_argument("--partitions", type=int, default=1)
    args = parser.parse_args()
    eos = args.guarantee == "eos"
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))

    repartition = f"{args.group}-repartition"
    changelog = f"{args.group}-store-changelog"
    print("READY", flush=True)
    _create_topics(
        args.bootstrap,
        [
            NewTopic(repartition, num_partitions=args.partitions, replication_factor=1),
            NewTopic(
                changelog,
                num_partitions=args.partitions,
                replication_factor=1,
                config={"cleanup.policy": "compact"},
            ),
        ],
    )
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed" if eos else "read_uncommitted",
            "fetch.queue.backoff.ms": 10,
        }
    )
    producer_conf = {
        "bootstrap.servers": args.bootstrap,
        "partitioner": "murmur2_random",
        "linger.ms": 5,
    }
    if eos:
        producer_conf["transactional.id"] = f"{args.group}-tx"
    producer = Producer(producer_conf)
    if eos:
        producer.init_transactions(30)
        producer.begin_transaction()
    store = Rdict(f"{args.state_dir}/store")

    input_topic = args.input
    output = args.output
    interval_s = args.commit_interval_ms / 1000.0
    dirty: dict[tuple[int, bytes], list] = {}  # (partition, key+start) -> [sum, timestamp]
    stream_time: dict[int, int] = {}
    offsets: dict[tuple[str, int], int] = {}
    loads = orjson.loads
    produce = producer.produce
    pack = _LONG.pack

    def commit() -> None:
        if not offsets and not dirty:
            return
        for (partition, wkey), (total, ts) in dirty.items():
            raw = orjson.dumps(total)
            store[wkey] = raw
            produce(changelog, raw, wkey, partition=partition, timestamp=ts)
            produce(output, raw, wkey, timestamp=ts)
        dirty.clear()
        tps = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
        if eos:
            producer.send_offsets_to_transaction(tps, consumer.consumer_group_metadata())
            producer.commit_transaction()
            producer.begin_transaction()
        else:
            producer.flush()
            if tps:
                consumer.commit(offsets=tps, asynchronous=False)
        offsets.clear()

    consumer.subscribe([input_topic, repartition])
    last_commit = time.monotonic()
    while not stop:
        # untyped: the loop does only the workload's own work, no None checks per field
        msgs: list[Any] = consumer.consume(num_messages=1000, timeout=0.1)
        for msg in msgs:
            if msg.error() is not None:
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(msg.error())
                continue
            topic = msg.topic()
            partition = msg.partition()
            ts = msg.timestamp()[1]
            value = msg.value()
            if topic == input_topic:
                region = loads(value)["region"].encode()
                while True:
                    try:
                        produce(repartition, value, region, timestamp=ts)
                        break
                    except BufferError:
                        producer.poll(0.05)
            else:
                observed = stream_time.get(partition, -1)
                if ts > observed:
                    stream_time[partition] = observed = ts
                start = ts - ts % WINDOW_MS
                if start + WINDOW_MS + GRACE_MS > observed:
                    wkey = msg.key() + pack(start)
                    slot = dirty.get((partition, wkey))
                    if slot is None:
                        old = store.get(wkey)
                        slot = dirty[(partition, wkey)] = [0.0 if old is None else loads(old), ts]
                    slot[0] += loads(value)["amount"]
                    if ts > slot[1]:
                        slot[1] = ts
            offsets[(topic, partition)] = msg.offset() + 1
        producer.poll(0)
        now = time.monotonic()
        if now - last_commit >= interval_s:
            commit()
            last_commit = now
    commit()
    if eos:
        producer.abort_transaction()
    producer.flush()
    consumer.close()
    store.close()


if __name__ == "__main__":
    main()
