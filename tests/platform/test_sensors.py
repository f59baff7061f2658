"""Sensor ticks and schedules give the expected run requests.

The pure parts (which hours, which late orders) are tested directly; the sensors themselves
are evaluated with ``dagster.build_sensor_context`` against a real broker.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime

import orjson
import pytest
from confluent_kafka import Producer
from dagster import (
    DagsterInstance,
    DagsterRun,
    DagsterRunStatus,
    HourlyPartitionsDefinition,
    SensorResult,
    SkipReason,
    build_schedule_context,
    build_sensor_context,
    instance_for_test,
)

from pipelines.streams import monitor
from pipelines.streams.apps import STREAM_APPS
from resources import KafkaResource, StreamAppsResource
from sensors import (
    HOURLY_JOB,
    build_health_sensor,
    build_late_data_sensor,
    build_nightly_backfill,
    build_watermark_sensor,
    hour_key,
    hour_start_ms,
)
from sensors.late_data import LateDataState, hours_to_request, read_orders
from sensors.schedules import previous_day_hours
from sensors.watermark import covered_hours, hours_to_reconcile

M = 60_000
H = 60 * M
T0 = int(datetime(2025, 1, 1, tzinfo=UTC).timestamp() * 1000)
PARTITIONS = HourlyPartitionsDefinition(start_date="2025-01-01-00:00")


def _add_run(instance: DagsterInstance, status: DagsterRunStatus, hour: str) -> DagsterRun:
    """A run of the hourly job for partition ``hour``, recorded in ``instance``."""
    run = DagsterRun(
        job_name=HOURLY_JOB,
        run_id=uuid.uuid4().hex,
        status=status,
        tags={"dagster/partition": hour},
    )
    instance.add_run(run)
    return run


def test_hour_keys_round_trip() -> None:
    assert hour_key(T0) == "2025-01-01-00:00"
    assert hour_key(T0 + H + 59 * M) == "2025-01-01-01:00"
    assert hour_start_ms("2025-01-01-01:00") == T0 + H


def test_hours_to_reconcile() -> None:
    # windows closed through 01:55 (the last window of hour 01 not yet): only hour 00
    assert hours_to_reconcile(T0 + H + 55 * M, None) == ["2025-01-01-00:00"]
    # through 02:00: hours 00 and 01 after cursor None -> only the latest complete one
    assert hours_to_reconcile(T0 + 2 * H, None) == ["2025-01-01-01:00"]
    assert hours_to_reconcile(T0 + 2 * H, "2025-01-01-00:00") == ["2025-01-01-01:00"]
    assert hours_to_reconcile(T0 + 3 * H + 5 * M, "2025-01-01-00:00") == [
        "2025-01-01-01:00",
        "2025-01-01-02:00",
    ]
    assert hours_to_reconcile(T0 + 2 * H, "2025-01-01-01:00") == []
    assert hours_to_reconcile(None, None) == []
    assert hours_to_reconcile(T0 + H, None, valid=PARTITIONS.has_partition_key) == [
        "2025-01-01-00:00"
    ]
    assert hours_to_reconcile(T0, None, valid=PARTITIONS.has_partition_key) == []


def test_late_data_state() -> None:
    state = LateDataState()
    # 00:10 sets stream time; 00:04:30 is late (window [00:00, 00:05) closed at 00:06);
    # 00:05:30 is within grace (window [00:05, 00:10) closes at 00:11)
    assert state.observe([T0 + 10 * M, T0 + 4 * M + 30_000, T0 + 5 * M + 30_000]) == 1
    assert state.late == {"2025-01-01-00:00": 1}
    assert state.hours_to_rerun() == []  # hour 00 is not complete yet
    state.observe([T0 + H + 2 * M])  # stream time past 01:01
    assert state.hours_to_rerun() == ["2025-01-01-00:00"]
    state.requested["2025-01-01-00:00"] = 1
    assert state.hours_to_rerun() == []
    state.observe([T0 + 30 * M])  # another late order for hour 00
    assert state.hours_to_rerun() == ["2025-01-01-00:00"]
    again = LateDataState.from_cursor(state.to_cursor())
    assert again == state


def test_late_data_waits_until_the_late_orders_of_an_hour_stop_coming() -> None:
    """Late orders trickle in for as long as the producers' lateness lasts: one re-run
    once none came for the quiet time, not one per minute of the trickle."""
    state = LateDataState()
    at = 1_000_000.0
    state.observe([T0 + H + 2 * M, T0 + 4 * M], now=at)  # hour 00 complete, one late
    assert state.hours_to_rerun(quiet_s=180, now=at + 60) == []
    assert state.settling() == ["2025-01-01-00:00"]
    state.observe([T0 + 30 * M], now=at + 120)  # another one: the quiet time starts again
    assert state.hours_to_rerun(quiet_s=180, now=at + 240) == []
    assert state.hours_to_rerun(quiet_s=180, now=at + 300) == ["2025-01-01-00:00"]


def test_late_data_asks_for_one_run_of_an_hour_at_a_time() -> None:
    """No second Spark run of an hour while one is queued or running, and none for late
    orders that a run created after them lands anyway."""
    hour = "2025-01-01-00:00"
    instance = DagsterInstance.ephemeral()
    state = LateDataState(late={hour: 2}, late_at={hour: time.time() - 60})

    def add_run(status: DagsterRunStatus) -> DagsterRun:
        return _add_run(instance, status, hour)

    assert hours_to_request(state, instance, HOURLY_JOB, [hour]) == ([hour], [])
    running = add_run(DagsterRunStatus.STARTED)  # e.g. the watermark sensor's run
    assert hours_to_request(state, instance, HOURLY_JOB, [hour]) == ([], [hour])
    assert state.requested == {}
    instance.report_run_canceled(running)
    # that run was created after the two late orders were read: it landed them
    assert hours_to_request(state, instance, HOURLY_JOB, [hour]) == ([], [])
    assert state.requested == {hour: 2}
    state.observe([T0 + 2 * M], now=time.time() + 5)  # stream time unknown yet: not late
    state.observe([T0 + 3 * H, T0 + 4 * M], now=time.time() + 5)  # one more, after that run
    assert state.late[hour] == 3 and state.hours_to_rerun(now=time.time() + 5) == [hour]
    assert hours_to_request(state, instance, HOURLY_JOB, [hour]) == ([hour], [])


def test_the_hourly_schedule_runs_an_hour_the_watermark_sensor_did_not(kafka_cluster) -> None:
    """At :10 the schedule requests the hour that just ended, unless it has a run already
    (the watermark sensor's): one run per hour, and a stalled stream still gets its hour.
    An hour without orders (the platform was not running yet) is skipped, not reconciled
    red for lack of data."""
    from assets.data_defs import HOURLY_JOB_DEF
    from sensors import build_hourly_schedule

    orders = f"orders-{uuid.uuid4().hex[:6]}"
    kafka_cluster.create_topic(orders, partitions=2)
    # the platform ran from 02:50 to 04:05: orders in hours 02 and 04, none in hour 03
    _produce(
        kafka_cluster.bootstrap_servers,
        orders,
        [(f"c{i}", {"order_id": f"o{i}"}, T0 + 2 * H + 50 * M + i * M) for i in range(10)]
        + [(f"c{i}", {"order_id": f"p{i}"}, T0 + 4 * H + i * M) for i in range(5)],
    )
    kafka = KafkaResource(bootstrap_servers=kafka_cluster.bootstrap_servers)
    schedule = build_hourly_schedule(HOURLY_JOB_DEF, PARTITIONS, orders_topic=orders)
    with instance_for_test() as instance:

        def tick(hour: int, day: datetime = datetime(2025, 1, 1, tzinfo=UTC)):
            when = day.replace(hour=hour, minute=10)
            # entered: the context closes the resources (and the instance they hold) it built
            with build_schedule_context(
                instance=instance, scheduled_execution_time=when, resources={"kafka": kafka}
            ) as context:
                return schedule(context)

        request = tick(3)
        assert request.partition_key == "2025-01-01-02:00"
        assert request.run_key == "hourly-2025-01-01-02:00"
        _add_run(instance, DagsterRunStatus.SUCCESS, "2025-01-01-02:00")
        assert "2025-01-01-02:00 already has a run" in tick(3).skip_message
        assert "no orders in hour 2025-01-01-01:00" in tick(2).skip_message
        assert "no orders in hour 2025-01-01-03:00" in tick(4).skip_message
        assert tick(5).partition_key == "2025-01-01-04:00"
        assert (
            "no hourly partition has ended yet"
            in tick(23, datetime(2024, 12, 31, tzinfo=UTC)).skip_message
        )


def test_nightly_backfill_requests_previous_day_as_one_run() -> None:
    from sensors.schedules import RANGE_END_TAG, RANGE_START_TAG

    schedule = build_nightly_backfill(partitions_def=PARTITIONS)
    ctx = build_schedule_context(scheduled_execution_time=datetime(2025, 1, 3, 2, 0, tzinfo=UTC))
    request = schedule(ctx)
    hours = previous_day_hours(T0 + 2 * 24 * H + 2 * H)
    assert (hours[0], hours[-1]) == ("2025-01-02-00:00", "2025-01-02-23:00")
    assert request.tags[RANGE_START_TAG] == hours[0]
    assert request.tags[RANGE_END_TAG] == hours[-1]
    assert request.run_key == "nightly-2025-01-02"
    # a day before the first partition: nothing to run, and the tick says why
    early = build_schedule_context(scheduled_execution_time=datetime(2024, 6, 2, 2, 0, tzinfo=UTC))
    skipped = schedule(early)
    assert "no partition of 2024-06-01" in skipped.skip_message


def _produce(bootstrap: str, topic: str, records: list[tuple[str, dict, int]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    for key, value, ts in records:
        producer.produce(topic, key=key.encode(), value=orjson.dumps(value), timestamp=ts)
    assert producer.flush(30) == 0


def _revenue(region: str, start: int) -> tuple[str, dict, int]:
    value = {"region": region, "window_start": start, "window_end": start + 5 * M}
    return region, {**value, "revenue": 1.0, "order_count": 1}, start + 5 * M - 1


def test_watermark_sensor_requests_complete_hours(kafka_cluster) -> None:
    topic = f"revenue-{uuid.uuid4().hex[:6]}"
    kafka_cluster.create_topic(topic, partitions=2)
    kafka = KafkaResource(bootstrap_servers=kafka_cluster.bootstrap_servers)
    sensor = build_watermark_sensor(topic=topic, partitions_def=PARTITIONS)
    instance = DagsterInstance.ephemeral()

    def tick(cursor: str | None):
        ctx = build_sensor_context(instance=instance, cursor=cursor, resources={"kafka": kafka})
        return sensor(ctx)

    assert isinstance(tick(None), SkipReason)  # nothing closed yet
    # EU closed through 01:00, US only through 00:50: hour 00 is not complete for US
    _produce(
        kafka_cluster.bootstrap_servers,
        topic,
        [_revenue("EU", T0 + i * 5 * M) for i in range(12)]
        + [_revenue("US", T0 + i * 5 * M) for i in range(10)],
    )
    assert isinstance(tick(None), SkipReason)
    _produce(
        kafka_cluster.bootstrap_servers,
        topic,
        [_revenue("US", T0 + i * 5 * M) for i in range(10, 13)]
        + [_revenue("EU", T0 + i * 5 * M) for i in range(12, 25)],
    )
    # US through 01:05, EU through 02:05: every key's windows are final through 01:05
    result = tick(None)
    assert isinstance(result, SensorResult)
    assert [r.partition_key for r in result.run_requests] == ["2025-01-01-00:00"]
    assert result.run_requests[0].run_key == "watermark-2025-01-01-00:00"
    assert result.cursor == "2025-01-01-00:00"
    nothing_new = tick(result.cursor)
    assert isinstance(nothing_new, SkipReason)
    assert nothing_new.skip_message == (
        "windows closed through 2025-01-01 01:05:00 UTC: no new complete hour"
    )
    _produce(
        kafka_cluster.bootstrap_servers,
        topic,
        [_revenue("US", T0 + i * 5 * M) for i in range(13, 37)],
    )
    result = tick("2025-01-01-00:00")  # US through 03:05, EU through 02:05
    assert [r.partition_key for r in result.run_requests] == [
        "2025-01-01-01:00",
    ]
    assert result.cursor == "2025-01-01-01:00"
    # hour 02 closes, but the late-data sensor's run of it (created after it ended) is
    # running: no second run, and the cursor moves on
    _produce(
        kafka_cluster.bootstrap_servers,
        topic,
        [_revenue("EU", T0 + i * 5 * M) for i in range(25, 37)],
    )
    _add_run(instance, DagsterRunStatus.STARTED, "2025-01-01-02:00")
    covered = tick(result.cursor)
    assert not covered.run_requests and covered.cursor == "2025-01-01-02:00"
    assert covered.skip_reason.skip_message == (
        "2025-01-01-02:00 already reconciled by a run created after it ended"
    )


def test_an_hour_counts_as_covered_by_a_run_created_after_it_ended_that_did_not_fail() -> None:
    instance = DagsterInstance.ephemeral()
    hours = [hour_key(T0 + i * H) for i in range(5)]
    for hour, status in zip(
        hours,
        [
            DagsterRunStatus.SUCCESS,
            DagsterRunStatus.STARTING,
            DagsterRunStatus.CANCELED,  # Ctrl-C of make run: the hour still needs its run
            DagsterRunStatus.FAILURE,
        ],
        strict=False,
    ):
        _add_run(instance, status, hour)
    now_hour = hour_key(int(time.time() * 1000))  # a run created before this hour ended
    _add_run(instance, DagsterRunStatus.SUCCESS, now_hour)
    assert covered_hours(instance, HOURLY_JOB, [*hours, now_hour]) == hours[:2]


def test_a_watermark_is_not_read_from_part_of_the_topic(kafka_cluster, monkeypatch) -> None:
    """A partition not read to its end in time (here its records never arrive, as on a
    loaded machine) fails the read instead of leaving that partition's keys out, which
    would move the watermark past hours they have not closed; the sensor skips the tick."""
    import confluent_kafka

    topic = f"revenue-{uuid.uuid4().hex[:6]}"
    kafka_cluster.create_topic(topic, partitions=2)
    boot = kafka_cluster.bootstrap_servers
    producer = Producer({"bootstrap.servers": boot})
    producer.produce(topic, partition=0, key=b"US", value=orjson.dumps(_revenue("US", T0)[1]))
    eu = _revenue("EU", T0 + 3 * H)[1]
    producer.produce(topic, partition=1, key=b"EU", value=orjson.dumps(eu))
    assert producer.flush(30) == 0
    assert monitor.closed_window_watermark(boot, topic) == T0 + 5 * M

    class SlowPartitionOne(confluent_kafka.Consumer):
        def assign(self, partitions):  # type: ignore[override]
            super().assign(partitions)
            self.pause([tp for tp in partitions if tp.partition == 1])

    monkeypatch.setattr(confluent_kafka, "Consumer", SlowPartitionOne)
    with pytest.raises(monitor.TopicReadTimeout, match=r"partitions \[1\] not read"):
        monitor.closed_window_watermark(boot, topic, timeout=2.0)
    kafka = KafkaResource(bootstrap_servers=boot)
    sensor = build_watermark_sensor(
        topic=topic, partitions_def=PARTITIONS, read_timeout_seconds=2.0
    )
    tick = sensor(build_sensor_context(cursor=None, resources={"kafka": kafka}))
    assert isinstance(tick, SkipReason)
    assert "watermark unknown" in str(tick.skip_message)


def test_late_data_counts_only_what_is_late_for_a_reader_aligned_by_event_time(
    kafka_cluster,
) -> None:
    """Two partitions holding the same hour of on-time orders, one late order at the end of
    the second: read partition after partition, the second's first hour would look late;
    the sensor counts the one late order, over ticks that read a share of the backlog."""
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    kafka_cluster.create_topic(topic, partitions=2)
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers})

    def order(n: int, t: int) -> bytes:
        value = {"order_id": f"o{n}", "customer_id": "c1", "amount": 1.0, "region": "EU"}
        return orjson.dumps({**value, "location": "Berlin", "event_time": t})

    for partition in (0, 1):
        for i in range(0, 71):
            t = T0 + i * M
            producer.produce(topic, partition=partition, value=order(i, t), timestamp=t)
    producer.produce(topic, partition=1, value=order(99, T0 + 20 * M), timestamp=T0 + 20 * M)
    assert producer.flush(30) == 0
    ends = {0: 71, 1: 72}
    state = LateDataState()
    offsets: dict[str, int] = {}
    ticks = 0
    while offsets != {"0": 71, "1": 72}:
        times, offsets = read_orders(kafka_cluster.bootstrap_servers, topic, offsets, 40, ends)
        state.observe(times)
        ticks += 1
        assert ticks < 20, offsets
    assert state.late == {"2025-01-01-00:00": 1}
    assert ticks >= 4  # 143 records, 40 a tick


def test_late_data_sensor_requests_reruns(kafka_cluster) -> None:
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    kafka_cluster.create_topic(topic, partitions=1)
    kafka = KafkaResource(bootstrap_servers=kafka_cluster.bootstrap_servers)
    sensor = build_late_data_sensor(topic=topic, partitions_def=PARTITIONS, quiet_seconds=0)
    instance = DagsterInstance.ephemeral()

    def order(n: int, t: int) -> tuple[str, dict, int]:
        oid = f"o{n}"
        value = {"order_id": oid, "customer_id": "c1", "amount": 1.0, "region": "EU"}
        return oid, {**value, "location": "Berlin", "event_time": t}, t

    def tick(cursor: str | None):
        ctx = build_sensor_context(instance=instance, cursor=cursor, resources={"kafka": kafka})
        return sensor(ctx)

    # on time through 01:10, then an order of 00:20 (late: its window closed at 00:26)
    on_time = [order(i, T0 + i * M) for i in range(0, 71, 5)]
    _produce(kafka_cluster.bootstrap_servers, topic, [*on_time, order(99, T0 + 20 * M)])
    # as configured by default: the late order has just come, more may follow
    patient = build_late_data_sensor(topic=topic, partitions_def=PARTITIONS)
    waiting = patient(
        build_sensor_context(instance=instance, cursor=None, resources={"kafka": kafka})
    )
    assert not waiting.run_requests
    assert (
        "late orders of 2025-01-01-00:00 still arriving (a re-run once none came for 180 s)"
        in waiting.skip_reason.skip_message
    )
    result = tick(None)
    assert [r.partition_key for r in result.run_requests] == ["2025-01-01-00:00"]
    assert result.run_requests[0].tags["trigger"] == "late-data"
    cursor = json.loads(result.cursor)
    assert cursor["offsets"] == {"0": len(on_time) + 1}
    # nothing new: no request; one more late order for hour 00: a new request
    again = tick(result.cursor)
    assert not again.run_requests
    _produce(kafka_cluster.bootstrap_servers, topic, [order(100, T0 + 21 * M)])
    third = tick(again.cursor)
    assert [r.partition_key for r in third.run_requests] == ["2025-01-01-00:00"]
    assert third.run_requests[0].run_key != result.run_requests[0].run_key
    # while a run of the hour is running, more late orders ask for nothing; once it has
    # finished, one run for them
    running = _add_run(instance, DagsterRunStatus.STARTED, "2025-01-01-00:00")
    _produce(kafka_cluster.bootstrap_servers, topic, [order(101, T0 + 22 * M)])
    fourth = tick(third.cursor)
    assert not fourth.run_requests
    assert "2025-01-01-00:00 is queued or running" in fourth.skip_reason.skip_message
    instance.report_run_canceled(running)
    fifth = tick(fourth.cursor)
    assert [r.partition_key for r in fifth.run_requests] == ["2025-01-01-00:00"]
    assert fifth.run_requests[0].tags["late_orders"] == "3"


def test_health_sensor_observes_lag(kafka_cluster, tmp_path) -> None:
    from confluent_kafka import Consumer, TopicPartition

    for topic in ("orders", "customers", "clicks", "payments"):
        if topic not in kafka_cluster.list_topics():
            kafka_cluster.create_topic(topic, partitions=1)
    _produce(
        kafka_cluster.bootstrap_servers,
        "orders",
        [("o1", {"order_id": "o1"}, T0), ("o2", {"order_id": "o2"}, T0)],
    )
    # the windowed-revenue group is one record behind: everything else committed (the
    # session's broker is shared, so "orders" may hold other tests' records)
    consumer = Consumer(
        {"bootstrap.servers": kafka_cluster.bootstrap_servers, "group.id": "windowed-revenue"}
    )
    partitions = consumer.list_topics("orders", timeout=10).topics["orders"].partitions
    offsets = []
    for p in sorted(partitions):
        _low, high = consumer.get_watermark_offsets(TopicPartition("orders", p), timeout=10)
        offsets.append(TopicPartition("orders", p, high))
    busiest = max(offsets, key=lambda tp: tp.offset)
    busiest.offset -= 1
    consumer.commit(offsets=offsets, asynchronous=False)
    consumer.close()
    status_dir = tmp_path / "supervisor"
    status_dir.mkdir()
    (status_dir / "status.json").write_text(
        json.dumps({"apps": {"windowed-revenue": {"state": "ERROR", "records_per_second": 0.0}}})
    )
    sensor = build_health_sensor()
    ctx = build_sensor_context(
        instance=DagsterInstance.ephemeral(),
        resources={
            "kafka": KafkaResource(bootstrap_servers=kafka_cluster.bootstrap_servers),
            "stream_apps": StreamAppsResource(state_root=str(tmp_path), max_healthy_lag=0),
        },
    )
    result = sensor(ctx)
    by_key = {}
    for event in result.asset_events:
        by_key.setdefault(event.asset_key.path[-1], event.metadata)
    # the health is an evaluation of the application's stream_app_healthy check (WARN)
    checks = {e.asset_key.path[-1]: e for e in result.asset_events if hasattr(e, "check_name")}
    assert len(checks) == len(STREAM_APPS)
    health = checks["revenue-per-region-5m"]
    assert health.check_name == "stream_app_healthy" and not health.passed
    assert health.severity.value == "WARN"
    assert "windowed-revenue lags 1 records (limit 0)" in health.description
    instance = ctx.instance
    instance.report_runless_asset_event(health)
    stored = instance.event_log_storage.get_latest_asset_check_execution_by_key(
        [health.asset_check_key]
    )
    assert stored[health.asset_check_key].status.value == "FAILED"
    revenue = by_key["revenue-per-region-5m"]
    assert revenue["consumer_lag_total"].value == 1
    assert revenue["state"].value == "ERROR"
    assert revenue["healthy"].value is False
    assert by_key["orders"]["records"].value >= 2
    # the tick says what it observed (Dagster shows it as the skipped tick's text)
    message = result.skip_reason.skip_message
    assert message.startswith(f"Observed {len(STREAM_APPS)} stream apps (")
    assert "windowed-revenue lag 1 ERROR" in message
    assert f"orders {by_key['orders']['records'].value:,} records" in message
    assert "alerts: windowed-revenue lags 1 records (limit 0)" in message
    tick = sensor.evaluate_tick(ctx)
    assert tick.skip_message.startswith(f"Observed {len(STREAM_APPS)} stream apps (")
    assert "empty result" not in tick.skip_message
    assert len(tick.asset_events) == len(result.asset_events)


@pytest.mark.parametrize("now", [T0 + 2 * 24 * H + 2 * H])
def test_previous_day_hours(now: int) -> None:
    hours = previous_day_hours(now)
    assert len(hours) == 24 and hours[0] == "2025-01-02-00:00"


def test_health_sensor_reports_a_stall_when_kafka_does_not_answer(tmp_path) -> None:
    # nothing listens on port 1: the sensor reports instead of failing the tick
    status_dir = tmp_path / "supervisor"
    status_dir.mkdir()
    stalled = {
        "state": "RUNNING",
        "health": "STALLED",
        "stalled_since": "2026-01-01T00:00:00+00:00",
        "stalled_for_s": 42.0,
        "stall_reason": "broker unreachable: _TRANSPORT: Failed to get metadata",
        "last_error": "broker unreachable: _TRANSPORT: Failed to get metadata",
        "restarts": 2,
    }
    running = {"state": "RUNNING", "health": "RUNNING", "restarts": 0}
    (status_dir / "status.json").write_text(
        json.dumps(
            {
                "written_at": time.time(),
                "apps": {"windowed-revenue": stalled, "orders-dedup": running},
            }
        )
    )
    sensor = build_health_sensor()
    ctx = build_sensor_context(
        instance=DagsterInstance.ephemeral(),
        resources={
            "kafka": KafkaResource(bootstrap_servers="127.0.0.1:1"),
            "stream_apps": StreamAppsResource(state_root=str(tmp_path)),
        },
    )
    began = time.monotonic()
    result = sensor(ctx)
    assert time.monotonic() - began < 30  # one probe, not a lag query per application
    by_key = {e.asset_key.path[-1]: e.metadata for e in result.asset_events}
    assert "orders" not in by_key  # raw topic sizes need the broker
    revenue = {k: v.value for k, v in by_key["revenue-per-region-5m"].items()}
    assert revenue["health"] == "STALLED"
    assert revenue["stalled_since"] == "2026-01-01T00:00:00+00:00"
    assert revenue["stall_reason"].startswith("broker unreachable")
    assert revenue["restarts"] == 2
    assert revenue["broker_error"] and revenue["lag_error"]
    assert revenue["healthy"] is False
    dedup = {k: v.value for k, v in by_key["orders-deduped"].items()}
    assert dedup["health"] == "RUNNING" and dedup["healthy"] is False  # Kafka is away
    message = result.skip_reason.skip_message
    assert f"Observed {len(STREAM_APPS)} stream apps (0 healthy)" in message
    assert "windowed-revenue lag unavailable STALLED" in message
    assert "orders-dedup lag unavailable RUNNING" in message
    assert "Kafka does not answer" in message


def test_health_tick_message() -> None:
    from sensors.health import tick_message

    observed = {
        "windowed-revenue": {"consumer_lag_total": 12345, "health": "RUNNING", "healthy": True},
        "orders-dedup": {"lag_error": "timed out", "state": "ERROR", "healthy": False},
    }
    message = tick_message(observed, {"orders": 1200}, ["orders-dedup is ERROR"], 7)
    assert message == (
        "Observed 2 stream apps (1 healthy): windowed-revenue lag 12,345 RUNNING, "
        "orders-dedup lag unavailable ERROR. raw topics: orders 1,200 records. "
        "7 observations recorded. 1 alert: orders-dedup is ERROR"
    )
    assert tick_message({}, {}, [], 0).endswith("no alerts")


def test_health_sensor_flags_a_stale_supervisor_status(tmp_path) -> None:
    from assets.stream_health import app_health

    status = {"state": "RUNNING", "health": "RUNNING", "status_age_s": 600.0}
    meta, alerts = app_health("orders-dedup", {"orders-0": 0}, status, max_lag=10)
    assert meta["status_age_s"] == 600.0 and not meta["healthy"]
    assert any("600 s old" in a for a in alerts)
    meta, alerts = app_health("orders-dedup", {"orders-0": 0}, {"state": "RUNNING"}, 10)
    assert meta["healthy"] and alerts == []


def test_health_sensor_asks_instances_run_elsewhere_over_http(kafka_cluster, tmp_path) -> None:
    """Applications the supervisor does not run (pods): the sensor finds every instance of
    the group from one of them (``/metadata``) and asks each for its state (``/health``)."""
    from pipelines.streams import monitor
    from pipelines.topics import create_topics
    from resources.stream_apps import free_port

    bootstrap = kafka_cluster.bootstrap_servers
    create_topics(bootstrap)
    group = f"orders-dedup-pods-{uuid.uuid4().hex[:6]}"
    resource = StreamAppsResource(state_root=str(tmp_path / "state"))
    ports = [free_port(), free_port()]
    pods = [
        resource.runner(
            "orders-dedup", bootstrap, instance=f"pod-{i}", application_id=group, query_port=port
        )
        for i, port in enumerate(ports)
    ]
    url = f"http://127.0.0.1:{ports[0]}"
    sensor = build_health_sensor()

    def observe() -> dict:
        ctx = build_sensor_context(
            instance=DagsterInstance.ephemeral(),
            resources={
                "kafka": KafkaResource(bootstrap_servers=bootstrap),
                "stream_apps": StreamAppsResource(
                    state_root=str(tmp_path / "no-supervisor"), query_urls={"orders-dedup": url}
                ),
            },
        )
        result = sensor(ctx)
        by_key = {e.asset_key.path[-1]: e.metadata for e in result.asset_events}
        return {k: v.value for k, v in by_key["orders-deduped"].items()}, result

    try:
        for pod in pods:
            pod.start()
        deadline = time.monotonic() + 120
        health = monitor.instances_health(url)
        while time.monotonic() < deadline and (
            health["state"] != "RUNNING" or health["instances"] != 2
        ):
            time.sleep(1)
            health = monitor.instances_health(url)
        assert health["state"] == "RUNNING" and health["instances"] == 2, health
        assert set(health["instance_states"]) == {f"127.0.0.1:{p}" for p in ports}

        meta, _ = observe()
        assert meta["state"] == "RUNNING"
        assert meta["instances"] == meta["instances_running"] == 2
    finally:
        for pod in pods:
            pod.close(60)

    # nobody answers any more: UNREACHABLE, and an alert
    meta, result = observe()
    assert meta["state"] == "UNREACHABLE" and meta["healthy"] is False
    assert "orders-dedup is UNREACHABLE" in result.skip_reason.skip_message


def test_instances_health_reports_error_answers_and_sends_the_token() -> None:
    """An instance answering /metadata with an error (503 while rebalancing, 401 without the
    token) is UNREACHABLE, never a failed tick; the bearer token goes to every instance."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from pipelines.streams import monitor

    token = "s3cret-token"

    class Instance(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            authorized = self.headers.get("Authorization") == f"Bearer {token}"
            port = self.server.server_address[1]
            if not authorized:
                status, body = 401, {"error": "missing or wrong bearer token"}
            elif self.path == "/metadata":
                status, body = 200, [{"host": "127.0.0.1", "port": port}]
            else:
                status, body = 503, {"state": "REBALANCING", "healthy": False}
            payload = orjson.dumps(body)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Instance)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        refused = monitor.instances_health(url)
        assert refused["state"] == "UNREACHABLE" and "bearer token" in refused["error"]
        health = monitor.instances_health(url, token=token)
        assert health["state"] == "REBALANCING"
        assert health["instances"] == 1 and health["instances_running"] == 0
    finally:
        server.shutdown()
    # nobody listens any more
    assert monitor.instances_health(url, timeout=1)["state"] == "UNREACHABLE"
