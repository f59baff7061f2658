"""Batch recompute with PySpark: the stream applications' results, per event hour.

``session`` (one local Spark session per process; Spark's Kafka source jars only for the
Kafka path), ``read`` (lake hours -> DataFrames), ``kafka_source`` (the kappa path: the
same hours read straight from the Kafka topics with Spark's Kafka source, offsets resolved
by timestamp per partition, read_committed, JSON decoded with the topic schema),
``compute`` (the pure DataFrame transformations: revenue tumbling/hopping, fraud rules,
click sessions, dedup), ``recompute`` (one result and hour from either source),
``store`` (results -> ``<lake>/batch/<result>/event_hour=.../part-0.parquet``, those
read from Kafka in ``<lake>/batch/<result>_from_kafka/``). The hourly-partitioned Dagster
assets (``batch/<result>`` from the lake, ``kappa_batch/<result>`` from Kafka) are in
``assets.batch``.

Semantics follow the stream applications (``pipelines/streams``, constants in
``pipelines.domain``): windows are ``[start, end)`` and epoch aligned; a window belongs to the
hour partition holding its start; money is summed in integer cents. Batch includes late
events that the stream dropped after the grace period: that is the expected difference
the reconciliation reports.
"""
