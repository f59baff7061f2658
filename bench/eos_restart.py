"""Exactly-once restart after SIGKILL: transactional stores vs. wipe and restore.

An exactly-once count application (``python -m streaming run``, one input partition) counts
``--keys`` distinct keys (5,000,000 by default, one record each) into a RocksDB store. Once
all of it is committed, input keeps arriving (``--rate`` records/s over random keys) and the
instance is killed with SIGKILL mid-stream, twice:

1. restart on the same ``state.dir``: the transactional store resumes from the changelog
   offsets it committed with its content, and restores only the changelog records after
   them;
2. kill again, delete the offsets stored in the store (what a store nothing vouches for
   looks like, so it clears itself: the wipe-and-restore path exactly-once took after every
   crash before stores were transactional), restart: the whole changelog is restored.

Reported for each: seconds from the process start to ``RUNNING`` and changelog records
restored. Then the input stops, the last instance commits everything and closes, and the
count of every key fed during the kills, and of a sample of the others, is checked against
the input.

    python -m bench.eos_restart [--keys 5000000] [--rate 10000]
"""

from __future__ import annotations

import argparse
import random
import re
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from bench.broker import REPO
from streaming.state import InMemoryStateStoreContext
from streaming.state.rocksdb_key_value import RocksDBKeyValueStore
from streaming.testing import LocalKafkaCluster

APP_ID = "bench-eos-restart"
STORE = "counts"
INPUT = "bench-eos-restart-input"
OUTPUT = "bench-eos-restart-counts"
RUNNING = "state REBALANCING -> RUNNING"
RESTORED = re.compile(r"Restored store counts from \S+: (\d+) records")
_LONG = struct.Struct(">q")


def topology(config: dict[str, Any]) -> Any:
    """Count the input per key into the ``counts`` store; the counts go to the output."""
    from streaming import StreamsBuilder, serdes

    builder = StreamsBuilder()
    builder.stream(
        INPUT, key_serde=serdes.String(), value_serde=serdes.String()
    ).group_by_key().count(materialized=STORE).to_stream().to(OUTPUT, value_serde=serdes.Long())
    return builder


def key(i: int) -> bytes:
    return b"key-%08d" % i


