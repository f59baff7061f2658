"""dbt models as Dagster assets (dagster-dbt); dbt tests become asset checks. The models
are built by the ``dbt_after_the_lake`` automation sensor whenever the lake they read was
landed again (``AutomationCondition.eager``).

The manifest is prepared at load time (``dbt parse``, offline) when
``dbt_project/target/manifest.json`` is missing. Sources map to the lake assets
(``meta.dagster.asset_key`` in ``sources.yml``), models to ``dbt/<model>``.
"""

from collections.abc import Iterator, Mapping
from typing import Any

from dagster import (
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AssetSelection,
    AssetSpec,
    AutomationCondition,
    AutomationConditionSensorDefinition,
    DefaultSensorStatus,
)
from dagster_dbt import DagsterDbtTranslator, DbtCliResource, DbtProject, dbt_assets

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

    def get_automation_condition(
        self, dbt_resource_props: Mapping[str, Any]
    ) -> AutomationCondition | None:
        """Models rebuild once their lake sources were landed again (the hourly job lands
        them), as soon as nothing upstream is still running."""
        return AutomationCondition.eager()

    def get_asset_check_spec(
        self,
        asset_spec: AssetSpec,
        manifest: Mapping[str, Any],
        unique_id: str,
        project: DbtProject | None,
    ) -> AssetCheckSpec | None:
        """dbt tests run in the run that rebuilds their model (requested with it)."""
        spec = super().get_asset_check_spec(asset_spec, manifest, unique_id, project)
        if spec is None:
            return None
        return spec._replace(automation_condition=AutomationCondition.eager())


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


def build_dbt_automation_sensor(
    default_status: DefaultSensorStatus = DefaultSensorStatus.RUNNING,
) -> AutomationConditionSensorDefinition:
    """The sensor that evaluates the dbt models' automation conditions (every 30 s)."""
    return AutomationConditionSensorDefinition(
        "dbt_after_the_lake",
        target=AssetSelection.groups("dbt"),
        default_status=default_status,
        minimum_interval_seconds=30,
        description="Builds the dbt models after the hourly job (or anyone) landed the lake "
        "tables they read",
    )
