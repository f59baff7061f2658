"""The platform's Dagster definitions: assets, asset checks and jobs.

``streams`` (the generator, the raw topics and one long-running asset per stream
application, the kappa replay), ``lake`` (topics landed as Parquet), ``batch`` (hourly
PySpark recompute), ``reconcile`` (stream vs batch, blocking checks), ``quality`` (Great
Expectations checks), ``dbt_assets`` (dbt models and tests), ``keys`` (asset keys),
``data_defs`` (the data side's lists and jobs). Asset bodies take their configuration from
resources (``resources``) and their logic from ``pipelines``.
"""
