"""Data quality with Great Expectations 1.x (used directly; dagster-ge pins GX < 1).

``suites`` (the expectation suites per dataset, each expectation a contract or advisory:
schema, not-null, ranges, uniqueness where it is promised, duplicate rates,
referential orders -> customers), ``validate`` (run a suite on a pandas DataFrame in an
ephemeral context; result -> ``AssetCheckResult`` with the statistics as metadata, ERROR
for a failed contract, WARN for advisory failures only), ``assets.quality`` (the asset
checks, blocking where other assets are built from the table). ``GX_ANALYTICS_ENABLED`` is forced to false.
"""

import os

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
