"""Batch assets on local Spark (``dagster.materialize``) and the stream-vs-batch reconciliation."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pytest
from dagster import AssetKey, DagsterInstance, materialize
from data_fixture import HOUR, PARTITION_KEY, START_MS, build_lake, valid_orders

from assets.batch import BATCH_ASSETS
from assets.reconcile import RECONCILE_ASSETS
from pipelines import domain
from pipelines.batch.session import get_spark
from pipelines.batch.store import read_result
from pipelines.generator import Event
from pipelines.lake.writer import ensure_layout, land_events
from pipelines.reconcile.compare import DUPLICATE_IN_STREAM, MISSING_IN_STREAM, VALUE_DIFF
from pipelines.reconcile.reconcile import reconcile_hour, reconcile_revenue
from pipelines.reconcile.tolerance import Tolerance
from resources import platform_resources

HOUR_END = START_MS + 3_600_000


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list]]:
    root = tmp_path_factory.mktemp("lake")
    events = build_lake(root)
    get_spark()  # one session per process, shared by every test
    result = materialize(
        BATCH_ASSETS,
        partition_key=PARTITION_KEY,
        instance=DagsterInstance.ephemeral(),
        resources=resources_for(root),
    )
    assert result.success
    yield root, events


def resources_for(root: Path) -> dict:
    """The embedded deployment's resources, on the lake at ``root``."""
    return platform_resources({"LAKE_ROOT": str(root)})


def _reference_revenue(orders: list[dict]) -> dict[tuple[str, int], tuple[int, int]]:
    out: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0])
    for order in orders:
        start = domain.window_start(order["event_time"], domain.REVENUE_WINDOW_MS)
        if START_MS <= start < HOUR_END:
            cell = out[(order["region"], start)]
            cell[0] += round(order["amount"] * 100)
            cell[1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


def test_batch_revenue_matches_a_hand_computation(lake: tuple[Path, list]) -> None:
    root, events = lake
    batch = read_result("revenue_5m", HOUR, root)
    got = {
        (r.region, int(r.window_start)): (int(r.revenue_cents), int(r.order_count))
        for r in batch.itertuples()
    }
    assert got == _reference_revenue(valid_orders(events))
    assert (batch["window_end"] - batch["window_start"] == domain.REVENUE_WINDOW_MS).all()


def test_batch_hopping_fraud_sessions_and_dedup(lake: tuple[Path, list]) -> None:
    root, events = lake
    orders = valid_orders(events)
    hopping = read_result("revenue_hopping", HOUR, root)
    # every 5-minute slot of the hour starts one 10-minute window per region with orders,
    # each holding the cents and count of the orders in its 10 minutes
    assert set(hopping["window_start"]) == set(range(START_MS, HOUR_END, domain.HOPPING_ADVANCE_MS))
    expected_hopping: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0])
    for o in orders:
        for start in range(START_MS, HOUR_END, domain.HOPPING_ADVANCE_MS):
            if start <= o["event_time"] < start + domain.HOPPING_SIZE_MS:
                cell = expected_hopping[(o["region"], start)]
                cell[0] += round(o["amount"] * 100)
                cell[1] += 1
    assert {
        (r.region, int(r.window_start)): [int(r.revenue_cents), int(r.order_count)]
        for r in hopping.itertuples()
    } == dict(expected_hopping)

    fraud = read_result("fraud_alerts", HOUR, root)
    in_hour = [o for o in orders if START_MS <= o["event_time"] < HOUR_END]
    high = {o["order_id"] for o in in_hour if o["amount"] > domain.HIGH_VALUE_THRESHOLD}
    assert set(fraud[fraud["rule"] == "high_value"]["order_id"]) == high
    counts: dict[tuple[str, int], int] = defaultdict(int)
    for o in orders:
        start = domain.window_start(o["event_time"], domain.BURST_WINDOW_MS)
        if START_MS <= start < HOUR_END:
            counts[(o["customer_id"], start)] += 1
    bursts = {k for k, n in counts.items() if n > domain.BURST_MAX_ORDERS}
    got = fraud[fraud["rule"] == "rapid_burst"]
    assert set(zip(got["customer_id"], got["window_start"].astype(int), strict=True)) == bursts
    # a new location: an order (once per id) of a known customer from a place their latest
    # profile does not list
    profiles = {
        c["customer_id"]: c
        for c in (
            domain.parse_record(e.topic, e.value) for e in events if e.topic == domain.CUSTOMERS
        )
        if c is not None
    }
    new_places = {
        o["order_id"]
        for o in in_hour
        if o["customer_id"] in profiles
        and o.get("location") not in (profiles[o["customer_id"]].get("known_locations") or [])
    }
    assert new_places and set(fraud[fraud["rule"] == "new_location"]["order_id"]) == new_places

    # sessions: a user's clicks at most 30 minutes apart, starting in the hour
    clicks: dict[str, list[int]] = defaultdict(list)
    for e in events:
        if e.topic == domain.CLICKS and (c := domain.parse_record(e.topic, e.value)) is not None:
            clicks[c["user_id"]].append(c["event_time"])
    expected_sessions = set()
    for user, times in clicks.items():
        times.sort()
        first = last = times[0]
        count = 1
        for t in [*times[1:], None]:
            if t is not None and t - last <= domain.SESSION_GAP_MS:
                last, count = t, count + 1
                continue
            if START_MS <= first < HOUR_END:
                expected_sessions.add((user, first, last, count))
            if t is not None:
                first = last = t
                count = 1
    sessions = read_result("click_sessions", HOUR, root)
    assert (
        expected_sessions
        and {
            (r.user_id, int(r.session_start), int(r.session_end), int(r.click_count))
            for r in sessions.itertuples()
        }
        == expected_sessions
    )

    deduped = read_result("orders_deduped", HOUR, root)
    assert deduped["order_id"].is_unique
    assert set(deduped["order_id"]) == {o["order_id"] for o in in_hour}


