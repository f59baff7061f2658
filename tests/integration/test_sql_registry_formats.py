"""SQL tables in the schema-registry formats against a real schema registry: Flink's
``avro-confluent`` (values and keys; a source reads records of two versions of a producer's
schema by column name, a sink registers the schema Flink derives from its columns; a table
may take its columns from the registered schema) and ``json-registry``; a table without its
registry URL is refused."""

from __future__ import annotations

import json
import struct

import pytest
from test_app_support import T0, unique
from test_schema_serdes import ORDER_V1, ORDER_V2, order_schema

from streaming import serdes
from streaming.serdes import AvroSerde, JsonSchemaSerde
from streaming.sql import SqlError, compile
from streaming.sql.registry_tables import column_type
from streaming.testing import TopologyTestDriver

SQL = """
CREATE TABLE orders (id STRING, amount BIGINT, currency STRING)
WITH ('connector' = 'kafka', 'topic' = '{orders}', 'format' = 'avro-confluent',
      'avro-confluent.url' = '{url}');
CREATE TABLE big_orders (id STRING, amount BIGINT, currency STRING)
WITH ('connector' = 'kafka', 'topic' = '{big}', 'value.format' = 'avro-confluent',
      'value.avro-confluent.url' = '{url}');
INSERT INTO big_orders SELECT id, amount, currency FROM orders WHERE amount > 10;
"""


def test_avro_confluent_tables_read_any_version_and_register_their_schema(schema_registry):
    orders, big = unique("orders"), unique("big-orders")
    registry = schema_registry.client_config()
    v1 = AvroSerde(registry, ORDER_V1)
    v2 = AvroSerde(registry, ORDER_V2)
    topology = compile(SQL.format(orders=orders, big=big, url=schema_registry.url))
    with TopologyTestDriver(topology) as driver:
        source = driver.create_input_topic(
            orders, key_serde=serdes.String(), value_serde=serdes.Bytes()
        )
        source.pipe_input("a", v1.serialize(orders, {"id": "a", "amount": 5, "note": ""}), T0)
        source.pipe_input("b", v1.serialize(orders, {"id": "b", "amount": 50, "note": "x"}), T0)
        source.pipe_input(
            "c", v2.serialize(orders, {"id": "c", "amount": 70, "currency": "USD"}), T0
        )
        sink = driver.create_output_topic(big, value_serde=serdes.Bytes())
        raw = [r.value for r in sink.read_records_to_list()]
    assert schema_registry.versions(f"{big}-value") == [1]
    sink_id = schema_registry.request("GET", f"/subjects/{big}-value/versions/1")["id"]
    assert [(v[0], struct.unpack(">i", v[1:5])[0]) for v in raw] == [(0, sink_id)] * 2
    reader = AvroSerde(registry)
    assert [reader.deserialize(big, v) for v in raw] == [
        {"id": "b", "amount": 50, "currency": None},  # v1 has no currency: NULL
        {"id": "c", "amount": 70, "currency": "USD"},
    ]


def test_avro_confluent_needs_the_registry_url():
    with pytest.raises(SqlError, match=r"avro-confluent\.url"):
        compile(
            "CREATE TABLE t (id STRING) WITH ('topic' = 't', 'format' = 'avro-confluent');"
            "CREATE TABLE u (id STRING) WITH ('topic' = 'u', 'format' = 'json');"
            "INSERT INTO u SELECT id FROM t;"
        )


def test_a_sink_registers_under_the_subject_option(schema_registry):
    orders, big = unique("orders"), unique("big-orders")
    subject = unique("shop.BigOrder")
    sql = SQL.format(orders=orders, big=big, url=schema_registry.url).replace(
        "'value.avro-confluent.url' = ",
        f"'value.avro-confluent.subject' = '{subject}', 'value.avro-confluent.url' = ",
    )
    writer = AvroSerde(schema_registry.client_config(), ORDER_V2)
    with TopologyTestDriver(compile(sql)) as driver:
        source = driver.create_input_topic(
            orders, key_serde=serdes.String(), value_serde=serdes.Bytes()
        )
        source.pipe_input(
            "c", writer.serialize(orders, {"id": "c", "amount": 70, "currency": "USD"}), T0
        )
        (record,) = driver.create_output_topic(
            big, value_serde=serdes.Bytes()
        ).read_records_to_list()
    assert schema_registry.versions(subject) == [1]
    assert f"{big}-value" not in schema_registry.subjects()
    assert (
        struct.unpack(">i", record.value[1:5])[0]
        == schema_registry.request("GET", f"/subjects/{subject}/versions/1")["id"]
    )


