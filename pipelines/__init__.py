"""The platform's code below its Dagster definitions: the domain and event generator, the
stream applications and their supervisor, the lake, the batch recompute, reconciliation,
data quality suites, the dbt project, and how to reach Kafka (``connection``). It never
imports assets, sensors or resources: they call it with their configuration.
"""
