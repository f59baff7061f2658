"""What the platform observes of its stream applications, read from Kafka itself.

Works for applications running anywhere (the supervisor, a Dagster run, another machine):

- ``consumer_lag(kafka, group)``: per partition, end offset minus committed offset of
  the application's consumer group (``application.id``);
- ``end_offsets(kafka, topic)``: records written to a topic (closed windows = records on a
  final-results topic);
- ``closed_window_watermark(kafka, topic)``: the window end up to which every key's
  windows are final, from the tail of a final-results topic (``window_end`` field): the
  minimum over keys of the latest closed window end;
- ``ensure_topics(kafka, {name: partitions})``: create the topics that are missing;
- ``BrokerProbe(kafka).check()``: whether the cluster answers (None) or why not.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import orjson

from pipelines.connection import Kafka, KafkaConnection

T = TypeVar("T")

#: the supervisor's health fields (pipelines.streams.supervisor.AppHealth), copied when set
HEALTH_FIELDS = (
    "health",
    "stalled_since",
    "stalled_for_s",
    "stall_reason",
    "restarts",
    "last_error",
    "last_error_at",
    "last_restart_at",
    "last_stall_s",
)


def _client_config(kafka: Kafka, **extra: Any) -> dict[str, Any]:
    return KafkaConnection.of(kafka).client_config(**extra)


def _quiet_logger() -> Any:
    import logging

    quiet = logging.getLogger("pipelines.streams.monitor.librdkafka")
    quiet.propagate = False
    if not quiet.handlers:
        quiet.addHandler(logging.NullHandler())
    return quiet


def _committed(consumer: Any, topics: list[str], timeout: float) -> dict[tuple[str, int], int]:
    """Committed offset (-1: none) per partition of ``topics`` for ``consumer``'s group.id.

    Through ``Consumer.committed`` (an OffsetFetch of a consumer that never joins the group),
    not the AdminClient's ``list_consumer_group_offsets``: that one can abort the process
    (librdkafka ``rd_kafka_enq_once_del_source_return`` assertion) when a request times out
    while a broker restarts."""
    from confluent_kafka import TopicPartition

    parts = []
    for topic in topics:
        meta = consumer.list_topics(topic=topic, timeout=timeout).topics.get(topic)
        if meta is not None and meta.error is None:
            parts += [TopicPartition(topic, p) for p in sorted(meta.partitions)]
    if not parts:
        return {}
    return {
        (tp.topic, tp.partition): tp.offset if tp.offset >= 0 else -1
        for tp in _retrying(lambda left: consumer.committed(parts, timeout=left), timeout)
    }


#: errors of an offsets lookup that go away once metadata, leaders and group coordinators
#: are known again (what a fresh client meets right after the brokers restarted)
TRANSIENT_LOOKUP_ERRORS = (
    "_UNKNOWN_PARTITION",
    "_UNKNOWN_TOPIC",
    "_TRANSPORT",
    "_TIMED_OUT",
    "LEADER_NOT_AVAILABLE",
    "NOT_LEADER_FOR_PARTITION",
    "UNKNOWN_TOPIC_OR_PART",
    "NOT_COORDINATOR",
    "COORDINATOR_NOT_AVAILABLE",
    "COORDINATOR_LOAD_IN_PROGRESS",
)


def _retrying(lookup: Callable[[float], T], timeout: float) -> T:
    """``lookup(remaining seconds)``, called again while it fails with one of the
    ``TRANSIENT_LOOKUP_ERRORS`` and ``timeout`` is not spent."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout
    while True:
        try:
            return lookup(max(deadline - time.monotonic(), 0.1))
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            name = getattr(error, "name", lambda: None)()
            if name not in TRANSIENT_LOOKUP_ERRORS or time.monotonic() + 0.2 > deadline:
                raise
            time.sleep(0.2)


def _watermarks(consumer: Any, tp: Any, timeout: float) -> tuple[int, int]:
    """(low, high) watermark of ``tp`` (``_retrying``)."""
    return _retrying(lambda left: consumer.get_watermark_offsets(tp, timeout=left), timeout)


