"""The Dagster code location (``dagster dev -w workspace.yaml``).

Assets, checks, sensors, schedules and resources are added by the platform issue; the
location loads (with the ``platform`` extra installed) and is empty until then.
"""

from dagster import Definitions

defs = Definitions(assets=[], asset_checks=[], sensors=[], schedules=[], resources={})
