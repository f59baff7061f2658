"""SESSION windows, COUNT(DISTINCT) and HAVING vs hand-written DSL aggregations."""

from __future__ import annotations

import random

import pytest

from streaming import (
    BufferConfig,
    Grouped,
    Materialized,
    SessionWindows,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    TopologyTestDriver,
    serdes,
)
from streaming.sql import SqlError, compile
from streaming.sql.timestamps import ColumnTimestampExtractor, format_timestamp

ORDERS = """
CREATE TABLE orders (
  id STRING, region STRING, amount DOUBLE, qty BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '30' SECOND
) WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json');
"""

S = {"key_serde": serdes.String(), "value_serde": serdes.Json()}
J = {"key_serde": serdes.Json(), "value_serde": serdes.Json()}


def trace(seed: int, n: int = 80) -> list[tuple[str, dict, int]]:
    """Random orders in bursts (sessions), partly out of order, some NULL amounts."""
    rng = random.Random(seed)
    records, clock = [], 0
    for i in range(n):
        clock += rng.choice([5_000, 20_000, 60_000, 400_000])
        ts = max(0, clock - rng.choice([0, 0, 0, 20_000, 120_000]))
        value = {
            "id": f"o{i}",
            "region": rng.choice(["EU", "US", None]),
            "amount": rng.choice([None, 5.0, 30.0, 70.0]),
            "qty": rng.randint(0, 3),
            "ts": format_timestamp(ts),
        }
        records.append((f"o{i}", value, ts))
    return records


def run(topology, records, key_serde=None) -> list[tuple]:
    with TopologyTestDriver(topology) as driver:
        src = driver.create_input_topic("orders", **S)
        for key, value, ts in records:
            src.pipe_input(key, value, timestamp=ts)
        out = driver.create_output_topic(
            "out", key_serde=key_serde or serdes.String(), value_serde=serdes.Json()
        )
        return [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]


def grouped_by_region(builder: StreamsBuilder):
    return (
        builder.stream("orders", **S, timestamp_extractor=ColumnTimestampExtractor("ts"))
        .filter(lambda k, v: isinstance(v, dict))
        .group_by(lambda k, v: [v["region"]], Grouped.with_(**J))
    )


def store():
    return Materialized.as_("agg").with_key_serde(serdes.Json()).with_value_serde(serdes.Json())


def add(k, v, a):
    """COUNT(*), COUNT(DISTINCT qty), SUM(amount)."""
    amount = v["amount"]
    return [
        a[0] + 1,
        a[1] if v["qty"] in a[1] else [*a[1], v["qty"]],
        a[2] if amount is None else (a[2] or 0) + amount,
    ]


def merge(k, a, b):
    total = b[2] if a[2] is None else (a[2] if b[2] is None else a[2] + b[2])
    return [a[0] + b[0], [*a[1], *(q for q in b[1] if q not in a[1])], total]


SESSION_SINK = """
CREATE TABLE out (region STRING, s TIMESTAMP(3), e BIGINT, n BIGINT, kinds BIGINT, total DOUBLE,
  PRIMARY KEY (region, s) NOT ENFORCED)
  WITH ('connector' = 'kafka', 'topic' = 'out', 'key.fields' = 'region');
"""


def session_dsl(emit_final: bool):
    builder = StreamsBuilder()
    table = (
        grouped_by_region(builder)
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(300_000, 30_000))
        .aggregate(lambda: [0, [], None], add, merge, materialized=store())
    )
    if emit_final:
        table = table.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))

    def row(k, a):
        if a is None:  # a session merged into a longer one: a delete
            return None
        return {
            "region": k.key[0],
            "s": format_timestamp(k.window.start),
            "e": k.window.end + 300_000,
            "n": a[0],
            "kinds": len(a[1]),
            "total": a[2],
        }

    out = table.to_stream().map(lambda k, a: (k.key[0], row(k, a)))
    if emit_final:
        out = out.filter(lambda k, v: v is not None)
    out.to("out", **S)
    return builder.build()


