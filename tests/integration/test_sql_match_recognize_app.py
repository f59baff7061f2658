"""MATCH_RECOGNIZE on the real broker: a SQL file with a card-testing pattern (a small
charge followed by a large one within minutes) and a Python function in SQL runs as an
application (``python -m streaming sql``, exactly_once_v2); the matches read back
read_committed are the ones the test driver finds, out-of-order rows and rows of two
partitions of the source topic included."""

from __future__ import annotations

import json
from typing import Any

from test_app_support import T0, produce, read_all, stop_app, unique
from test_sql_app import free_port, start_app, wait_healthy

SECOND = 1_000
BASE = T0 // 60_000 * 60_000 - 30 * 60_000

SQL = """
CREATE FUNCTION risk_score AS 'pipelines.streams.sql.udfs.risk_score' LANGUAGE PYTHON;

CREATE TABLE payments (id STRING, card STRING, amount DOUBLE, ts BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH ('connector' = 'kafka', 'topic' = '{payments}', 'format' = 'json',
        'scan.startup.mode' = 'earliest-offset');

CREATE TABLE alerts (card STRING, small_id STRING, large_id STRING, risk DOUBLE
) WITH ('connector' = 'kafka', 'topic' = '{alerts}', 'format' = 'json', 'key.fields' = 'card');

INSERT INTO alerts
SELECT card, small_id, large_id, risk_score(small, large, gap)
FROM payments MATCH_RECOGNIZE (
  PARTITION BY card
  ORDER BY ts
  MEASURES S.id AS small_id, L.id AS large_id, S.amount AS small, L.amount AS large,
    L.ts - S.ts AS gap
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (S X*? L) WITHIN INTERVAL '2' MINUTE
  DEFINE S AS S.amount < 5, L AS L.amount >= 500
) AS T;
"""


def payment(i: int, card: str, amount: float, second: int) -> dict[str, Any]:
    return {"id": f"p{i}", "card": card, "amount": amount, "ts": BASE + second * SECOND}


def test_match_recognize_runs_on_the_broker(kafka_cluster, tmp_path):
    bootstrap = kafka_cluster.bootstrap_servers
    payments_topic, alerts_topic = unique("mr-payments"), unique("mr-alerts")
    kafka_cluster.create_topic(payments_topic, partitions=2)
    kafka_cluster.create_topic(alerts_topic, partitions=2)
    sql_file = tmp_path / "cards.sql"
    sql_file.write_text(SQL.format(payments=payments_topic, alerts=alerts_topic))
    port = free_port()
    props = tmp_path / "app.properties"
    props.write_text(
        "\n".join(
            [
                f"application.id={unique('mr-app')}",
                f"bootstrap.servers={bootstrap}",
                f"state.dir={tmp_path / 'state'}",
                f"application.server=localhost:{port}",
                "processing.guarantee=exactly_once_v2",
                "commit.interval.ms=200",
                "consumer.session.timeout.ms=6000",
            ]
        )
        + "\n"
    )
    rows = [
        payment(0, "c1", 1.0, 0),
        payment(1, "c2", 2.0, 1),
        payment(2, "c1", 30.0, 10),
        payment(4, "c2", 900.0, 20),  # before p3 in the topic, after it in time
        payment(3, "c2", 40.0, 15),
        payment(5, "c1", 800.0, 40),
        payment(6, "c3", 3.0, 50),
        payment(7, "c3", 700.0, 200),  # more than WITHIN after its small charge
        payment(8, "c9", 1.0, 600),  # moves the watermark past the others
    ]
    # keyed by card: each card's rows in one partition, in this order
    produce(
        bootstrap,
        payments_topic,
        ((r["card"].encode(), json.dumps(r).encode(), None) for r in rows),
    )
    log = tmp_path / "app.log"
    proc = start_app(sql_file, props, log)
    try:
        wait_healthy(f"http://localhost:{port}", proc, log)

        def alerts(msgs: list[Any]) -> list[tuple[str, str, str]]:
            return sorted(
                (key.decode(), (row := json.loads(value))["small_id"], row["large_id"])
                for _t, _p, _o, key, value, _h in msgs
            )

        want = [("c1", "p0", "p5"), ("c2", "p1", "p4")]
        msgs = read_all(bootstrap, [alerts_topic], until=lambda m: alerts(m) == want)
        assert alerts(msgs) == want, log.read_text()[-4000:]
        risks = [json.loads(value)["risk"] for *_, value, _h in msgs]
        assert all(isinstance(r, float) and 0 < r <= 1 for r in risks)
    finally:
        stop_app(proc)
