"""Run an expectation suite on a pandas DataFrame; turn the result into Dagster terms.

A check's Dagster severity follows the failed expectations' GX severity: ERROR when a
contract (``critical``) expectation failed, WARN when only advisory (``warning`` / ``info``)
ones did. Only ERROR stops the assets downstream of a blocking check.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: a Dagster code location loads without pandas
    import pandas as pd

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

_LOCK = threading.Lock()
_CONTEXT: Any = None


@dataclass
class Validation:
    """The outcome of one suite: success, GX statistics and the failed expectations."""

    suite: str
    success: bool
    statistics: dict[str, Any]
    failures: list[dict[str, Any]]
    rows: int

    @property
    def contract_failures(self) -> list[dict[str, Any]]:
        """The failed contract (``critical``) expectations."""
        return [f for f in self.failures if f["severity"] == "critical"]

    @property
    def advisory_failures(self) -> list[dict[str, Any]]:
        """The failed advisory (``warning`` / ``info``) expectations."""
        return [f for f in self.failures if f["severity"] != "critical"]


def _context() -> Any:
    global _CONTEXT
    if _CONTEXT is None:
        import great_expectations as gx

        logging.getLogger("great_expectations").setLevel(logging.WARNING)
        _CONTEXT = gx.get_context(mode="ephemeral")
        try:
            from great_expectations.data_context.types.base import ProgressBarsConfig

            _CONTEXT.variables.progress_bars = ProgressBarsConfig(globally=False)
        except Exception:  # progress bars are cosmetic; keep validating without the setting
            pass
    return _CONTEXT


def _columns_of(kwargs: dict[str, Any]) -> Any:
    """The column (or columns) an expectation is about, None for table-level ones."""
    if "column_A" in kwargs:
        return [kwargs["column_A"], kwargs.get("column_B")]
    return kwargs.get("column") or kwargs.get("column_list")


def run_suite(name: str, frame: pd.DataFrame, rules: list[Any]) -> Validation:
    """Validate ``frame`` against ``rules`` as suite ``name``."""
    import great_expectations as gx

    with _LOCK:
        context = _context()
        source = context.data_sources.add_or_update_pandas(f"ds_{name}")
        asset = (
            source.get_asset(name)
            if name in {a.name for a in source.assets}
            else source.add_dataframe_asset(name)
        )
        definition = asset.add_batch_definition_whole_dataframe(f"{name}_{id(frame)}")
        suite = gx.ExpectationSuite(name=name, expectations=[r.copy() for r in rules])
        result = definition.get_batch(batch_parameters={"dataframe": frame}).validate(suite)
        asset.delete_batch_definition(definition.name)
    failures = []
    for item in result.results:
        if not item.success:
            config = item.expectation_config
            details = item.result or {}
            severity = getattr(config, "severity", None)
            failures.append(
                {
                    "expectation": config.type,
                    "severity": str(getattr(severity, "value", severity) or "critical"),
                    "column": _columns_of(config.kwargs),
                    "unexpected_count": details.get("unexpected_count"),
                    "unexpected_percent": details.get("unexpected_percent"),
                    "examples": [
                        str(v) for v in (details.get("partial_unexpected_list") or [])[:5]
                    ],
                    "observed": str(details.get("observed_value", ""))[:200],
                }
            )
    return Validation(name, bool(result.success), dict(result.statistics), failures, len(frame))


def to_check_result(
    validation: Validation, *, asset_key: Any = None, check_name: str | None = None
) -> Any:
    """A Dagster ``AssetCheckResult`` with the validation statistics as metadata; severity
    ERROR if a contract expectation failed, else WARN."""
    from dagster import AssetCheckResult, AssetCheckSeverity, MetadataValue

    stats = validation.statistics
    metadata: dict[str, Any] = {
        "suite": validation.suite,
        "rows": validation.rows,
        "evaluated_expectations": int(stats.get("evaluated_expectations", 0)),
        "successful_expectations": int(stats.get("successful_expectations", 0)),
        "unsuccessful_expectations": int(stats.get("unsuccessful_expectations", 0)),
        "success_percent": float(stats.get("success_percent") or 0.0),
        "contract_failures": len(validation.contract_failures),
        "advisory_failures": len(validation.advisory_failures),
    }
    if validation.failures:
        metadata["failures"] = MetadataValue.json(validation.failures)
    kwargs: dict[str, Any] = {}
    if asset_key is not None:
        kwargs["asset_key"] = asset_key
    if check_name is not None:
        kwargs["check_name"] = check_name
    return AssetCheckResult(
        passed=validation.success,
        severity=(
            AssetCheckSeverity.WARN
            if validation.failures and not validation.contract_failures
            else AssetCheckSeverity.ERROR
        ),
        metadata=metadata,
        **kwargs,
    )
