"""Batch recompute with PySpark: the stream applications' results, per event hour.

``session`` (one local Spark session per process), ``read`` (lake hours -> DataFrames),
``kafka_source`` (Spark's Kafka source over an offset range), ``compute`` (the pure
DataFrame transformations: revenue tumbling/hopping, fraud rules, click sessions, dedup),
``store`` (results -> ``<lake>/batch/<result>/event_hour=.../part-0.parquet``),
``dagster_assets`` (hourly-partitioned Dagster assets).

Semantics follow the stream applications (``assets/streams``, constants in
``assets.domain``): windows are ``[start, end)`` and epoch aligned; a window belongs to the
hour partition holding its start; money is summed in integer cents. Batch includes late
events that the stream dropped after the grace period: that is the expected difference
the reconciliation reports.
"""
