"""The platform's late topics: written by the aggregations themselves (their late side
output), across a restart, on a real broker."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from committed_reads import read_committed

M = 60_000


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
