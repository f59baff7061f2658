"""Value formats of SQL tables (csv, avro, raw): the bytes each writes, what it reads back,
and a clear SerializationError for bytes it cannot read."""

from __future__ import annotations

import random
import re
import struct

import pytest

from streaming.errors import SerializationError
from streaming.sql.formats import AvroRows, ColumnType, CsvRows, RawRows, avro_schema
from streaming.sql.timestamps import format_timestamp

COLUMNS = {
    "id": ColumnType("STRING", "VARCHAR"),
    "qty": ColumnType("BIGINT", "INT"),
    "total": ColumnType("BIGINT", "BIGINT"),
    "price": ColumnType("DOUBLE", "DOUBLE"),
    "ok": ColumnType("BOOLEAN", "BOOLEAN"),
    "ts": ColumnType("TIMESTAMP", "TIMESTAMP", 3),
}


def _zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def test_avro_schema_is_flinks_record_of_nullable_fields():
    schema = avro_schema(
        {
            **COLUMNS,
            "amount": ColumnType("DOUBLE", "DECIMAL", 10, 2),
            "f": ColumnType("DOUBLE", "FLOAT"),
        }
    )
    assert schema["type"] == "record" and schema["name"] == "record"
    assert [(f["name"], f["type"]) for f in schema["fields"]] == [
        ("id", ["null", "string"]),
        ("qty", ["null", "int"]),
        ("total", ["null", "long"]),
        ("price", ["null", "double"]),
        ("ok", ["null", "boolean"]),
        ("ts", ["null", {"type": "long", "logicalType": "timestamp-millis"}]),
        (
            "amount",
            ["null", {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}],
        ),
        ("f", ["null", "float"]),
    ]
    assert all(f["default"] is None for f in schema["fields"])


def test_avro_writes_the_binary_encoding_of_the_spec():
    rows = AvroRows(COLUMNS)
    ts = 1_704_103_260_123  # 2024-01-01 10:01:00.123
    value = {
        "id": "o1",
        "qty": -3,
        "total": 1 << 40,
        "price": 1.5,
        "ok": True,
        "ts": format_timestamp(ts),
    }
    expected = (
        b"\x02"
        + _zigzag(2)
        + b"o1"  # union branch 1 (string), length, bytes
        + b"\x02"
        + _zigzag(-3)
        + b"\x02"
        + _zigzag(1 << 40)
        + b"\x02"
        + struct.pack("<d", 1.5)
        + b"\x02"
        + b"\x01"
        + b"\x02"
        + _zigzag(ts)
    )
    assert rows.serialize("t", value) == expected
    assert rows.deserialize("t", expected) == value
    # NULLs are the union's first branch
    nulls = dict.fromkeys(COLUMNS)
    assert rows.serialize("t", nulls) == b"\x00" * len(COLUMNS)
    assert rows.deserialize("t", b"\x00" * len(COLUMNS)) == nulls


def test_avro_round_trips_random_rows_and_reads_timestamps_as_sql_text():
    rows = AvroRows({**COLUMNS, "amount": ColumnType("DOUBLE", "DECIMAL", 10, 2)})
    rng = random.Random(3)
    for _ in range(300):
        ts = rng.randint(0, 4_000_000_000_000)
        value = {
            "id": rng.choice([None, "", "é€", "x" * rng.randint(0, 300)]),
            "qty": rng.choice([None, 0, -(1 << 31), (1 << 31) - 1]),
            "total": rng.choice([None, -(1 << 63), (1 << 63) - 1, rng.randint(-9, 9)]),
            "price": rng.choice([None, 0.1, -2.5e300, rng.random()]),
            "ok": rng.choice([None, True, False]),
            "ts": rng.choice([None, ts, format_timestamp(ts)]),
            "amount": rng.choice([None, 12.34, -0.01, 99999999.99]),
        }
        back = rows.deserialize("t", rows.serialize("t", value))
        assert back == {**value, "ts": None if value["ts"] is None else format_timestamp(ts)}


def test_avro_refuses_what_it_cannot_encode_or_read():
    rows = AvroRows(COLUMNS)
    with pytest.raises(SerializationError, match="not a TIMESTAMP"):
        rows.serialize("t", {"ts": "yesterday"})
    with pytest.raises(SerializationError, match="cannot encode"):
        rows.serialize("t", {"qty": "three"})
    good = rows.serialize("t", {"id": "a", "qty": 1})
    with pytest.raises(SerializationError, match="invalid Avro"):
        rows.deserialize("t", good[:1] + b"\x7f")
    with pytest.raises(SerializationError, match="bytes after the record"):
        rows.deserialize("t", good + b"\x00")
    assert rows.serialize("t", None) is None and rows.deserialize("t", None) is None


