"""URL keys to typed keys, and store values to JSON."""

from __future__ import annotations

import orjson
import pytest

from streaming import serdes
from streaming.query import codec
from streaming.state.value_and_timestamp import ValueAndTimestamp
from streaming.windowed import TimeWindow, Windowed


@pytest.mark.parametrize(
    ("serde", "kind"),
    [
        (serdes.String(), "string"),
        (serdes.Json(), "string"),
        (serdes.Long(), "long"),
        (serdes.Integer(), "long"),
        (serdes.Double(), "double"),
        (serdes.Bytes(), "bytes"),
        (None, "string"),
    ],
)
def test_default_key_type_follows_the_store_serde(serde, kind):
    assert codec.default_key_type(serde) == kind


def test_parse_key():
    assert codec.parse_key("EU", "string") == "EU"
    assert codec.parse_key("42", "long") == 42
    assert codec.parse_key("-7", "integer") == -7
    assert codec.parse_key("2.5", "double") == 2.5
    assert codec.parse_key('{"a": [1]}', "json") == {"a": [1]}
    assert codec.parse_key("k", "bytes") == b"k"
    with pytest.raises(codec.BadKey, match="not a valid long"):
        codec.parse_key("x", "long")
    with pytest.raises(codec.BadKey, match="not a valid json"):
        codec.parse_key("{", "json")
    with pytest.raises(codec.BadKey, match="unknown key_type"):
        codec.parse_key("x", "uuid")


def test_dumps_store_types():
    payload = {
        "windowed": Windowed("EU", TimeWindow(0, 300_000)),
        "vat": ValueAndTimestamp.make(5, 123),
        "text": b"caf\xc3\xa9",
        "binary": b"\xff\x00",
        "set": {1},
        3: "non-string key",
    }
    assert orjson.loads(codec.dumps(payload)) == {
        "windowed": {"key": "EU", "start": 0, "end": 300_000},
        "vat": {"value": 5, "timestamp": 123},
        "text": "café",
        "binary": {"base64": "/wA="},
        "set": [1],
        "3": "non-string key",
    }
