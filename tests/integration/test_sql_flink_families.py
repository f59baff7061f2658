"""Flink's query families not run on the broker elsewhere, as one SQL application on the
real broker (``python -m streaming sql``, exactly_once_v2): the windowed-revenue job as
Flink's docs write it (``GROUP BY TUMBLE``, into a plain Kafka sink), a window Top-N over
a window aggregation, an OVER aggregation, an interval join, an event-time temporal join
(``FOR SYSTEM_TIME AS OF``) and a keep-first deduplication. The sinks, read back
read_committed, hold exactly the rows the queries define (computed here in Python).

The topics have one partition, so one task's stream time closes windows. Two orders far
later end the input: the first closes every window of the orders, the second closes the
first's window, whose result moves the window Top-N's time past the orders' windows. The
shipments' WATERMARK delay (an hour, the interval join's grace) keeps every order and
shipment in the join whichever of its two repartition topics the join's task reads first.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from test_app_support import T0, produce, read_all, stop_app, unique
from test_sql_app import start_app

from streaming.sql.timestamps import format_timestamp

MINUTE = 60_000
BASE = T0 // (5 * MINUTE) * (5 * MINUTE) - 60 * MINUTE

SQL = """
CREATE TABLE orders (
  id STRING, customer STRING, region STRING, currency STRING, amount DOUBLE,
  order_time TIMESTAMP(3),
  WATERMARK FOR order_time AS order_time - INTERVAL '1' MINUTE
) WITH ('connector' = 'kafka', 'topic' = '{orders}', 'format' = 'json',
        'scan.startup.mode' = 'earliest-offset');

CREATE TABLE shipments (
  order_id STRING, carrier STRING, ship_time TIMESTAMP(3),
  WATERMARK FOR ship_time AS ship_time - INTERVAL '1' HOUR
) WITH ('connector' = 'kafka', 'topic' = '{shipments}', 'format' = 'json',
        'scan.startup.mode' = 'earliest-offset');

CREATE TABLE rates (
  currency STRING, rate DOUBLE, rate_time TIMESTAMP(3),
  WATERMARK FOR rate_time AS rate_time - INTERVAL '1' MINUTE,
  PRIMARY KEY (currency) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = '{rates}', 'key.format' = 'raw',
        'value.format' = 'json');

CREATE TABLE windowed_revenue (
  region STRING, window_start TIMESTAMP(3), window_end TIMESTAMP(3), revenue DOUBLE
) WITH ('connector' = 'kafka', 'topic' = '{windowed_revenue}', 'format' = 'json');

CREATE TABLE top_regions (
  window_start TIMESTAMP(3), window_end TIMESTAMP(3), region STRING, revenue DOUBLE,
  rownum BIGINT
) WITH ('connector' = 'kafka', 'topic' = '{top_regions}', 'format' = 'json');

CREATE TABLE running_totals (id STRING, customer STRING, amount DOUBLE, last_two DOUBLE)
  WITH ('connector' = 'kafka', 'topic' = '{running_totals}', 'format' = 'json');

CREATE TABLE shipped (id STRING, region STRING, carrier STRING, ship_time TIMESTAMP(3))
  WITH ('connector' = 'kafka', 'topic' = '{shipped}', 'format' = 'json');

CREATE TABLE converted (id STRING, currency STRING, amount DOUBLE, rate DOUBLE)
  WITH ('connector' = 'kafka', 'topic' = '{converted}', 'format' = 'json');

CREATE TABLE first_orders (id STRING, customer STRING, amount DOUBLE)
  WITH ('connector' = 'kafka', 'topic' = '{first_orders}', 'format' = 'json');

INSERT INTO windowed_revenue SELECT region, TUMBLE_START(order_time, INTERVAL '5' MINUTE), TUMBLE_END(order_time, INTERVAL '5' MINUTE), SUM(amount) FROM orders GROUP BY region, TUMBLE(order_time, INTERVAL '5' MINUTE);

