"""What the platform observes of its stream applications, read from Kafka itself.

Works for applications running anywhere (the supervisor, a Dagster run, another machine):

- ``consumer_lag(bootstrap, group)``: per partition, end offset minus committed offset of
  the application's consumer group (``application.id``);
- ``end_offsets(bootstrap, topic)``: records written to a topic (closed windows = records on a
  final-results topic);
- ``closed_window_watermark(bootstrap, topic)``: the window end up to which every key's
  windows are final, from the tail of a final-results topic (``window_end`` field): the
  minimum over keys of the latest closed window end;
- ``ensure_topics(bootstrap, {name: partitions})``: create the topics that are missing;
- ``BrokerProbe(bootstrap).check()``: whether the cluster answers (None) or why not.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

import orjson


def _client_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, **extra}


class BrokerProbe:
    """Asks the cluster for its metadata with a short timeout, and for consumer groups'
    committed offsets: the supervisor's stall detection. Keeps its clients between calls.

    ``check()`` returns (and keeps in ``error``) None when a broker answered, else why not;
    ``group_offsets(group)`` gives the group's committed offsets and lag in total, or None
    when the cluster does not answer."""

    def __init__(self, bootstrap: str, timeout: float = 3.0) -> None:
        self.bootstrap = bootstrap
        self.timeout = timeout
        self.error: str | None = None
        self._admin: Any = None
        self._consumer: Any = None

    def _config(self) -> dict[str, Any]:
        import logging

        quiet = logging.getLogger("assets.streams.monitor.librdkafka")
        quiet.propagate = False
        if not quiet.handlers:
            quiet.addHandler(logging.NullHandler())
        return _client_config(self.bootstrap, logger=quiet)

    def _admin_client(self) -> Any:
        from confluent_kafka.admin import AdminClient

        if self._admin is None:
            self._admin = AdminClient(self._config())
        return self._admin

    @staticmethod
    def _describe(exc: BaseException) -> str:
        err = exc.args[0] if exc.args else None
        if err is not None and callable(getattr(err, "name", None)):
            return f"{err.name()}: {err.str()}"
        return f"{type(exc).__name__}: {exc}"

    def check(self) -> str | None:
        """None when a broker answered within the timeout, else the error."""
        try:
            meta = self._admin_client().list_topics(timeout=self.timeout)
            self.error = None if meta.brokers else "the cluster answered without any broker"
        except Exception as exc:  # KafkaException: _TRANSPORT, _TIMED_OUT ...
            self.error = self._describe(exc)
        return self.error

    def group_offsets(self, group: str) -> tuple[int, int] | None:
        """(sum of committed offsets, sum of lag) over every partition ``group`` committed,
        or None when the cluster did not answer."""
        from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition

        try:
            future = self._admin_client().list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group)], request_timeout=self.timeout
            )[group]
            parts = [tp for tp in future.result(self.timeout).topic_partitions if tp.offset >= 0]
            if self._consumer is None:
                self._consumer = Consumer(
                    {**self._config(), "group.id": f"monitor-{uuid.uuid4().hex[:8]}"}
                )
            committed = lag = 0
            for tp in parts:
                _low, high = self._consumer.get_watermark_offsets(
                    TopicPartition(tp.topic, tp.partition), timeout=self.timeout
                )
                committed += tp.offset
                lag += max(0, high - tp.offset)
        except Exception:
            return None
        return committed, lag

    def close(self) -> None:
        """Close the clients."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        self._admin = None


def topic_partitions(bootstrap: str, topic: str, timeout: float = 10.0) -> list[int]:
    """Partition numbers of ``topic`` (empty if it does not exist)."""
    from confluent_kafka.admin import AdminClient

    meta = AdminClient(_client_config(bootstrap)).list_topics(topic=topic, timeout=timeout)
    t = meta.topics.get(topic)
    if t is None or t.error is not None:
        return []
    return sorted(t.partitions)


def end_offsets(bootstrap: str, topic: str, timeout: float = 10.0) -> dict[int, int]:
    """Partition -> high watermark of ``topic``."""
    from confluent_kafka import Consumer, TopicPartition

    parts = topic_partitions(bootstrap, topic, timeout)
    if not parts:
        return {}
    consumer = Consumer(
        _client_config(bootstrap, **{"group.id": f"monitor-{uuid.uuid4().hex[:8]}"})
    )
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1]
            for p in parts
        }
    finally:
        consumer.close()


