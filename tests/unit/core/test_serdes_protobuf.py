"""``ProtobufSerde`` in Confluent's wire format, with confluent-kafka's in-process registry
(``MockSchemaRegistryClient``, which keeps schemas as Confluent's registry does: the local
registry of the integration tests does not take the serialized file descriptors Python's
Protobuf serializer registers): keys and values round trip as generated classes, the
framing carries the schema id and the message's index path, bad bytes raise
SerializationError."""

from __future__ import annotations

import struct

import orders_pb2  # generated from tests/protos/orders.proto
import pytest
from confluent_kafka.schema_registry._sync.mock_schema_registry_client import (
    MockSchemaRegistryClient,
)

from streaming.errors import SerializationError
from streaming.serdes import ProtobufSerde


@pytest.fixture
def registry():
    return MockSchemaRegistryClient({"url": "mock://"})


def test_protobuf_keys_and_values_round_trip(registry):
    keys = ProtobufSerde(registry, orders_pb2.OrderKey, is_key=True)
    values = ProtobufSerde(registry, orders_pb2.Order)
    order = orders_pb2.Order(order_id="o1", customer="ada", amount_cents=1250, items=["a", "b"])
    raw_key = keys.serialize("orders", orders_pb2.OrderKey(order_id="o1"))
    raw_value = values.serialize("orders", order)
    key_id = registry.get_latest_version("orders-key").schema_id
    value_id = registry.get_latest_version("orders-value").schema_id
    assert (raw_key[0], struct.unpack(">i", raw_key[1:5])[0]) == (0, key_id)
    assert (raw_value[0], struct.unpack(">i", raw_value[1:5])[0]) == (0, value_id)
    # the message's index path in the .proto file (zigzag varints): OrderKey, the first
    # message, is the single byte 0; Order is [1]: a count of 1, then 1
    assert raw_key[5] == 0
    assert raw_value[5:7] == b"\x02\x02"
    assert raw_value[7:] == order.SerializeToString()
    fresh = ProtobufSerde(registry, orders_pb2.Order)
    assert fresh.deserialize("orders", raw_value) == order
    assert keys.deserialize("orders", raw_key) == orders_pb2.OrderKey(order_id="o1")
    assert values.serialize("orders", None) is None and values.deserialize("orders", None) is None


def test_protobuf_record_name_strategy(registry):
    serde = ProtobufSerde(registry, orders_pb2.Order, subject_name_strategy="record")
    serde.serialize("orders", orders_pb2.Order(order_id="o1"))
    assert registry.get_subjects() == ["streamplatform.tests.Order"]


def test_bad_protobuf_bytes_are_serialization_errors(registry):
    serde = ProtobufSerde(registry, orders_pb2.Order)
    raw = serde.serialize("orders", orders_pb2.Order(order_id="o1"))
    with pytest.raises(SerializationError, match="magic byte"):
        serde.deserialize("orders", b"\x07" + raw[1:])
    with pytest.raises(SerializationError, match="does not know"):
        serde.deserialize("orders", b"\x00" + struct.pack(">i", 4242) + raw[5:])
