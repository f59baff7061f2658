"""``LateRecordTap``: the late decision of a windowed aggregation, reported per window."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from committed_reads import read_committed

from pipelines.streams.late import LateRecordTap
from streaming import TimeWindows
from streaming.topology.processor import Record

M = 60_000


class Context:
    """The two context calls the tap makes (processor metadata of the task, forward)."""

    def __init__(self, metadata: dict[str, int] | None = None) -> None:
        self.metadata = metadata or {}
        self.forwarded: list[Record] = []

    def processor_metadata_for_key(self, key: str) -> int | None:
        return self.metadata.get(key)

    def forward(self, record: Record) -> None:
        self.forwarded.append(record)


def tap(windows: TimeWindows, context: Context, final_store: str | None = None) -> LateRecordTap:
    processor = LateRecordTap("r", windows, final_store)
    processor.init(context)  # type: ignore[arg-type]
    return processor


def late_windows(context: Context) -> list[tuple[Any, int, int]]:
    return [(r.key, r.value["window_start"], r.value["stream_time"]) for r in context.forwarded]


def test_tumbling_windows_late_at_end_plus_grace() -> None:
    context = Context()
    p = tap(TimeWindows.of_size_and_grace(5 * M, 1 * M), context)
    p.process(Record("k", {"n": 1}, 7 * M))  # stream time 7M: [0, 5M) closed at 6M
    p.process(Record("k", {"n": 2}, 4 * M))  # dropped
    p.process(Record("k", {"n": 3}, 6 * M))  # [5M, 10M) still open
    p.process(Record(None, {"n": 4}, 0))  # null keys are skipped, not late
    p.process(Record("k", {"n": 5}, 6 * M - 1))  # [5M, 10M): open
    assert late_windows(context) == [("k", 0, 7 * M)]
    assert context.forwarded[0].value["n"] == 2 and context.forwarded[0].timestamp == 4 * M


def test_hopping_reports_only_the_closed_windows_of_a_record() -> None:
    context = Context()
    p = tap(TimeWindows.of_size_and_grace(10 * M, 1 * M).advance_by(5 * M), context)
    p.process(Record("k", {}, 16 * M))  # close time 15M
    p.process(Record("k", {}, 7 * M))  # in [0, 10M) (closed) and [5M, 15M) (closed at 15M)
    p.process(Record("k", {}, 12 * M))  # in [5M, 15M) (closed) and [10M, 20M) (open)
    assert late_windows(context) == [("k", 0, 16 * M), ("k", 5 * M, 16 * M), ("k", 5 * M, 16 * M)]


def test_windows_emitted_as_final_before_a_restart_count_as_closed() -> None:
    # after a restart the aggregation's stream time starts over, but a window already
    # emitted on close (its close time is in the task's processor metadata) stays final
    context = Context({"store": 11 * M})
    p = tap(TimeWindows.of_size_and_grace(5 * M, 1 * M), context, final_store="store")
    p.process(Record("k", {}, 9 * M))  # [5M, 10M) was emitted at close time 11M
    p.process(Record("k", {}, 10 * M))  # [10M, 15M) was not
    assert late_windows(context) == [("k", 5 * M, 9 * M)]
    no_metadata = Context()
    tap(TimeWindows.of_size_and_grace(5 * M, 1 * M), no_metadata, "store").process(
        Record("k", {}, 9 * M)
    )
    assert no_metadata.forwarded == []


# -- a restart on a real broker ---------------------------------------------------------------


def _consume(bootstrap: str, topic: str, until: Any, timeout: float = 60.0) -> list[Any]:
    """(key, value) of the committed records of ``topic`` (``read_committed``)."""
    import orjson

    def decoded(messages: list[Any]) -> list[Any]:
        return [(m.key().decode(), orjson.loads(m.value())) for m in messages]

    return decoded(read_committed(bootstrap, topic, lambda ms: until(decoded(ms)), timeout))


@pytest.mark.parametrize("app_name", ["windowed-revenue", "windowed-revenue-sql"])
def test_a_restart_that_meets_a_late_order_first_keeps_final_windows_final(
    kafka_cluster: Any, tmp_path: Path, app_name: str
) -> None:
    """After a restart an aggregation's stream time starts over, so an order of a window
    emitted as final before the restart, arriving first, lands in an open-looking window. It
    must not change what was emitted (a second final row for the window, as a suppression
    buffer that forgot its stream time would write) and it is reported late, as the batch
    counts it and the stream does not."""
    import orjson
    from confluent_kafka import Producer

    from pipelines.streams.apps import STREAM_APPS
    from pipelines.streams.config import StreamAppConfig
    from pipelines.streams.supervisor import RunnerSettings, StreamAppRunner

    boot = kafka_cluster.bootstrap_servers
    suffix = uuid.uuid4().hex[:8]
    orders_topic = f"orders-restart-{suffix}"
    kafka_cluster.create_topic(orders_topic, partitions=1)
    config = StreamAppConfig(
        orders_topic=orders_topic,
        revenue_topic=f"revenue-5m-restart-{suffix}",
        hopping_revenue_topic=f"revenue-hopping-restart-{suffix}",
        revenue_sql_topic=f"revenue-5m-sql-restart-{suffix}",
        dead_letter_suffix=f"-dlq-{suffix}",
        late_suffix=f"-late-{suffix}",
    )
    app = STREAM_APPS[app_name]
    output = config.revenue_sql_topic if app_name.endswith("-sql") else config.revenue_topic
    late_topic = config.late_topic(app.name)
    region = f"R{suffix}"
    now = int(time.time() * 1000)
    base = now - now % (5 * M) - 30 * M  # a window start, recent enough for retention
    producer = Producer({"bootstrap.servers": boot})

    def send(n: int, t: int) -> None:
        order = {
            "order_id": f"o{n}",
            "customer_id": "c1",
            "amount": float(n),
            "region": region,
            "location": "Berlin",
            "event_time": t,
        }
        producer.produce(orders_topic, key=f"o{n}".encode(), value=orjson.dumps(order))
        assert producer.flush(30) == 0

    def windows(records: list[Any]) -> list[int]:
        return [v["window_start"] for k, v in records if k == region and v is not None]

    settings = RunnerSettings(
        boot, state_root=tmp_path / "state", instance="restart", commit_interval_ms=100
    )

    def run_until(done: Any) -> list[Any]:
        runner = StreamAppRunner(app, settings, config, application_id=f"{app_name}-{suffix}")
        runner.start()
        try:
            return _consume(boot, output, done)
        finally:
            assert runner.close(60)

    for n, minute in enumerate((0.5, 1, 2, 3, 4)):
        send(n, base + int(minute * M))
    send(5, base + 7 * M)  # closes [base, base + 5m) at base + 6m
    first = run_until(lambda records: base in windows(records))
    assert windows(first) == [base]

    send(6, base + 2 * M + 30_000)  # the window's, late: the first record after the restart
    send(7, base + 8 * M)
    send(8, base + 12 * M)  # closes [base + 5m, base + 10m)
    both = run_until(lambda records: base + 5 * M in windows(records))
    assert windows(both) == [base, base + 5 * M], "a window emitted twice, or lost"
    (final,) = [v for k, v in both if k == region and v["window_start"] == base]
    assert final["order_count"] == 5 and final["revenue_cents"] == 1_000
    late = _consume(boot, late_topic, lambda records: len(records) >= 1, timeout=30)
    reported = [v["order_id"] for k, v in late if v["result"] == "revenue_5m"]
    assert reported == ["o6"]