def test_csv_writes_declared_order_quotes_when_needed_and_nulls_empty():
    rows = CsvRows(COLUMNS)
    value = {
        "ok": False,
        "id": 'say "hi", bye',
        "qty": 3,
        "total": None,
        "price": 2.5,
        "ts": "2024-01-01 10:00:00.000",
    }
    data = rows.serialize("t", value)
    assert data == b'"say ""hi"", bye",3,,2.5,false,2024-01-01 10:00:00.000'
    assert rows.deserialize("t", data) == value
    assert rows.deserialize("t", b",,,,,") == {**dict.fromkeys(COLUMNS), "id": ""}


def test_csv_options_and_errors():
    rows = CsvRows(
        {"a": ColumnType("STRING"), "n": ColumnType("BIGINT")}, delimiter="|", null_literal="\\N"
    )
    assert rows.serialize("t", {"a": None, "n": 7}) == b"\\N|7"
    assert rows.deserialize("t", b"\\N|7") == {"a": None, "n": 7}
    assert rows.deserialize("t", b"a,b|") == {"a": "a,b", "n": None}
    with pytest.raises(SerializationError, match="2 columns"):
        rows.deserialize("t", b"1|2|3")
    with pytest.raises(SerializationError, match="n is not a BIGINT"):
        rows.deserialize("t", b"x|seven")
    with pytest.raises(SerializationError, match="not a BOOLEAN"):
        CsvRows({"b": ColumnType("BOOLEAN")}).deserialize("t", b"yes")


def test_csv_round_trips_random_rows():
    rows = CsvRows(COLUMNS)
    rng = random.Random(5)
    alphabet = ["a", ",", '"', "\n", " ", "é"]
    for _ in range(300):
        value = {
            "id": "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8))),
            "qty": rng.choice([None, -5, 0, 12]),
            "total": rng.choice([None, 1 << 50]),
            "price": rng.choice([None, 0.1, 1e-300, -3.25]),
            "ok": rng.choice([None, True, False]),
            "ts": rng.choice([None, "2024-01-01 10:00:00.250"]),
        }
        assert rows.deserialize("t", rows.serialize("t", value)) == value


def test_raw_is_one_string_column():
    rows = RawRows({"line": ColumnType("STRING")})
    assert rows.serialize("t", {"line": "héllo"}) == "héllo".encode()
    assert rows.deserialize("t", b"hi") == {"line": "hi"}
    assert rows.serialize("t", {"line": None}) is None
    assert rows.deserialize("t", None) is None
    with pytest.raises(SerializationError, match="UTF-8"):
        rows.deserialize("t", b"\xff")


# -- tables in these formats, compiled ---------------------------------------------------

ORDERS_COLUMNS = """id STRING, region STRING, amount DECIMAL(10, 2), qty INT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '30' SECOND"""
QUERY = """
INSERT INTO revenue
SELECT region, window_start, SUM(amount), SUM(qty), COUNT(*)
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
WHERE region IS NOT NULL
GROUP BY window_start, window_end, region
EMIT FINAL;
"""


def _program(in_format: str, out_format: str) -> str:
    # CSV reads an empty field of a STRING column as '' (as Flink does): a NULL string
    # needs a null literal to come back as NULL
    def extra(fmt: str) -> str:
        return ", 'csv.null-literal' = 'N/A'" if fmt == "csv" else ""

    return f"""
CREATE TABLE orders ({ORDERS_COLUMNS}) WITH ('connector' = 'kafka', 'topic' = 'orders',
  'format' = '{in_format}'{extra(in_format)});
CREATE TABLE revenue (region STRING, window_start TIMESTAMP(3), revenue DOUBLE, qty BIGINT,
  n BIGINT) WITH ('connector' = 'kafka', 'topic' = 'revenue', 'value.format' = '{out_format}',
  'key.fields' = 'region'{extra(out_format)});
{QUERY}"""


def _orders(seed: int, n: int = 120) -> list[tuple[str, dict, int]]:
    rng = random.Random(seed)
    records, clock = [], 0
    for i in range(n):
        clock += rng.randint(0, 20_000)
        ts = max(0, clock - rng.choice([0, 0, 10_000, 70_000]))
        value = {
            "id": f"o{i}",
            "region": rng.choice(["EU", "US, east", 'say "x"', None]),
            "amount": rng.choice([None, 1.25, 10.5, 99.99]),
            "qty": rng.choice([None, 0, 3]),
            "ts": format_timestamp(ts),
        }
        records.append((f"o{i}", value, ts))
    return records