def _land_as_stream(root: Path, topic: str, frame: pd.DataFrame, key: str) -> None:
    events = [
        Event(
            topic,
            str(row[key]),
            orjson.dumps(row),
            int(row.get("window_start") or row.get("event_time") or row.get("session_start")),
            0,
        )
        for row in frame.to_dict("records")
    ]
    land_events(root, events, partitions=2)


def _fresh_stream_topics(root: Path) -> None:
    import shutil

    for topic in (
        domain.REVENUE_5M,
        domain.REVENUE_HOPPING,
        domain.FRAUD_ALERTS,
        domain.CLICK_SESSIONS,
        domain.REVENUE_5M_SQL,
    ):
        shutil.rmtree(root / topic, ignore_errors=True)
        (root / "_manifest" / f"{topic}.json").unlink(missing_ok=True)


def _stream_like_batch(root: Path) -> None:
    _fresh_stream_topics(root)
    for result, topic, key in (
        ("revenue_5m", domain.REVENUE_5M, "region"),
        ("revenue_5m", domain.REVENUE_5M_SQL, "region"),
        ("revenue_hopping", domain.REVENUE_HOPPING, "region"),
        ("fraud_alerts", domain.FRAUD_ALERTS, "customer_id"),
        ("click_sessions", domain.CLICK_SESSIONS, "user_id"),
    ):
        frame = read_result(result, HOUR, root)
        frame = frame.astype(object).where(frame.notna(), None)
        _land_as_stream(root, topic, frame, key)


def test_reconciliation_passes_when_stream_and_batch_agree(lake: tuple[Path, list]) -> None:
    root, _ = lake
    _stream_like_batch(root)
    reports = reconcile_hour(HOUR, root)
    for name, report in reports.items():
        assert report.passed, report.summary()
        assert report.stats["unexplained"] == 0, name
        assert report.stats["key_coverage"] == 1.0

    result = materialize(
        RECONCILE_ASSETS,
        partition_key=PARTITION_KEY,
        instance=DagsterInstance.ephemeral(),
        resources=resources_for(lake[0]),
    )
    assert result.success
    checks = result.get_asset_check_evaluations()
    # four stream results, the SQL revenue app vs batch and vs DSL, and vs DuckDB
    assert len(checks) == 7 and all(c.passed for c in checks), [
        (c.check_name, c.description) for c in checks if not c.passed
    ]
    names = {c.check_name for c in checks}
    assert {
        "revenue_5m_sql_stream_matches_batch",
        "revenue_5m_sql_matches_dsl",
        "revenue_5m_sql_matches_duckdb",
    } <= names


