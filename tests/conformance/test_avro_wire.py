"""The Avro serdes' bytes against Java: the same topology (keep orders over 10, double the
amount) runs on Kafka Streams' TopologyTestDriver with a Java serde writing Confluent's wire
format through Apache Avro's Java implementation (``java/AvroWire.java``) and here with
``AvroSerde`` and a real schema registry; the output records are byte for byte the same."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from reference import JARS_DIR, JVM_FLAGS, _classpath, compile_harness

from streaming import StreamsBuilder, serdes
from streaming.serdes import AvroSerde
from streaming.testing import TopologyTestDriver

sys.path.insert(0, str(Path(__file__).parents[1] / "integration"))
from test_app_support import T0, unique

ORDER = {
    "type": "record",
    "name": "WireOrder",
    "namespace": "conformance",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "amount", "type": "long"},
        {"name": "price", "type": "double"},
        {"name": "paid", "type": "boolean"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "qty", "type": "int"},
    ],
}


def _orders() -> list[dict]:
    return [
        {
            "id": f"o{i}",
            "amount": i * 7 - 20,
            "price": i / 3,
            "paid": i % 2 == 0,
            "note": None if i % 3 == 0 else f"n{'é' * i}",
            "tags": [f"t{j}" for j in range(i % 4)],
            "attrs": {f"a{j}": j * -1000 for j in range(i % 3)},
            "status": ("NEW", "PAID")[i % 2],
            "ts": T0 + i,
            "qty": -i,
        }
        for i in range(12)
    ]


def test_avro_serde_bytes_equal_javas(schema_registry, tmp_path):
    topic_in, topic_out = "orders", "big-orders"
    registry = schema_registry.client_config()
    subject_topic = unique("wire")  # the subject the writer registers the schema under
    writer = AvroSerde(registry, json.dumps(ORDER))
    inputs = [(o["id"], writer.serialize(subject_topic, o)) for o in _orders()]
    schema_id = int.from_bytes(inputs[0][1][1:5], "big")

    builder = StreamsBuilder()
    values = AvroSerde(registry, json.dumps(ORDER))
    (
        builder.stream(topic_in, key_serde=serdes.String(), value_serde=values)
        .filter(lambda key, order: order["amount"] > 10)
        .map_values(lambda order: {**order, "amount": order["amount"] * 2})
        .to(topic_out, key_serde=serdes.String(), value_serde=values)
    )
    with TopologyTestDriver(builder.build()) as driver:
        source = driver.create_input_topic(
            topic_in, key_serde=serdes.String(), value_serde=serdes.Bytes()
        )
        for key, value in inputs:
            source.pipe_input(key, value, timestamp=T0)
        sink = driver.create_output_topic(
            topic_out, key_serde=serdes.String(), value_serde=serdes.Bytes()
        )
        python = [(r.key, r.value.hex()) for r in sink.read_records_to_list()]

    # the Python side registered the schema under orders' subject: the same id, one schema
    assert int.from_bytes(bytes.fromhex(python[0][1])[1:5], "big") == schema_id
    schema_file = tmp_path / "order.avsc"
    schema_file.write_text(json.dumps(ORDER))
    classes = compile_harness()
    java = subprocess.run(
        [
            shutil.which("java") or "java",
            *JVM_FLAGS,
            "-cp",
            _classpath(classes, JARS_DIR / "*"),
            "AvroWire",
            str(schema_file),
            str(schema_id),
        ],
        input="".join(f"{key}\t{value.hex()}\n" for key, value in inputs),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    reference = [tuple(line.split("\t")) for line in java.stdout.splitlines()]
    assert len(reference) == 7  # orders 5 to 11
    assert python == reference
