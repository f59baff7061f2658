"""Push queries that aggregate, window or join, against a SQL application on the real
broker (``python -m streaming sql``) over its query server's ``/sql``: each runs as a
transient application inside the serving process and streams its rows as JSON lines;
rows written after the query started are aggregated (running COUNT and SUM per region,
per one-minute window) or joined with the current rows of an upsert table. When the
client disconnects, the transient application's internal topics, consumer group and
state directory are gone."""

from __future__ import annotations

import json
import urllib.error
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from test_app_support import T0, produce, stop_app, unique, wait_for
from test_sql_app import free_port, http_sql, produce_orders, start_app, wait_healthy

from streaming.sql.timestamps import format_timestamp

MINUTE = 60_000
BASE = T0 // MINUTE * MINUTE - 10 * MINUTE

SQL = """
CREATE TABLE orders (id STRING, region STRING, amount DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' HOUR
) WITH ('connector' = 'kafka', 'topic' = '{orders}', 'format' = 'json',
        'scan.startup.mode' = 'earliest-offset');

CREATE TABLE regions (region STRING, manager STRING, PRIMARY KEY (region) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = '{regions}', 'key.format' = 'raw',
        'value.format' = 'json');

CREATE TABLE big_orders (id STRING, region STRING, amount DOUBLE
) WITH ('connector' = 'kafka', 'topic' = '{big}', 'format' = 'json');

INSERT INTO big_orders SELECT id, region, amount FROM orders WHERE amount > 5;
"""


def order(i: int, region: str, amount: float, minute: int = 0) -> dict[str, Any]:
    return {
        "id": f"o{i}",
        "region": region,
        "amount": amount,
        "ts": format_timestamp(BASE + minute * MINUTE + i * 100),
    }


def read_lines(stream: Any, n: int) -> list[dict[str, Any]]:
    return [json.loads(stream.readline()) for _ in range(n)]


@pytest.fixture
def sql_app(kafka_cluster, tmp_path):
    """A running SQL application with a query server; yields (url, topics, state dir)."""
    bootstrap = kafka_cluster.bootstrap_servers
    topics = {name: unique(f"push-{name}") for name in ("orders", "regions", "big")}
    for topic in topics.values():
        kafka_cluster.create_topic(topic, partitions=2)
    sql_file = tmp_path / "app.sql"
    sql_file.write_text(SQL.format(**topics))
    port = free_port()
    url = f"http://localhost:{port}"
    app_id = unique("sqlpush-app")
    state = tmp_path / "state"
    props = tmp_path / "app.properties"
    props.write_text(
        "\n".join(
            [
                f"application.id={app_id}",
                f"bootstrap.servers={bootstrap}",
                f"state.dir={state}",
                f"application.server=localhost:{port}",
                "processing.guarantee=exactly_once_v2",
                "commit.interval.ms=200",
                "consumer.session.timeout.ms=6000",
            ]
        )
        + "\n"
    )
    log = tmp_path / "app.log"
    proc = start_app(sql_file, props, log)
    try:
        wait_healthy(url, proc, log)
        yield url, topics, state, app_id, log
    finally:
        assert stop_app(proc) == 0, log.read_text()[-4000:]


def transient_topics(kafka_cluster: Any, app_id: str) -> list[str]:
    admin = kafka_cluster.admin()
    return sorted(
        t for t in admin.list_topics(timeout=10).topics if t.startswith(f"{app_id}-push-")
    )


def group_state(kafka_cluster: Any, group: str) -> str:
    """The consumer group's state name (DEAD: it does not exist)."""
    admin = kafka_cluster.admin()
    try:
        desc = admin.describe_consumer_groups([group], request_timeout=10)[group].result(10)
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND:
            return "DEAD"
        raise
    return str(desc.state.name)


def push_dirs(state: Path) -> list[Path]:
    return sorted(state.glob("push-*")) if state.exists() else []


