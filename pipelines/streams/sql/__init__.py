"""Stream applications written in Streaming SQL (``streaming.sql``), beside their DSL versions.

- ``revenue.sql``: ``windowed-revenue-sql``, the 5-minute tumbling revenue per region
  (final on window close) -> ``revenue-per-region-5m-sql``;
- ``enriched.sql``: ``enriched-orders-sql``, orders left-joined with the customers
  -> ``enriched-orders-sql``;
- ``fraud.sql``: ``fraud-alerts-sql``, card testing (a small charge followed by a large
  one within minutes, scored by ``udfs.risk_score``) and impossible travel (consecutive
  orders from two regions within minutes, ``udfs.region_of`` in DEFINE), by
  MATCH_RECOGNIZE -> ``fraud-alerts-sql``.

Each file runs as written with ``python -m streaming sql FILE --config app.properties``.
The platform compiles it with ``app.SqlApp``: its tables' topics renamed after the
``StreamAppConfig`` and its source streams behind the platform's dead-letter gate.
``lineage`` reads which topics an application reads and writes from its ``CREATE TABLE``
and ``INSERT INTO`` statements: the catalogue (``apps.STREAM_APPS``) and the Dagster
asset graph take them from there.
"""

from pipelines.streams.sql.app import ENRICHED_SQL, FRAUD_SQL, REVENUE_SQL, SqlApp
from pipelines.streams.sql.lineage import SqlLineage, read_lineage

__all__ = ["ENRICHED_SQL", "FRAUD_SQL", "REVENUE_SQL", "SqlApp", "SqlLineage", "read_lineage"]
