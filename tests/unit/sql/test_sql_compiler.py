"""SQL vs hand-written DSL: the same random trace through both gives identical output."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from streaming import (
    BufferConfig,
    Grouped,
    Materialized,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    TopologyTestDriver,
    serdes,
)
from streaming.sql import SqlError, compile, explain
from streaming.sql.timestamps import ColumnTimestampExtractor, format_timestamp, parse_timestamp

ORDERS = """
CREATE TABLE orders (
  id STRING, region STRING, amount DOUBLE, qty BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '30' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json');
"""


def trace(seed: int, n: int = 60) -> list[tuple[str, dict, int]]:
    """Random orders, partly out of order, some with NULL amounts, TIMESTAMP text."""
    rng = random.Random(seed)
    records, clock = [], 0
    for i in range(n):
        clock += rng.randint(0, 90_000)
        ts = max(0, clock - rng.choice([0, 0, 0, 20_000, 120_000]))
        value = {
            "id": f"o{i}",
            "region": rng.choice(["EU", "US", "APAC", None]),
            "amount": rng.choice([None, *[round(rng.uniform(1, 100), 2) for _ in range(5)]]),
            "qty": rng.randint(0, 5),
            "ts": format_timestamp(ts),
        }
        records.append((f"o{i}", value, ts))
    return records


def run(topology, records, out_topic="out", key_serde=None) -> list[tuple]:
    with TopologyTestDriver(topology) as driver:
        src = driver.create_input_topic(
            "orders", key_serde=serdes.String(), value_serde=serdes.Json()
        )
        for key, value, ts in records:
            src.pipe_input(key, value, timestamp=ts)
        out = driver.create_output_topic(
            out_topic, key_serde=key_serde or serdes.String(), value_serde=serdes.Json()
        )
        return [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]


def orders_stream(builder: StreamsBuilder):
    return builder.stream(
        "orders",
        key_serde=serdes.String(),
        value_serde=serdes.Json(),
        timestamp_extractor=ColumnTimestampExtractor("ts"),
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_projection_and_where_match_the_dsl(seed):
    sql = (
        ORDERS
        + """
    CREATE TABLE out (id STRING, region STRING, total DOUBLE, big BOOLEAN, label STRING)
      WITH ('connector' = 'kafka', 'topic' = 'out', 'key.fields' = 'id');
    INSERT INTO out
    SELECT id, LOWER(COALESCE(region, 'none')) AS region, amount * qty AS total,
           CASE WHEN amount > 50 THEN TRUE ELSE FALSE END,
           CONCAT(UPPER(SUBSTRING(id, 1, 1)), CAST(qty AS STRING))
    FROM orders
    WHERE (amount IS NOT NULL AND qty > 0) OR NOT region = 'EU';
    """
    )
    builder = StreamsBuilder()

    def keep(v):
        amount, qty, region = v["amount"], v["qty"], v["region"]
        first = amount is not None and qty > 0
        second = None if region is None else region != "EU"
        return first or second is True

    def project(v):
        amount = v["amount"]
        return {
            "id": v["id"],
            "region": (v["region"] or "none").lower(),
            "total": None if amount is None else amount * v["qty"],
            "big": amount is not None and amount > 50,
            "label": v["id"][:1].upper() + str(v["qty"]),
        }

    orders_stream(builder).filter(lambda k, v: keep(v)).map(lambda k, v: (v["id"], project(v))).to(
        "out", key_serde=serdes.String(), value_serde=serdes.Json()
    )
    records = trace(seed)
    expected = run(builder.build(), records)
    assert expected
    assert run(compile(sql), records) == expected


def windowed_dsl(size, slide, emit_final):
    builder = StreamsBuilder()
    windows = TimeWindows.of_size_and_grace(timedelta(milliseconds=size), timedelta(seconds=30))
    if slide != size:
        windows = windows.advance_by(slide)
    table = (
        orders_stream(builder)
        .group_by(
            lambda k, v: [v["region"]],
            Grouped.with_(key_serde=serdes.Json(), value_serde=serdes.Json()),
        )
        .windowed_by(windows)
        .aggregate(
            lambda: [0, None, [0, 0], None],
            lambda k, v, a: [
                a[0] + 1,
                a[1] if v["amount"] is None else (a[1] or 0) + v["amount"],
                a[2] if v["amount"] is None else [a[2][0] + v["amount"], a[2][1] + 1],
                v["qty"] if a[3] is None else max(a[3], v["qty"]),
            ],
            materialized=Materialized.as_("agg")
            .with_key_serde(serdes.Json())
            .with_value_serde(serdes.Json()),
        )
    )
    if emit_final:
        table = table.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
    table.to_stream().map(
        lambda k, a: (
            k.key[0],
            {
                "region": k.key[0],
                "window_start": format_timestamp(k.window.start),
                "window_end": k.window.end,
                "orders": a[0],
                "revenue": a[1],
                "avg_amount": a[2][0] / a[2][1] if a[2][1] else None,
                "max_qty": a[3],
            },
        )
    ).to("out", key_serde=serdes.String(), value_serde=serdes.Json())
    return builder.build()


SINK = """
CREATE TABLE out (region STRING, window_start TIMESTAMP(3), window_end BIGINT, orders BIGINT,
                  revenue DOUBLE, avg_amount DOUBLE, max_qty BIGINT,
                  PRIMARY KEY (region, window_start) NOT ENFORCED)
  WITH ('connector' = 'kafka', 'topic' = 'out', 'key.fields' = 'region');
"""


@pytest.mark.parametrize("emit", ["", "EMIT CHANGES", "EMIT FINAL"])
@pytest.mark.parametrize("seed", [4, 5])
def test_tumble_group_window_matches_the_dsl(seed, emit):
    sql = (
        ORDERS
        + SINK
        + f"""
    INSERT INTO out
    SELECT region, TUMBLE_START(ts, INTERVAL '5' MINUTE), TUMBLE_END(ts, INTERVAL '5' MINUTE),
           COUNT(*), SUM(amount), AVG(amount), MAX(qty)
    FROM orders GROUP BY region, TUMBLE(ts, INTERVAL '5' MINUTE) {emit};
    """
    )
    records = trace(seed)
    # final (one row per window once it closes) unless EMIT CHANGES
    expected = run(windowed_dsl(300_000, 300_000, emit != "EMIT CHANGES"), records)
    assert expected
    assert run(compile(sql), records) == expected


@pytest.mark.parametrize("emit", ["", "EMIT CHANGES", "EMIT FINAL"])
def test_tumble_tvf_matches_the_dsl(emit):
    sql = (
        ORDERS
        + SINK
        + f"""
    INSERT INTO out
    SELECT region, window_start, window_end, COUNT(id), SUM(amount), AVG(amount), MAX(qty)
    FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '5' MINUTES))
    GROUP BY window_start, window_end, region {emit};
    """
    )
    records = trace(6)
    expected = run(windowed_dsl(300_000, 300_000, emit != "EMIT CHANGES"), records)
    assert run(compile(sql), records) == expected


@pytest.mark.parametrize("emit", ["", "EMIT CHANGES"])
def test_hop_both_forms_match_the_dsl(emit):
    group_window = (
        ORDERS
        + SINK
        + f"""
    INSERT INTO out
    SELECT region, HOP_START(ts, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE),
           HOP_END(ts, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE),
           COUNT(*), SUM(amount), AVG(amount), MAX(qty)
    FROM orders GROUP BY HOP(ts, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE), region {emit};
    """
    )
    tvf = (
        ORDERS
        + SINK
        + f"""
    INSERT INTO out
    SELECT region, window_start, window_end, COUNT(*), SUM(amount), AVG(amount), MAX(qty)
    FROM TABLE(HOP(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '5' MINUTE))
    GROUP BY window_start, window_end, region {emit};
    """
    )
    records = trace(7)
    expected = run(windowed_dsl(300_000, 60_000, emit != "EMIT CHANGES"), records)
    assert expected
    assert run(compile(group_window), records) == expected
    assert run(compile(tvf), records) == expected


def test_non_windowed_group_by_is_a_table_aggregation():
    sql = (
        ORDERS
        + """
    CREATE TABLE out (region STRING, n BIGINT, low DOUBLE)
      WITH ('connector' = 'upsert-kafka', 'topic' = 'out', 'key.fields' = 'region');
    INSERT INTO out SELECT region, COUNT(*), MIN(amount) FROM orders GROUP BY region EMIT CHANGES;
    """
    )
    builder = StreamsBuilder()
    (
        orders_stream(builder)
        .group_by(
            lambda k, v: [v["region"]],
            Grouped.with_(key_serde=serdes.Json(), value_serde=serdes.Json()),
        )
        .aggregate(
            lambda: [0, None],
            lambda k, v, a: [
                a[0] + 1,
                a[1] if v["amount"] is None else min(a[1] or v["amount"], v["amount"]),
            ],
            materialized=Materialized.as_("agg")
            .with_key_serde(serdes.Json())
            .with_value_serde(serdes.Json()),
        )
        .to_stream()
        .map(lambda k, a: (k[0], {"region": k[0], "n": a[0], "low": a[1]}))
        .to("out", key_serde=serdes.String(), value_serde=serdes.Json())
    )
    records = trace(8)
    assert run(compile(sql), records) == run(builder.build(), records)


def test_upsert_table_source_passes_keys_and_deletes():
    sql = """
    CREATE TABLE customers (id STRING, name STRING, tier STRING, PRIMARY KEY (id) NOT ENFORCED)
      WITH ('connector' = 'upsert-kafka', 'topic' = 'orders', 'key.format' = 'raw');
    CREATE TABLE out (id STRING, name STRING, PRIMARY KEY (id) NOT ENFORCED)
      WITH ('connector' = 'upsert-kafka', 'topic' = 'out');
    INSERT INTO out SELECT id, UPPER(name) FROM customers WHERE tier = 'gold';
    """
    builder = StreamsBuilder()
    (
        builder.table("orders", key_serde=serdes.String(), value_serde=serdes.Json())
        .filter(lambda k, v: isinstance(v, dict) and v["tier"] == "gold")
        .map_values(lambda v: None if v is None else {"id": v["id"], "name": v["name"].upper()})
        .to_stream()
        .to("out", key_serde=serdes.String(), value_serde=serdes.Json())
    )
    records = [
        ("c1", {"id": "c1", "name": "ann", "tier": "gold"}, 1),
        ("c2", {"id": "c2", "name": "bob", "tier": "silver"}, 2),
        ("c1", {"id": "c1", "name": "ann", "tier": "silver"}, 3),
        ("c2", {"id": "c2", "name": "bob", "tier": "gold"}, 4),
    ]
    expected = run(builder.build(), records)
    # c1 leaves the result (a delete), c2 enters it; filtered rows are deletes, as in Kafka
    assert expected[-2:] == [("c1", None, 3), ("c2", {"id": "c2", "name": "BOB"}, 4)]
    assert run(compile(sql), records) == expected


def test_bigint_event_time_and_timestamp_text():
    assert parse_timestamp("2024-01-01 10:00:00.123") == 1704103200123
    assert parse_timestamp("2024-01-01T10:00:00Z") == 1704103200000
    assert parse_timestamp(1704103200000) == 1704103200000
    assert format_timestamp(1704103200123) == "2024-01-01 10:00:00.123"
    sql = """
    CREATE TABLE orders (region STRING, amount DOUBLE, ts BIGINT,
      WATERMARK FOR ts AS ts) WITH ('topic' = 'orders');
    CREATE TABLE out (region STRING, ws BIGINT, total DOUBLE) WITH ('topic' = 'out');
    INSERT INTO out SELECT region, TUMBLE_START(ts, INTERVAL '1' MINUTE), SUM(amount)
    FROM orders GROUP BY region, TUMBLE(ts, INTERVAL '1' MINUTE) EMIT FINAL;
    """
    records = [
        ("a", {"region": "EU", "amount": 1.0, "ts": 10_000}, 0),
        ("b", {"region": "EU", "amount": 2.0, "ts": 50_000}, 0),
        ("c", {"region": "EU", "amount": 4.0, "ts": 130_000}, 0),
    ]
    assert run(compile(sql), records) == [(None, {"region": "EU", "ws": 0, "total": 3.0}, 50_000)]


def test_explain_returns_the_topology_description():
    sql = (
        ORDERS
        + """
    CREATE TABLE out (id STRING) WITH ('topic' = 'out');
    EXPLAIN INSERT INTO out SELECT id FROM orders;
    """
    )
    text = explain(sql)
    assert text.startswith("Topologies:")
    assert "(topics: [orders])" in text and "(topic: out)" in text
    assert text == str(compile(sql).describe())


def error_of(sql: str) -> SqlError:
    with pytest.raises(SqlError) as info:
        compile(sql)
    return info.value


BASE = ORDERS + "CREATE TABLE out (id STRING, n BIGINT) WITH ('topic' = 'out');\n"
BASE_LINES = BASE.count("\n")


@pytest.mark.parametrize(
    ("query", "column", "message"),
    [
        (
            "INSERT INTO out SELECT nope, qty FROM orders;",
            24,
            "unknown column nope in table orders",
        ),
        ("INSERT INTO out SELECT id, qty FROM missing;", 37, "unknown table missing"),
        ("INSERT INTO nowhere SELECT id, qty FROM orders;", 13, "unknown table nowhere"),
        (
            "INSERT INTO out SELECT id, qty FROM orders WHERE id + 1 > 2;",
            50,
            "type mismatch: + needs numbers, id is STRING",
        ),
        (
            "INSERT INTO out SELECT id, id FROM orders;",
            28,
            "type mismatch: id is STRING, sink column out.n is BIGINT",
        ),
        (
            "INSERT INTO out SELECT id, COUNT(*) FROM orders GROUP BY region EMIT FINAL;",
            65,
            "EMIT FINAL needs a windowed aggregation",
        ),
        (
            "INSERT INTO out SELECT id, COUNT(*) FROM orders GROUP BY region;",
            24,
            "column id must be in GROUP BY or inside an aggregate",
        ),
        (
            "INSERT INTO out SELECT region, SUM(region) FROM orders GROUP BY region;",
            32,
            "type mismatch: SUM needs numbers",
        ),
        ("INSERT INTO out SELECT id FROM orders;", 17, "the query has 1 columns, sink out has 2"),
        (
            "INSERT INTO out SELECT id, qty FROM orders WHERE qty;",
            50,
            "type mismatch: WHERE needs a BOOLEAN",
        ),
        ("SELECT id FROM orders;", 1, "a SELECT needs INSERT INTO"),
        ("INSERT INTO out SELECT id, qty FROM orders WHERE (;", 50, "syntax error"),
    ],
)
def test_errors_point_at_line_and_column(query, column, message):
    error = error_of(BASE + query)
    assert message in error.message
    assert (error.line, error.column) == (BASE_LINES + 1, column), str(error)
    assert str(error).startswith(f"line {BASE_LINES + 1}, column {column}: ")


def test_window_needs_a_watermarked_time_attribute():
    sql = """CREATE TABLE t (k STRING, ts BIGINT) WITH ('topic' = 't');
