"""The batch transformations (pure DataFrame -> DataFrame), one per stream application.

Every function takes the rows of the hours it needs and the partition's ``[start, end)``
in epoch ms, and returns the results that belong to that partition (by window or session
start, or by event time).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from pipelines import domain


def _cents(column: str = "amount") -> Any:
    return F.round(F.col(column) * 100).cast("long")


def _in_range(column: str, start_ms: int, end_ms: int) -> Any:
    return (F.col(column) >= F.lit(start_ms)) & (F.col(column) < F.lit(end_ms))


def _arrival_order() -> list[Any]:
    return [F.col("_partition"), F.col("_offset")]


def revenue_tumbling(
    orders: DataFrame, start_ms: int, end_ms: int, size_ms: int = domain.REVENUE_WINDOW_MS
) -> DataFrame:
    """Revenue and order count per region per tumbling window starting in the range."""
    start_col = F.col("event_time") - F.pmod(F.col("event_time"), F.lit(size_ms))
    return (
        orders.withColumn("window_start", start_col)
        .filter(_in_range("window_start", start_ms, end_ms))
        .groupBy("region", "window_start")
        .agg(F.sum(_cents()).alias("revenue_cents"), F.count(F.lit(1)).alias("order_count"))
        .select(
            "region",
            "window_start",
            (F.col("window_start") + F.lit(size_ms)).alias("window_end"),
            (F.col("revenue_cents") / 100).alias("revenue"),
            F.col("order_count").cast("long").alias("order_count"),
            "revenue_cents",
        )
    )


def revenue_hopping(
    orders: DataFrame,
    start_ms: int,
    end_ms: int,
    size_ms: int = domain.HOPPING_SIZE_MS,
    advance_ms: int = domain.HOPPING_ADVANCE_MS,
) -> DataFrame:
    """Revenue and order count per region per hopping window starting in the range."""
    last = F.col("event_time") - F.pmod(F.col("event_time"), F.lit(advance_ms))
    starts = F.sequence(
        F.greatest(F.lit(0).cast("long"), last - F.lit(size_ms - advance_ms)),
        last,
        F.lit(advance_ms).cast("long"),
    )
    return (
        orders.withColumn("window_start", F.explode(starts))
        .filter(_in_range("window_start", start_ms, end_ms))
        .groupBy("region", "window_start")
        .agg(F.sum(_cents()).alias("revenue_cents"), F.count(F.lit(1)).alias("order_count"))
        .select(
            "region",
            "window_start",
            (F.col("window_start") + F.lit(size_ms)).alias("window_end"),
            (F.col("revenue_cents") / 100).alias("revenue"),
            F.col("order_count").cast("long").alias("order_count"),
            "revenue_cents",
        )
    )


def latest_profiles(customers: DataFrame) -> DataFrame:
    """The latest profile per customer (highest offset; a compacted topic's view)."""
    order = Window.partitionBy("customer_id").orderBy(F.col("_offset").desc())
    return (
        customers.withColumn("_rank", F.row_number().over(order))
        .filter("_rank = 1")
        .select("customer_id", "known_locations", "credit_limit", "tier", "name")
    )


def fraud_alerts(
    orders: DataFrame,
    customers: DataFrame,
    start_ms: int,
    end_ms: int,
    *,
    threshold: float = domain.HIGH_VALUE_THRESHOLD,
    burst_max: int = domain.BURST_MAX_ORDERS,
    burst_window_ms: int = domain.BURST_WINDOW_MS,
) -> DataFrame:
    """The three fraud rules over the orders of the range, one row per alert.

    ``high_value`` and ``new_location``: one alert per order id (duplicates collapse);
    ``rapid_burst``: one alert per customer and window, naming the order that exceeded
    the limit (arrival order). Columns: rule, customer_id, order_id, amount, event_time,
    window_start, evidence (JSON text).
    """
    in_range = orders.filter(_in_range("event_time", start_ms, end_ms))
    first = Window.partitionBy("order_id").orderBy(*_arrival_order())
    unique = in_range.withColumn("_n", F.row_number().over(first)).filter("_n = 1").drop("_n")
    high = unique.filter(F.col("amount") > F.lit(threshold)).select(
        F.lit("high_value").alias("rule"),
        "customer_id",
        "order_id",
        "amount",
        "event_time",
        F.lit(None).cast("long").alias("window_start"),
        F.to_json(F.struct("amount", F.lit(threshold).alias("threshold"))).alias("evidence"),
    )
    profiles = latest_profiles(customers)
    located = unique.join(profiles.select("customer_id", "known_locations"), "customer_id")
    new_location = located.filter(
        F.col("location").isNull() | ~F.array_contains(F.col("known_locations"), F.col("location"))
    ).select(
        F.lit("new_location").alias("rule"),
        "customer_id",
        "order_id",
        "amount",
        "event_time",
        F.lit(None).cast("long").alias("window_start"),
        F.to_json(F.struct("location", "known_locations")).alias("evidence"),
    )
    # Bursts count every valid order record (the stream counts duplicates too).
    windowed = orders.withColumn(
        "window_start",
        F.col("event_time") - F.pmod(F.col("event_time"), F.lit(burst_window_ms)),
    ).filter(_in_range("window_start", start_ms, end_ms))
    arrival = Window.partitionBy("customer_id", "window_start").orderBy(*_arrival_order())
    counted = windowed.withColumn("_n", F.row_number().over(arrival)).withColumn(
        "_count", F.count(F.lit(1)).over(Window.partitionBy("customer_id", "window_start"))
    )
    bursts = counted.filter(F.col("_n") == F.lit(burst_max + 1)).select(
        F.lit("rapid_burst").alias("rule"),
        "customer_id",
        "order_id",
        "amount",
        "event_time",
        "window_start",
        F.to_json(
            F.struct(
                F.col("_count").alias("count"),
                "window_start",
                (F.col("window_start") + F.lit(burst_window_ms)).alias("window_end"),
            )
        ).alias("evidence"),
    )
    return high.unionByName(new_location).unionByName(bursts)


def click_sessions(
    clicks: DataFrame, start_ms: int, end_ms: int, gap_ms: int = domain.SESSION_GAP_MS
) -> DataFrame:
    """Sessions per user (clicks at most ``gap_ms`` apart) that start in the range.

    Pass the clicks of the surrounding hours too: a session's clicks may lie outside the
    partition. Columns: user_id, session_start, session_end (last click), click_count.
    """
    by_user = Window.partitionBy("user_id").orderBy("event_time", *_arrival_order())
    marked = clicks.withColumn("_prev", F.lag("event_time").over(by_user)).withColumn(
        "_new",
        F.when(
            F.col("_prev").isNull() | (F.col("event_time") - F.col("_prev") > F.lit(gap_ms)), 1
        ).otherwise(0),
    )
    numbered = marked.withColumn(
        "_session",
        F.sum("_new").over(by_user.rowsBetween(Window.unboundedPreceding, Window.currentRow)),
    )
    return (
        numbered.groupBy("user_id", "_session")
        .agg(
            F.min("event_time").alias("session_start"),
            F.max("event_time").alias("session_end"),
            F.count(F.lit(1)).cast("long").alias("click_count"),
        )
        .filter(_in_range("session_start", start_ms, end_ms))
        .select("user_id", "session_start", "session_end", "click_count")
    )


def dedup_orders(orders: DataFrame, start_ms: int, end_ms: int) -> DataFrame:
    """The first arrival of each order id among the orders of the range."""
    first = Window.partitionBy("order_id").orderBy(*_arrival_order())
    return (
        orders.filter(_in_range("event_time", start_ms, end_ms))
        .withColumn("_n", F.row_number().over(first))
        .filter("_n = 1")
        .select(*domain.SCHEMAS[domain.ORDERS])
    )
