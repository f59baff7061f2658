"""dbt models as Dagster assets (dagster-dbt); dbt tests become asset checks.

The manifest is prepared at load time (``dbt parse``, offline) when
``dbt_project/target/manifest.json`` is missing. Sources map to the lake assets
(``meta.dagster.asset_key`` in ``sources.yml``), models to ``dbt/<model>``.
"""

from collections.abc import Iterator, Mapping
from typing import Any

from dagster import AssetExecutionContext, AssetKey
from dagster_dbt import DagsterDbtTranslator, DbtCliResource, dbt_assets

from assets.keys import dbt_key
from pipelines.dbt import DBT_PROJECT, build_args, prepare_manifest
from pipelines.lake.writer import ensure_layout
from resources.lake import LakeResource


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
def dbt_marts(
    context: AssetExecutionContext, dbt: DbtCliResource, lake: LakeResource
) -> Iterator[Any]:
    """``dbt build``: staging views and marts over the lake, dbt tests as asset checks."""
    ensure_layout(lake.path)
    yield from dbt.cli(build_args(lake.path, lake.database), context=context).stream()


DBT_ASSETS = [dbt_marts]
