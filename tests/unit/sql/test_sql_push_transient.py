"""Push queries compiled into a transient application (``streaming.sql.transient``): which
queries need one, the rows its topology hands to the buffer (run in a test driver), the
bounded buffer between the application and the reader, and the transient config."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from streaming import TopologyTestDriver, serdes
from streaming.runtime.config import StreamsConfig
from streaming.sql import SqlError, compile
from streaming.sql.queries import PushQuery, plan
from streaming.sql.results import SqlCatalog, catalog_of
from streaming.sql.transient import (
    PushQueryFailed,
    RowBuffer,
    TransientQuery,
    transient_config,
)

SQL = """
CREATE TABLE orders (id STRING, region STRING, amount DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE
) WITH ('connector' = 'kafka', 'topic' = 'orders', 'format' = 'json');
CREATE TABLE regions (region STRING, manager STRING, PRIMARY KEY (region) NOT ENFORCED
) WITH ('connector' = 'upsert-kafka', 'topic' = 'regions', 'key.format' = 'raw',
        'value.format' = 'json');
CREATE TABLE big (id STRING, amount DOUBLE)
  WITH ('connector' = 'kafka', 'topic' = 'big', 'format' = 'json');
INSERT INTO big SELECT id, amount FROM orders WHERE amount > 5;
"""
T10 = 1_704_103_200_000  # 2024-01-01 10:00:00 UTC


def catalog() -> SqlCatalog:
    found = catalog_of(compile(SQL))
    assert found is not None
    return found


def transient(query: str) -> TransientQuery:
    planned = plan(catalog(), query)
    assert isinstance(planned, TransientQuery)
    return planned


def order(i: int, region: str, amount: float, ts: int = T10) -> dict:
    return {"id": f"o{i}", "region": region, "amount": amount, "ts": ts}


def run(query: TransientQuery, orders: list[dict], regions: dict | None = None) -> list[dict]:
    """The rows the query's topology hands to its buffer for ``orders`` (after
    ``regions``' rows)."""
    with TopologyTestDriver(query.topology) as driver:
        if regions:
            table = driver.create_input_topic("regions", key_serde=serdes.String())
            for region, manager in regions.items():
                table.pipe_input(region, {"region": region, "manager": manager}, 0)
        src = driver.create_input_topic("orders", key_serde=serdes.String())
        for row in orders:
            src.pipe_input(row["id"], row, row["ts"])
        return query.buffer.take(0)


@pytest.mark.parametrize(
    "query",
    [
        "SELECT region, COUNT(*) AS n FROM orders GROUP BY region EMIT CHANGES",
        "SELECT COUNT(*) AS n FROM orders EMIT CHANGES",
        "SELECT region, COUNT(*) AS n FROM orders GROUP BY region HAVING COUNT(*) > 1 EMIT CHANGES",
        "SELECT region, window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE orders, "
        "DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end, region "
        "EMIT CHANGES",
        "SELECT o.id, r.manager FROM orders o JOIN regions r ON o.region = r.region EMIT CHANGES",
        "SELECT id FROM (SELECT id, amount FROM orders) AS q WHERE amount > 1 EMIT CHANGES",
    ],
)
def test_push_queries_that_aggregate_window_or_join_compile_to_a_topology(query):
    assert isinstance(plan(catalog(), query), TransientQuery)


def test_a_plain_push_query_still_tails_its_topic():
    query = plan(catalog(), "SELECT id, amount FROM orders WHERE region = 'EU' EMIT CHANGES")
    assert isinstance(query, PushQuery)


def test_streams_start_now_tables_from_their_beginning():
    query = transient(
        "SELECT o.id, r.manager FROM orders o JOIN regions r ON o.region = r.region EMIT CHANGES"
    )
    assert query.topics == {"orders": "orders", "regions": "regions"}
    assert query.stream_topics == ("orders",)


def test_errors_point_into_the_push_query():
    with pytest.raises(SqlError, match="line 2, column 10: unknown column nope"):
        plan(catalog(), "SELECT region, COUNT(*) AS n FROM orders\nGROUP BY nope EMIT CHANGES")
    with pytest.raises(SqlError, match="unknown table nowhere"):
        plan(catalog(), "SELECT region, COUNT(*) FROM nowhere GROUP BY region EMIT CHANGES")
    # not "in a pull query"
    with pytest.raises(SqlError, match=r"DISTINCT is not supported in a push query$"):
        plan(catalog(), "SELECT DISTINCT region FROM orders EMIT CHANGES")


