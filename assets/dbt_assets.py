"""dbt models as Dagster assets (dagster-dbt); dbt tests become asset checks.

The manifest is prepared at load time (``dbt parse``, offline) when
``dbt_project/target/manifest.json`` is missing. Sources map to the lake assets
(``meta.dagster.asset_key`` in ``sources.yml``), models to ``dbt/<model>``.
"""

import os
import shutil
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from dagster import AssetExecutionContext, AssetKey
from dagster_dbt import DagsterDbtTranslator, DbtCliResource, DbtProject, dbt_assets

from assets.keys import dbt_key
from assets.lake.paths import lake_root
from assets.lake.writer import ensure_layout

DBT_PROJECT_DIR = Path(__file__).resolve().parents[1] / "dbt_project"
DBT_PROJECT = DbtProject(project_dir=DBT_PROJECT_DIR, profiles_dir=DBT_PROJECT_DIR)


def dbt_env() -> dict[str, str]:
    """``LAKE_ROOT`` / ``DUCKDB_PATH`` for dbt, defaulting to the platform's lake."""
    lake = lake_root()
    return {
        "LAKE_ROOT": str(lake),
        "DUCKDB_PATH": os.environ.get("DUCKDB_PATH") or str(lake / "warehouse.duckdb"),
    }


def dbt_executable() -> str:
    """The ``dbt`` of this virtualenv (it need not be on ``PATH``), else ``dbt``."""
    local = Path(sys.executable).parent / "dbt"
    return str(local) if local.exists() else (shutil.which("dbt") or "dbt")


def dbt_cli() -> DbtCliResource:
    """A dbt CLI resource for the platform's project."""
    return DbtCliResource(project_dir=DBT_PROJECT, dbt_executable=dbt_executable())


def prepare_manifest() -> Path:
    """``dbt parse`` unless the manifest exists; returns the manifest path."""
    manifest = DBT_PROJECT.manifest_path
    if not manifest.exists():
        import subprocess

        subprocess.run(
            [
                dbt_executable(),
                "parse",
                "--quiet",
                "--project-dir",
                str(DBT_PROJECT_DIR),
                "--profiles-dir",
                str(DBT_PROJECT_DIR),
            ],
            cwd=DBT_PROJECT_DIR,
            env={**dbt_env(), **os.environ},
            check=True,
        )
    return manifest


class PlatformDbtTranslator(DagsterDbtTranslator):
    """Models under ``dbt/``; sources under the key their ``meta.dagster`` names."""

    def get_asset_key(self, dbt_resource_props: Mapping[str, Any]) -> AssetKey:
        if dbt_resource_props["resource_type"] == "source":
            return super().get_asset_key(dbt_resource_props)
        return dbt_key(dbt_resource_props["name"])

    def get_group_name(self, dbt_resource_props: Mapping[str, Any]) -> str | None:
        return "dbt"


@dbt_assets(
    manifest=prepare_manifest(),
    project=DBT_PROJECT,
    dagster_dbt_translator=PlatformDbtTranslator(),
    name="dbt_marts",
)
def dbt_marts(context: AssetExecutionContext) -> Iterator[Any]:
    """``dbt build``: staging views and marts over the lake, dbt tests as asset checks."""
    env = dbt_env()
    ensure_layout(Path(env["LAKE_ROOT"]))
    os.environ.update(env)
    yield from dbt_cli().cli(["build"], context=context).stream()


DBT_ASSETS = [dbt_marts]