CREATE TABLE out (k STRING, n BIGINT) WITH ('topic' = 'out');
INSERT INTO out SELECT k, COUNT(*) FROM t GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE);"""
    error = error_of(sql)
    assert (error.line, error.column) == (3, 55)
    assert "ts is not a time attribute of t: declare WATERMARK FOR ts" in error.message


def test_tokenizer_errors_are_sql_errors():
    error = error_of("CREATE TABLE t (k STRING) WITH ('topic' = 't);")
    assert error.line == 1


def test_ddl_errors_name_the_problem():
    error = error_of(
        "CREATE TABLE t (k STRING, PRIMARY KEY (x) NOT ENFORCED) WITH ('topic' = 't');"
    )
    assert "PRIMARY KEY names unknown column x" in error.message
    error = error_of(
        "CREATE TABLE t (k STRING,\n  WATERMARK FOR k AS k - INTERVAL '1' SECOND) WITH ('topic' = 't');"
    )
    assert (error.line, error.column) == (2, 3)
    assert "must be TIMESTAMP(3) or BIGINT" in error.message
    error = error_of("CREATE TABLE t (k STRING) WITH ('topic' = 't', 'format' = 'xml');")
    assert "unsupported 'format' 'xml': use one of json, csv, avro, raw" in error.message
    # a computed column reads the table's columns
    error = error_of("CREATE TABLE t (k STRING,\n  n AS CHAR_LENGTH(x)) WITH ('topic' = 't');")
    assert (error.line, error.column) == (2, 20)
    assert "unknown column x in table t" in error.message


def test_docs_sql_example_runs_as_written(capsys):
    from pathlib import Path

    page = (Path(__file__).resolve().parents[3] / "docs" / "sql" / "index.md").read_text()
    section = page.split("# Streaming SQL\n", 1)[1]
    block = section.split("```python\n", 1)[1].split("```", 1)[0]
    exec(block, {})
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "{'region': 'EU', 'window_start': '2024-01-01 10:00:00.000', "
        "'window_end': '2024-01-01 10:05:00.000', 'revenue': 14.5}"
    ]


@pytest.mark.parametrize(
    ("query", "why"),
    [
        ("INSERT INTO out SELECT id, tier FROM c;", "the rows of c (an upsert table) are updated"),
        (
            "INSERT INTO out SELECT a.id, b.tier FROM c a JOIN c2 b ON a.id = b.id;",
            "a join of two tables updates and deletes its rows",
        ),
    ],
)
def test_an_updating_result_needs_a_sink_with_a_key(query, why):
    tables = """CREATE TABLE c (id STRING, tier STRING, PRIMARY KEY (id) NOT ENFORCED)
  WITH ('connector' = 'upsert-kafka', 'topic' = 'c');