def test_reconciliation_detects_an_injected_difference(lake: tuple[Path, list]) -> None:
    root, _ = lake
    _fresh_stream_topics(root)
    frame = read_result("revenue_5m", HOUR, root)
    tampered = frame.copy()
    victim = tampered.index[3]
    tampered.loc[victim, "revenue_cents"] += 12_345
    tampered.loc[victim, "revenue"] += 123.45
    dropped = tampered.index[7]
    region, start = tampered.loc[dropped, "region"], int(tampered.loc[dropped, "window_start"])
    tampered = tampered.drop(index=dropped)
    _land_as_stream(root, domain.REVENUE_5M, tampered, "region")

    report = reconcile_revenue(HOUR, root)
    assert not report.passed
    assert report.stats["value_diffs"] == 1 and report.stats["missing_in_stream"] == 1
    worst = report.worst
    assert set(worst["status"]) == {VALUE_DIFF, MISSING_IN_STREAM}
    diff_row = worst[worst["status"] == VALUE_DIFF].iloc[0]
    assert diff_row["revenue_cents_diff"] == -12_345
    missing = worst[worst["status"] == MISSING_IN_STREAM].iloc[0]
    assert (missing["region"], int(missing["window_start"])) == (region, start)
    # a tolerance admitting two unexplained keys passes
    assert reconcile_revenue(HOUR, root, tolerance=Tolerance(max_unexplained_keys=2)).passed

    _stream_like_batch(root)
    frame = read_result("revenue_5m", HOUR, root)
    tampered = frame.copy()
    tampered.loc[tampered.index[0], "order_count"] -= 1
    _fresh_stream_topics(root)
    _land_as_stream(root, domain.REVENUE_5M, tampered, "region")
    for result, topic, key in (
        ("revenue_hopping", domain.REVENUE_HOPPING, "region"),
        ("fraud_alerts", domain.FRAUD_ALERTS, "customer_id"),
        ("click_sessions", domain.CLICK_SESSIONS, "user_id"),
    ):
        f = read_result(result, HOUR, root)
        _land_as_stream(root, topic, f.astype(object).where(f.notna(), None), key)
    result = materialize(
        RECONCILE_ASSETS,
        partition_key=PARTITION_KEY,
        instance=DagsterInstance.ephemeral(),
        resources=resources_for(lake[0]),
        raise_on_error=False,
    )
    checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
    failed = checks["revenue_5m_stream_matches_batch"]
    assert not failed.passed
    worst = failed.metadata["worst_keys"].value.records
    # window starts read as UTC times, not epoch milliseconds
    assert all(
        re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}", r.data["window_start"])
        for r in worst
    )
    assert checks["click_sessions_stream_matches_batch"].passed
    assert not result.success  # the blocking check stops the run
    materialized = {e.asset_key for e in result.get_asset_materialization_events()}
    assert AssetKey(["reconcile", "stream_vs_batch"]) in materialized


def test_late_data_explains_exactly_the_stream_shortfall() -> None:
    from pipelines.reconcile.compare import compare_keyed
    from pipelines.reconcile.late import late_report

    w = domain.REVENUE_WINDOW_MS
    # what the stream reported dropping: one EU order of window 0 (and one of another result)
    dropped = pd.DataFrame(
        {
            "result": ["revenue_5m", "revenue_hopping"],
            "region": ["EU", "EU"],
            "amount": [5.0, 7.0],
            "event_time": [2_000, 2_000],
            "window_start": [0, 0],
            "stream_time": [4 * w, 4 * w],
        }
    )
    late = late_report(dropped, "revenue_5m")
    assert late.to_dict("records") == [
        {
            "region": "EU",
            "window_start": 0,
            "late_count": 1,
            "late_cents": 500,
            "max_lateness_ms": 4 * w - 2_000,
        }
    ]
    batch = pd.DataFrame(
        {"region": ["EU"], "window_start": [0], "revenue_cents": [1500], "order_count": [2]}
    )
    stream = pd.DataFrame(
        {"region": ["EU"], "window_start": [0], "revenue_cents": [1000], "order_count": [1]}
    )

    def compare(stream: pd.DataFrame) -> Any:
        return compare_keyed(
            "r",
            stream,
            batch,
            keys=["region", "window_start"],
            values=["revenue_cents", "order_count"],
            late=late,
            count_column="order_count",
            late_values={"revenue_cents": "late_cents"},
        )

    report = compare(stream)
    assert report.passed and report.stats["explained_by_late_data"] == 1
    # short by two orders, or by the right count but another amount: not the late order
    for wrong in (stream.assign(order_count=0), stream.assign(revenue_cents=900)):
        report = compare(wrong)
        assert not report.passed and report.stats["unexplained"] == 1
    # the whole window dropped: explained only if everything in it was late
    report = compare(stream.iloc[0:0])
    assert report.stats["unexplained"] == 1