@pytest.mark.parametrize("emit", ["", "EMIT CHANGES", "EMIT FINAL"])
@pytest.mark.parametrize("seed", [1, 2])
def test_session_group_window_matches_the_dsl(seed, emit):
    sql = (
        ORDERS
        + SESSION_SINK
        + f"""
    INSERT INTO out
    SELECT region, SESSION_START(ts, INTERVAL '5' MINUTE), SESSION_END(ts, INTERVAL '5' MINUTE),
           COUNT(*), COUNT(DISTINCT qty), SUM(amount)
    FROM orders GROUP BY SESSION(ts, INTERVAL '5' MINUTE), region {emit};
    """
    )
    records = trace(seed)
    # final (one row per session once it closes) unless EMIT CHANGES
    expected = run(session_dsl(emit != "EMIT CHANGES"), records)
    assert expected
    if emit == "EMIT CHANGES":
        assert any(v is None for _, v, _ in expected)  # merged sessions were deleted
    assert run(compile(sql), records) == expected


def test_session_tvf_matches_the_dsl():
    sql = (
        ORDERS
        + SESSION_SINK
        + """
    INSERT INTO out
    SELECT region, window_start, window_end, COUNT(*), COUNT(DISTINCT qty), SUM(amount)
    FROM TABLE(SESSION(TABLE orders PARTITION BY region, DESCRIPTOR(ts), INTERVAL '5' MINUTES))
    GROUP BY window_start, window_end, region EMIT FINAL;
    """
    )
    records = trace(3)
    expected = run(session_dsl(True), records)
    assert expected
    assert run(compile(sql), records) == expected


def having_dsl(keyed: bool):
    builder = StreamsBuilder()
    table = grouped_by_region(builder).aggregate(lambda: [0, [], None], add, materialized=store())

    def passes(a):
        return a[2] is not None and a[2] > 100 and len(a[1]) >= 2

    out = table.to_stream().map(
        lambda k, a: (
            k[0] if keyed else None,
            {"region": k[0], "n": a[0]} if passes(a) else None,
        )
    )
    if not keyed:
        out = out.filter(lambda k, v: v is not None)
    out.to("out", **S)
    return builder.build()


@pytest.mark.parametrize("connector", ["kafka", "upsert-kafka"])
def test_having_deletes_failing_rows_of_a_keyed_sink(connector):
    sql = (
        ORDERS
        + f"""
    CREATE TABLE out (region STRING, n BIGINT, PRIMARY KEY (region) NOT ENFORCED)
      WITH ('connector' = '{connector}', 'topic' = 'out');
    INSERT INTO out SELECT region, COUNT(*) FROM orders GROUP BY region
    HAVING SUM(amount) > 100 AND COUNT(DISTINCT qty) >= 2;
    """
    )
    records = trace(4)
    expected = run(having_dsl(True), records)
    assert any(v for _, v, _ in expected)
    assert any(v is None for _, v, _ in expected)
    assert run(compile(sql), records) == expected


@pytest.mark.parametrize(
    ("sink", "query"),
    [
        ("'key.fields' = 'region'", "SELECT region, COUNT(*) FROM orders GROUP BY region"),
        ("", "SELECT region, COUNT(*) FROM orders GROUP BY region HAVING COUNT(*) > 1"),
        (
            "'key.fields' = 'region'",
            "SELECT region, COUNT(*) FROM orders "
            "GROUP BY region, TUMBLE(ts, INTERVAL '1' MINUTE) EMIT CHANGES",
        ),
        (
            "'key.fields' = 'region'",
            "SELECT region, COUNT(*) FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), "
            "INTERVAL '1' MINUTE)) GROUP BY window_start, window_end, region EMIT CHANGES",
        ),
    ],
)
def test_an_updating_result_into_an_append_only_sink_is_an_error(sink, query):
    # Flink: "Table sink doesn't support consuming update changes"
    head = ORDERS + f"CREATE TABLE out (region STRING, n BIGINT) WITH ('topic' = 'out', {sink}"
    head = head.rstrip(", ") + ");\n"
    error = error_of(head + "  INSERT INTO out " + query + ";")
    assert (error.line, error.column) == (head.count("\n") + 1, 3), str(error)
    assert "the sink out is append-only" in error.message
    assert "PRIMARY KEY" in error.message