class BrokerProbe:
    """Asks the cluster for its metadata with a short timeout, and for an application's
    committed offsets: the supervisor's stall detection. Keeps its clients between calls
    (plain consumers that never join a group; no AdminClient, see ``_committed``).

    ``check()`` returns (and keeps in ``error``) None when a broker answered, else why not;
    ``group_offsets(group, topics)`` gives the group's committed offsets and lag in total
    over ``topics``, or None when the cluster does not answer."""

    def __init__(self, kafka: Kafka, timeout: float = 3.0) -> None:
        self.kafka = kafka
        self.timeout = timeout
        self.error: str | None = None
        self._consumers: dict[str, Any] = {}

    def _consumer(self, group: str | None = None) -> Any:
        from confluent_kafka import Consumer

        key = group or ""
        if key not in self._consumers:
            self._consumers[key] = Consumer(
                _client_config(
                    self.kafka,
                    logger=_quiet_logger(),
                    **{
                        "group.id": group or f"monitor-{uuid.uuid4().hex[:8]}",
                        "enable.auto.commit": False,
                    },
                )
            )
        return self._consumers[key]

    @staticmethod
    def _describe(exc: BaseException) -> str:
        err = exc.args[0] if exc.args else None
        if err is not None and callable(getattr(err, "name", None)):
            return f"{err.name()}: {err.str()}"
        return f"{type(exc).__name__}: {exc}"

    def check(self) -> str | None:
        """None when a broker answered within the timeout, else the error."""
        try:
            meta = self._consumer().list_topics(timeout=self.timeout)
            self.error = None if meta.brokers else "the cluster answered without any broker"
        except Exception as exc:  # KafkaException: _TRANSPORT, _TIMED_OUT ...
            self.error = self._describe(exc)
        return self.error

    def group_offsets(self, group: str, topics: list[str]) -> tuple[int, int] | None:
        """(sum of committed offsets, sum of lag) of consumer group ``group`` over
        ``topics`` (a partition without a commit counts its whole log as lag), or None when
        the cluster did not answer."""
        from confluent_kafka import TopicPartition

        try:
            consumer = self._consumer(group)
            committed = lag = 0
            for (topic, partition), offset in _committed(consumer, topics, self.timeout).items():
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=self.timeout
                )
                committed += max(offset, 0)
                lag += max(0, high - (offset if offset >= 0 else low))
        except Exception:
            return None
        return committed, lag

    def close(self) -> None:
        """Close the clients."""
        for consumer in self._consumers.values():
            with contextlib.suppress(Exception):  # closing is best effort
                consumer.close()
        self._consumers = {}


def groups_lag(probe: BrokerProbe, groups: Mapping[str, Sequence[str]]) -> int | str:
    """Total lag of the consumer ``groups`` (group -> its input topics), or why it is unknown
    (right after the brokers (re)started, a group's offsets stay unknown until its
    coordinator is loaded and the transactions the previous run left open are aborted)."""
    total = 0
    for group, topics in groups.items():
        offsets = probe.group_offsets(group, list(topics))
        if offsets is None:
            return f"unknown (group {group}: {probe.check() or 'offsets lookup failed'})"
        total += offsets[1]
    return total


def wait_for_no_lag(
    probe: BrokerProbe, groups: Mapping[str, Sequence[str]], timeout: float
) -> int | str:
    """Until the consumer ``groups`` have consumed everything (0), or ``timeout`` seconds
    passed (the lag then, or why it is unknown)."""
    deadline = time.monotonic() + timeout
    lag = groups_lag(probe, groups)
    while lag != 0 and time.monotonic() < deadline:
        time.sleep(0.1)
        lag = groups_lag(probe, groups)
    return lag


def list_topics(kafka: Kafka, timeout: float = 10.0) -> set[str]:
    """Names of the cluster's topics."""
    from confluent_kafka.admin import AdminClient

    return set(AdminClient(_client_config(kafka)).list_topics(timeout=timeout).topics)


def topic_partitions(kafka: Kafka, topic: str, timeout: float = 10.0) -> list[int]:
    """Partition numbers of ``topic`` (empty if it does not exist)."""
    from confluent_kafka.admin import AdminClient

    meta = AdminClient(_client_config(kafka)).list_topics(topic=topic, timeout=timeout)
    t = meta.topics.get(topic)
    if t is None or t.error is not None:
        return []
    return sorted(t.partitions)


def end_offsets(kafka: Kafka, topic: str, timeout: float = 10.0) -> dict[int, int]:
    """Partition -> high watermark of ``topic``."""
    from confluent_kafka import Consumer, TopicPartition

    parts = topic_partitions(kafka, topic, timeout)
    if not parts:
        return {}
    consumer = Consumer(_client_config(kafka, **{"group.id": f"monitor-{uuid.uuid4().hex[:8]}"}))
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1]
            for p in parts
        }
    finally:
        consumer.close()