CREATE TABLE c2 (id STRING, tier STRING, PRIMARY KEY (id) NOT ENFORCED)
  WITH ('connector' = 'upsert-kafka', 'topic' = 'c2');
CREATE TABLE out (id STRING, tier STRING) WITH ('topic' = 'out');
"""
    error = error_of(tables + query)
    assert (error.line, error.column) == (6, 1)
    assert "the sink out is append-only" in error.message and why in error.message
    # with a key the sink takes the updates
    keyed = tables.replace(
        "CREATE TABLE out (id STRING, tier STRING) WITH ('topic' = 'out');",
        "CREATE TABLE out (id STRING, tier STRING, PRIMARY KEY (id) NOT ENFORCED) "
        "WITH ('connector' = 'upsert-kafka', 'topic' = 'out');",
    )
    compile(keyed + query)
    # ... keyed by the source's key: the rows keep their Kafka keys, deletes included
    rekeyed = keyed.replace(
        "out (id STRING, tier STRING, PRIMARY KEY (id)",
        "out (id STRING, tier STRING, PRIMARY KEY (tier)",
    )
    error = error_of(rekeyed + query)
    assert (
        "keep its key (id, 'key.format' raw): select it into the key of the sink out (tier"
        in error.message
    )


@pytest.mark.parametrize("emit", ["", "EMIT FINAL"])
def test_late_topic_gets_each_row_a_windowed_aggregation_left_out(emit):
    sql = (
        ORDERS
        + SINK
        + f"""
    INSERT INTO out
    SELECT region, window_start, window_end, COUNT(*), SUM(amount), AVG(amount), MAX(qty)
    FROM TABLE(HOP(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '5' MINUTE))
    GROUP BY window_start, window_end, region {emit};
    """
    )
    records = trace(11, n=120)
    with TopologyTestDriver(compile(sql, late_topic="late")) as driver:
        src = driver.create_input_topic("orders", serdes.String(), serdes.Json())
        for key, value, ts in records:
            src.pipe_input(key, value, timestamp=ts)
        late = driver.create_output_topic("late", serdes.Json(), serdes.Json())
        rows = [(r.key, r.value) for r in late.read_records_to_list()]
        dropped = driver.metrics()["late-records-dropped-total"]
        out = driver.create_output_topic("out", serdes.String(), serdes.Json())
        output = [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]
    # the trace holds orders 2 minutes late: with 30 s of watermark delay some windows of
    # each are closed; every one of them is a row, and the aggregation counted it dropped
    assert rows and len(rows) == dropped
    for key, row in rows:
        assert key == [row["region"]] and row["result"] == "out"
        start, end = row["window_start"], row["window_end"]
        assert end - start == 300_000 and start % 60_000 == 0
        assert start <= parse_timestamp(row["ts"]) < end <= row["stream_time"] - 30_000
    # the aggregation's own output is the same with the late rows written or not
    assert output == run(compile(sql), records)


def test_legacy_connector_options_are_an_error_naming_them():
    ddl = """
    CREATE TABLE side (k BIGINT, v STRING) WITH (
      'connector.type' = 'kafka', 'connector.topic' = 'side', 'format.type' = 'json');
    """
    with pytest.raises(SqlError, match=r"the legacy 'connector\.type' = 'kafka' options"):
        compile(ddl)