def test_a_table_without_columns_takes_them_from_the_registered_schema(schema_registry):
    orders, out = unique("orders"), unique("out")
    registry = schema_registry.client_config()
    namespace = orders.replace("-", "_")
    writer = AvroSerde(registry, order_schema(2, namespace))
    first = writer.serialize(orders, {"id": "a", "amount": 50, "currency": "USD"})
    sql = f"""
    CREATE TABLE orders WITH ('connector' = 'kafka', 'topic' = '{orders}',
        'format' = 'avro-confluent', 'avro-confluent.url' = '{schema_registry.url}');
    CREATE TABLE out (id STRING, cents BIGINT, currency STRING)
    WITH ('connector' = 'kafka', 'topic' = '{out}', 'format' = 'json');
    INSERT INTO out SELECT id, amount * 100, currency FROM orders WHERE amount > 10;
    """
    with TopologyTestDriver(compile(sql)) as driver:
        source = driver.create_input_topic(
            orders, key_serde=serdes.String(), value_serde=serdes.Bytes()
        )
        source.pipe_input("a", first, T0)
        source.pipe_input(
            "b", writer.serialize(orders, {"id": "b", "amount": 5, "currency": "EUR"}), T0
        )
        rows = driver.create_output_topic(out, value_serde=serdes.Json()).read_values_to_list()
    assert rows == [{"id": "a", "cents": 5000, "currency": "USD"}]
    # no schema under the subject: the error names it
    with pytest.raises(SqlError, match="subject 'none-registered-value'"):
        compile(sql.replace(f"'topic' = '{orders}'", "'topic' = 'none-registered'"))