def has_records_between(
    kafka: Kafka, topic: str, start_ms: int, end_ms: int, timeout: float = 10.0
) -> bool:
    """Whether ``topic`` holds a record timestamped in ``[start_ms, end_ms)``, by the
    brokers' time index: in some partition the first record at or after ``start_ms``
    comes before the first record at or after ``end_ms``."""
    from confluent_kafka import Consumer, TopicPartition

    parts = topic_partitions(kafka, topic, timeout)
    if not parts:
        return False
    consumer = Consumer(_client_config(kafka, **{"group.id": f"monitor-{uuid.uuid4().hex[:8]}"}))
    try:

        def first_at(ts: int) -> dict[int, int]:
            found = consumer.offsets_for_times(
                [TopicPartition(topic, p, ts) for p in parts], timeout=timeout
            )
            return {tp.partition: tp.offset for tp in found}

        def high(p: int) -> int:
            return int(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1])

        starts, ends = first_at(start_ms), first_at(end_ms)
        for p in parts:
            if starts[p] < 0:  # no record that late in this partition
                continue
            end = ends[p] if ends[p] >= 0 else high(p)
            if starts[p] < end:
                return True
        return False
    finally:
        consumer.close()


def consumer_lag(
    kafka: Kafka,
    group: str,
    topics: list[str] | None = None,
    timeout: float = 10.0,
    *,
    committed_only: bool = False,
) -> dict[str, int]:
    """``"topic-partition" -> lag`` of consumer group ``group`` (committed offsets only;
    partitions without a commit count their whole log, or are left out with
    ``committed_only``). With ``topics`` the committed offsets are read with
    ``Consumer.committed`` (safe while brokers restart, see ``_committed``); without, the
    topics are whatever the group committed (AdminClient)."""
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    if topics is None:
        admin = AdminClient(_client_config(kafka))
        future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
        committed = {
            (tp.topic, tp.partition): tp.offset for tp in future.result(timeout).topic_partitions
        }
        wanted = sorted({t for t, _ in committed})
    else:
        wanted = sorted(set(topics))
    consumer = Consumer(
        _client_config(
            kafka,
            logger=_quiet_logger(),
            **{"group.id": group if topics is not None else f"monitor-{uuid.uuid4().hex[:8]}"},
            **{"enable.auto.commit": False},
        )
    )
    lag: dict[str, int] = {}
    try:
        if topics is not None:
            committed = _committed(consumer, wanted, timeout)
        for topic in wanted:
            for p in topic_partitions(kafka, topic, timeout):
                low, high = _watermarks(consumer, TopicPartition(topic, p), timeout)
                offset = committed.get((topic, p), -1)
                if offset < 0 and committed_only:
                    continue
                lag[f"{topic}-{p}"] = max(0, high - (offset if offset >= 0 else low))
    finally:
        consumer.close()
    return lag


class TopicReadTimeout(TimeoutError):
    """A topic's partitions were not read to their end offsets in time."""

    def __init__(self, topic: str, partitions: list[int], timeout: float) -> None:
        super().__init__(f"{topic}: partitions {partitions} not read to their end in {timeout:g} s")
        self.topic = topic
        self.partitions = partitions


