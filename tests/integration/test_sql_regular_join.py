"""A regular LEFT join of two streams run as a SQL application on the real broker
(``python -m streaming sql``): orders come out padded with NULLs at once, and when their
payments arrive later the padded rows are replaced, so the upsert sink's last row per
order is Flink's final result. The join's state has a TTL (``SET
'table.exec.state.ttl'``) far longer than the test."""

from __future__ import annotations

import json
from typing import Any

from test_app_support import produce, read_all, stop_app, unique
from test_sql_app import free_port, start_app, wait_healthy

SQL = """
SET 'table.exec.state.ttl' = '1 h';

CREATE TABLE orders (id STRING, customer STRING, amount DOUBLE)
  WITH ('connector' = 'kafka', 'topic' = '{orders}', 'format' = 'json',
        'scan.startup.mode' = 'earliest-offset');

CREATE TABLE payments (order_id STRING, paid DOUBLE)
  WITH ('connector' = 'kafka', 'topic' = '{payments}', 'format' = 'json',
        'scan.startup.mode' = 'earliest-offset');

CREATE TABLE paid_orders (id STRING, customer STRING, amount DOUBLE, paid DOUBLE,
  PRIMARY KEY (id) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = '{sink}', 'key.format' = 'raw',
        'value.format' = 'json');

INSERT INTO paid_orders
SELECT o.id, o.customer, o.amount, p.paid
FROM orders o LEFT JOIN payments p ON o.id = p.order_id AND p.paid >= o.amount;
"""


def last_rows(msgs: list[Any]) -> dict[str, Any]:
    """The sink's rows by key, each key's last record (a tombstone deletes it)."""
    table: dict[str, Any] = {}
    for _t, _p, _o, key, value, _h in msgs:
        table[key.decode()] = None if value is None else json.loads(value)
    return {k: v for k, v in table.items() if v is not None}


def test_left_join_of_two_streams_replaces_padded_rows_on_the_broker(kafka_cluster, tmp_path):
    bootstrap = kafka_cluster.bootstrap_servers
    orders_topic, payments_topic = unique("rj-orders"), unique("rj-payments")
    sink_topic = unique("rj-paid")
    for topic in (orders_topic, payments_topic, sink_topic):
        kafka_cluster.create_topic(topic, partitions=3)
    sql_file = tmp_path / "paid.sql"
    sql_file.write_text(SQL.format(orders=orders_topic, payments=payments_topic, sink=sink_topic))
    port = free_port()
    url = f"http://localhost:{port}"
    props = tmp_path / "app.properties"
    props.write_text(
        "\n".join(
            [
                f"application.id={unique('sql-regular-join')}",
                f"bootstrap.servers={bootstrap}",
                f"state.dir={tmp_path / 'state'}",
                f"application.server=localhost:{port}",
                "commit.interval.ms=200",
                "consumer.session.timeout.ms=6000",
            ]
        )
        + "\n"
    )
    orders = [{"id": f"o{i}", "customer": f"c{i % 4}", "amount": float(10 + i)} for i in range(12)]
    produce(
        bootstrap, orders_topic, ((o["id"].encode(), json.dumps(o).encode(), None) for o in orders)
    )
    log = tmp_path / "app.log"
    proc = start_app(sql_file, props, log)
    try:
        wait_healthy(url, proc, log)
        padded = {o["id"]: {**o, "paid": None} for o in orders}
        msgs = read_all(bootstrap, [sink_topic], until=lambda m: last_rows(m) == padded)
        assert last_rows(msgs) == padded, log.read_text()[-4000:]

        # payments for the even orders; o2's is too small (the ON condition fails)
        payments = [
            {"order_id": o["id"], "paid": o["amount"] - (1.0 if o["id"] == "o2" else 0.0)}
            for o in orders[::2]
        ]
        produce(
            bootstrap,
            payments_topic,
            ((p["order_id"].encode(), json.dumps(p).encode(), None) for p in payments),
        )
        want = {
            o["id"]: {**o, "paid": o["amount"] if i % 2 == 0 and o["id"] != "o2" else None}
            for i, o in enumerate(orders)
        }
        msgs = read_all(bootstrap, [sink_topic], until=lambda m: last_rows(m) == want)
        assert last_rows(msgs) == want, log.read_text()[-4000:]
        # each matched order's padded row was deleted before its joined row came
        deleted = {key.decode() for _t, _p, _o, key, value, _h in msgs if value is None}
        assert deleted == {o["id"] for o in orders[::2] if o["id"] != "o2"}
    finally:
        assert stop_app(proc) == 0, log.read_text()[-4000:]
