"""How much stream and batch may differ before the reconciliation check fails."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tolerance:
    """Drift limits: per-key value tolerance and how many unexplained keys are allowed.

    ``value_abs`` / ``value_rel``: a value matches when ``|stream - batch| <= value_abs`` or
    ``<= value_rel * |batch|``. ``max_unexplained_keys``: keys that differ (or are missing
    on one side) without late data to explain them. ``max_unexplained_share``: the same as
    a share of the batch keys. The check fails when either limit is exceeded.
    """

    value_abs: float = 0.0
    value_rel: float = 0.0
    max_unexplained_keys: int = 0
    max_unexplained_share: float = 0.0

    def allows(self, unexplained: int, batch_keys: int) -> bool:
        """Whether ``unexplained`` differing keys out of ``batch_keys`` are acceptable."""
        share = unexplained / batch_keys if batch_keys else 0.0
        return unexplained <= self.max_unexplained_keys or share <= self.max_unexplained_share
