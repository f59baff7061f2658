"""Data quality with Great Expectations 1.x (used directly; dagster-ge pins GX < 1).

``suites`` (the expectation suites per dataset: schema, not-null, ranges, uniqueness,
referential orders -> customers), ``validate`` (run a suite on a pandas DataFrame in an
ephemeral context; result -> ``AssetCheckResult`` with the statistics as metadata),
``dagster_checks`` (the asset checks). ``GX_ANALYTICS_ENABLED`` is forced to false.
"""

import os

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