@pytest.mark.parametrize(
    ("avro", "column"),
    [
        ("string", ("STRING", "VARCHAR", None, None, False)),
        (["null", "int"], ("BIGINT", "INT", None, None, True)),
        (
            {"type": "long", "logicalType": "timestamp-millis"},
            ("TIMESTAMP", "TIMESTAMP", 3, None, False),
        ),
        (
            {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
            ("DOUBLE", "DECIMAL", 10, 2, False),
        ),
        (["null", "double"], ("DOUBLE", "DOUBLE", None, None, True)),
        ({"type": "array", "items": "string"}, None),
        (["null", "string", "long"], None),
    ],
)
def test_avro_field_types_as_columns(avro, column):
    found = column_type(avro)
    assert (
        None
        if found is None
        else (found.kind, found.declared, found.precision, found.scale, found.nullable)
    ) == column


def test_avro_confluent_keys(schema_registry):
    """``'key.format' = 'avro-confluent'``: keys as records of the key columns, read by
    name from the writer's key schema, written under ``<topic>-key`` (a projection and a
    GROUP BY, whose re-keyed rows go through a repartition and a store)."""
    orders, big, totals = unique("orders"), unique("big"), unique("totals")
    url = schema_registry.url
    avro = f"'avro-confluent.url' = '{url}', 'key.format' = 'avro-confluent', 'key.avro-confluent.url' = '{url}'"
    sql = f"""
    CREATE TABLE orders (id STRING, region STRING, amount BIGINT)
    WITH ('topic' = '{orders}', 'format' = 'avro-confluent', 'key.fields' = 'id', {avro});
    CREATE TABLE big (id STRING, region STRING, amount BIGINT)
    WITH ('topic' = '{big}', 'format' = 'avro-confluent', 'key.fields' = 'id', {avro});
    CREATE TABLE totals (region STRING, total BIGINT, PRIMARY KEY (region) NOT ENFORCED)
    WITH ('topic' = '{totals}', 'format' = 'json', 'key.format' = 'avro-confluent',
          'key.avro-confluent.url' = '{url}');
    INSERT INTO big SELECT id, region, amount FROM orders WHERE amount > 10;
    INSERT INTO totals SELECT region, SUM(amount) FROM orders GROUP BY region;
    """
    registry = schema_registry.client_config()
    key_schema = json.dumps(
        {
            "type": "record",
            "name": "OrderKey",
            "namespace": "shop",
            "fields": [{"name": "id", "type": "string"}],
        }
    )
    value_schema = json.dumps(
        {
            "type": "record",
            "name": "KeyedOrder",
            "namespace": "shop",
            "fields": [
                {"name": "id", "type": "string"},
                {"name": "region", "type": "string"},
                {"name": "amount", "type": "long"},
            ],
        }
    )
    keys, values = AvroSerde(registry, key_schema, is_key=True), AvroSerde(registry, value_schema)
    rows = [("a", "EU", 5), ("b", "EU", 50), ("c", "US", 70)]
    with TopologyTestDriver(compile(sql)) as driver:
        source = driver.create_input_topic(
            orders, key_serde=serdes.Bytes(), value_serde=serdes.Bytes()
        )
        for id_, region, amount in rows:
            source.pipe_input(
                keys.serialize(orders, {"id": id_}),
                values.serialize(orders, {"id": id_, "region": region, "amount": amount}),
                T0,
            )
        out = driver.create_output_topic(big, key_serde=serdes.Bytes(), value_serde=serdes.Bytes())
        big_records = [(r.key, r.value) for r in out.read_records_to_list()]
        out = driver.create_output_topic(
            totals, key_serde=serdes.Bytes(), value_serde=serdes.Json()
        )
        total_records = [(r.key, r.value) for r in out.read_records_to_list()]
    key_reader, value_reader = AvroSerde(registry, is_key=True), AvroSerde(registry)
    assert [
        (key_reader.deserialize(big, k), value_reader.deserialize(big, v)) for k, v in big_records
    ] == [
        ({"id": "b"}, {"id": "b", "region": "EU", "amount": 50}),
        ({"id": "c"}, {"id": "c", "region": "US", "amount": 70}),
    ]
    assert [(key_reader.deserialize(totals, k), v) for k, v in total_records] == [
        ({"region": "EU"}, {"region": "EU", "total": 5}),
        ({"region": "EU"}, {"region": "EU", "total": 55}),
        ({"region": "US"}, {"region": "US", "total": 70}),
    ]
    assert schema_registry.versions(f"{big}-key") == [1]
    assert schema_registry.versions(f"{totals}-key") == [1]


def test_an_avro_confluent_key_needs_its_registry_url():
    with pytest.raises(SqlError, match=r"'key\.avro-confluent\.url'"):
        compile(
            "CREATE TABLE t (id STRING) WITH ('topic' = 't', 'format' = 'json',"
            " 'key.format' = 'avro-confluent', 'key.fields' = 'id');"
            "CREATE TABLE u (id STRING) WITH ('topic' = 'u', 'format' = 'json');"
            "INSERT INTO u SELECT id FROM t;"
        )


def test_json_registry_tables(schema_registry):
    """``'format' = 'json-registry'``: a sink registers the JSON Schema derived from its
    columns and writes Confluent-framed JSON; a source validates each document against the
    schema its id names and takes the columns by name."""
    orders, big = unique("orders"), unique("big")
    url = schema_registry.url
    sql = f"""
    CREATE TABLE orders (id STRING, amount BIGINT, price DOUBLE NOT NULL, paid BOOLEAN)
    WITH ('topic' = '{orders}', 'format' = 'json-registry', 'json-registry.url' = '{url}');
    CREATE TABLE big (id STRING, amount BIGINT, price DOUBLE NOT NULL, paid BOOLEAN)
    WITH ('topic' = '{big}', 'value.format' = 'json-registry', 'value.json-registry.url' = '{url}');
    INSERT INTO big SELECT id, amount, price, paid FROM orders WHERE amount > 10;
    """
    registry = schema_registry.client_config()
    producer_schema = json.dumps(
        {
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "amount": {"type": "integer"},
                "price": {"type": "number"},
                "paid": {"type": "boolean"},
                "channel": {"type": "string"},
            },
            "required": ["id", "amount", "price"],
        }
    )
    writer = JsonSchemaSerde(registry, producer_schema)
    with TopologyTestDriver(compile(sql)) as driver:
        source = driver.create_input_topic(
            orders, key_serde=serdes.String(), value_serde=serdes.Bytes()
        )
        for document in (
            {"id": "a", "amount": 5, "price": 1.5, "paid": True, "channel": "web"},
            {"id": "b", "amount": 50, "price": 2.25, "channel": "app"},
        ):
            source.pipe_input(document["id"], writer.serialize(orders, document), T0)
        raw = [
            r.value
            for r in driver.create_output_topic(
                big, value_serde=serdes.Bytes()
            ).read_records_to_list()
        ]
    assert [json.loads(v[5:]) for v in raw] == [
        {"id": "b", "amount": 50, "price": 2.25, "paid": None}
    ]
    registered = json.loads(
        schema_registry.request("GET", f"/subjects/{big}-value/versions/1")["schema"]
    )
    assert registered["properties"]["price"] == {"type": ["number"]}
    assert registered["properties"]["paid"] == {"type": ["boolean", "null"]}
    assert registered["required"] == ["price"]
    assert JsonSchemaSerde(registry).deserialize(big, raw[0])["amount"] == 50