def test_a_group_by_streams_every_update_of_the_running_aggregate():
    query = transient(
        "SELECT COUNT(*) AS n, SUM(amount) AS revenue FROM orders GROUP BY region EMIT CHANGES"
    )
    rows = run(query, [order(0, "EU", 1.5), order(1, "US", 2.0), order(2, "EU", 0.25)])
    # only the selected columns: the group's region is not one
    assert rows == [{"n": 1, "revenue": 1.5}, {"n": 1, "revenue": 2.0}, {"n": 2, "revenue": 1.75}]


def test_having_retractions_are_not_rows():
    query = transient(
        "SELECT region, COUNT(*) AS n FROM orders GROUP BY region HAVING COUNT(*) > 1 EMIT CHANGES"
    )
    rows = run(query, [order(0, "EU", 1.0), order(1, "US", 1.0), order(2, "EU", 1.0)])
    assert rows == [{"region": "EU", "n": 2}]


def test_a_windowed_group_by_streams_window_rows():
    query = transient(
        "SELECT region, window_start, window_end, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE orders, "
        "DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end, region "
        "EMIT CHANGES"
    )
    rows = run(query, [order(0, "EU", 1.0), order(1, "EU", 1.0, T10 + 60_000)])
    assert rows == [
        {
            "region": "EU",
            "window_start": "2024-01-01 10:00:00.000",
            "window_end": "2024-01-01 10:01:00.000",
            "n": 1,
        },
        {
            "region": "EU",
            "window_start": "2024-01-01 10:01:00.000",
            "window_end": "2024-01-01 10:02:00.000",
            "n": 1,
        },
    ]


def test_a_stream_table_join_streams_joined_rows():
    query = transient(
        "SELECT o.id, r.manager FROM orders o LEFT JOIN regions r ON o.region = r.region "
        "EMIT CHANGES"
    )
    rows = run(query, [order(0, "EU", 1.0), order(1, "US", 1.0)], {"EU": "ana"})
    assert rows == [{"id": "o0", "manager": "ana"}, {"id": "o1", "manager": None}]


def test_the_buffer_hands_rows_over_in_order():
    buffer = RowBuffer(capacity=3)
    assert buffer.take(0.01) == []
    for n in range(3):
        buffer.offer({"n": n})
    assert buffer.take(0) == [{"n": 0}, {"n": 1}, {"n": 2}]


def test_a_full_buffer_blocks_the_offer_until_the_reader_takes():
    buffer = RowBuffer(capacity=2)
    buffer.offer({"n": 0})
    buffer.offer({"n": 1})
    done = threading.Event()

    def offer() -> None:
        buffer.offer({"n": 2})
        done.set()

    threading.Thread(target=offer, daemon=True).start()
    assert not done.wait(0.3)  # blocked: the stream thread stops consuming
    assert buffer.take(0) == [{"n": 0}, {"n": 1}]
    assert done.wait(5)
    assert buffer.take(1) == [{"n": 2}]


def test_a_reader_that_stalls_cancels_the_query_with_a_message():
    buffer = RowBuffer(capacity=1, stall_limit_s=0.2)
    buffer.offer({"n": 0})
    started = time.monotonic()
    buffer.offer({"n": 1})  # gives up after the stall limit, dropping the row
    assert time.monotonic() - started >= 0.2
    buffer.offer({"n": 2})  # cancelled: dropped at once
    assert buffer.take(0) == [{"n": 0}]  # what was handed over is still read
    with pytest.raises(PushQueryFailed, match=r"took no rows for 0\.2 s while 1 rows waited"):
        buffer.take(0)


def test_closing_the_buffer_releases_a_blocked_offer():
    buffer = RowBuffer(capacity=1)
    buffer.offer({"n": 0})
    thread = threading.Thread(target=buffer.offer, args=({"n": 1},), daemon=True)
    thread.start()
    time.sleep(0.1)
    buffer.close()
    thread.join(5)
    assert not thread.is_alive()


