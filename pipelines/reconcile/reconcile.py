"""Reconcile one hour partition: stream results in the lake vs the batch results.

The batch side is the recompute from the lake by default; ``source="kafka"`` takes the one
computed straight from the Kafka topics (``pipelines.batch.kafka_source``, the kappa path).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from pipelines import domain
from pipelines.batch.store import LAKE, read_result, read_result_cuts
from pipelines.lake.cut import LakeCut
from pipelines.lake.duck import read_topic_hours
from pipelines.lake.paths import HOUR_MS, hour_of, hour_start_ms
from pipelines.reconcile.compare import Reconciliation, compare_keyed
from pipelines.reconcile.late import late_report, of_orders
from pipelines.reconcile.tolerance import Tolerance

if TYPE_CHECKING:  # imported where used: a Dagster code location loads without pandas
    import pandas as pd

# What the reconciliation compares: batch result -> stream topic, keys, values.
REVENUE_KEYS = ("region", "window_start")
REVENUE_VALUES = ("revenue_cents", "order_count")


def _hours(start_ms: int, end_ms: int) -> list[str]:
    return [hour_of(t) for t in range(start_ms - start_ms % HOUR_MS, end_ms, HOUR_MS)]


def stream_watermark(lake: Path | None = None, hours: list[str] | None = None) -> int | None:
    """The highest order event time in the lake (the stream's time, approximately)."""
    from pipelines.lake.duck import read_topic

    orders = (
        read_topic_hours(domain.ORDERS, hours, lake) if hours else read_topic(domain.ORDERS, lake)
    )
    return None if orders.empty else int(orders["event_time"].max())


def batch_result(result: str, hour: str, lake: Path | None, source: str = LAKE) -> pd.DataFrame:
    """The stored batch ``result`` of ``hour`` from ``source``; an error saying so when it
    was not computed (a reconciliation never compares with nothing)."""
    frame = read_result(result, hour, lake, source=source)
    if frame is None:
        raise FileNotFoundError(
            f"batch result {result!r} for {hour} was not computed"
            + ("" if source == LAKE else f" from {source}")
        )
    return frame


def late_records_of_hour(
    topic: str, start: int, lake: Path | None, orders_cut: LakeCut | None = None
) -> pd.DataFrame:
    """What the stream reported dropping as late for windows starting in the hour; with
    ``orders_cut`` (the orders a batch result was computed from) only the records of those
    orders (``late.of_orders``)."""
    hours = _hours(start - HOUR_MS, start + 2 * HOUR_MS)
    late = read_topic_hours(topic, hours, lake)
    if late.empty:
        return late
    late = late[(late["window_start"] >= start) & (late["window_start"] < start + HOUR_MS)]
    if orders_cut is None:
        return late
    return of_orders(late, read_topic_hours(domain.ORDERS, hours, lake, cut=orders_cut))


def batch_orders_cut(
    result: str, hour: str, lake: Path | None, source: str = LAKE
) -> LakeCut | None:
    """The orders batch ``result`` of ``hour`` was computed from (None: not from the lake,
    or computed before results kept their cut)."""
    if source != LAKE:
        return None
    return read_result_cuts(result, hour, lake).get(domain.ORDERS)


def _explainable_bursts(batch_bursts: pd.DataFrame, late: pd.DataFrame) -> pd.DataFrame:
    """Batch burst alerts the stream could not raise: without the records it dropped as
    late, the customer's window held no more than the limit (``rule``, ``customer_id``,
    ``ref``, ``late_count``)."""
    import pandas as pd

    columns = ["rule", "customer_id", "ref", "late_count"]
    per_window = late_report(late, "rapid_burst", key="customer_id")
    if batch_bursts.empty or per_window.empty:
        return pd.DataFrame(columns=columns)
    counts = batch_bursts["evidence"].map(lambda e: orjson.loads(e)["count"])
    bursts = batch_bursts.assign(count=counts).merge(
        per_window, on=["customer_id", "window_start"], how="inner"
    )
    bursts = bursts[bursts["count"] - bursts["late_count"] <= domain.BURST_MAX_ORDERS]
    return bursts.assign(ref=bursts["window_start"].astype("int64").astype(str))[columns]


def closed_mask(
    frame: pd.DataFrame, end_column: str, wait_ms: int, watermark: int | None
) -> pd.Series:
    """Which rows' windows (or sessions) are closed at ``watermark``: ``end + wait_ms`` at
    or before it (all of them without a watermark)."""
    import pandas as pd

    if watermark is None:
        return pd.Series(True, index=frame.index)
    return frame[end_column].astype("int64") + wait_ms <= watermark


def reconcile_revenue(
    hour: str,
    lake: Path | None = None,
    *,
    hopping: bool = False,
    tolerance: Tolerance | None = None,
    watermark_ms: int | None = None,
    source: str = LAKE,
) -> Reconciliation:
    """Revenue per region and window (tumbling or hopping) for ``hour``.

    Windows that are not closed at ``watermark_ms`` (end + grace beyond it) are left out
    of both sides and counted as ``pending``. ``source``: the batch results' source.
    """
    start = hour_start_ms(hour)
    lake_hour = hour_of(start)
    result, topic = (
        ("revenue_hopping", domain.REVENUE_HOPPING)
        if hopping
        else (
            "revenue_5m",
            domain.REVENUE_5M,
        )
    )
    batch = batch_result(result, lake_hour, lake, source)
    stream = read_topic_hours(topic, [lake_hour], lake)
    stream = stream[(stream["window_start"] >= start) & (stream["window_start"] < start + HOUR_MS)]
    cut = batch_orders_cut(result, lake_hour, lake, source)
    late = late_report(late_records_of_hour(domain.REVENUE_LATE, start, lake, cut), result)
    grace = domain.REVENUE_GRACE_MS
    closed_batch = closed_mask(batch, "window_end", grace, watermark_ms)
    closed_stream = closed_mask(stream, "window_end", grace, watermark_ms)
    report = compare_keyed(
        result,
        stream[closed_stream],
        batch[closed_batch],
        keys=REVENUE_KEYS,
        values=REVENUE_VALUES,
        late=late,
        count_column="order_count",
        late_values={"revenue_cents": "late_cents"},
        tolerance=tolerance,
        final=not hopping,  # emitted on window close; the hopping windows update eagerly
    )
    report.stats["pending_windows"] = int((~closed_batch).sum())
    report.stats["late_records"] = int(late["late_count"].sum()) if not late.empty else 0
    return report


def reconcile_fraud(
    hour: str,
    lake: Path | None = None,
    *,
    tolerance: Tolerance | None = None,
    watermark_ms: int | None = None,
    source: str = LAKE,
) -> Reconciliation:
    """Fraud alerts of ``hour``: the same (rule, customer, order | window) alerts?"""
    import pandas as pd

    start = hour_start_ms(hour)
    lake_hour = hour_of(start)
    batch = batch_result("fraud_alerts", lake_hour, lake, source).copy()
    stream = read_topic_hours(
        domain.FRAUD_ALERTS, _hours(start - HOUR_MS, start + 2 * HOUR_MS), lake
    )
    stream = stream[(stream["event_time"] >= start) & (stream["event_time"] < start + HOUR_MS)]
    stream = stream[stream["rule"] != "rapid_burst"]
    batch_point = batch[batch["rule"] != "rapid_burst"]
    # Burst alerts are per customer and window; their order is whichever exceeded the limit.
    stream_bursts = read_topic_hours(
        domain.FRAUD_ALERTS, _hours(start - HOUR_MS, start + 2 * HOUR_MS), lake
    )
    stream_bursts = stream_bursts[
        (stream_bursts["rule"] == "rapid_burst")
        & (stream_bursts["window_start"] >= start)
        & (stream_bursts["window_start"] < start + HOUR_MS)
    ]
    batch_bursts = batch[batch["rule"] == "rapid_burst"]
    wait = domain.BURST_WINDOW_MS + domain.REVENUE_GRACE_MS
    if watermark_ms is not None:
        batch_bursts = batch_bursts[batch_bursts["window_start"] + wait <= watermark_ms]
        stream_bursts = stream_bursts[stream_bursts["window_start"] + wait <= watermark_ms]
    keys = ["rule", "customer_id", "ref"]
    cut = batch_orders_cut("fraud_alerts", lake_hour, lake, source)
    late = _explainable_bursts(
        batch_bursts, late_records_of_hour(domain.FRAUD_LATE, start, lake, cut)
    )
    return compare_keyed(
        "fraud_alerts",
        pd.concat(
            [
                stream.assign(ref=stream["order_id"].astype(str)),
                stream_bursts.assign(ref=stream_bursts["window_start"].astype("int64").astype(str)),
            ]
        ),
        pd.concat(
            [
                batch_point.assign(ref=batch_point["order_id"].astype(str)),
                batch_bursts.assign(ref=batch_bursts["window_start"].astype("int64").astype(str)),
            ]
        ),
        keys=keys,
        late=late,
        tolerance=tolerance,
        final=True,
    )


def reconcile_sessions(
    hour: str,
    lake: Path | None = None,
    *,
    tolerance: Tolerance | None = None,
    watermark_ms: int | None = None,
    grace_ms: int = 5 * domain.MINUTE_MS,
    source: str = LAKE,
) -> Reconciliation:
    """Click sessions starting in ``hour``: same bounds and click counts?"""
    start = hour_start_ms(hour)
    lake_hour = hour_of(start)
    batch = batch_result("click_sessions", lake_hour, lake, source)
    stream = read_topic_hours(domain.CLICK_SESSIONS, [lake_hour], lake)
    stream = stream[
        (stream["session_start"] >= start) & (stream["session_start"] < start + HOUR_MS)
    ]
    wait = domain.SESSION_GAP_MS + grace_ms
    closed = closed_mask(batch, "session_end", wait, watermark_ms)
    report = compare_keyed(
        "click_sessions",
        stream[closed_mask(stream, "session_end", wait, watermark_ms)],
        batch[closed],
        keys=("user_id", "session_start"),
        values=("session_end", "click_count"),
        tolerance=tolerance,
        final=True,
    )
    report.stats["pending_sessions"] = int((~closed).sum())
    return report


def reconcile_hour(
    hour: str,
    lake: Path | None = None,
    *,
    tolerance: Tolerance | None = None,
    watermark_ms: int | None = None,
    source: str = LAKE,
) -> dict[str, Reconciliation]:
    """Every reconciliation of ``hour`` (batch results of ``source`` must be computed:
    ``"lake"``, or ``"kafka"`` for the kappa path's)."""
    common: dict[str, Any] = {
        "tolerance": tolerance,
        "watermark_ms": watermark_ms,
        "source": source,
    }
    return {
        "revenue_5m": reconcile_revenue(hour, lake, **common),
        "revenue_hopping": reconcile_revenue(hour, lake, hopping=True, **common),
        "fraud_alerts": reconcile_fraud(hour, lake, **common),
        "click_sessions": reconcile_sessions(hour, lake, **common),
    }