def test_group_by_push_query_streams_running_aggregates_and_cleans_up(sql_app, kafka_cluster):
    url, topics, state, app_id, log = sql_app
    bootstrap = kafka_cluster.bootstrap_servers
    rows = [
        order(0, "EU", 2.5),
        order(1, "US", 4.0),
        order(2, "EU", 1.25),
        order(3, "APAC", 8.0),
        order(4, "US", 0.5),
        order(5, "EU", 3.0),
    ]
    text = (
        "SELECT region, COUNT(*) AS n, SUM(amount) AS revenue, MAX(amount) AS biggest "
        "FROM orders WHERE amount > 1 GROUP BY region EMIT CHANGES"
    )
    produce_orders(bootstrap, topics["orders"], [order(99, "EU", 100.0)])  # before: not read
    with http_sql(url, text, timeout=60) as stream:
        assert stream.headers.get_content_type() == "application/x-ndjson"
        produce_orders(bootstrap, topics["orders"], rows)
        lines = read_lines(stream, 5)  # o4 (0.5) fails the WHERE
        by_region: dict[str, list[dict[str, Any]]] = {}
        for line in lines:
            by_region.setdefault(line["region"], []).append(line)
        # one row per update, in order per region: the running aggregates
        assert by_region == {
            "EU": [
                {"region": "EU", "n": 1, "revenue": 2.5, "biggest": 2.5},
                {"region": "EU", "n": 2, "revenue": 3.75, "biggest": 2.5},
                {"region": "EU", "n": 3, "revenue": 6.75, "biggest": 3.0},
            ],
            "US": [{"region": "US", "n": 1, "revenue": 4.0, "biggest": 4.0}],
            "APAC": [{"region": "APAC", "n": 1, "revenue": 8.0, "biggest": 8.0}],
        }, log.read_text()[-4000:]
        # the transient application: its own repartition topic and state directory
        running = transient_topics(kafka_cluster, app_id)
        assert running and all("-repartition" in t or "-changelog" in t for t in running)
        assert len(push_dirs(state)) == 1
        transient_id = running[0][: len(f"{app_id}-push-") + 8]
        assert group_state(kafka_cluster, transient_id) not in ("DEAD", "UNKNOWN")
    # the client disconnected: the transient application is closed and cleaned up
    wait_for(lambda: not transient_topics(kafka_cluster, app_id), 60, "topics deleted")
    wait_for(lambda: not push_dirs(state), 30, "the state directory removed")

    wait_for(lambda: group_state(kafka_cluster, transient_id) == "DEAD", 30, "the group deleted")


def test_windowed_group_by_push_query(sql_app, kafka_cluster):
    url, topics, state, app_id, log = sql_app
    bootstrap = kafka_cluster.bootstrap_servers
    text = (
        "SELECT region, window_start, window_end, COUNT(*) AS n, SUM(amount) AS revenue\n"
        "FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE))\n"
        "GROUP BY window_start, window_end, region EMIT CHANGES"
    )
    rows = [
        order(0, "EU", 1.5, minute=0),
        order(1, "EU", 2.0, minute=1),
        order(2, "EU", 4.0, minute=0),
        order(3, "US", 0.25, minute=1),
    ]
    with http_sql(url, text, timeout=60) as stream:
        produce_orders(bootstrap, topics["orders"], rows)
        lines = read_lines(stream, 4)
    last = {(r["region"], r["window_start"]): r for r in lines}
    w0, w1, w2 = (format_timestamp(BASE + m * MINUTE) for m in range(3))
    assert last == {
        ("EU", w0): {"region": "EU", "window_start": w0, "window_end": w1, "n": 2, "revenue": 5.5},
        ("EU", w1): {"region": "EU", "window_start": w1, "window_end": w2, "n": 1, "revenue": 2.0},
        ("US", w1): {"region": "US", "window_start": w1, "window_end": w2, "n": 1, "revenue": 0.25},
    }, log.read_text()[-4000:]
    wait_for(lambda: not transient_topics(kafka_cluster, app_id), 60, "topics deleted")
    wait_for(lambda: not push_dirs(state), 30, "the state directory removed")


def test_stream_table_join_push_query(sql_app, kafka_cluster):
    url, topics, _state, app_id, log = sql_app
    bootstrap = kafka_cluster.bootstrap_servers
    managers = {"EU": "ana", "US": "bo"}
    # the table's rows are written before the query: it reads the table from its start
    produce(
        bootstrap,
        topics["regions"],
        (
            (region.encode(), json.dumps({"region": region, "manager": m}).encode(), T0 - MINUTE)
            for region, m in managers.items()
        ),
    )
    text = (
        "SELECT o.id, o.amount * 2 AS doubled, r.manager FROM orders o\n"
        "LEFT JOIN regions r ON o.region = r.region WHERE o.amount > 1 EMIT CHANGES"
    )
    rows = [order(0, "EU", 2.0), order(1, "US", 3.0), order(2, "APAC", 5.0), order(3, "US", 0.5)]
    for row in rows:
        row["ts"] = format_timestamp(T0 + 1000)
    with http_sql(url, text, timeout=60) as stream:
        produce_orders(bootstrap, topics["orders"], rows)
        lines = read_lines(stream, 3)
    assert sorted(lines, key=lambda r: r["id"]) == [
        {"id": "o0", "doubled": 4.0, "manager": "ana"},
        {"id": "o1", "doubled": 6.0, "manager": "bo"},
        {"id": "o2", "doubled": 10.0, "manager": None},
    ], log.read_text()[-4000:]
    wait_for(lambda: not transient_topics(kafka_cluster, app_id), 60, "topics deleted")


