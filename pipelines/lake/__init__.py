"""The lake: Kafka topics landed as Parquet, partitioned by event hour, with DuckDB views.

Layout under the lake root (``LakeResource.root``, default ``.lake/`` in the repository)::

    <lake>/<topic>/event_hour=YYYY-MM-DDTHH/part-<partition>-<from>-<to>[-g<n>].parquet
    <lake>/_manifest/<topic>.json        offset ranges landed per partition, Kafka cluster id
    <lake>/batch/<result>/event_hour=.../part-0.parquet   batch recompute results

Modules: ``paths`` (layout), ``records`` (Kafka record -> typed row, Arrow schemas),
``manifest`` (offset ranges, the cluster they refer to, locking; ``-g<n>``: files landed
after the ``n``-th change of Kafka cluster), ``writer`` (rows -> Parquet files + manifest),
``sink`` (Kafka consumer -> writer), ``duck`` (DuckDB views); the Dagster assets are in ``assets.lake``.
"""