def produce_keys(bootstrap: str, keys: int) -> None:
    """One record per key."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1 << 20})
    for i in range(keys):
        while True:
            try:
                producer.produce(INPUT, key=key(i), value=b"1")
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120) != 0:
        raise RuntimeError("the input was not written completely")


class Feeder(threading.Thread):
    """Writes ``rate`` records a second over random keys until stopped; counts what it fed."""

    def __init__(self, bootstrap: str, keys: int, rate: int) -> None:
        super().__init__(name="feeder", daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
        self.keys = keys
        self.rate = rate
        self.fed: Counter[int] = Counter()
        self.stop_event = threading.Event()
        self.rng = random.Random(20261130)

    def run(self) -> None:
        step = 0.05
        per_step = max(1, int(self.rate * step))
        while not self.stop_event.is_set():
            began = time.monotonic()
            for _ in range(per_step):
                i = self.rng.randrange(self.keys)
                while True:
                    try:
                        self.producer.produce(INPUT, key=key(i), value=b"1")
                        break
                    except BufferError:
                        self.producer.poll(0.05)
                self.fed[i] += 1
            self.producer.poll(0)
            self.stop_event.wait(max(0.0, step - (time.monotonic() - began)))
        if self.producer.flush(60) != 0:
            raise RuntimeError("the fed input was not written completely")

    def stop(self) -> None:
        self.stop_event.set()
        self.join(90)


class Instance:
    """The application as a child process, its log in ``log_path``."""

    def __init__(self, bootstrap: str, state_dir: Path, log_path: Path) -> None:
        self.log_path = log_path
        self.settings = {
            "application.id": APP_ID,
            "bootstrap.servers": bootstrap,
            "processing.guarantee": "exactly_once_v2",
            "state.dir": str(state_dir),
            "consumer.session.timeout.ms": 10000,
        }
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""

    def start(self) -> tuple[float, int]:
        """Start and wait for RUNNING: (seconds from the start, changelog records restored)."""
        before = self.log()
        cmd = [sys.executable, "-m", "streaming", "run", "bench.eos_restart:topology"]
        cmd += ["--quiet", "--log-level", "INFO"]
        for k, v in self.settings.items():
            cmd += ["--set", f"{k}={v}"]
        started = time.perf_counter()
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen(
                cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.runs += 1
        deadline = time.monotonic() + 900
        while self.log().count(RUNNING) < self.runs:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the instance exited:\n{self.log()[-3000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError("the instance did not reach RUNNING within 900 s")
            time.sleep(0.01)
        to_running = time.perf_counter() - started
        restored = sum(int(n) for n in RESTORED.findall(self.log()[len(before) :]))
        return to_running, restored

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(120)


class Progress:
    """The group's committed offset of the input, read with a consumer of the group that
    never joins it (confluent-kafka 2.16's admin ``list_consumer_group_offsets`` can crash
    the process while the group has no offsets yet)."""

    def __init__(self, bootstrap: str) -> None:
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": APP_ID, "enable.auto.commit": False}
        )
        self.tp = TopicPartition(INPUT, 0)

    def committed(self) -> int:
        deadline = time.monotonic() + 30
        while True:
            try:
                (tp,) = self.consumer.committed([self.tp], timeout=10)
                return max(tp.offset, 0)
            except KafkaException:  # e.g. the group coordinator still loading
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def end(self) -> int:
        return self.consumer.get_watermark_offsets(self.tp, timeout=10, cached=False)[1]

    def wait_all(self, timeout: float, what: str) -> float:
        """Wait until the group committed all of the input written so far; seconds waited."""
        began = time.monotonic()
        end = self.end()
        while self.committed() < end:
            if time.monotonic() - began > timeout:
                raise RuntimeError(f"{what}: not committed within {timeout:.0f} s")
            time.sleep(0.5)
        return time.monotonic() - began

    def wait_more(self, records: int, timeout: float = 120) -> None:
        """Wait until the group committed ``records`` more input records than it had."""
        base = self.committed()
        deadline = time.monotonic() + timeout
        while self.committed() < base + records:
            if time.monotonic() > deadline:
                raise RuntimeError("the instance made no progress")
            time.sleep(0.2)

    def close(self) -> None:
        self.consumer.close()


def forget_offsets(store_dir: Path) -> None:
    """Delete the offsets stored in the store (opened outside a transaction, it drops them)."""
    store = RocksDBKeyValueStore(STORE)
    store.init(InMemoryStateStoreContext(state_dir=store_dir.parent), store)
    store.close()


def check_counts(store_dir: Path, keys: int, fed: Counter[int], sample: int = 20_000) -> int:
    """Every fed key's count and a sample of the others' against the input; mismatches."""
    store = RocksDBKeyValueStore(STORE)
    context = InMemoryStateStoreContext(state_dir=store_dir.parent, transactional_state=True)
    store.init(context, store)
    try:
        rng = random.Random(7)
        checked = set(fed) | {rng.randrange(keys) for _ in range(sample)}
        wrong = 0
        for i in checked:
            raw = store.get(key(i))
            count = None if raw is None else _LONG.unpack(raw[8:16])[0]  # timestamped value
            wrong += count != 1 + fed.get(i, 0)
        return wrong
    finally:
        store.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=5_000_000)
    parser.add_argument("--rate", type=int, default=10_000, help="input records/s while killing")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-eos-restart-") as tmp:
        work = Path(tmp)
        state_dir = work / "state"
        store_dir = state_dir / APP_ID / "0_0" / STORE
        with LocalKafkaCluster() as kafka:
            bootstrap = kafka.bootstrap_servers
            kafka.create_topic(INPUT, partitions=1)
            kafka.create_topic(OUTPUT, partitions=1)
            began = time.monotonic()
            produce_keys(bootstrap, args.keys)
            print(f"input: {args.keys:,} keys written in {time.monotonic() - began:.1f} s")
            progress = Progress(bootstrap)
            instance = Instance(bootstrap, state_dir, work / "app.log")
            instance.start()
            built = progress.wait_all(3600, "building the state")
            print(f"state: {args.keys:,} keys counted and committed in {built:.1f} s")
            feeder = Feeder(bootstrap, args.keys, args.rate)
            feeder.start()
            results = {}
            try:
                progress.wait_more(args.rate)
                instance.kill()
                results["transactional stores"] = instance.start()
                progress.wait_more(args.rate)
                instance.kill()
                forget_offsets(store_dir)
                results["wipe and restore"] = instance.start()
                progress.wait_more(args.rate)
            finally:
                feeder.stop()
            progress.wait_all(900, "the fed input")
            code = instance.stop()
            progress.close()
        wrong = check_counts(store_dir, args.keys, feeder.fed)
    fed = sum(feeder.fed.values())
    print(
        f"\nexactly-once count of {args.keys:,} keys, SIGKILL mid-stream "
        f"({fed:,} records fed at {args.rate:,}/s during the kills), restart on the same state:"
    )
    for name, (to_running, restored) in results.items():
        print(
            f"  {name:22s} start to RUNNING {to_running:7.2f} s   restored {restored:>10,} records"
        )
    print(f"  counts checked: {len(feeder.fed) + 20_000:,} keys, {wrong} wrong; exit code {code}")
    return 1 if wrong or code else 0


if __name__ == "__main__":
    raise SystemExit(main())
