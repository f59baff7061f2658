"""``SparkResource``: the local Spark session of the batch recompute (``local[2]``)."""

from typing import Any

from dagster import ConfigurableResource
from pydantic import Field


class SparkResource(ConfigurableResource):
    """Spark settings on top of ``assets.batch.session.DEFAULT_CONF``."""

    master: str = "local[2]"
    shuffle_partitions: int = 4
    conf: dict[str, str] = Field(default_factory=dict)

    def get_session(self) -> Any:
        """The process's shared Spark session (created on first use)."""
        from assets.batch.session import get_spark

        return get_spark(
            {
                "spark.master": self.master,
                "spark.sql.shuffle.partitions": str(self.shuffle_partitions),
                **self.conf,
            }
        )
