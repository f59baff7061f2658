"""The SQL fraud application's reconciliation with its own SQL run by DuckDB
(``pipelines.reconcile.sql_fraud``), on hand-made orders and alerts: no broker, no lake."""

from __future__ import annotations

from typing import Any

import pandas as pd

from pipelines import domain
from pipelines.reconcile.sql_fraud import (
    compare_alerts,
    duckdb_alerts,
    possibly_late,
    watermark_delay_ms,
)
from pipelines.reconcile.tolerance import Tolerance

MINUTE = domain.MINUTE_MS
HOUR = "2026-01-01-10:00"
T0 = 1_767_261_600_000  # 2026-01-01T10:00:00Z


def order(n: int, customer: str, amount: float, location: str, minute: float) -> dict[str, Any]:
    """An order as the lake holds it: each customer's in its own partition, in this order."""
    return {
        "_partition": int(customer[2:]),
        "_offset": n,
        "order_id": f"o-{n}",
        "customer_id": customer,
        "amount": amount,
        "region": "EU",
        "location": location,
        "event_time": T0 + int(minute * MINUTE),
    }


EU, NA = domain.LOCATIONS["EU"][0], domain.LOCATIONS["NA"][0]
ORDERS = pd.DataFrame(
    [
        order(1, "c-1", 2.0, EU, 1),  # small ...
        order(2, "c-1", 40.0, EU, 2),
        order(3, "c-1", 900.0, EU, 3),  # ... then large: small_then_large (o-3, o-1)
        order(4, "c-2", 50.0, EU, 5),
        order(5, "c-2", 60.0, NA, 6),  # another region: impossible_travel (o-5, o-4)
        order(6, "c-1", 30.0, EU, 40),  # c-1's latest order: its alert is behind it
        order(7, "c-2", 70.0, NA, 12),  # c-2's latest: o-5 + WITHIN + delay is not behind
        order(8, "c-3", 80.0, EU, 20),
        order(9, "c-3", 90.0, NA, 21),  # impossible_travel (o-9, o-8) ...
        order(10, "c-3", 95.0, NA, 50),  # ... behind c-3's latest order
    ]
)


def batch() -> pd.DataFrame:
    return duckdb_alerts(ORDERS, HOUR)


def test_duckdb_gives_both_rules_alerts_of_the_hour() -> None:
    alerts = batch()
    got = sorted(zip(alerts["rule"], alerts["order_id"], alerts["first_order_id"], strict=True))
    assert got == [
        ("impossible_travel", "o-5", "o-4"),
        ("impossible_travel", "o-9", "o-8"),
        ("small_then_large", "o-3", "o-1"),
    ]
    assert watermark_delay_ms() == MINUTE


def test_equal_alerts_pass_and_held_back_ones_are_pending() -> None:
    alerts = batch()
    # the stream has not emitted c-2's alert yet: its watermark has not passed it plus WITHIN
    stream = alerts[alerts["customer_id"] != "c-2"]
    report = compare_alerts(stream, alerts, ORDERS, watermark_ms=None)
    assert report.passed, report.worst
    assert report.stats["matched"] == 2
    assert report.stats["pending_alerts"] == 1
    assert report.stats["matched_small_then_large"] == 1
    assert report.stats["matched_impossible_travel"] == 1
    # a global watermark below c-3's alert plus WITHIN holds it back too
    report = compare_alerts(stream, alerts, ORDERS, watermark_ms=T0 + 30 * MINUTE)
    assert report.passed and report.stats["matched"] == 1
    assert report.stats["pending_alerts"] == 2


def test_a_missing_changed_or_repeated_alert_is_unexplained() -> None:
    alerts = batch()
    due = alerts[alerts["customer_id"] != "c-2"]
    missing = due[due["rule"] != "small_then_large"]
    report = compare_alerts(missing, alerts, ORDERS, watermark_ms=None)
    assert not report.passed
    assert report.stats["missing_in_stream"] == 1 and report.stats["unexplained"] == 1

    changed = due.copy()
    changed.loc[changed["rule"] == "small_then_large", "risk"] += 0.25
    report = compare_alerts(changed, alerts, ORDERS, watermark_ms=None)
    assert not report.passed and report.stats["value_diffs"] == 1
    assert report.stats["matched_small_then_large"] == 0

    twice = pd.concat([due, due[due["rule"] == "impossible_travel"]])
    report = compare_alerts(twice, alerts, ORDERS, watermark_ms=None)
    assert not report.passed and report.stats["duplicates"] == 1

    extra = pd.concat([due, due.assign(first_order_id="o-2")[due["rule"] == "small_then_large"]])
    report = compare_alerts(extra, alerts, ORDERS, watermark_ms=None)
    assert report.stats["missing_in_batch"] == 1 and report.stats["unexplained"] == 1
    # the policy's tolerance decides how many unexplained alerts pass
    assert compare_alerts(extra, alerts, ORDERS, None, Tolerance(max_unexplained_keys=1)).passed


def test_alerts_missing_around_an_order_the_stream_may_have_dropped_are_explained() -> None:
    orders = pd.concat(
        [
            ORDERS,
            pd.DataFrame(
                [
                    order(11, "c-4", 50.0, EU, 20),
                    order(12, "c-4", 60.0, EU, 30),
                    order(13, "c-4", 70.0, NA, 22),  # arrives 8 minutes behind: late
                    order(14, "c-4", 80.0, EU, 55),
                ]
            ),
        ],
        ignore_index=True,
    )
    assert possibly_late(orders)["order_id"].tolist() == ["o-13"]
    alerts = duckdb_alerts(orders, HOUR)
    # the batch pairs o-13 with both neighbours; the stream dropped it and pairs them instead
    c4 = alerts[alerts["customer_id"] == "c-4"]
    assert sorted(zip(c4["order_id"], c4["first_order_id"], strict=True)) == [
        ("o-12", "o-13"),
        ("o-13", "o-11"),
    ]
    stream = pd.concat(
        [
            alerts[~alerts["customer_id"].isin(["c-2", "c-4"])],
            c4.head(1).assign(order_id="o-12", first_order_id="o-11"),
        ]
    )
    report = compare_alerts(stream, alerts, orders, watermark_ms=None)
    assert report.passed, report.worst
    assert report.stats["missing_in_stream"] == 2 and report.stats["missing_in_batch"] == 1
    assert report.stats["explained_by_late_data"] == 3 and report.stats["unexplained"] == 0
    assert report.stats["possibly_late_orders"] == 1
    # another customer's missing alert is not explained by c-4's late order
    report = compare_alerts(
        stream[stream["customer_id"] != "c-3"], alerts, orders, watermark_ms=None
    )
    assert not report.passed and report.stats["unexplained"] == 1
