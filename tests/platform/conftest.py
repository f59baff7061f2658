"""Platform tests: one session-scoped local Kafka broker shared by every test that needs one
(``kafka_cluster``; tests create their own uniquely named topics or application ids)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streaming.testing import LocalKafkaCluster


@pytest.fixture(scope="session")
def kafka_cluster() -> Iterator[LocalKafkaCluster]:
    """One single-node KRaft broker on loopback for the session."""
    with LocalKafkaCluster(nodes=1) as cluster:
        yield cluster


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that use the broker get the ``kafka`` marker."""
    for item in items:
        if "kafka_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.kafka)