INSERT INTO top_regions
SELECT *
  FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY revenue DESC) as rownum
    FROM (
      SELECT window_start, window_end, region, SUM(amount) as revenue
      FROM TABLE(
        TUMBLE(TABLE orders, DESCRIPTOR(order_time), INTERVAL '5' MINUTES))
      GROUP BY window_start, window_end, region
    )
  ) WHERE rownum <= 2;

INSERT INTO running_totals
SELECT id, customer, amount,
  SUM(amount) OVER (PARTITION BY customer ORDER BY order_time
                    ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)
FROM orders;

INSERT INTO shipped
SELECT o.id, o.region, s.carrier, s.ship_time
FROM orders o, shipments s
WHERE o.id = s.order_id
  AND s.ship_time BETWEEN o.order_time AND o.order_time + INTERVAL '4' MINUTE;

INSERT INTO converted
SELECT o.id, o.currency, o.amount * r.rate, r.rate
FROM orders AS o
JOIN rates FOR SYSTEM_TIME AS OF o.order_time AS r
ON o.currency = r.currency;

INSERT INTO first_orders
SELECT id, customer, amount
FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY id ORDER BY order_time ASC) AS row_num
  FROM orders)
WHERE row_num = 1;
"""

#: id, customer, region, currency, amount, seconds after BASE (o2 is sent twice)
ORDERS = [
    ("o1", "ann", "north", "EUR", 10.0, 30),
    ("o2", "bob", "south", "USD", 20.0, 60),
    ("o3", "ann", "north", "EUR", 5.0, 120),
    ("o4", "cid", "south", "EUR", 8.0, 180),
    ("o5", "bob", "east", "USD", 4.0, 360),
    ("o6", "ann", "north", "USD", 2.0, 420),
    ("o2", "bob", "south", "USD", 20.0, 480),
    ("o7", "cid", "east", "EUR", 6.0, 540),
]
#: two orders far later, of a currency with no rate: the end of the input
ENDS = [("z1", "zed", "zz", "XXX", 1.0, 1200), ("z2", "zed", "zz", "XXX", 1.0, 2400)]
#: currency, rate, seconds after BASE
RATES = [("EUR", 1.5, 0), ("USD", 2.0, 0), ("EUR", 3.0, 300), ("USD", 0.5, 450)]
#: order id, carrier, seconds after BASE (o5's is later than its 4 minutes)
SHIPMENTS = [("o1", "dhl", 200), ("o3", "ups", 150), ("o5", "dhl", 660), ("o7", "fedex", 560)]


def at(seconds: int) -> str:
    return format_timestamp(BASE + seconds * 1000)


def order_row(row: tuple[Any, ...]) -> dict[str, Any]:
    id_, customer, region, currency, amount, seconds = row
    return {
        "id": id_,
        "customer": customer,
        "region": region,
        "currency": currency,
        "amount": amount,
        "order_time": at(seconds),
    }


def expected_windowed_revenue() -> list[dict[str, Any]]:
    """The windows the second end closes: every order's and the first end's."""
    sums: dict[tuple[str, int], float] = defaultdict(float)
    for _, _, region, _, amount, seconds in [*ORDERS, ENDS[0]]:
        sums[(region, seconds // 300 * 300)] += amount
    return [
        {"region": r, "window_start": at(s), "window_end": at(s + 300), "revenue": total}
        for (r, s), total in sums.items()
    ]


def expected_top_regions() -> list[dict[str, Any]]:
    """The two largest regions of each window of the orders (ties: none here)."""
    windows: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for _, _, region, _, amount, seconds in ORDERS:
        windows[seconds // 300 * 300][region] += amount
    rows = []
    for start, regions in windows.items():
        ranked = sorted(regions.items(), key=lambda kv: -kv[1])[:2]
        for n, (region, revenue) in enumerate(ranked, start=1):
            rows.append(
                {
                    "window_start": at(start),
                    "window_end": at(start + 300),
                    "region": region,
                    "revenue": revenue,
                    "rownum": n,
                }
            )
    return rows


def expected_running_totals() -> list[dict[str, Any]]:
    """Each row the watermark passes (all but the last end): its amount and the one
    before it of its customer."""
    previous: dict[str, float] = {}
    rows = []
    for id_, customer, _, _, amount, _ in sorted([*ORDERS, ENDS[0]], key=lambda r: r[5]):
        rows.append(
            {
                "id": id_,
                "customer": customer,
                "amount": amount,
                "last_two": amount + previous.get(customer, 0.0),
            }
        )
        previous[customer] = amount
    return rows


def expected_shipped() -> list[dict[str, Any]]:
    regions = {o[0]: o[2] for o in ORDERS}
    times = {o[0]: o[5] for o in ORDERS}
    return [
        {"id": id_, "region": regions[id_], "carrier": carrier, "ship_time": at(seconds)}
        for id_, carrier, seconds in SHIPMENTS
        if times[id_] <= seconds <= times[id_] + 240
    ]


def expected_converted() -> list[dict[str, Any]]:
    """Each order with the rate of its currency as of its time."""
    rows = []
    for id_, _, _, currency, amount, seconds in ORDERS:
        rate = [r for c, r, s in RATES if c == currency and s <= seconds][-1]
        rows.append({"id": id_, "currency": currency, "amount": amount * rate, "rate": rate})
    return rows


def expected_first_orders() -> list[dict[str, Any]]:
    """Each id's first row, once the watermark passes it (not the last end's)."""
    seen: dict[str, dict[str, Any]] = {}
    for id_, customer, _, _, amount, _ in [*ORDERS, ENDS[0]]:
        seen.setdefault(id_, {"id": id_, "customer": customer, "amount": amount})
    return list(seen.values())


SINKS = {
    "windowed_revenue": expected_windowed_revenue,
    "top_regions": expected_top_regions,
    "running_totals": expected_running_totals,
    "shipped": expected_shipped,
    "converted": expected_converted,
    "first_orders": expected_first_orders,
}


def canonical(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(row, sort_keys=True) for row in rows)


def test_flink_query_families_run_on_the_broker(kafka_cluster, tmp_path):
    bootstrap = kafka_cluster.bootstrap_servers
    names = ["orders", "shipments", "rates", *SINKS]
    topics = {name: unique(f"sql-families-{name}") for name in names}
    for topic in topics.values():
        kafka_cluster.create_topic(topic, partitions=1)
    sql_file = tmp_path / "families.sql"
    sql_file.write_text(SQL.format(**topics))
    props = tmp_path / "app.properties"
    props.write_text(
        "\n".join(
            [
                f"application.id={unique('sql-families-app')}",
                f"bootstrap.servers={bootstrap}",
                f"state.dir={tmp_path / 'state'}",
                "processing.guarantee=exactly_once_v2",
                "commit.interval.ms=200",
                "consumer.session.timeout.ms=6000",
                # a task waits for its tables' records before the orders' later times
                "max.task.idle.ms=5000",
            ]
        )
        + "\n"
    )
    produce(
        bootstrap,
        topics["rates"],
        (
            (c.encode(), json.dumps({"currency": c, "rate": r, "rate_time": at(s)}).encode(), None)
            for c, r, s in RATES
        ),
    )
    produce(
        bootstrap,
        topics["shipments"],
        (
            (None, json.dumps({"order_id": o, "carrier": c, "ship_time": at(s)}).encode(), None)
            for o, c, s in SHIPMENTS
        ),
    )
    produce(
        bootstrap,
        topics["orders"],
        ((None, json.dumps(order_row(o)).encode(), None) for o in [*ORDERS, *ENDS]),
    )
    expected = {sink: canonical(rows()) for sink, rows in SINKS.items()}

    log = tmp_path / "app.log"
    proc = start_app(sql_file, props, log)
    try:
        for sink, rows in expected.items():
            msgs = read_all(bootstrap, [topics[sink]], until=lambda m, n=len(rows): len(m) >= n)
            got = canonical([json.loads(value) for _t, _p, _o, _k, value, _h in msgs])
            assert got == rows, f"{sink}\n{log.read_text()[-4000:]}"
    finally:
        assert stop_app(proc) == 0, log.read_text()[-4000:]
