"""The foreign-key join's wire formats and value hash, byte for byte against Kafka Streams 4.1.1
(reference values printed by Kafka's own ``Murmur3`` and wrapper serdes)."""

from __future__ import annotations

import pytest

from streaming import serdes
from streaming.dsl.processors.foreign_key.murmur3 import hash128
from streaming.dsl.processors.foreign_key.wrappers import (
    CombinedKeySchema,
    Instruction,
    SubscriptionResponseWrapper,
    SubscriptionResponseWrapperSerde,
    SubscriptionWrapper,
    SubscriptionWrapperSerde,
)

# Murmur3.hash128(s.getBytes()) in Java
JAVA_HASHES = {
    b"": (-7122613646888064702, -8341524471658347240),
    b"a": (3702349557448790408, -1601067453332442517),
    b"hello": (3512725192710940516, 6227047293690958278),
    b"0123456789abcdef": (1904622552327088487, -2893518741649893711),
    b"0123456789abcdefXYZ12345678": (4836742126718847143, -729667736412615442),
}


@pytest.mark.parametrize("data", list(JAVA_HASHES))
def test_murmur3_hash128_matches_kafka(data: bytes) -> None:
    assert hash128(data) == JAVA_HASHES[data]


HASH_42 = (-7077147430740553937, 7843067317662407887)  # hash of LongSerializer(42)


def test_hash_of_a_serialized_long() -> None:
    assert hash128(serdes.Long().serialize("t", 42)) == HASH_42


def test_subscription_wrapper_bytes() -> None:
    serde = SubscriptionWrapperSerde(serdes.String(), "pk")
    with_hash = SubscriptionWrapper(
        HASH_42, Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE, "k1", 3
    )
    raw = serde.serialize("t", with_hash)
    assert raw.hex() == "01039dc8ebe877a40f2f6cd82c2bcabe5ccf6b3100000003"
    assert serde.deserialize("t", raw) == with_hash
    no_hash = SubscriptionWrapper(None, Instruction.DELETE_KEY_AND_PROPAGATE, "k1", 0)
    raw = serde.serialize("t", no_hash)
    assert raw.hex() == "81016b3100000000"
    assert serde.deserialize("t", raw) == no_hash


def test_subscription_wrapper_needs_a_primary_key() -> None:
    with pytest.raises(ValueError, match="primaryKey cannot be null"):
        SubscriptionWrapper(None, Instruction.DELETE_KEY_NO_PROPAGATE, None, 0)


def test_subscription_wrapper_serde_takes_the_default_key_serde() -> None:
    serde = SubscriptionWrapperSerde(None)
    assert serde.with_default(serdes.Long()) is serde  # the value default is not the key's
    serde.set_if_unset(serdes.String(), "app-topic-pk")
    assert serde.primary_key_serde.__class__ is serdes.String
    assert serde.pseudo_topic == "app-topic-pk"


def test_response_wrapper_bytes() -> None:
    serde = SubscriptionResponseWrapperSerde(serdes.Long())
    full = SubscriptionResponseWrapper(HASH_42, 7, 3)
    raw = serde.serialize("t", full)
    assert raw.hex() == "009dc8ebe877a40f2f6cd82c2bcabe5ccf0000000000000007"
    back = serde.deserialize("t", raw)
    assert (back.original_value_hash, back.foreign_value, back.version) == (HASH_42, 7, 0)
    assert back.primary_partition is None  # not on the wire
    empty = serde.serialize("t", SubscriptionResponseWrapper(None, None, 3))
    assert empty.hex() == "80"
    back = serde.deserialize("t", empty)
    assert (back.original_value_hash, back.foreign_value) == (None, None)


def test_combined_key_schema() -> None:
    schema = CombinedKeySchema(serdes.String(), serdes.Integer())
    key = schema.to_bytes("fk", 7)
    assert key == b"\x00\x00\x00\x02fk\x00\x00\x00\x07"
    assert schema.prefix_bytes("fk") == b"\x00\x00\x00\x02fk"
    assert key.startswith(schema.prefix_bytes("fk"))
    assert not schema.to_bytes("fkx", 7).startswith(schema.prefix_bytes("fk"))
    assert schema.from_bytes(key) == ("fk", 7)
