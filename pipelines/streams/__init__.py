"""The platform's stream applications, built with ``streaming``.

Each application is a topology factory ``build_<app>(config) -> Topology`` (config: a
``StreamAppConfig``, a mapping of its fields, or None for the defaults):

=================  =============================================  ==============================
application        factory                                        output topics
=================  =============================================  ==============================
windowed-revenue   ``revenue.build_windowed_revenue``             revenue-per-region-5m,
                                                                  revenue-per-region-hopping
enriched-orders    ``enriched.build_enriched_orders``             enriched-orders
fraud-alerts       ``fraud.build_fraud_alerts``                   fraud-alerts
click-sessions     ``sessions.build_click_sessions``              click-sessions
orders-dedup       ``dedup.build_orders_dedup``                   orders-deduped
windowed-revenue-  ``sql/revenue.sql`` (``sql.REVENUE_SQL``)      revenue-per-region-5m-sql
sql
enriched-orders-   ``sql/enriched.sql`` (``sql.ENRICHED_SQL``)    enriched-orders-sql
sql
fraud-alerts-sql   ``sql/fraud.sql`` (``sql.FRAUD_SQL``)          fraud-alerts-sql
=================  =============================================  ==============================

The last three are written in Streaming SQL (``pipelines.streams.sql``); their topics are
read from their statements.

Every application also writes records it cannot use to ``<application>-dlq``.
``apps.STREAM_APPS`` lists them; ``supervisor`` runs them with ``KafkaStreams``; the Dagster
assets that run them live in ``assets.streams``. Keys and values are JSON
(keys plain strings), event time is the ``event_time`` field.
"""

from pipelines.streams.config import StreamAppConfig
from pipelines.streams.dedup import build_orders_dedup
from pipelines.streams.enriched import build_enriched_orders
from pipelines.streams.fraud import build_fraud_alerts
from pipelines.streams.revenue import build_windowed_revenue
from pipelines.streams.sessions import build_click_sessions

__all__ = [
    "StreamAppConfig",
    "build_click_sessions",
    "build_enriched_orders",
    "build_fraud_alerts",
    "build_orders_dedup",
    "build_windowed_revenue",
]
