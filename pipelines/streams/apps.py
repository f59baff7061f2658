"""The catalogue of the platform's stream applications: name, factory, topics, stores.

The DSL applications list their topics here; the SQL applications (``pipelines/streams/
sql/*.sql``) take theirs from their statements (``sql.lineage``), never by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pipelines.streams import dedup, enriched, fraud, revenue, sessions
from pipelines.streams.config import StreamAppConfig
from pipelines.streams.sql import ENRICHED_SQL, FRAUD_SQL, REVENUE_SQL, SqlApp
from streaming import Topology


@dataclass(frozen=True)
class StreamApp:
    """One stream application: ``factory(config)`` builds its topology."""

    name: str
    factory: Callable[[Any], Topology]
    description: str
    inputs: tuple[str, ...]  # StreamAppConfig field names of the input topics
    outputs: tuple[str, ...]  # ... of the output topics
    stores: tuple[str, ...]  # queryable stores
    # window store whose closed windows are reported (name, window size, grace), if any
    windowed_store: tuple[str, str, str] | None = None
    # writes the records its windowed aggregations drop as late to "<name>-late"
    reports_late: bool = False
    # the SQL file the application is compiled from (None: a DSL topology factory)
    sql: SqlApp | None = None

    @staticmethod
    def from_sql(
        sql: SqlApp, description: str, windowed_store: tuple[str, str, str] | None = None
    ) -> StreamApp:
        """The catalogue entry of a SQL application: its input and output topics read from
        its ``CREATE TABLE`` / ``INSERT INTO`` statements, its stores from its aggregations."""
        return StreamApp(
            sql.name,
            sql.build,
            description,
            sql.input_fields,
            sql.output_fields,
            sql.stores,
            windowed_store,
            reports_late=sql.reports_late,
            sql=sql,
        )

    def input_topics(self, config: StreamAppConfig) -> list[str]:
        """The input topic names under ``config``."""
        return [getattr(config, f) for f in self.inputs]

    def output_topics(self, config: StreamAppConfig) -> list[str]:
        """The output topic names under ``config`` (the late-record topic, if any, and the
        dead-letter topic last)."""
        late = [config.late_topic(self.name)] if self.reports_late else []
        return (
            [getattr(config, f) for f in self.outputs]
            + late
            + [config.dead_letter_topic(self.name)]
        )

    def window_size_and_grace(self, config: StreamAppConfig) -> tuple[int, int] | None:
        """(size, grace) in ms of the reported window store, if the app has one."""
        if self.windowed_store is None:
            return None
        _, size, grace = self.windowed_store
        return getattr(config, size), getattr(config, grace)


STREAM_APPS: dict[str, StreamApp] = {
    app.name: app
    for app in (
        StreamApp(
            revenue.APP,
            revenue.build_windowed_revenue,
            "Revenue and order count per region: 5-minute tumbling windows (final on close) "
            "and 10-minute hopping windows (eager)",
            ("orders_topic",),
            ("revenue_topic", "hopping_revenue_topic"),
            (revenue.STORE_5M, revenue.STORE_HOPPING),
            (revenue.STORE_5M, "revenue_window_ms", "revenue_grace_ms"),
            reports_late=True,
        ),
        StreamApp(
            enriched.APP,
            enriched.build_enriched_orders,
            "Orders left-joined with the customers KTable, flagged within_credit_limit",
            ("orders_topic", "customers_topic"),
            ("enriched_topic",),
            (enriched.CUSTOMERS_STORE,),
        ),
        StreamApp(
            fraud.APP,
            fraud.build_fraud_alerts,
            "Fraud alerts: high value, rapid bursts, new location",
            ("orders_topic", "customers_topic"),
            ("fraud_topic",),
            (fraud.BURST_STORE, fraud.PROFILE_STORE),
            (fraud.BURST_STORE, "burst_window_ms", "burst_grace_ms"),
            reports_late=True,
        ),
        StreamApp(
            sessions.APP,
            sessions.build_click_sessions,
            "Click sessions per user with a 30-minute inactivity gap",
            ("clicks_topic",),
            ("sessions_topic",),
            (sessions.STORE,),
        ),
        StreamApp(
            dedup.APP,
            dedup.build_orders_dedup,
            "Orders without repeated order ids (window store dedup)",
            ("orders_topic",),
            ("dedup_topic",),
            (dedup.STORE,),
        ),
        StreamApp.from_sql(
            REVENUE_SQL,
            "SQL version of windowed-revenue's 5-minute tumbling revenue per region "
            "(final on close), compiled from pipelines/streams/sql/revenue.sql",
            # the window and grace in the SQL are the config's defaults (a test checks it)
            (REVENUE_SQL.stores[0], "revenue_window_ms", "revenue_grace_ms"),
        ),
        StreamApp.from_sql(
            ENRICHED_SQL,
            "SQL version of enriched-orders: orders left-joined with the customers, "
            "compiled from pipelines/streams/sql/enriched.sql",
        ),
        StreamApp.from_sql(
            FRAUD_SQL,
            "Fraud patterns in SQL (MATCH_RECOGNIZE with Python functions): card testing, a "
            "small charge then a large one within minutes, and impossible travel, compiled "
            "from pipelines/streams/sql/fraud.sql",
        ),
    )
}


def consumer_groups(names: Iterable[str] | None = None) -> dict[str, list[str]]:
    """The consumer group (application id) of each stream application (every one, or
    ``names``) -> the input topics it reads, under the default config."""
    config = StreamAppConfig()
    return {
        app.name: app.input_topics(config) for app in (STREAM_APPS[n] for n in names or STREAM_APPS)
    }
