"""Recompute one result for one hour partition: read its input, transform, store.

The input comes from the Parquet lake (``source="lake"``, ``pipelines.batch.read``) or
straight from the Kafka topics (``source="kafka"``, ``pipelines.batch.kafka_source``: the kappa
path); the same ``compute`` functions run on either, and each source's results are stored
apart (``store.result_name``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from pipelines import domain
from pipelines.batch import compute
from pipelines.batch.read import read_all, read_hours
from pipelines.batch.session import ensure_kafka_source, get_spark
from pipelines.batch.store import KAFKA, LAKE, write_result
from pipelines.connection import Kafka
from pipelines.lake.cut import LakeCut
from pipelines.lake.paths import HOUR_MS, hour_of, hour_start_ms, lake_root

# Batch result name -> the stream topic it recomputes.
RESULTS = {
    "revenue_5m": domain.REVENUE_5M,
    "revenue_hopping": domain.REVENUE_HOPPING,
    "fraud_alerts": domain.FRAUD_ALERTS,
    "click_sessions": domain.CLICK_SESSIONS,
    "orders_deduped": domain.ORDERS_DEDUPED,
}


@dataclass
class BatchOutput:
    """One recomputed result: its rows (pandas), where they were stored and its source."""

    result: str
    hour: str
    frame: Any
    path: Path | None
    source: str = LAKE


class Reader(Protocol):
    """Where a batch result's input rows come from: ``name`` (the source results are
    stored under) and the two reads ``compute_result`` makes."""

    name: ClassVar[str]

    def read_hours(self, spark: Any, topic: str, start_ms: int, end_ms: int) -> Any: ...

    def read_all(self, spark: Any, topic: str) -> Any: ...


@dataclass
class LakeReader:
    """The lake's topics (``pipelines.batch.read``), each as of the first time this reader
    read it (``cuts``): a result records what it was computed from, and data landing while
    it runs does not change it half-way."""

    lake: Path | None = None
    cuts: dict[str, LakeCut] = field(default_factory=dict)
    name: ClassVar[str] = LAKE

    def cut(self, topic: str) -> LakeCut:
        """The cut of ``topic`` this reader reads (taken on first use)."""
        if topic not in self.cuts:
            self.cuts[topic] = LakeCut.now(lake_root(self.lake), topic)
        return self.cuts[topic]

    def read_hours(self, spark: Any, topic: str, start_ms: int, end_ms: int) -> Any:
        """Valid rows of ``topic`` in the lake's hour folders overlapping the range."""
        return read_hours(spark, topic, start_ms, end_ms, self.lake, self.cut(topic))

    def read_all(self, spark: Any, topic: str) -> Any:
        """Every valid row of ``topic`` in the lake."""
        return read_all(spark, topic, self.lake, self.cut(topic))


def reader_for(
    source: str | Reader = LAKE,
    lake: Path | None = None,
    *,
    kafka: Kafka | None = None,
    topics: Mapping[str, str] | None = None,
) -> Reader:
    """The reader of ``source``: ``"lake"``, ``"kafka"`` (a ``kafka_source.KafkaSource`` on
    ``kafka``, reading ``topics``: platform topic ->
    Kafka topic), or a reader itself (e.g. a configured ``KafkaSource``)."""
    if not isinstance(source, str):
        return source
    if source == LAKE:
        return LakeReader(lake)
    if source == KAFKA:
        from pipelines.batch.kafka_source import KafkaSource

        if kafka is None:
            raise ValueError("the Kafka batch source needs the cluster to read (kafka)")
        return KafkaSource(kafka, dict(topics or {}))
    raise ValueError(f"unknown batch source {source!r}; known: {LAKE!r}, {KAFKA!r}")


