"""Run an expectation suite on a pandas DataFrame; turn the result into Dagster terms."""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from typing import Any

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
            failures.append(
                {
                    "expectation": config.type,
                    "column": config.kwargs.get("column") or config.kwargs.get("column_list"),
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
    """A Dagster ``AssetCheckResult`` with the validation statistics as metadata."""
    from dagster import AssetCheckResult, AssetCheckSeverity, MetadataValue

    stats = validation.statistics
    metadata: dict[str, Any] = {
        "suite": validation.suite,
        "rows": validation.rows,
        "evaluated_expectations": int(stats.get("evaluated_expectations", 0)),
        "successful_expectations": int(stats.get("successful_expectations", 0)),
        "unsuccessful_expectations": int(stats.get("unsuccessful_expectations", 0)),
        "success_percent": float(stats.get("success_percent") or 0.0),
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
        severity=AssetCheckSeverity.ERROR,
        metadata=metadata,
        **kwargs,
    )
