"""The schema-registry serdes against a real registry (``LocalSchemaRegistry``) and broker:
round trips of Avro and JSON Schema for keys and values in Confluent's wire format, the
subject name strategies, auto-registration off, and schema evolution both ways with an
incompatible version refused under BACKWARD. (Protobuf: tests/unit/core/test_serdes_protobuf.py;
the local registry does not take the serialized descriptors Python's serializer registers.)"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass

import cloudpickle
import pytest
from test_app_support import T0, produce, read_all, unique

from streaming.errors import SerializationError, StreamsException
from streaming.serdes import AvroSerde, JsonSchemaSerde, TimeWindowedSerde
from streaming.testing import LocalSchemaRegistry
from streaming.windowed import TimeWindow, Windowed

KEY_V1 = json.dumps(
    {
        "type": "record",
        "name": "OrderKey",
        "namespace": "shop",
        "fields": [{"name": "id", "type": "string"}],
    }
)
#: the fields of each version of the Order record: v2 adds "currency" with a default and
#: removes "note" (which had one), so v1 and v2 read each other (BACKWARD and FORWARD); v3
#: adds "region" without a default, so v3 cannot read v2's records (not BACKWARD)
_ORDER_FIELDS = {
    1: [
        {"name": "id", "type": "string"},
        {"name": "amount", "type": "long"},
        {"name": "note", "type": "string", "default": ""},
    ],
    2: [
        {"name": "id", "type": "string"},
        {"name": "amount", "type": "long"},
        {"name": "currency", "type": "string", "default": "EUR"},
    ],
    3: [
        {"name": "id", "type": "string"},
        {"name": "amount", "type": "long"},
        {"name": "currency", "type": "string", "default": "EUR"},
        {"name": "region", "type": "string"},
    ],
}


def order_schema(version: int, namespace: str = "shop") -> str:
    """Version ``version`` of the Order record. A test that counts a subject's versions
    gives a namespace of its own: the local registry (rivven-schema) adds a schema that
    another subject already has to a subject only while that subject is empty."""
    return json.dumps(
        {
            "type": "record",
            "name": "Order",
            "namespace": namespace,
            "fields": _ORDER_FIELDS[version],
        }
    )


ORDER_V1, ORDER_V2, ORDER_V3 = order_schema(1), order_schema(2), order_schema(3)
ORDER_JSON_SCHEMA = json.dumps(
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Order",
        "type": "object",
        "properties": {"id": {"type": "string"}, "amount": {"type": "integer"}},
        "required": ["id", "amount"],
        "additionalProperties": False,
    }
)


@dataclass
class Order:
    id: str
    amount: int
    currency: str


def _registry(schema_registry):
    return schema_registry.client_config()


def _framing(raw: bytes) -> tuple[int, int]:
    """The magic byte and schema id in front of a Confluent-framed payload."""
    return raw[0], struct.unpack(">i", raw[1:5])[0]


def _through_the_broker(kafka_cluster, topic, records):
    """Write (key bytes, value bytes) records to a new topic and read their bytes back."""
    kafka_cluster.create_topic(topic)
    produce(kafka_cluster.bootstrap_servers, topic, [(k, v, T0) for k, v in records])
    msgs = read_all(
        kafka_cluster.bootstrap_servers, [topic], until=lambda m: len(m) >= len(records)
    )
    return [(m[3], m[4]) for m in msgs]


def test_avro_keys_and_values_round_trip_in_the_confluent_wire_format(
    kafka_cluster, schema_registry
):
    topic = unique("avro-orders")
    registry = _registry(schema_registry)
    keys = AvroSerde(registry, KEY_V1, is_key=True)
    values = AvroSerde(registry, ORDER_V1)
    orders = [{"id": f"o{i}", "amount": 100 * i, "note": "n" * i} for i in range(3)]
    records = [(keys.serialize(topic, {"id": o["id"]}), values.serialize(topic, o)) for o in orders]
    read = _through_the_broker(kafka_cluster, topic, records)
    assert {f"{topic}-key", f"{topic}-value"} <= set(schema_registry.subjects())
    key_id = schema_registry.request("GET", f"/subjects/{topic}-key/versions/1")["id"]
    value_id = schema_registry.request("GET", f"/subjects/{topic}-value/versions/1")["id"]
    assert key_id != value_id
    for raw_key, raw_value in read:
        assert _framing(raw_key) == (0, key_id)
        assert _framing(raw_value) == (0, value_id)
    # a fresh serde (no cached schema) reads them through the registry
    fresh_keys = AvroSerde(registry, is_key=True)
    fresh_values = AvroSerde(registry)
    assert [
        (fresh_keys.deserialize(topic, k), fresh_values.deserialize(topic, v)) for k, v in read
    ] == [({"id": o["id"]}, o) for o in orders]
    assert values.serialize(topic, None) is None and values.deserialize(topic, None) is None


def test_avro_specific_records_are_dataclass_instances(schema_registry):
    topic = unique("avro-specific")
    serde = AvroSerde(_registry(schema_registry), ORDER_V2, record_type=Order)
    raw = serde.serialize(topic, Order("o1", 250, "USD"))
    assert serde.deserialize(topic, raw) == Order("o1", 250, "USD")


def test_windowed_avro_keys_keep_kafkas_window_layout_around_the_framed_key(schema_registry):
    topic = unique("avro-windowed")
    inner = AvroSerde(_registry(schema_registry), KEY_V1, is_key=True)
    serde = TimeWindowedSerde(inner, window_size_ms=60_000)
    key = Windowed({"id": "o1"}, TimeWindow(T0, T0 + 60_000))
    raw = serde.serialize(topic, key)
    assert raw[-8:] == struct.pack(">q", T0)
    assert raw[:-8] == inner.serialize(topic, {"id": "o1"})
    assert serde.deserialize(topic, raw) == key


def test_json_schema_round_trip_and_validation(kafka_cluster, schema_registry):
    topic = unique("json-orders")
    registry = _registry(schema_registry)
    values = JsonSchemaSerde(registry, ORDER_JSON_SCHEMA)
    keys = JsonSchemaSerde(registry, json.dumps({"type": "string"}), is_key=True)
    read = _through_the_broker(
        kafka_cluster,
        topic,
        [(keys.serialize(topic, "o1"), values.serialize(topic, {"id": "o1", "amount": 5}))],
    )
    ((raw_key, raw_value),) = read
    value_id = schema_registry.request("GET", f"/subjects/{topic}-value/versions/1")["id"]
    assert _framing(raw_value) == (0, value_id)
    assert json.loads(raw_value[5:]) == {"id": "o1", "amount": 5}
    assert JsonSchemaSerde(registry, is_key=True).deserialize(topic, raw_key) == "o1"
    assert JsonSchemaSerde(registry).deserialize(topic, raw_value) == {"id": "o1", "amount": 5}
    with pytest.raises(SerializationError, match="amount"):
        values.serialize(topic, {"id": "o2"})
    # a document that breaks the reader's schema is refused on read too
    framed = raw_value[:5] + json.dumps({"id": "o3", "amount": "lots"}).encode()
    with pytest.raises(SerializationError):
        JsonSchemaSerde(registry, reader_schema=ORDER_JSON_SCHEMA).deserialize(topic, framed)


@pytest.mark.parametrize(
    ("strategy", "subject"),
    [
        ("topic", "{topic}-value"),
        ("record", "shop.Order"),
        ("topic_record", "{topic}-shop.Order"),
        ("io.confluent.kafka.serializers.subject.TopicRecordNameStrategy", "{topic}-shop.Order"),
    ],
)
def test_subject_name_strategies(schema_registry, strategy, subject):
    topic = unique("strategy")
    serde = AvroSerde(_registry(schema_registry), ORDER_V1, subject_name_strategy=strategy)
    raw = serde.serialize(topic, {"id": "o1", "amount": 1, "note": ""})
    expected = subject.format(topic=topic)
    assert expected in schema_registry.subjects()
    assert AvroSerde(_registry(schema_registry), subject_name_strategy=strategy).deserialize(
        topic, raw
    ) == {"id": "o1", "amount": 1, "note": ""}


def test_without_auto_registration_the_subjects_latest_schema_is_used(schema_registry):
    """Confluent's production setting: ``auto.register.schemas=false`` with
    ``use.latest.version=true``: nothing is registered by the application."""
    topic = unique("no-auto")
    registry = _registry(schema_registry)
    strict = AvroSerde(registry, ORDER_V1, auto_register=False, use_latest_version=True)
    with pytest.raises(SerializationError, match="the schema registry does not know it"):
        strict.serialize(topic, {"id": "o1", "amount": 1, "note": ""})
    assert f"{topic}-value" not in schema_registry.subjects()
    schema_registry.request(
        "POST", f"/subjects/{topic}-value/versions", {"schema": order_schema(2, "no_auto")}
    )
    # written with the subject's latest version (v2): the dict's fields fit it
    raw = strict.serialize(topic, {"id": "o1", "amount": 1, "currency": "CHF"})
    assert AvroSerde(registry).deserialize(topic, raw) == {
        "id": "o1",
        "amount": 1,
        "currency": "CHF",
    }
    assert schema_registry.versions(f"{topic}-value") == [1]


def test_evolution_both_ways_and_an_incompatible_version_refused(schema_registry):
    topic = unique("evolution")
    namespace = topic.replace("-", "_")
    v1, v2, v3 = (order_schema(v, namespace) for v in (1, 2, 3))
    registry = _registry(schema_registry)
    writer_v1 = AvroSerde(registry, v1)
    writer_v2 = AvroSerde(registry, v2)
    app_v1 = AvroSerde(registry, reader_schema=v1)
    app_v2 = AvroSerde(registry, reader_schema=v2)
    old = writer_v1.serialize(topic, {"id": "o1", "amount": 10, "note": "gift"})
    new = writer_v2.serialize(topic, {"id": "o2", "amount": 20, "currency": "USD"})
    assert schema_registry.versions(f"{topic}-value") == [1, 2]
    # the producer moved to v2 while an application built against v1 runs
    assert app_v1.deserialize(topic, old) == {"id": "o1", "amount": 10, "note": "gift"}
    assert app_v1.deserialize(topic, new) == {"id": "o2", "amount": 20, "note": ""}
    # the application moved to v2, reading what v1 wrote (as a state store's old values)
    assert app_v2.deserialize(topic, old) == {"id": "o1", "amount": 10, "currency": "EUR"}
    assert app_v2.deserialize(topic, new) == {"id": "o2", "amount": 20, "currency": "USD"}
    # read as written without a reader schema
    assert AvroSerde(registry).deserialize(topic, old) == {"id": "o1", "amount": 10, "note": "gift"}
    # v3 adds a field without a default: BACKWARD refuses it, and the producer is told why
    writer_v3 = AvroSerde(registry, v3)
    with pytest.raises(SerializationError, match="incompatible") as refused:
        writer_v3.serialize(topic, {"id": "o3", "amount": 30, "currency": "EUR", "region": "eu"})
    assert f"topic {topic}" in str(refused.value)
    assert schema_registry.versions(f"{topic}-value") == [1, 2]


def test_a_serde_travels_by_pickle_as_its_settings(schema_registry):
    """The worker processes of num.stream.threads get the topology, serdes and all, by
    cloudpickle: a serde is rebuilt there from its arguments."""
    topic = unique("pickled")
    serde = AvroSerde(
        _registry(schema_registry), ORDER_V2, record_type=Order, subject_name_strategy="record"
    )
    copy = cloudpickle.loads(cloudpickle.dumps(serde))
    assert copy is not serde and copy.registry.config()["url"] == schema_registry.url
    raw = copy.serialize(topic, Order("o1", 5, "CHF"))
    assert serde.deserialize(topic, raw) == Order("o1", 5, "CHF")
    docs = cloudpickle.loads(cloudpickle.dumps(JsonSchemaSerde(_registry(schema_registry))))
    assert docs.deserialize(
        topic,
        JsonSchemaSerde(_registry(schema_registry), ORDER_JSON_SCHEMA).serialize(
            topic, {"id": "o1", "amount": 1}
        ),
    ) == {"id": "o1", "amount": 1}


def test_a_registry_behind_basic_auth_and_tls(tmp_path):
    """An external registry's settings: HTTPS trusting its CA, basic auth; credentials it
    refuses, or a certificate not trusted, stop the serde with StreamsException (a setting
    to fix, not a record to dead-letter)."""
    with LocalSchemaRegistry(users={"app": "s3cret"}, tls=True) as secured:
        assert secured.url.startswith("https://")
        config = secured.client_config()
        assert config["basic.auth.user.info"] == "app:s3cret"
        topic = unique("secured")
        raw = AvroSerde(config, ORDER_V1).serialize(topic, {"id": "o1", "amount": 1, "note": ""})
        assert AvroSerde(secured.client_config()).deserialize(topic, raw) == {
            "id": "o1",
            "amount": 1,
            "note": "",
        }
        assert secured.subjects() == [f"{topic}-value"]
        wrong = secured.client_config(**{"basic.auth.user.info": "app:wrong"})
        with pytest.raises(StreamsException, match="refused the credentials"):
            AvroSerde(wrong).deserialize(topic, raw)
        untrusted = {k: v for k, v in config.items() if "ssl" not in k}
        with pytest.raises(StreamsException, match="TLS certificate is not trusted"):
            AvroSerde(untrusted).deserialize(topic, raw)


def test_the_schemas_page_example_runs_against_the_registry(schema_registry):
    """docs/concepts/schemas.md's example, run as written against the local registry: the
    serdes it builds write and read an order."""
    import re
    from pathlib import Path

    import orders_pb2

    from streaming import StreamsBuilder

    root = Path(__file__).resolve().parents[2]

    page = (root / "docs" / "concepts" / "schemas.md").read_text()
    (block,) = re.findall(r"^```python\n(.*?)^```", page, re.S | re.M)
    namespace = unique("docs").replace("-", "")
    scope = {
        "ORDER_V1": order_schema(1, namespace),
        "ORDER_V2": order_schema(2, namespace),
        "KEY_SCHEMA": KEY_V1.replace('"shop"', f'"{namespace}"'),
        "ORDER_JSON_SCHEMA": ORDER_JSON_SCHEMA,
        "Order": Order,
        "orders_pb2": orders_pb2,
        "builder": StreamsBuilder(),
    }
    exec(block.replace("http://127.0.0.1:8081", schema_registry.url), scope)
    topic = unique("docs-orders")
    raw = scope["orders"].serialize(topic, {"id": "o1", "amount": 250, "currency": "USD"})
    assert scope["as_v1"].deserialize(topic, raw) == {"id": "o1", "amount": 250, "note": ""}
    assert scope["typed"].deserialize(topic, raw) == Order("o1", 250, "USD")
