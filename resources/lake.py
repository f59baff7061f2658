"""``LakeResource``: the Parquet lake and its DuckDB views.

``root`` defaults to ``$LAKE_ROOT`` or ``.lake/``; ``duckdb_path`` (the database dbt builds
marts in) to ``$DUCKDB_PATH`` or ``<root>/lake.duckdb``.
"""

import os
from pathlib import Path
from typing import Any

from dagster import ConfigurableResource
from pydantic import Field


def _default_root() -> str:
    from assets.lake.paths import lake_root

    return str(lake_root())


class LakeResource(ConfigurableResource):
    """Where the lake lives and how to query it."""

    root: str = Field(default_factory=_default_root)
    duckdb_path: str | None = Field(default_factory=lambda: os.environ.get("DUCKDB_PATH"))

    @property
    def path(self) -> Path:
        """The lake root as a Path."""
        return Path(self.root)

    @property
    def database(self) -> str:
        """The DuckDB database file of the marts."""
        return self.duckdb_path or str(self.path / "lake.duckdb")

    def connect(self) -> Any:
        """A DuckDB connection (in memory) with views over the lake."""
        from assets.lake.duck import connect

        return connect(self.path)