def test_value_tolerances_and_stream_only_keys() -> None:
    """A value within ``value_abs`` or ``value_rel`` of the batch matches, one beyond does
    not; a key only the stream has is unexplained; ``max_unexplained_keys`` lets it pass."""
    from pipelines.reconcile.compare import MISSING_IN_BATCH, compare_keyed

    batch = pd.DataFrame({"region": ["EU", "US"], "window_start": [0, 0], "cents": [1000, 500]})
    stream = pd.DataFrame(
        {"region": ["EU", "US", "ASIA"], "window_start": [0, 0, 0], "cents": [1004, 500, 7]}
    )

    def compare(stream: pd.DataFrame, tolerance: Tolerance | None = None) -> Any:
        return compare_keyed(
            "r",
            stream,
            batch,
            keys=["region", "window_start"],
            values=["cents"],
            tolerance=tolerance,
        )

    exact = compare(stream.iloc[:2])
    assert exact.stats["value_diffs"] == 1 and not exact.passed
    assert compare(stream.iloc[:2], Tolerance(value_abs=4)).passed
    assert not compare(stream.iloc[:2], Tolerance(value_abs=3.9)).passed
    assert compare(stream.iloc[:2], Tolerance(value_rel=0.004)).passed
    assert not compare(stream.iloc[:2], Tolerance(value_rel=0.0039)).passed
    extra = compare(stream, Tolerance(value_abs=4))
    assert extra.stats["missing_in_batch"] == 1 and extra.stats["unexplained"] == 1
    assert extra.worst["status"].tolist() == [MISSING_IN_BATCH] and not extra.passed
    assert compare(stream, Tolerance(value_abs=4, max_unexplained_keys=1)).passed


def test_reconciliation_asset_leaves_open_windows_and_sessions_out(
    lake: tuple[Path, list],
) -> None:
    # a stream emitting on window close has not written the windows and sessions its
    # watermark has not closed yet: the asset passes the watermark, so they are pending,
    # not differences
    from pipelines.reconcile.reconcile import stream_watermark

    root, events = lake
    watermark = stream_watermark(root)
    assert watermark == max(o["event_time"] for o in valid_orders(events))
    _stream_like_batch(root)
    sessions = read_result("click_sessions", HOUR, root)
    wait = domain.SESSION_GAP_MS + 5 * domain.MINUTE_MS
    closed = sessions["session_end"] + wait <= watermark
    assert 0 < (~closed).sum() < len(sessions)
    revenue = read_result("revenue_5m", HOUR, root)
    on_close = revenue["window_end"] + domain.REVENUE_GRACE_MS <= watermark
    assert (~on_close).sum() > 0
    for topic in (domain.CLICK_SESSIONS, domain.REVENUE_5M):
        import shutil

        shutil.rmtree(root / topic, ignore_errors=True)
        (root / "_manifest" / f"{topic}.json").unlink(missing_ok=True)
    open_free = sessions[closed]
    _land_as_stream(
        root,
        domain.CLICK_SESSIONS,
        open_free.astype(object).where(open_free.notna(), None),
        "user_id",
    )
    _land_as_stream(root, domain.REVENUE_5M, revenue[on_close], "region")

    # without the watermark the open sessions and windows look missing in the stream
    unaware = reconcile_hour(HOUR, root)
    assert not unaware["click_sessions"].passed
    assert not unaware["revenue_5m"].passed

    result = materialize(
        RECONCILE_ASSETS,
        partition_key=PARTITION_KEY,
        instance=DagsterInstance.ephemeral(),
        resources=resources_for(lake[0]),
    )
    assert result.success
    checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
    # (the SQL revenue app's, landed with every window: the open ones are pending too)
    assert len(checks) == 7 and all(c.passed for c in checks.values()), {
        n: c.description for n, c in checks.items() if not c.passed
    }
    (event,) = [
        e
        for e in result.get_asset_materialization_events()
        if e.asset_key == AssetKey(["reconcile", "stream_vs_batch"])
    ]
    meta = {k: v.value for k, v in event.materialization.metadata.items()}
    assert meta["watermark_ms"] == watermark
    assert meta["click_sessions.pending_sessions"] == int((~closed).sum())


