"""Reconciliation (lambda): stream results from the lake vs batch results, per hour.

``tolerance`` (what drift is acceptable), ``late`` (which input records the stream
dropped as late, approximated from the lake's arrival order), ``compare`` (pure pandas
comparisons: row counts, key coverage, value differences, worst keys), ``reconcile``
(loads both sides of one hour from the lake); the Dagster assets are in
``assets.reconcile``.
"""