def consumer_lag(
    bootstrap: str, group: str, topics: list[str] | None = None, timeout: float = 10.0
) -> dict[str, int]:
    """``"topic-partition" -> lag`` of consumer group ``group`` (committed offsets only;
    partitions without a commit count their whole log)."""
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(_client_config(bootstrap))
    future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    committed = {
        (tp.topic, tp.partition): tp.offset for tp in future.result(timeout).topic_partitions
    }
    wanted = set(topics or {t for t, _ in committed})
    consumer = Consumer(
        _client_config(bootstrap, **{"group.id": f"monitor-{uuid.uuid4().hex[:8]}"})
    )
    lag: dict[str, int] = {}
    try:
        for topic in sorted(wanted):
            for p in topic_partitions(bootstrap, topic, timeout):
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=timeout
                )
                offset = committed.get((topic, p), -1)
                lag[f"{topic}-{p}"] = max(0, high - (offset if offset >= 0 else low))
    finally:
        consumer.close()
    return lag


def read_tail(
    bootstrap: str, topic: str, per_partition: int = 500, timeout: float = 10.0
) -> list[tuple[str | None, Any, int]]:
    """The last ``per_partition`` records of each partition: (key, JSON value, timestamp)."""
    from confluent_kafka import OFFSET_END, Consumer, TopicPartition

    ends = end_offsets(bootstrap, topic, timeout)
    consumer = Consumer(
        _client_config(
            bootstrap,
            **{
                "group.id": f"monitor-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            },
        )
    )
    out: list[tuple[str | None, Any, int]] = []
    try:
        assignment = []
        remaining = {}
        for p, end in ends.items():
            if end <= 0:
                continue
            low, _ = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
            start = max(low, end - per_partition)
            if start < end:
                assignment.append(TopicPartition(topic, p, start))
                remaining[p] = end
        if not assignment:
            return out
        consumer.assign(assignment)
        deadline = time.monotonic() + timeout
        while remaining and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=500, timeout=0.5):
                if msg.error() is not None:
                    continue
                p = msg.partition()
                try:
                    value = orjson.loads(msg.value()) if msg.value() is not None else None
                except orjson.JSONDecodeError:
                    value = None
                key = msg.key().decode() if msg.key() is not None else None
                out.append((key, value, msg.timestamp()[1]))
                if msg.offset() + 1 >= remaining.get(p, 0):
                    remaining.pop(p, None)
            # transaction markers take offsets too: stop when the position reaches the end
            for tp in consumer.position([TopicPartition(topic, p) for p in list(remaining)]):
                if tp.offset != OFFSET_END and tp.offset >= remaining.get(tp.partition, 0):
                    remaining.pop(tp.partition, None)
    finally:
        consumer.close()
    return out


def closed_window_watermark(bootstrap: str, topic: str, per_partition: int = 500) -> int | None:
    """Window end (ms) through which every key's windows on final-results ``topic`` are
    closed: the minimum over keys of their latest ``window_end`` (None before any closes)."""
    latest: dict[Any, int] = {}
    for key, value, _ in read_tail(bootstrap, topic, per_partition):
        end = value.get("window_end") if isinstance(value, dict) else None
        if isinstance(end, int) and end > latest.get(key, -1):
            latest[key] = end
    return min(latest.values()) if latest else None


def ensure_topics(
    bootstrap: str, topics: Mapping[str, int], replication_factor: int = 1, timeout: float = 30.0
) -> list[str]:
    """Create the topics of ``topics`` (name -> partitions) that do not exist; return them."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(_client_config(bootstrap))
    existing = set(admin.list_topics(timeout=timeout).topics)
    missing = [name for name in topics if name not in existing]
    if not missing:
        return []
    futures = admin.create_topics(
        [
            NewTopic(n, num_partitions=topics[n], replication_factor=replication_factor)
            for n in missing
        ]
    )
    for _name, future in futures.items():
        try:
            future.result(timeout)
        except Exception as exc:  # created concurrently by someone else: fine
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise
    return missing