def test_the_transient_config_keeps_the_client_settings_with_its_own_identity(tmp_path):
    serving = StreamsConfig.from_mapping(
        {
            "application.id": "shop",
            "bootstrap.servers": "broker:9093",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "u",
            "sasl.password": "p",
            "processing.guarantee": "exactly_once_v2",
            "application.server": "localhost:7070",
            "client.id": "shop-1",
            "consumer.group.instance.id": "shop-a",
            "main.consumer.auto.offset.reset": "latest",
            "num.standby.replicas": 1,
        }
    )
    config = transient_config(serving, "shop-push-0123abcd", tmp_path)
    parsed = StreamsConfig.from_mapping(config)
    assert parsed.application_id == "shop-push-0123abcd"
    assert parsed.bootstrap_servers == "broker:9093"
    assert parsed.processing_guarantee == "at_least_once"
    assert parsed.state_dir == tmp_path and parsed.cache_max_bytes == 0
    assert parsed.application_server is None and parsed.client_id is None
    assert parsed.num_standby_replicas == 0 and not parsed.query_server_enabled
    consumer = parsed.clients().main_consumer(client_id="c", group_instance_id=None)
    assert consumer["group.id"] == "shop-push-0123abcd"
    assert consumer["security.protocol"] == "SASL_SSL" and consumer["sasl.password"] == "p"
    assert consumer["isolation.level"] == "read_committed"
    assert consumer["auto.offset.reset"] == "earliest"  # streams start at committed ends
    assert "group.instance.id" not in consumer
    assert parsed.clients().admin(client_id="a")["sasl.username"] == "u"
    reading_all = StreamsConfig.from_mapping(
        {
            "application.id": "shop",
            "bootstrap.servers": "broker:9093",
            "main.consumer.isolation.level": "read_uncommitted",
        }
    )
    parsed = StreamsConfig.from_mapping(transient_config(reading_all, "t", tmp_path))
    consumer = parsed.clients().main_consumer(client_id="c", group_instance_id=None)
    assert consumer["isolation.level"] == "read_committed"


def test_one_transient_query_too_many_is_refused_before_it_touches_kafka(monkeypatch, tmp_path):
    from streaming.sql import transient as module

    monkeypatch.setattr(module, "MAX_OPEN", 0)
    serving = StreamsConfig.from_mapping(
        {"application.id": "shop", "bootstrap.servers": "nowhere:9092", "state.dir": tmp_path}
    )
    query = transient("SELECT region, COUNT(*) AS n FROM orders GROUP BY region EMIT CHANGES")
    stream = module.TransientPushStream(query, serving)
    with pytest.raises(RuntimeError, match=r"\(at most 0\): close one, or retry later"):
        stream.start()
    assert list(tmp_path.iterdir()) == []


def test_a_start_that_fails_after_committing_offsets_deletes_the_group(monkeypatch, tmp_path):
    # the offsets committed for the application's group make the group: a start that
    # fails afterwards (here the application cannot be created) deletes it, and the state
    # directory, and frees the slot; a poll then says the query is closed
    import streaming.runtime.client
    from streaming.sql import transient as module

    deleted = []
    monkeypatch.setattr(module, "_sweep", lambda serving: None)

    def commit(self, timeout):
        self._committed = True

    monkeypatch.setattr(module.TransientPushStream, "_commit_stream_ends", commit)
    monkeypatch.setattr(module, "delete_broker_state", lambda c, app: deleted.append(app) or True)

    def no_app(*args, **kwargs):
        raise RuntimeError("cannot create the application")

    monkeypatch.setattr(streaming.runtime.client, "StreamsClient", no_app)
    serving = StreamsConfig.from_mapping(
        {"application.id": "shop", "bootstrap.servers": "nowhere:9092", "state.dir": tmp_path}
    )
    query = transient("SELECT region, COUNT(*) AS n FROM orders GROUP BY region EMIT CHANGES")
    stream = module.TransientPushStream(query, serving)
    with pytest.raises(RuntimeError, match="cannot create the application"):
        stream.start()
    assert deleted == [stream.application_id]
    assert list(tmp_path.iterdir()) == [] and stream not in module._OPEN
    with pytest.raises(PushQueryFailed, match="closed"):
        stream.poll(0)


def test_a_sweep_deletes_only_push_queries_no_live_process_runs(monkeypatch, tmp_path):
    import fcntl
    import os

    from streaming.sql import transient as module

    deleted = []
    monkeypatch.setattr(module, "delete_broker_state", lambda c, app: deleted.append(app) or True)
    serving = StreamsConfig.from_mapping(
        {"application.id": "shop", "bootstrap.servers": "nowhere:9092", "state.dir": tmp_path}
    )

    def push_dir(name: str, application_id: str | None, locked: bool = False) -> Path:
        path = tmp_path / name
        path.mkdir()
        if application_id is not None:
            (path / module.APPLICATION_FILE).write_text(application_id)
            (path / application_id).mkdir()
            (path / application_id / ".lock").touch()
        if locked:
            fd = os.open(path / str(application_id) / ".lock", os.O_RDWR)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held.append(fd)
        return path

    held: list[int] = []
    try:
        orphan = push_dir("push-1", "shop-push-00000001")
        running = push_dir("push-2", "shop-push-00000002", locked=True)  # another process's
        other = push_dir("push-3", "shopfront-push-00000003")  # another application's
        unnamed = push_dir("push-4", None)  # not named yet: a push query starting
        serving_state = tmp_path / "shop"
        serving_state.mkdir()
        assert module.sweep_orphans(serving) == ["shop-push-00000001"]
        assert deleted == ["shop-push-00000001"]
        assert not orphan.exists()
        assert running.exists() and other.exists() and unnamed.exists() and serving_state.exists()
        # one whose broker state could not be deleted stays, for the next sweep
        monkeypatch.setattr(module, "delete_broker_state", lambda c, app: False)
        again = push_dir("push-5", "shop-push-00000005")
        assert module.sweep_orphans(serving) == [] and again.exists()
    finally:
        for fd in held:
            os.close(fd)