def test_an_hour_without_data_is_reported_not_passed(lake: tuple[Path, list]) -> None:
    from pipelines.lake.paths import hour_of

    empty_hour = hour_of(START_MS + 5 * 3_600_000)
    partition = f"{empty_hour.replace('T', '-')}:00"
    instance = DagsterInstance.ephemeral()
    batch = materialize(
        BATCH_ASSETS,
        partition_key=partition,
        instance=instance,
        resources=resources_for(lake[0]),
    )
    assert batch.success
    result = materialize(
        RECONCILE_ASSETS,
        partition_key=partition,
        instance=instance,
        resources=resources_for(lake[0]),
    )
    checks = result.get_asset_check_evaluations()
    assert len(checks) == 7  # four stream results, three of the SQL revenue app
    for check in checks:
        assert not check.passed and check.severity.value == "WARN", check
        assert "no data for hour" in check.description
    assert result.success  # a WARN check blocks nothing


def test_a_range_backfill_is_one_run_over_every_hour(lake: tuple[Path, list]) -> None:
    from pipelines.lake.paths import hour_of
    from sensors.schedules import RANGE_END_TAG, RANGE_START_TAG

    root, _ = lake
    _stream_like_batch(root)
    keys = [f"{hour_of(START_MS + i * 3_600_000).replace('T', '-')}:00" for i in range(3)]
    instance = DagsterInstance.ephemeral()
    result = materialize(
        [*BATCH_ASSETS, *RECONCILE_ASSETS],
        instance=instance,
        resources=resources_for(lake[0]),
        tags={RANGE_START_TAG: keys[0], RANGE_END_TAG: keys[-1]},
    )
    assert result.success
    assert len(instance.get_runs()) == 1
    materialized = defaultdict(set)
    for event in result.get_asset_materialization_events():
        materialized[event.asset_key].add(event.partition)
    assert len(materialized) == len(BATCH_ASSETS) + len(RECONCILE_ASSETS)
    assert all(partitions == set(keys) for partitions in materialized.values()), materialized
    # the data's hour agrees; the two hours after it are named as empty, not passed
    for check in result.get_asset_check_evaluations():
        assert check.passed, check.description
        assert check.metadata["hours"].value == 3
        assert check.metadata["hours_without_data"].value >= 1
        assert "no data for hour(s)" in check.description


def test_a_session_running_for_hours_is_read_to_its_end(tmp_path: Path) -> None:
    """A user clicking every 10 minutes for 5 hours has one session: the batch reads the
    clicks beyond the hour until the session has ended, as the stream sees it."""
    from pipelines.batch.recompute import compute_result

    long_clicks = [START_MS + 5 * 60_000 + i * 10 * 60_000 for i in range(31)]
    short_clicks = [START_MS + 20 * 60_000 + i * 60_000 for i in range(3)]
    events = [
        Event(
            domain.CLICKS,
            user,
            orjson.dumps({"user_id": user, "page": "/p", "event_time": ts}),
            ts,
            ts,
        )
        for user, times in (("u-long", long_clicks), ("u-short", short_clicks))
        for ts in times
    ]
    land_events(tmp_path, events)
    sessions = compute_result("click_sessions", HOUR, tmp_path, get_spark()).toPandas()
    got = {
        row.user_id: (int(row.session_start), int(row.session_end), int(row.click_count))
        for row in sessions.itertuples()
    }
    assert got == {
        "u-long": (long_clicks[0], long_clicks[-1], 31),
        "u-short": (short_clicks[0], short_clicks[-1], 3),
    }


def _order(order_id: str, region: str, cents: int, event_time: int) -> dict[str, Any]:
    return {
        "order_id": order_id,
        "customer_id": "c1",
        "amount": cents / 100,
        "region": region,
        "location": "Berlin",
        "event_time": event_time,
    }


def _land_orders(root: Path, orders: list[dict[str, Any]]) -> None:
    land_events(
        root,
        [Event(domain.ORDERS, o["order_id"], orjson.dumps(o), o["event_time"], 0) for o in orders],
        partitions=2,
    )


def _land_late(root: Path, orders: list[dict[str, Any]], stream_time: int) -> None:
    w = domain.REVENUE_WINDOW_MS
    late = pd.DataFrame(
        [
            {
                **o,
                "result": "revenue_5m",
                "window_start": o["event_time"] // w * w,
                "window_end": o["event_time"] // w * w + w,
                "stream_time": stream_time,
            }
            for o in orders
        ]
    )
    _land_as_stream(root, domain.REVENUE_LATE, late, "region")


