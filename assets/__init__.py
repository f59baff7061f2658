"""The platform's Dagster definitions: assets, asset checks and jobs.

``streams`` (the generator, the raw topics and one long-running asset per stream
application, the kappa replay), ``lake`` (topics landed as Parquet), ``batch`` (hourly
PySpark recompute), ``reconcile`` (stream vs batch, blocking checks), ``quality`` (Great
Expectations checks), ``dbt_assets`` (dbt models and tests), ``keys`` (asset keys),
``data_defs`` (the data side's lists and jobs). Asset bodies take their configuration from
resources (``resources``) and their logic from ``pipelines``.
"""

import warnings

from dagster import BetaWarning

# The hourly assets backfill a range of hours in one run (BackfillPolicy.single_run), a
# parameter Dagster marks beta; the platform relies on it knowingly, so its warning, once
# per asset in every process that loads the definitions, is left out of the logs.
warnings.filterwarnings("ignore", message="Parameter `backfill_policy`", category=BetaWarning)
