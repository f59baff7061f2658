"""Great Expectations checks pass on good data and fail on bad; dbt builds green on the lake."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from dagster import AssetKey, DagsterInstance, materialize
from data_fixture import START_MS, build_lake

from assets import domain
from assets.generator import Event
from assets.lake.writer import land_events
from assets.quality.dagster_checks import GX_CHECKS
from assets.quality.suites import expectations
from assets.quality.validate import run_suite, to_check_result


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("lake")
    build_lake(root)
    previous = {k: os.environ.get(k) for k in ("LAKE_ROOT", "DUCKDB_PATH")}
    os.environ["LAKE_ROOT"] = str(root)
    os.environ["DUCKDB_PATH"] = str(root / "warehouse.duckdb")
    yield root
    for key, value in previous.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _checks_by_name(result) -> dict:
    return {c.check_name: c for c in result.get_asset_check_evaluations()}


def test_gx_checks_pass_on_the_generated_lake(lake: Path) -> None:
    orders_check = next(c for c in GX_CHECKS if "gx_orders" in {k.name for k in c.check_keys})
    customers_check = next(c for c in GX_CHECKS if "gx_customers" in {k.name for k in c.check_keys})
    frame_checks = {}
    for check in (orders_check, customers_check):
        frame_checks.update({k.name: check for k in check.check_keys})
    for name, check in frame_checks.items():
        outcome = check.node_def.compute_fn.decorated_fn()
        assert outcome.passed, (name, outcome.metadata)
        assert outcome.metadata["evaluated_expectations"].value >= 5
        assert outcome.metadata["unsuccessful_expectations"].value == 0


def test_gx_checks_fail_on_broken_data(lake: Path) -> None:
    import pandas as pd

    from assets.lake.duck import read_topic

    orders = read_topic(domain.ORDERS, lake).drop(columns=["event_hour"])
    broken = orders.copy()
    broken.loc[broken.index[:5], "amount"] = -1.0
    broken.loc[broken.index[5:8], "region"] = "MARS"
    validation = run_suite("orders", broken, expectations(domain.ORDERS))
    assert not validation.success
    failed = {(f["expectation"], f["column"]) for f in validation.failures}
    assert failed == {
        ("expect_column_values_to_be_between", "amount"),
        ("expect_column_values_to_be_in_set", "region"),
    }
    result = to_check_result(validation, asset_key=AssetKey(["lake", "orders"]))
    assert not result.passed
    assert result.metadata["unsuccessful_expectations"].value == 2

    # referential: orders whose customers are mostly unknown
    validation = run_suite("orders", orders, expectations(domain.ORDERS, customer_ids=["c-00001"]))
    assert not validation.success
    customers = read_topic(domain.CUSTOMERS, lake).drop(columns=["event_hour"])
    doubled = pd.concat([customers, customers.head(3)])
    assert not run_suite("customers", doubled, expectations(domain.CUSTOMERS)).success

    # aggregated data: a repeated (region, window) fails the compound uniqueness rule
    rows = [
        {
            "region": "EU",
            "window_start": START_MS,
            "window_end": START_MS + 300_000,
            "revenue": 1.0,
            "order_count": 1,
        }
    ] * 2
    land_events(lake, [Event(domain.REVENUE_5M, "EU", orjson.dumps(r), START_MS, 0) for r in rows])
    check = next(
        c for c in GX_CHECKS if "gx_revenue_per_region_5m" in {k.name for k in c.check_keys}
    )
    assert not check.node_def.compute_fn.decorated_fn().passed


def test_dbt_build_is_green_on_the_fixture_lake(lake: Path) -> None:
    from assets.dbt_assets import DBT_ASSETS

    result = materialize(DBT_ASSETS, instance=DagsterInstance.ephemeral())
    assert result.success
    materialized = {e.asset_key for e in result.get_asset_materialization_events()}
    assert {
        AssetKey(["dbt", m]) for m in ("daily_revenue_by_region", "fraud_summary", "customer_360")
    } <= materialized
    checks = result.get_asset_check_evaluations()
    assert len(checks) >= 10 and all(c.passed for c in checks)
    import duckdb

    con = duckdb.connect(str(lake / "warehouse.duckdb"), read_only=True)
    regions = con.execute("select distinct region from marts.daily_revenue_by_region").fetchall()
    assert {r[0] for r in regions} <= set(domain.REGIONS) and regions
    assert con.execute("select count(*) from marts.customer_360").fetchone()[0] == 300
    con.close()