class FakeStreams:
    """A KafkaStreams stand-in: records its lifecycle."""

    def __init__(self, topology, config) -> None:
        self.config = config
        self.calls: list[str] = []

    def set_uncaught_exception_handler(self, handler) -> None:
        pass

    def set_state_listener(self, listener) -> None:
        pass

    def start(self) -> None:
        self.calls.append("start")

    def close(self, timeout) -> bool:
        self.calls.append("close")
        return True

    def cleanup(self) -> None:
        self.calls.append("cleanup")


def test_a_stall_gives_up_within_the_poll_interval_and_close_frees_everything(
    monkeypatch, tmp_path
):
    import streaming.runtime.client
    from streaming.sql import transient as module

    deleted = []
    monkeypatch.setattr(module, "_sweep", lambda serving: None)
    monkeypatch.setattr(module.TransientPushStream, "_commit_stream_ends", lambda self, t: None)
    monkeypatch.setattr(module, "delete_broker_state", lambda c, app: deleted.append(app) or True)
    monkeypatch.setattr(streaming.runtime.client, "StreamsClient", FakeStreams)
    serving = StreamsConfig.from_mapping(
        {
            "application.id": "shop",
            "bootstrap.servers": "nowhere:9092",
            "state.dir": tmp_path,
            "max.poll.interval.ms": 20_000,
        }
    )
    query = transient("SELECT region, COUNT(*) AS n FROM orders GROUP BY region EMIT CHANGES")
    stream = module.TransientPushStream(query, serving).start()
    app = stream.streams
    # a stream thread blocked longer than max.poll.interval.ms would leave the group
    assert query.buffer.stall_limit_s == 10.0
    assert stream in module._OPEN and len(list(tmp_path.iterdir())) == 1
    stream.close()
    assert app.calls == ["start", "close", "cleanup"]
    assert deleted == [stream.application_id]
    assert list(tmp_path.iterdir()) == [] and stream not in module._OPEN


def test_each_start_sweeps_in_the_background_one_sweep_at_a_time(monkeypatch):
    from streaming.sql import transient as module

    calls, release = [], threading.Event()

    def sweep(serving) -> list[str]:
        calls.append(serving)
        release.wait(10)
        return []

    monkeypatch.setattr(module, "sweep_orphans", sweep)
    module._sweep("a")
    module._sweep("b")  # one is running: not another
    release.set()
    deadline = time.monotonic() + 10
    while module._SWEEPING.locked() and time.monotonic() < deadline:
        time.sleep(0.01)
    module._sweep("c")  # the next start sweeps again (retrying what was refused)
    while len(calls) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert calls == ["a", "c"]


def test_a_start_that_fails_before_committing_touches_no_broker_state(monkeypatch, tmp_path):
    # (a missing topic, an unreachable broker: no second round trip to delete nothing)
    from streaming.sql import transient as module

    deleted = []
    monkeypatch.setattr(module, "_sweep", lambda serving: None)
    monkeypatch.setattr(module, "delete_broker_state", lambda c, app: deleted.append(app) or True)

    def missing(self, timeout):
        raise SqlError("topic orders of table orders does not exist", line=1, column=1)

    monkeypatch.setattr(module.TransientPushStream, "_commit_stream_ends", missing)
    serving = StreamsConfig.from_mapping(
        {"application.id": "shop", "bootstrap.servers": "nowhere:9092", "state.dir": tmp_path}
    )
    query = transient("SELECT region, COUNT(*) AS n FROM orders GROUP BY region EMIT CHANGES")
    stream = module.TransientPushStream(query, serving)
    with pytest.raises(SqlError, match="does not exist"):
        stream.start()
    assert deleted == [] and list(tmp_path.iterdir()) == [] and stream not in module._OPEN