def read_tail(
    kafka: Kafka, topic: str, per_partition: int = 500, timeout: float = 10.0
) -> list[tuple[str | None, Any, int]]:
    """The last ``per_partition`` records of each partition: (key, JSON value, timestamp).
    Raises ``TopicReadTimeout`` when a partition is not read to its end within ``timeout``:
    a partial tail would move a watermark or a comparison computed from it."""
    from confluent_kafka import OFFSET_END, Consumer, TopicPartition

    ends = end_offsets(kafka, topic, timeout)
    consumer = Consumer(
        _client_config(
            kafka,
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
                part, offset, raw_key, raw = msg.partition(), msg.offset(), msg.key(), msg.value()
                if msg.error() is not None or part is None or offset is None:
                    continue
                try:
                    value = orjson.loads(raw) if raw is not None else None
                except orjson.JSONDecodeError:
                    value = None
                key = raw_key.decode() if raw_key is not None else None
                out.append((key, value, msg.timestamp()[1]))
                if offset + 1 >= remaining.get(part, 0):
                    remaining.pop(part, None)
            # transaction markers take offsets too: stop when the position reaches the end
            for tp in consumer.position([TopicPartition(topic, p) for p in list(remaining)]):
                if tp.offset != OFFSET_END and tp.offset >= remaining.get(tp.partition, 0):
                    remaining.pop(tp.partition, None)
    finally:
        consumer.close()
    if remaining:
        raise TopicReadTimeout(topic, sorted(remaining), timeout)
    return out


def closed_window_watermark(
    kafka: Kafka, topic: str, per_partition: int = 500, timeout: float = 10.0
) -> int | None:
    """Window end (ms) through which every key's windows on final-results ``topic`` are
    closed: the minimum over keys of their latest ``window_end`` (None before any closes).
    Raises ``TopicReadTimeout`` when the tail cannot be read in ``timeout``."""
    latest: dict[Any, int] = {}
    for key, value, _ in read_tail(kafka, topic, per_partition, timeout):
        end = value.get("window_end") if isinstance(value, dict) else None
        if isinstance(end, int) and end > latest.get(key, -1):
            latest[key] = end
    return min(latest.values()) if latest else None


def ensure_topics(
    kafka: Kafka, topics: Mapping[str, int], replication_factor: int = 1, timeout: float = 30.0
) -> list[str]:
    """Create the topics of ``topics`` (name -> partitions) that do not exist; return them.
    Brokers that refuse for a while (all fenced on a busy machine) are asked again for up to
    ``timeout`` seconds (``streaming.runtime.topics.create_topics``)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from streaming.runtime.topics import create_topics

    admin = AdminClient(_client_config(kafka))
    existing = set(admin.list_topics(timeout=timeout).topics)
    missing = [name for name in topics if name not in existing]
    if not missing:
        return []
    create_topics(
        admin,
        [
            NewTopic(n, num_partitions=topics[n], replication_factor=replication_factor)
            for n in missing
        ],
        timeout,
    )
    return missing


def _get_json(url: str, timeout: float, token: str | None = None) -> Any:
    """The JSON body of ``url`` (an error status with a JSON body, as ``/health``'s 503,
    counts as an answer); ``token``: the query servers' bearer token."""
    import urllib.error
    import urllib.request

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers=headers), timeout=timeout
        ) as response:
            return orjson.loads(response.read())
    except urllib.error.HTTPError as exc:
        return orjson.loads(exc.read())


def instances_health(
    base_url: str, timeout: float = 3.0, token: str | None = None
) -> dict[str, Any]:
    """The health of every instance of an application, asked over HTTP: its instances from
    ``<base_url>/metadata`` (any instance answers for the whole group), then each one's
    ``/health`` (same scheme as ``base_url``; ``token``: the servers' bearer token). For
    applications the supervisor does not run (pods on Kubernetes).

    Returns ``state`` (``RUNNING`` when every instance is running, else the first other
    instance's state, ``UNREACHABLE`` when it does not answer or answers with an error),
    ``instances``, ``instances_running`` and ``instance_states`` (``host:port`` -> state)."""
    import urllib.parse

    def unreachable(why: str) -> dict[str, Any]:
        return {"state": "UNREACHABLE", "instances": 0, "instances_running": 0, "error": why}

    try:
        members = _get_json(f"{base_url.rstrip('/')}/metadata", timeout, token)
    except (OSError, ValueError) as exc:
        return unreachable(str(exc))
    if not isinstance(members, list):  # an error answer: {"error": ..., "state": ...}
        return unreachable(str(members.get("error") if isinstance(members, dict) else members))
    scheme = urllib.parse.urlsplit(base_url).scheme or "http"
    states: dict[str, str] = {}
    for member in members:
        try:
            address = f"{member['host']}:{member['port']}"
        except (KeyError, TypeError):
            continue
        try:
            health = _get_json(f"{scheme}://{address}/health", timeout, token)
            states[address] = str(health["state"])
        except (OSError, ValueError, KeyError, TypeError):
            states[address] = "UNREACHABLE"
    others = [s for s in states.values() if s != "RUNNING"]
    return {
        "state": others[0] if others else ("RUNNING" if states else "UNREACHABLE"),
        "instances": len(states),
        "instances_running": len(states) - len(others),
        "instance_states": states,
    }
