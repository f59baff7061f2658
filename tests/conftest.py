"""Fixtures shared by the whole suite: one real local Apache Kafka (``LocalKafkaCluster``).

``kafka_cluster`` is one single-node broker shared by the whole session (integration and
platform tests alike): tests create their own uniquely named topics and application ids.
Tests that need another layout (3 nodes, a broken config) start their own
``LocalKafkaCluster``. Every test using the fixture gets the ``kafka`` marker.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streaming.testing import LocalKafkaCluster


@pytest.fixture(scope="session")
def kafka_cluster() -> Iterator[LocalKafkaCluster]:
    """One single-node KRaft broker (broker+controller) on loopback for the session."""
    with LocalKafkaCluster(nodes=1) as cluster:
        yield cluster


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark tests that use a broker with ``kafka`` (deselect them with ``-m "not kafka"``)."""
    for item in items:
        if "kafka_cluster" in getattr(item, "fixturenames", ()) or item.get_closest_marker("kafka"):
            item.add_marker(pytest.mark.kafka)
