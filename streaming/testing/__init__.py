"""Testing: ``TopologyTestDriver`` (no broker) and ``LocalKafkaCluster`` (a real local Kafka)."""

from streaming.testing.driver import (
    KeyValue,
    TestInputTopic,
    TestOutputTopic,
    TestRecord,
    TopologyTestDriver,
)
from streaming.testing.kafka_cluster import KafkaClusterError, LocalKafkaCluster
from streaming.testing.ports import free_port, free_port_pair

__all__ = [
    "KafkaClusterError",
    "KeyValue",
    "LocalKafkaCluster",
    "TestInputTopic",
    "TestOutputTopic",
    "TestRecord",
    "TopologyTestDriver",
    "free_port",
    "free_port_pair",
]
