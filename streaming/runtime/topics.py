"""Creating and checking internal topics (Kafka's ``InternalTopicManager``) with the admin client.

Repartition topics ``<application.id>-<name>-repartition`` get ``cleanup.policy=delete`` and
infinite retention (consumed records are purged by the application after commits);
changelogs ``<application.id>-<store>-changelog`` are compacted (``compact,delete`` with the
store's retention plus one day for window and session stores).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from streaming.runtime.assignment import TopologyPlan

log = logging.getLogger(__name__)

REPARTITION_TOPIC_CONFIG = {
    "cleanup.policy": "delete",
    "retention.ms": "-1",
    "segment.bytes": str(50 * 1024 * 1024),
    "message.timestamp.type": "CreateTime",
}


class InternalTopicError(RuntimeError):
    """An internal topic could not be created or has the wrong layout."""


class MissingSinkTopicError(ValueError):
    """A topic the topology writes to does not exist, and the brokers will not create it."""


class TopicCreationError(Exception):
    """A topic the brokers refused to create (its name first in the message)."""


#: creation errors the brokers' state explains and time cures: every broker fenced or not
#: yet registered with the controller (a KRaft broker whose heartbeats were late on a busy
#: machine), the controller moving
_TRANSIENT_CREATE_ERRORS = ("INVALID_REPLICATION_FACTOR", "NOT_CONTROLLER", "REQUEST_TIMED_OUT")


def _transient(exc: BaseException) -> bool:
    err = exc.args[0] if exc.args else None
    retriable = getattr(err, "retriable", None)
    name = getattr(err, "name", lambda: "")()
    return bool(retriable is not None and retriable()) or name in _TRANSIENT_CREATE_ERRORS


def create_topics(admin: Any, new: list[Any], timeout: float, backoff_s: float = 0.5) -> None:
    """Create the ``NewTopic``s in ``new``: one that exists already is fine; one the brokers
    refuse for a while (all of them fenced, a controller moving) is asked again until
    ``timeout`` seconds have passed, as an outage stalls a start instead of failing it; any
    other refusal raises ``TopicCreationError`` at once."""
    deadline = time.monotonic() + timeout
    pending = list(new)
    while pending:
        futures = admin.create_topics(pending, request_timeout=timeout, operation_timeout=timeout)
        retry = []
        for topic, future in futures.items():
            try:
                future.result(timeout=timeout)
            except Exception as exc:
                err = exc.args[0] if exc.args else None
                if getattr(err, "name", lambda: "")() == "TOPIC_ALREADY_EXISTS":
                    continue  # another instance or process created it first
                if not _transient(exc) or time.monotonic() + backoff_s > deadline:
                    raise TopicCreationError(f"{topic}: {exc}") from exc
                log.info("Creating topic %s: %s; asking again", topic, exc)
                retry.append(topic)
        pending = [t for t in pending if t.topic in retry]
        if pending:
            time.sleep(backoff_s)


class InternalTopicManager:
    """Reads partition counts and creates the internal topics of a ``TopologyPlan``."""

    def __init__(self, admin: Any, *, replication_factor: int = -1, timeout: float = 30.0) -> None:
        self.admin = admin
        self.replication_factor = replication_factor
        self.timeout = timeout

    def all_partition_counts(self) -> dict[str, int]:
        """Partition count of every topic in the cluster (for pattern subscriptions)."""
        meta = self.admin.list_topics(timeout=self.timeout)
        return {name: len(tm.partitions) for name, tm in meta.topics.items() if tm.error is None}

    def partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        """Partition count of each existing topic (0 when it does not exist)."""
        meta = self.admin.list_topics(timeout=self.timeout)
        out = {}
        for topic in topics:
            tm = meta.topics.get(topic)
            out[topic] = 0 if tm is None or tm.error is not None else len(tm.partitions)
        return out

    def auto_create_enabled(self) -> bool:
        """Whether the brokers create a topic a client writes to
        (``auto.create.topics.enable``, read from one broker; True when it cannot be read)."""
        from confluent_kafka.admin import ConfigResource, ResourceType

        brokers = sorted(self.admin.list_topics(timeout=self.timeout).brokers)
        if not brokers:
            return True
        resource = ConfigResource(ResourceType.BROKER, str(brokers[0]))
        try:
            configs = self.admin.describe_configs([resource])[resource].result(self.timeout)
        except Exception:  # not authorized to read it, or an old broker: assume it may
            return True
        entry = configs.get("auto.create.topics.enable")
        return entry is None or str(entry.value).lower() != "false"

    def check_sink_topics(self, topics: Iterable[str]) -> None:
        """``MissingSinkTopicError`` naming the ``topics`` that do not exist when the brokers
        will not create them: records for them would only time out, transaction after
        transaction."""
        counts = self.partition_counts(topics)
        missing = sorted(t for t, n in counts.items() if not n)
        if missing and not self.auto_create_enabled():
            names = ", ".join(missing)
            raise MissingSinkTopicError(
                f"topic {names} does not exist (automatic topic creation is off): create "
                f"{'it' if len(missing) == 1 else 'them'} before starting the application"
            )

    def setup(self, plan: TopologyPlan) -> None:
        """Resolve partition counts and create missing repartition and changelog topics."""
        if plan.patterns:
            plan.match_patterns(self.all_partition_counts())
        plan.resolve(self.partition_counts)
        wanted: dict[str, tuple[int, dict[str, str]]] = {}
        for topic in plan.internal_topics:
            wanted[topic] = (plan.partitions[topic], dict(REPARTITION_TOPIC_CONFIG))
        for spec, partitions in plan.changelog_specs():
            wanted[spec.topic] = (partitions, spec.config)
        self.ensure(wanted)

    def ensure(self, wanted: dict[str, tuple[int, dict[str, str]]]) -> None:
        """Create each topic with (partitions, config) unless it exists with that count."""
        if not wanted:
            return
        from confluent_kafka.admin import NewTopic

        existing = self.partition_counts(wanted)
        for topic, count in existing.items():
            if count and count != wanted[topic][0]:
                raise InternalTopicError(
                    f"internal topic {topic} exists with {count} partitions but the topology "
                    f"needs {wanted[topic][0]}; delete it (and reset the application) or keep "
                    "the input topics' partition counts"
                )
        new = [
            NewTopic(
                topic,
                num_partitions=partitions,
                replication_factor=self.replication_factor,
                config=config,
            )
            for topic, (partitions, config) in wanted.items()
            if not existing.get(topic)
        ]
        if not new:
            return
        log.info("Creating internal topics %s", [t.topic for t in new])
        try:
            create_topics(self.admin, new, self.timeout)
        except TopicCreationError as exc:
            raise InternalTopicError(f"could not create internal topic {exc}") from exc
        self._wait_for_leaders({t.topic: t.num_partitions for t in new})

    def _wait_for_leaders(self, topics: dict[str, int]) -> None:
        deadline = time.monotonic() + self.timeout
        while True:
            meta = self.admin.list_topics(timeout=self.timeout)
            ready = all(
                (tm := meta.topics.get(t)) is not None
                and tm.error is None
                and len(tm.partitions) == n
                and all(p.leader >= 0 for p in tm.partitions.values())
                for t, n in topics.items()
            )
            if ready:
                return
            if time.monotonic() > deadline:
                raise InternalTopicError(f"internal topics {sorted(topics)} have no leaders")
            time.sleep(0.05)


def sink_topics(topology: Any) -> list[str]:
    """The user topics ``topology`` writes to by name (not internal ones, not topics
    chosen per record)."""
    from streaming.topology.nodes import SinkNode

    return sorted(
        {
            node.topic
            for node in topology.nodes.values()
            if isinstance(node, SinkNode)
            and node.topic is not None
            and node.topic not in topology.internal_topics
        }
    )


def create_output_topics(
    admin: Any, topology: Any, dead_letter_topic: str | None, replication_factor: int = -1
) -> list[str]:
    """Create the topics ``topology`` writes (and its dead-letter topic) that do not exist,
    with as many partitions as its largest source topic (1 for a dead-letter topic).
    Returns the topics created. For ``python -m streaming ... --create-topics``: Kafka
    Streams creates its internal topics only, its sinks are the user's."""
    from streaming.topology.nodes import SourceNode

    manager = InternalTopicManager(admin, replication_factor=replication_factor)
    sources = {t for n in topology.nodes.values() if isinstance(n, SourceNode) for t in n.topics}
    partitions = max(manager.partition_counts(sorted(sources)).values(), default=0) or 1
    wanted = {t: partitions for t in sink_topics(topology)}
    if dead_letter_topic:
        wanted[dead_letter_topic] = 1
    counts = manager.partition_counts(sorted(wanted))
    missing: dict[str, tuple[int, dict[str, str]]] = {
        t: (n, {}) for t, n in wanted.items() if not counts[t]
    }
    manager.ensure(missing)
    return sorted(missing)
