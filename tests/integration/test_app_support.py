"""Helpers shared by the KafkaStreams integration tests (this module holds no tests)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
#: record timestamps of the tests: recent, so broker retention (24 h) never deletes them;
#: a multiple of 10 s so that small tumbling windows start exactly there
T0 = int(time.time() * 1000) // 10_000 * 10_000


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes | None, int | None]],
    *,
    partition_of: Callable[[bytes | None], int] | None = None,
) -> int:
    """Write (key, value, timestamp) records (default partitioner: murmur2, like Java)."""
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    n = 0
    for key, value, ts in records:
        kwargs: dict[str, Any] = {"key": key, "value": value}
        if ts is not None:
            kwargs["timestamp"] = ts
        if partition_of is not None:
            kwargs["partition"] = partition_of(key)
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
        n += 1
    assert producer.flush(30) == 0
    return n


def read_all(
    bootstrap: str,
    topics: list[str],
    *,
    until: Callable[[list[Any]], bool],
    timeout: float = 60.0,
    read_committed: bool = True,
) -> list[Any]:
    """Consume ``topics`` from the beginning until ``until(messages)`` or the timeout.

    Messages are (topic, partition, offset, key, value, headers) tuples."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("reader"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed" if read_committed else "read_uncommitted",
        }
    )
    meta = consumer.list_topics(timeout=10)
    consumer.assign(
        [
            TopicPartition(topic, p, OFFSET_BEGINNING)
            for topic in topics
            for p in sorted(meta.topics[topic].partitions)
        ]
    )
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                if msg.error():
                    if msg.error().code() != KafkaError._PARTITION_EOF:
                        raise RuntimeError(msg.error())
                    continue
                out.append(
                    (
                        msg.topic(),
                        msg.partition(),
                        msg.offset(),
                        msg.key(),
                        msg.value(),
                        msg.headers() or [],
                    )
                )
            if until(out):
                return out
        return out
    finally:
        consumer.close()


def settle(
    bootstrap: str, topics: list[str], *, quiet_s: float = 2.0, timeout: float = 60.0
) -> list[Any]:
    """Read ``topics`` until no new record arrived for ``quiet_s`` seconds."""
    state = {"n": -1, "since": time.monotonic()}

    def quiet(msgs: list[Any]) -> bool:
        if len(msgs) != state["n"]:
            state["n"] = len(msgs)
            state["since"] = time.monotonic()
            return False
        return time.monotonic() - state["since"] >= quiet_s

    return read_all(bootstrap, topics, until=quiet, timeout=timeout)


def last_value_per_key(msgs: list[Any], topic: str) -> dict[bytes, bytes]:
    out = {}
    for t, _p, _o, k, v, _h in msgs:
        if t == topic:
            out[k] = v
    return out


def long_value(raw: bytes) -> int:
    return int.from_bytes(raw, "big", signed=True)


def spawn_app(
    factory: str,
    settings: dict[str, Any],
    *,
    log_path: Path,
) -> subprocess.Popen[bytes]:
    """Start ``python -m streaming run factory --set ...`` as a child process."""
    cmd = [sys.executable, "-m", "streaming", "run", factory, "--quiet", "--log-level", "INFO"]
    for key, value in settings.items():
        cmd += ["--set", f"{key}={value}"]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), str(HERE), env.get("PYTHONPATH")]))
    out = log_path.open("ab")
    return subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
    )


def stop_app(proc: subprocess.Popen[bytes], *, kill: bool = False, timeout: float = 60.0) -> int:
    """SIGKILL (``kill``) or SIGTERM a child app and wait for it."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise


def group_assignment(admin: Any, group: str) -> dict[str, set[tuple[str, int]]]:
    """client.id -> assigned partitions of the members of a consumer group."""
    try:
        desc = admin.describe_consumer_groups([group], request_timeout=10)[group].result(10)
    except Exception:
        return {}
    return {
        m.member_id: {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions}
        for m in desc.members
        if m.assignment is not None
    }


#: OffsetFetch errors of a coordinator that moves or loads (a broker busy or restarting)
_COORDINATOR_MOVING = (
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError._TIMED_OUT,
)


def group_caught_up(bootstrap: str, group: str, topics: list[str]) -> bool:
    """Whether ``group`` committed every record of ``topics``: read ``read_committed`` from its
    committed offsets, each partition is at its end. (A processed-records counter does not
    tell: a task rebuilt after a failure processes its uncommitted records again.) The
    committed offsets are read by a consumer with the group's id that never joins it
    (OffsetFetch), not by the admin client, whose call can crash the process while the group
    has none."""
    settings = {
        "bootstrap.servers": bootstrap,
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "isolation.level": "read_committed",
    }
    offsets = Consumer({**settings, "group.id": group})
    consumer = Consumer({**settings, "group.id": unique("caught-up")})
    try:
        parts = [
            TopicPartition(topic, p)
            for topic in topics
            for p in consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ]
        try:
            committed = offsets.committed(parts, timeout=10)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if err is not None and (err.retriable() or err.code() in _COORDINATOR_MOVING):
                return False  # the group's coordinator is moving or loading: ask again
            raise
        start = [
            TopicPartition(
                tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            )
            for tp in committed
        ]
        consumer.assign(start)
        at_end: set[tuple[str, int]] = set()
        deadline = time.monotonic() + 10
        while len(at_end) < len(start) and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=100, timeout=0.2):
                err = msg.error()
                if err is None:
                    return False  # a committed record past the group's offset
                if err.code() == KafkaError._PARTITION_EOF:
                    at_end.add((msg.topic(), msg.partition()))
        return len(at_end) == len(start)
    finally:
        consumer.close()
        offsets.close()


class OpenTransaction:
    """Sees an open transaction with records in ``topic``'s log: the end a read_committed
    consumer is given (the last stable offset) is below the log's end."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.consumers = [
            Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": unique(f"ends-{isolation}"),
                    "isolation.level": isolation,
                }
            )
            for isolation in ("read_committed", "read_uncommitted")
        ]
        meta = self.consumers[0].list_topics(topic, timeout=10)
        self.partitions = sorted(meta.topics[topic].partitions)

    def wait(self, timeout: float) -> bool:
        """Until a partition's last stable offset is below its end; False after ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for partition in self.partitions:
                tp = TopicPartition(self.topic, partition)
                stable, end = (
                    c.get_watermark_offsets(tp, timeout=5, cached=False)[1] for c in self.consumers
                )
                if stable < end:
                    return True
            time.sleep(0.005)
        return False

    def close(self) -> None:
        for consumer in self.consumers:
            consumer.close()


def wait_for(predicate: Callable[[], bool], timeout: float, what: str, step: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def count_and_copy(config: dict[str, Any]) -> Any:
    """The topology of the end-to-end tests: copy the input, and count per key.

    Topic names come from the ``app.test.input`` / ``app.test.copy`` / ``app.test.counts``
    settings (``app.``: settings of the application, which KafkaStreams does not check)."""
    from streaming import StreamsBuilder, serdes

    builder = StreamsBuilder()
    stream = builder.stream(
        config["app.test.input"], key_serde=serdes.String(), value_serde=serdes.String()
    )
    stream.to(config["app.test.copy"])
    stream.group_by_key().count(materialized="counts").to_stream().to(
        config["app.test.counts"], value_serde=serdes.Long()
    )
    return builder
