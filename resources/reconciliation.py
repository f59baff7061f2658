"""``ReconciliationPolicy``: how much stream and batch results may differ before the
blocking reconciliation checks fail (defaults: exactly equal)."""

from dagster import ConfigurableResource
from pydantic import Field

from pipelines.reconcile.tolerance import Tolerance


class ReconciliationPolicy(ConfigurableResource):
    """Drift limits of the stream-vs-batch reconciliation (``Tolerance``)."""

    value_abs: float = Field(default=0.0, description="a value matches within this difference")
    value_rel: float = Field(default=0.0, description="... or within this share of the batch value")
    max_unexplained_keys: int = Field(
        default=0, description="keys allowed to differ without late data explaining them"
    )
    max_unexplained_share: float = Field(
        default=0.0, description="the same, as a share of the batch keys"
    )

    @property
    def tolerance(self) -> Tolerance:
        return Tolerance(
            value_abs=self.value_abs,
            value_rel=self.value_rel,
            max_unexplained_keys=self.max_unexplained_keys,
            max_unexplained_share=self.max_unexplained_share,
        )