def test_push_query_errors_come_before_streaming(sql_app):
    url, _topics, _state, _app_id, _log = sql_app
    text = "SELECT region, COUNT(*) AS n\nFROM orders GROUP BY nowhere EMIT CHANGES"
    with pytest.raises(urllib.error.HTTPError) as info:
        http_sql(url, text)
    assert info.value.code == 400
    assert json.loads(info.value.read()) == {
        "error": "line 2, column 22: unknown column nowhere in table orders"
    }


def test_push_api_in_process_and_a_stalled_reader_cancels_the_query(
    kafka_cluster, tmp_path, monkeypatch
):
    """``streaming.sql.push`` on an application in this process: rows come from poll();
    a reader that stops taking rows while the buffer is full cancels the query with a
    message, and close() cleans up."""
    from streaming import KafkaStreams
    from streaming import sql as streaming_sql
    from streaming.sql import transient

    bootstrap = kafka_cluster.bootstrap_servers
    topics = {name: unique(f"pushapi-{name}") for name in ("orders", "regions", "big")}
    for topic in topics.values():
        kafka_cluster.create_topic(topic, partitions=1)
    app_id = unique("sqlpushapi")
    state = tmp_path / "state"
    streams = KafkaStreams(
        streaming_sql.compile(SQL.format(**topics)),
        {
            "application.id": app_id,
            "bootstrap.servers": bootstrap,
            "state.dir": str(state),
            "commit.interval.ms": 200,
        },
    )
    monkeypatch.setattr(transient, "BUFFER_ROWS", 3)
    monkeypatch.setattr(transient, "STALL_LIMIT_S", 1.0)
    streams.start()
    try:
        assert streams.wait_until(KafkaStreams.State.RUNNING, 60)
        text = "SELECT region, COUNT(*) AS n FROM orders GROUP BY region EMIT CHANGES"
        push = streaming_sql.push(streams, text)
        try:
            produce_orders(bootstrap, topics["orders"], [order(i, "EU", 1.0) for i in range(6)])
            rows: list[dict[str, Any]] = []
            wait_for(lambda: bool(push.query.buffer.failure), 60, "the query to be cancelled")
            with pytest.raises(transient.PushQueryFailed, match="took no rows for 1 s"):
                while True:
                    rows.extend(push.poll(0.1))
            assert rows == [{"region": "EU", "n": n} for n in (1, 2, 3)]
            assert transient_topics(kafka_cluster, app_id)
        finally:
            push.close()
        assert not transient_topics(kafka_cluster, app_id)
        assert not push_dirs(state)
    finally:
        streams.close(30)


def test_a_sweep_deletes_what_a_dead_process_left(kafka_cluster, tmp_path):
    """A push query whose process died (its application stopped, no ``close``) leaves
    its state directory, internal topics and group: ``sweep_orphans`` (run by the next
    push query of the application) deletes them, and leaves a running one alone."""
    from streaming import KafkaStreams
    from streaming import sql as streaming_sql
    from streaming.sql import transient

    bootstrap = kafka_cluster.bootstrap_servers
    topics = {name: unique(f"pushsweep-{name}") for name in ("orders", "regions", "big")}
    for topic in topics.values():
        kafka_cluster.create_topic(topic, partitions=1)
    app_id = unique("sqlpushsweep")
    state = tmp_path / "state"
    streams = KafkaStreams(
        streaming_sql.compile(SQL.format(**topics)),
        {"application.id": app_id, "bootstrap.servers": bootstrap, "state.dir": str(state)},
    )
    streams.start()
    try:
        assert streams.wait_until(KafkaStreams.State.RUNNING, 60)
        text = "SELECT region, COUNT(*) AS n FROM orders GROUP BY region EMIT CHANGES"
        dead = streaming_sql.push(streams, text)
        live = streaming_sql.push(streams, text)
        try:
            produce_orders(bootstrap, topics["orders"], [order(0, "EU", 1.0)])
            wait_for(lambda: dead.poll(0.5) != [], 60, "a row")
            # the process "dies": its application stops, nothing is cleaned up
            with transient._OPEN_LOCK:
                transient._OPEN.discard(dead)
            dead._closed = True
            assert dead.streams.close(30)
            prefix = f"{dead.application_id}-"
            assert any(t.startswith(prefix) for t in transient_topics(kafka_cluster, app_id))
            assert transient.sweep_orphans(streams.config) == [dead.application_id]
            assert not any(t.startswith(prefix) for t in transient_topics(kafka_cluster, app_id))
            assert group_state(kafka_cluster, dead.application_id) == "DEAD"
            assert push_dirs(state) == [live.state_dir]
            assert any(
                t.startswith(f"{live.application_id}-")
                for t in transient_topics(kafka_cluster, app_id)
            )
        finally:
            live.close()
        assert not push_dirs(state) and not transient_topics(kafka_cluster, app_id)
    finally:
        streams.close(30)
