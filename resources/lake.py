"""``LakeResource``: the Parquet lake, and the DuckDB database dbt builds the marts in."""

from pathlib import Path
from typing import Any

from dagster import ConfigurableResource
from pydantic import Field

from pipelines.lake.paths import DEFAULT_LAKE


class LakeResource(ConfigurableResource):
    """Where the lake lives and how to query it."""

    root: str = Field(default=str(DEFAULT_LAKE), description="the lake's root folder")
    duckdb_path: str | None = Field(
        default=None, description="dbt's DuckDB database (default <root>/warehouse.duckdb)"
    )

    @property
    def path(self) -> Path:
        """The lake root, resolved."""
        return Path(self.root).resolve()

    @property
    def database(self) -> str:
        """The DuckDB database file of the marts."""
        return self.duckdb_path or str(self.path / "warehouse.duckdb")

    def connect(self) -> Any:
        """A DuckDB connection (in memory) with views over the lake."""
        from pipelines.lake.duck import connect

        return connect(self.path)
