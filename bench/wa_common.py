"""Constants shared by the windowed-aggregation runners (stdlib only: ``.venv-quix`` imports it).

The grace period is long (2 hours, longer than the whole input's event-time span) on purpose:
with a 2-partition input, how far one partition runs ahead of the other on the repartition
topic depends on each engine's fetch pattern, and no engine may drop a record as late, so the
final window sums are the same for all three and can be checked exactly.
"""

from datetime import timedelta

WINDOW = timedelta(minutes=5)
GRACE = timedelta(hours=2)
WINDOW_MS = int(WINDOW.total_seconds() * 1000)
GRACE_MS = int(GRACE.total_seconds() * 1000)