def _run(in_format: str, out_format: str, records) -> list[tuple]:
    from streaming import TopologyTestDriver, serdes
    from streaming.sql import compile
    from streaming.sql.results import catalog_of

    topology = compile(_program(in_format, out_format))
    # the tables' own serdes put the rows on the topic and read them back
    tables = catalog_of(topology).tables
    orders_serde = tables["orders"].value_serde()
    revenue_serde = tables["revenue"].value_serde()
    with TopologyTestDriver(topology) as driver:
        src = driver.create_input_topic(
            "orders", key_serde=serdes.String(), value_serde=orders_serde
        )
        for key, value, ts in records:
            src.pipe_input(key, value, timestamp=ts)
        out = driver.create_output_topic(
            "revenue", key_serde=serdes.String(), value_serde=revenue_serde
        )
        return [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]


@pytest.mark.parametrize("fmt", ["csv", "avro"])
@pytest.mark.parametrize("seed", [1, 2])
def test_a_query_over_csv_or_avro_writes_what_it_writes_over_json(fmt, seed):
    records = _orders(seed)
    expected = _run("json", "json", records)
    assert len(expected) > 5
    assert _run(fmt, fmt, records) == expected
    assert _run(fmt, "json", records) == expected


def test_undecodable_values_fail_with_the_formats_reason():
    from streaming import TopologyTestDriver, serdes
    from streaming.errors import StreamsException
    from streaming.sql import compile

    with TopologyTestDriver(compile(_program("csv", "json"))) as driver:
        src = driver.create_input_topic(
            "orders", key_serde=serdes.String(), value_serde=serdes.Bytes()
        )
        with pytest.raises(StreamsException, match="amount is not a DOUBLE"):
            src.pipe_input("o1", b"o1,EU,lots,1,2024-01-01 10:00:00.000", timestamp=0)


@pytest.mark.parametrize(
    ("ddl", "message"),
    [
        ("(a STRING) WITH ('format' = 'thrift')", "unsupported 'format' 'thrift'"),
        ("(a STRING, b STRING) WITH ('format' = 'raw')", "holds one STRING column"),
        ("(a BIGINT) WITH ('format' = 'raw')", "holds one STRING column"),
        ("(a DECIMAL) WITH ('format' = 'avro')", "needs a precision"),
        ("(a STRING) WITH ('format' = 'csv', 'csv.field-delimiter' = '||')", "one character"),
    ],
)
def test_format_errors_point_at_the_table(ddl, message):
    from streaming.sql import SqlError, compile

    with pytest.raises(SqlError, match=rf"line 2, column \d+: .*{re.escape(message)}"):
        compile(f"\nCREATE TABLE t {ddl};")


def test_raw_table_lines_through_a_query():
    from streaming import TopologyTestDriver, serdes
    from streaming.sql import compile

    topology = compile(
        """
CREATE TABLE lines (line STRING) WITH ('topic' = 'lines', 'format' = 'raw');
CREATE TABLE shouted (line STRING) WITH ('topic' = 'shouted', 'format' = 'raw');
INSERT INTO shouted SELECT UPPER(line) FROM lines WHERE CHAR_LENGTH(line) > 2;
"""
    )
    with TopologyTestDriver(topology) as driver:
        src = driver.create_input_topic(
            "lines", key_serde=serdes.String(), value_serde=serdes.Bytes()
        )
        for text in (b"hello", b"no", "\u00e9t\u00e9".encode()):
            src.pipe_input(None, text, timestamp=0)
        out = driver.create_output_topic(
            "shouted", key_serde=serdes.String(), value_serde=serdes.Bytes()
        )
        assert [r.value for r in out.read_records_to_list()] == [b"HELLO", "\u00c9T\u00c9".encode()]


def test_json_writes_iso_timestamps_when_asked():
    from streaming import TopologyTestDriver, serdes
    from streaming.sql import SqlError, compile

    program = _program("json", "json").replace(
        "'key.fields' = 'region'",
        "'key.fields' = 'region', 'json.timestamp-format.standard' = 'ISO-8601'",
    )
    records = _orders(1)
    expected = _run("json", "json", records)
    with TopologyTestDriver(compile(program)) as driver:
        src = driver.create_input_topic(
            "orders", key_serde=serdes.String(), value_serde=serdes.Json()
        )
        for key, value, ts in records:
            # ISO-8601 event times are read as well
            src.pipe_input(key, {**value, "ts": value["ts"].replace(" ", "T")}, timestamp=ts)
        out = driver.create_output_topic(
            "revenue", key_serde=serdes.String(), value_serde=serdes.Json()
        )
        got = [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]
    assert [
        (k, {**v, "window_start": v["window_start"].replace(" ", "T")}, t) for k, v, t in expected
    ] == got
    assert all("T" in v["window_start"] for _, v, _ in got)
    with pytest.raises(SqlError, match=re.escape("'json.timestamp-format.standard' is 'RFC'")):
        compile(program.replace("'ISO-8601'", "'RFC'"))
