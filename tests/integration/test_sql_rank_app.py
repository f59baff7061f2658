"""Flink's ranking queries as a SQL application on the real broker (``python -m streaming
sql``, exactly_once_v2, three partitions): deduplication keeping the last row (an upsert
per customer), Top-N over a GROUP BY (Flink's retract rank: places rewritten as sums grow)
and window deduplication over a TUMBLE TVF (each window's last order once it closes).
The sinks, read back read_committed, end with the rows the queries define."""

from __future__ import annotations

import json
from typing import Any

from test_app_support import T0, produce, read_all, stop_app, unique
from test_sql_app import start_app

from streaming.sql.timestamps import format_timestamp

MINUTE = 60_000
BASE = T0 // MINUTE * MINUTE - 30 * MINUTE
CUSTOMERS = ("ann", "bob", "cid", "dee", "eve", "fay")

SQL = """
CREATE TABLE orders (id STRING, customer STRING, amount DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE
) WITH ('connector' = 'kafka', 'topic' = '{orders}', 'format' = 'json',
        'scan.startup.mode' = 'earliest-offset');

CREATE TABLE last_orders (customer STRING, id STRING, amount DOUBLE,
  PRIMARY KEY (customer) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = '{last}', 'format' = 'json');

CREATE TABLE top_customers (customer STRING, total DOUBLE, rn BIGINT,
  PRIMARY KEY (rn) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = '{top}', 'key.format' = 'json',
        'value.format' = 'json');

CREATE TABLE window_last (window_start TIMESTAMP(3), customer STRING, id STRING)
  WITH ('connector' = 'kafka', 'topic' = '{windows}', 'format' = 'json');

INSERT INTO last_orders
SELECT customer, id, amount FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY customer ORDER BY ts DESC) AS rn FROM orders
) WHERE rn = 1;

INSERT INTO top_customers
SELECT * FROM (
  SELECT customer, total, ROW_NUMBER() OVER (ORDER BY total DESC) AS rn
  FROM (SELECT customer, SUM(amount) AS total FROM orders GROUP BY customer)
) WHERE rn <= 3;

INSERT INTO window_last
SELECT window_start, customer, id FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, customer
                               ORDER BY ts DESC) AS rn
  FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '5' MINUTE))
) WHERE rn <= 1;
"""


def orders(n: int) -> list[dict[str, Any]]:
    """``n`` orders of six customers over ten minutes, in time order; amounts exact in
    binary and growing with the customer's index, so the top three are known."""
    return [
        {
            "id": f"o{i}",
            "customer": CUSTOMERS[i % len(CUSTOMERS)],
            "amount": 1.0 + (i % len(CUSTOMERS)) * 0.5,
            "ts": format_timestamp(BASE + i * 10_000),
        }
        for i in range(n)
    ]


def last_values(msgs: list[Any], key_of: Any) -> dict[Any, Any]:
    last: dict[Any, Any] = {}
    for _t, _p, _o, key, value, _h in msgs:
        last[key_of(key)] = None if value is None else json.loads(value)
    return {k: v for k, v in last.items() if v is not None}


def test_ranking_queries_run_on_the_broker(kafka_cluster, tmp_path):
    bootstrap = kafka_cluster.bootstrap_servers
    topics = {name: unique(f"sql-rank-{name}") for name in ("orders", "last", "top", "windows")}
    for topic in topics.values():
        kafka_cluster.create_topic(topic, partitions=3)
    sql_file = tmp_path / "ranks.sql"
    sql_file.write_text(SQL.format(**topics))
    props = tmp_path / "app.properties"
    props.write_text(
        "\n".join(
            [
                f"application.id={unique('sql-rank-app')}",
                f"bootstrap.servers={bootstrap}",
                f"state.dir={tmp_path / 'state'}",
                "processing.guarantee=exactly_once_v2",
                "commit.interval.ms=200",
                "consumer.session.timeout.ms=6000",
            ]
        )
        + "\n"
    )
    rows = orders(60)  # ten minutes: two or three windows per customer
    # a later order per customer moves every task's stream time past both windows' ends
    closing = [
        {"id": f"z{i}", "customer": c, "amount": 0.0, "ts": format_timestamp(BASE + 20 * MINUTE)}
        for i, c in enumerate(CUSTOMERS)
    ]
    produce(
        bootstrap,
        topics["orders"],
        ((r["customer"].encode(), json.dumps(r).encode(), None) for r in rows + closing),
    )
    # the expected results
    last = {c: {"customer": c, "id": f"z{i}", "amount": 0.0} for i, c in enumerate(CUSTOMERS)}
    totals = {c: sum(r["amount"] for r in rows if r["customer"] == c) for c in CUSTOMERS}
    ranked = sorted(CUSTOMERS, key=lambda c: -totals[c])[:3]
    top = {n + 1: {"customer": c, "total": totals[c], "rn": n + 1} for n, c in enumerate(ranked)}
    windows = {}
    for r in rows:  # in time order: the last order of a customer's window wins
        ts = BASE + int(r["id"][1:]) * 10_000
        windows[(format_timestamp(ts - ts % (5 * MINUTE)), r["customer"])] = r["id"]

    log = tmp_path / "app.log"
    proc = start_app(sql_file, props, log)
    try:
        got_last = read_all(
            bootstrap,
            [topics["last"]],
            until=lambda m: last_values(m, bytes.decode) == last,
        )
        assert last_values(got_last, bytes.decode) == last, log.read_text()[-4000:]
        got_top = read_all(
            bootstrap,
            [topics["top"]],
            until=lambda m: last_values(m, lambda k: json.loads(k)["rn"]) == top,
        )
        assert last_values(got_top, lambda k: json.loads(k)["rn"]) == top

        def window_rows(msgs: list[Any]) -> dict[tuple[str, str], str]:
            out = {}
            for _t, _p, _o, _k, value, _h in msgs:
                row = json.loads(value)
                assert (row["window_start"], row["customer"]) not in out  # once per window
                out[(row["window_start"], row["customer"])] = row["id"]
            return out

        got_windows = read_all(
            bootstrap, [topics["windows"]], until=lambda m: len(m) >= len(windows)
        )
        assert window_rows(got_windows) == windows
    finally:
        assert stop_app(proc) == 0, log.read_text()[-4000:]