def compute_result(
    result: str,
    hour: str,
    lake: Path | None = None,
    spark: Any = None,
    *,
    source: str | Reader = LAKE,
    kafka: Kafka | None = None,
    topics: Mapping[str, str] | None = None,
) -> Any:
    """The Spark DataFrame of batch ``result`` for ``hour`` (lake hour or Dagster key).

    The input hours come from ``source`` (see ``reader_for``): the lake, or the Kafka topics
    (then the session gets Spark's Kafka source, ``session.ensure_kafka_source``).
    """
    reader = reader_for(source, lake, kafka=kafka, topics=topics)
    if reader.name == KAFKA:
        spark = ensure_kafka_source(spark) if spark is not None else get_spark(kafka=True)
    else:
        spark = spark or get_spark()
    start = hour_start_ms(hour)
    end = start + HOUR_MS
    if result == "revenue_5m":
        orders = reader.read_hours(spark, domain.ORDERS, start, end)
        return compute.revenue_tumbling(orders, start, end)
    if result == "revenue_hopping":
        orders = reader.read_hours(spark, domain.ORDERS, start, end + domain.HOPPING_SIZE_MS)
        return compute.revenue_hopping(orders, start, end)
    if result == "fraud_alerts":
        orders = reader.read_hours(spark, domain.ORDERS, start, end)
        customers = reader.read_all(spark, domain.CUSTOMERS)
        return compute.fraud_alerts(orders, customers, start, end)
    if result == "click_sessions":
        return _click_sessions(reader, spark, start, end)
    if result == "orders_deduped":
        orders = reader.read_hours(spark, domain.ORDERS, start, end)
        return compute.dedup_orders(orders, start, end)
    raise KeyError(f"unknown batch result {result!r}; known: {sorted(RESULTS)}")


#: how far past its hour a session's clicks are read at most (a user active without a
#: 30-minute pause for longer has its session cut there, as the batch's answer)
MAX_SESSION_LOOKAHEAD_MS = 32 * HOUR_MS


def _click_sessions(reader: Reader, spark: Any, start: int, end: int) -> Any:
    """Sessions starting in ``[start, end)``, read until each has ended.

    The clicks of the hour before decide where a session starts (the gap is shorter than
    an hour). A session ends only after a gap, so it can run on for hours: the clicks are
    read further ahead, doubling the span, until no session of the range is open at its
    end, the span added no clicks (the data ends there), or ``MAX_SESSION_LOOKAHEAD_MS``."""
    from pyspark.sql import functions as F

    ahead, seen = HOUR_MS, -1
    while True:
        clicks = reader.read_hours(spark, domain.CLICKS, start - HOUR_MS, end + ahead)
        sessions = compute.click_sessions(clicks, start, end)
        if ahead >= MAX_SESSION_LOOKAHEAD_MS:
            return sessions
        read = clicks.count()
        still_open = sessions.filter(
            F.col("session_end") + F.lit(domain.SESSION_GAP_MS) >= F.lit(end + ahead)
        )
        if read == seen or still_open.isEmpty():
            return sessions
        ahead, seen = ahead * 2, read


_SORT = {
    "revenue_5m": ["window_start", "region"],
    "revenue_hopping": ["window_start", "region"],
    "fraud_alerts": ["rule", "customer_id", "order_id"],
    "click_sessions": ["session_start", "user_id"],
    "orders_deduped": ["event_time", "order_id"],
}


def recompute(
    result: str,
    hour: str,
    lake: Path | None = None,
    spark: Any = None,
    *,
    store: bool = True,
    source: str | Reader = LAKE,
    kafka: Kafka | None = None,
    topics: Mapping[str, str] | None = None,
) -> BatchOutput:
    """Compute ``result`` for ``hour`` from ``source`` (``"lake"`` or ``"kafka"``, see
    ``compute_result``) and (by default) store it in the lake under that source."""
    reader = reader_for(source, lake, kafka=kafka, topics=topics)
    frame = compute_result(result, hour, lake, spark, source=reader).toPandas()
    frame = frame.sort_values(_SORT[result], kind="stable").reset_index(drop=True)
    lake_hour = hour_of(hour_start_ms(hour))
    cuts = reader.cuts if isinstance(reader, LakeReader) else None
    path = (
        write_result(result, lake_hour, frame, lake, source=reader.name, cuts=cuts)
        if store
        else None
    )
    return BatchOutput(result, lake_hour, frame, path, reader.name)