def test_a_final_window_into_an_append_only_sink_is_fine():
    sql = ORDERS + (
        "CREATE TABLE out (region STRING, n BIGINT) WITH ('topic' = 'out');\n"
        "INSERT INTO out SELECT region, COUNT(*) FROM orders "
        "GROUP BY region, TUMBLE(ts, INTERVAL '1' MINUTE) HAVING COUNT(*) > 1 EMIT FINAL;"
    )
    assert "(topic: out)" in str(compile(sql).describe())


def test_having_on_a_final_window_drops_failing_windows():
    sql = (
        ORDERS
        + """
    CREATE TABLE out (region STRING, ws TIMESTAMP(3), n BIGINT)
      WITH ('topic' = 'out', 'key.fields' = 'region');
    INSERT INTO out SELECT region, window_start, COUNT(*)
    FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '10' MINUTE))
    GROUP BY window_start, window_end, region HAVING COUNT(*) > 1 EMIT FINAL;
    """
    )
    builder = StreamsBuilder()
    (
        grouped_by_region(builder)
        .windowed_by(TimeWindows.of_size_and_grace(600_000, 30_000))
        .aggregate(lambda: [0], lambda k, v, a: [a[0] + 1], materialized=store())
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .filter(lambda k, a: a[0] > 1)
        .map(
            lambda k, a: (
                k.key[0],
                {"region": k.key[0], "ws": format_timestamp(k.window.start), "n": a[0]},
            )
        )
        .to("out", **S)
    )
    records = trace(5)
    expected = run(builder.build(), records)
    assert expected and all(v["n"] > 1 for _, v, _ in expected)
    assert run(compile(sql), records) == expected


def error_of(sql: str) -> SqlError:
    with pytest.raises(SqlError) as info:
        compile(sql)
    return info.value


BASE = ORDERS + "CREATE TABLE out (region STRING, n BIGINT) WITH ('topic' = 'out');\n"
LINE = BASE.count("\n") + 1


@pytest.mark.parametrize(
    ("query", "column", "message"),
    [
        (
            "INSERT INTO out SELECT region, COUNT(*) FROM orders GROUP BY region HAVING SUM(amount);",
            76,
            "type mismatch: HAVING needs a BOOLEAN, SUM(amount) is DOUBLE",
        ),
        (
            "INSERT INTO out SELECT region, qty FROM orders WHERE qty > 1 HAVING qty > 2;",
            69,
            "HAVING needs GROUP BY or an aggregate",
        ),
        (
            "INSERT INTO out SELECT region, COUNT(*) FROM orders GROUP BY region HAVING amount > 2;",
            76,
            "column amount must be in GROUP BY or inside an aggregate",
        ),
        (
            "INSERT INTO out SELECT region, SUM(DISTINCT qty) FROM orders GROUP BY region;",
            32,
            "SUM(DISTINCT ...) is not supported yet",
        ),
        (
            "INSERT INTO out SELECT region, COUNT(*) FROM orders GROUP BY region, SESSION(ts);",
            70,
            "SESSION takes SESSION(ts, gap)",
        ),
        (
            "INSERT INTO out SELECT region, COUNT(*) FROM orders GROUP BY region, SESSION(amount, INTERVAL '1' MINUTE);",
            70,
            "amount is not a time attribute of orders: declare WATERMARK FOR amount",
        ),
        (
            "INSERT INTO out SELECT region, COUNT(*) FROM TABLE(SESSION(TABLE orders PARTITION BY id, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end, region;",
            46,
            "GROUP BY needs the SESSION's PARTITION BY columns: id",
        ),
        (
            "INSERT INTO out SELECT region, COUNT(*) FROM TABLE(SESSION(TABLE orders, DESCRIPTOR(ts))) GROUP BY region;",
            52,
            "SESSION takes (TABLE t [PARTITION BY k, ...], DESCRIPTOR(ts), gap)",
        ),
    ],
)
def test_errors_point_at_line_and_column(query, column, message):
    error = error_of(BASE + query)
    assert message in error.message
    assert (error.line, error.column) == (LINE, column), str(error)
