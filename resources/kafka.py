"""``KafkaResource``: the cluster the platform reads and writes.

``bootstrap_servers`` defaults to ``$KAFKA_BOOTSTRAP_SERVERS`` (``make run`` sets it to the
local broker it starts), else ``localhost:9092``.
"""

import os
from typing import Any

from dagster import ConfigurableResource
from pydantic import Field

from assets.streams import monitor


def default_bootstrap_servers() -> str:
    """``$KAFKA_BOOTSTRAP_SERVERS`` or ``localhost:9092``."""
    return os.environ.get("KAFKA_BOOTSTRAP_SERVERS") or "localhost:9092"


class KafkaResource(ConfigurableResource):
    """A Kafka cluster: admin, offsets, lag and topic tails."""

    bootstrap_servers: str = Field(
        default_factory=default_bootstrap_servers,
        description="Kafka bootstrap servers (env KAFKA_BOOTSTRAP_SERVERS)",
    )

    def client_config(self, **extra: Any) -> dict[str, Any]:
        """confluent-kafka settings for this cluster plus ``extra``."""
        return {"bootstrap.servers": self.bootstrap_servers, **extra}

    def reachable(self, timeout: float = 3.0) -> str | None:
        """None when a broker answers within ``timeout`` seconds, else why not."""
        probe = monitor.BrokerProbe(self.bootstrap_servers, timeout)
        try:
            return probe.check()
        finally:
            probe.close()

    def end_offsets(self, topic: str) -> dict[int, int]:
        """Partition -> end offset of ``topic``."""
        return monitor.end_offsets(self.bootstrap_servers, topic)

    def consumer_lag(self, group: str, topics: list[str] | None = None) -> dict[str, int]:
        """Lag per ``topic-partition`` of consumer group ``group``."""
        return monitor.consumer_lag(self.bootstrap_servers, group, topics)

    def closed_window_watermark(self, topic: str) -> int | None:
        """Window end through which every key's windows on ``topic`` are final."""
        return monitor.closed_window_watermark(self.bootstrap_servers, topic)

    def ensure_topics(self, topics: dict[str, int]) -> list[str]:
        """Create missing topics (name -> partitions)."""
        return monitor.ensure_topics(self.bootstrap_servers, topics)
