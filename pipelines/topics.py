"""The platform's topics, declared in ``platform/topics.yaml``, and their idempotent creation."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pipelines.connection import Kafka, KafkaConnection

TOPICS_FILE = Path(__file__).resolve().parents[1] / "platform" / "topics.yaml"


@dataclass(frozen=True)
class TopicSpec:
    """One topic: name, partitions, replication factor and broker-side configuration."""

    name: str
    partitions: int
    replication_factor: int
    config: dict[str, str] = field(default_factory=dict)


def load_topic_specs(path: str | Path = TOPICS_FILE) -> list[TopicSpec]:
    """The topics declared in ``path`` (defaults merged into each topic)."""
    data = yaml.safe_load(Path(path).read_text())
    defaults = data.get("defaults", {})
    specs = []
    for name, spec in (data.get("topics") or {}).items():
        spec = spec or {}
        config = {**defaults.get("config", {}), **spec.get("config", {})}
        specs.append(
            TopicSpec(
                name=name,
                partitions=int(spec.get("partitions", defaults.get("partitions", 1))),
                replication_factor=int(
                    spec.get("replication_factor", defaults.get("replication_factor", 1))
                ),
                config={k: str(v) for k, v in config.items()},
            )
        )
    return specs


def create_topics(
    kafka: Kafka,
    *,
    specs: list[TopicSpec] | None = None,
    timeout: float = 30.0,
    admin_config: dict[str, Any] | None = None,
) -> dict[str, str]:
    """Create every missing topic; returns ``{name: "created" | "exists"}``.

    The replication factor is capped at the number of brokers, so the same file serves a
    single local broker and a real cluster. Existing topics are left as they are.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    specs = load_topic_specs() if specs is None else specs
    admin = AdminClient(KafkaConnection.of(kafka).client_config(**(admin_config or {})))
    metadata = admin.list_topics(timeout=timeout)
    brokers = max(1, len(metadata.brokers))
    result = {spec.name: "exists" for spec in specs if spec.name in metadata.topics}
    missing = [spec for spec in specs if spec.name not in metadata.topics]
    if missing:
        futures = admin.create_topics(
            [
                NewTopic(
                    spec.name,
                    num_partitions=spec.partitions,
                    replication_factor=min(spec.replication_factor, brokers),
                    config=spec.config,
                )
                for spec in missing
            ],
            operation_timeout=timeout,
            request_timeout=timeout,
        )
        for name, future in futures.items():
            try:
                future.result(timeout=timeout)
                result[name] = "created"
            except KafkaException as exc:
                if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
                    raise
                result[name] = "exists"
    deadline = time.monotonic() + timeout
    _wait_for_leaders(admin, [spec for spec in specs], deadline)
    created = [name for name, outcome in result.items() if outcome == "created"]
    if created:
        _wait_until_served(kafka, created, deadline, admin_config or {})
    return result


def _wait_for_leaders(admin: Any, specs: list[TopicSpec], deadline: float) -> None:
    """Block until every partition of ``specs`` has a leader."""
    names = {spec.name for spec in specs}
    while True:
        meta = admin.list_topics(timeout=max(0.5, deadline - time.monotonic()))
        ready = all(
            name in meta.topics
            and meta.topics[name].error is None
            and all(p.leader >= 0 for p in meta.topics[name].partitions.values())
            for name in names
        )
        if ready:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topics without a leader: {sorted(names)}")
        time.sleep(0.1)


# what a partition answers while its new leader is still taking over
_NOT_YET_SERVED = frozenset(
    {"NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE", "UNKNOWN_TOPIC_OR_PART"}
)


def _wait_until_served(
    kafka: Kafka, topics: list[str], deadline: float, config: dict[str, Any]
) -> None:
    """Block until every partition of the new ``topics`` answers an offsets request: the
    metadata names a leader a moment before that broker serves the partition, and a client
    asking in between gets ``NOT_LEADER_FOR_PARTITION``."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer(
        KafkaConnection.of(kafka).client_config(**config, **{"group.id": "platform-create-topics"})
    )
    try:
        meta = consumer.list_topics(timeout=max(0.5, deadline - time.monotonic()))
        pending = [TopicPartition(name, p) for name in topics for p in meta.topics[name].partitions]
        while pending:
            tp = pending[-1]
            try:
                consumer.get_watermark_offsets(tp, timeout=max(0.5, deadline - time.monotonic()))
                pending.pop()
            except KafkaException as exc:
                if exc.args[0].name() not in _NOT_YET_SERVED or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    finally:
        consumer.close()


def main(argv: list[str] | None = None) -> int:
    """``python -m pipelines.topics``: create the platform's missing topics on the cluster the
    environment names (``KafkaConnection.from_env``), e.g. as a Kubernetes Job."""
    import argparse
    import os

    parser = argparse.ArgumentParser(description="Create the platform's topics (idempotent)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds")
    args = parser.parse_args(argv)
    kafka = KafkaConnection.from_env(os.environ)
    kafka.verify(timeout_s=args.timeout)
    for name, outcome in sorted(create_topics(kafka, timeout=args.timeout).items()):
        print(f"{name}: {outcome}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
