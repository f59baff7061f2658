"""Serdes produce Kafka's byte layouts and fail clearly on bad bytes."""

import pytest

from streaming import SessionWindow, TimeWindow, Windowed, serdes


@pytest.mark.parametrize(
    ("serde", "value", "raw"),
    [
        (serdes.Long(), 1, b"\x00\x00\x00\x00\x00\x00\x00\x01"),
        (serdes.Long(), -1, b"\xff" * 8),
        (serdes.Integer(), 258, b"\x00\x00\x01\x02"),
        (serdes.Double(), 1.5, b"\x3f\xf8\x00\x00\x00\x00\x00\x00"),
        (serdes.String(), "héllo", "héllo".encode()),
        (serdes.Json(), {"a": [1, 2]}, b'{"a":[1,2]}'),
        (serdes.Bytes(), b"\x00\x01", b"\x00\x01"),
    ],
)
def test_round_trip_and_layout(serde, value, raw):
    assert serde.serialize("t", value) == raw
    assert serde.deserialize("t", raw) == value


@pytest.mark.parametrize(
    "serde", [serdes.Long(), serdes.String(), serdes.Json(), serdes.Integer(), serdes.Bytes()]
)
def test_none_is_a_tombstone(serde):
    assert serde.serialize("t", None) is None
    assert serde.deserialize("t", None) is None


def test_bad_bytes_raise_serialization_error():
    with pytest.raises(serdes.SerializationError, match="not 8"):
        serdes.Long().deserialize("t", b"\x01\x02")
    with pytest.raises(serdes.SerializationError, match="invalid JSON"):
        serdes.Json().deserialize("t", b"{nope")
    with pytest.raises(serdes.SerializationError, match="UTF-8"):
        serdes.String().deserialize("t", b"\xff\xfe")


def test_time_windowed_serde_matches_kafka_layout():
    serde = serdes.TimeWindowedSerde(serdes.String(), 10)
    key = Windowed("k", TimeWindow(20, 30))
    raw = serde.serialize("t", key)
    assert raw == b"k" + (20).to_bytes(8, "big")
    back = serde.deserialize("t", raw)
    assert back == key and str(back) == "[k@20/30]"


def test_session_windowed_serde_matches_kafka_layout():
    serde = serdes.SessionWindowedSerde(serdes.String())
    key = Windowed("k", SessionWindow(5, 9))
    raw = serde.serialize("t", key)
    assert raw == b"k" + (9).to_bytes(8, "big") + (5).to_bytes(8, "big")
    assert serde.deserialize("t", raw) == key


def test_windowed_serde_takes_default_inner():
    serde = serdes.resolve(serdes.TimeWindowedSerde(None, 5), serdes.String())
    assert serde.inner.__class__ is serdes.String


def test_from_config_names_and_errors():
    assert isinstance(serdes.from_config("string"), serdes.String)
    assert isinstance(
        serdes.from_config("org.apache.kafka.common.serialization.Serdes$LongSerde"), serdes.Long
    )
    with pytest.raises(ValueError, match="unknown serde"):
        serdes.from_config("avro")