def test_late_records_count_only_for_orders_the_batch_read(tmp_path: Path) -> None:
    """The first hour of a user's platform came out red: a late order arrived between the
    batch recompute's read of the lake and the reconciliation, so the stream's late report
    (landed later) held one more record than the batch had orders, and the window's
    difference no longer added up. A late record counts only for an order of the batch's
    input (its lake cut); recomputing the batch takes the new order in, and both
    reconciliations agree, with the late accounting exact each time."""
    from pipelines.batch.recompute import recompute

    root = tmp_path
    ensure_layout(root)
    w = domain.REVENUE_WINDOW_MS
    window = START_MS + 9 * w
    on_time = [_order(f"o{i}", "EU", 1_000 + i, window + i * 1_000) for i in range(5)]
    late_1 = _order("late-1", "EU", 777, window + 30_000)
    after = _order("later", "EU", 555, START_MS + 20 * w)  # moves the watermark on
    _land_orders(root, [*on_time, late_1, late_1, after])  # late-1 sent twice (a duplicate)
    stream_time = window + 3 * w
    _land_as_stream(
        root,
        domain.REVENUE_5M,
        pd.DataFrame(
            [
                {
                    "region": "EU",
                    "window_start": window,
                    "window_end": window + w,
                    "revenue": sum(o["amount"] for o in on_time),
                    "order_count": 5,
                    "revenue_cents": sum(round(o["amount"] * 100) for o in on_time),
                }
            ]
        ),
        "region",
    )
    _land_late(root, [late_1, late_1], stream_time)
    get_spark()
    recompute("revenue_5m", HOUR, root)

    # after the batch read: another late order of the window, and the stream's report of it
    late_2 = _order("late-2", "EU", 333, window + 60_000)
    _land_orders(root, [late_2])
    _land_late(root, [late_2], stream_time)

    def verdict() -> tuple[bool, dict[str, Any], list[dict[str, Any]]]:
        report = reconcile_revenue(HOUR, root)
        row = report.table[report.table["window_start"] == window]
        return report.passed, report.stats, row.to_dict("records")

    passed, stats, rows = verdict()
    assert passed and stats["unexplained"] == 0, stats
    assert stats["late_records"] == 2  # both copies of late-1; late-2 is not in the batch
    assert rows[0]["order_count_batch"] - rows[0]["order_count_stream"] == rows[0]["late_count"]
    assert rows[0]["explained_by_late_data"]

    recompute("revenue_5m", HOUR, root)  # the next run reads late-2 too
    passed, stats, rows = verdict()
    assert passed and stats["unexplained"] == 0, stats
    assert stats["late_records"] == 3
    assert rows[0]["order_count_batch"] - rows[0]["order_count_stream"] == 3
    assert rows[0]["revenue_cents_batch"] - rows[0]["revenue_cents_stream"] == 777 * 2 + 333


def test_a_final_result_written_twice_is_an_unexplained_difference(
    lake: tuple[Path, list],
) -> None:
    """A window emitted on close, a session or an alert written twice with the same value
    would pass as a match if only the last record per key counted; it is a duplicate. The
    hopping windows update eagerly, so their repeated records are a changelog."""
    root, _ = lake
    _stream_like_batch(root)
    for result, topic, key in (
        ("revenue_5m", domain.REVENUE_5M, "region"),
        ("revenue_hopping", domain.REVENUE_HOPPING, "region"),
        ("fraud_alerts", domain.FRAUD_ALERTS, "customer_id"),
        ("click_sessions", domain.CLICK_SESSIONS, "user_id"),
    ):
        frame = read_result(result, HOUR, root)
        again = frame.iloc[[2]].astype(object)
        _land_as_stream(root, topic, again.where(again.notna(), None), key)
    reports = reconcile_hour(HOUR, root)
    for name in ("revenue_5m", "fraud_alerts", "click_sessions"):
        report = reports[name]
        assert not report.passed, name
        assert report.stats["duplicates"] == 1 and report.stats["unexplained"] == 1, name
        assert report.worst["status"].tolist() == [DUPLICATE_IN_STREAM], name
    hopping = reports["revenue_hopping"]
    assert hopping.passed and hopping.stats["duplicates"] == 0
