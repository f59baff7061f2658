"""Testing: ``TopologyTestDriver`` (no broker), ``LocalKafkaCluster`` (a real local Kafka) and
``LocalSchemaRegistry`` (a real local schema registry)."""

from streaming.testing.driver import (
    KeyValue,
    TestInputTopic,
    TestOutputTopic,
    TestRecord,
    TopologyTestDriver,
)
from streaming.testing.kafka_cluster import KafkaClusterError, LocalKafkaCluster
from streaming.testing.ports import free_port, free_port_pair
from streaming.testing.schema_registry import LocalSchemaRegistry, SchemaRegistryError

__all__ = [
    "KafkaClusterError",
    "KeyValue",
    "LocalKafkaCluster",
    "LocalSchemaRegistry",
    "SchemaRegistryError",
    "TestInputTopic",
    "TestOutputTopic",
    "TestRecord",
    "TopologyTestDriver",
    "free_port",
    "free_port_pair",
]
