"""Great Expectations checks are green on what the platform produces (raw topics with their
injected duplicates, a customers changelog with updates, the stream applications' outputs)
and red for broken data, ERROR for a broken contract (blocking the dbt marts), WARN for an
advisory finding (not blocking); dbt builds green on the lake."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pandas as pd
import pytest
from dagster import (
    AssetCheckSeverity,
    AssetKey,
    AssetSelection,
    DagsterInstance,
    materialize,
)
from data_fixture import CONFIG, START_MS, build_lake

from assets.quality import BLOCKING, GX_CHECKS
from pipelines import domain
from pipelines.generator import Event, generate_events
from pipelines.lake.duck import read_topic
from pipelines.lake.writer import land_events
from pipelines.quality.suites import DATASETS, expectations, prepare
from pipelines.quality.validate import Validation, run_suite, to_check_result
from resources import platform_resources

# what the stream applications derive from the raw topics, landed next to them
DERIVED = {
    "orders-dedup": (domain.ORDERS_DEDUPED,),
    "enriched-orders": (domain.ENRICHED_ORDERS,),
    "windowed-revenue": (domain.REVENUE_5M,),
}


def stream_outputs(events: list[Event]) -> list[Event]:
    """The applications of ``DERIVED`` run on ``events`` (TopologyTestDriver, input in
    send order), their outputs as events to land."""
    from pipelines.streams.apps import STREAM_APPS
    from pipelines.streams.config import StreamAppConfig
    from streaming import TopologyTestDriver, serdes

    config = StreamAppConfig()
    out: list[Event] = []
    for name, topics in DERIVED.items():
        app = STREAM_APPS[name]
        with TopologyTestDriver(app.factory(config), {"application.id": name}) as driver:
            inputs = {
                t: driver.create_input_topic(
                    t, key_serde=serdes.String(), value_serde=serdes.Json()
                )
                for t in app.input_topics(config)
            }
            for e in events:
                if e.topic not in inputs:
                    continue
                try:
                    value = orjson.loads(e.value)
                except orjson.JSONDecodeError:
                    continue  # undecodable: the runtime dead-letters it before the topology
                inputs[e.topic].pipe_input(e.key, value, timestamp=e.timestamp)
            for topic in topics:
                reader = driver.create_output_topic(
                    topic, key_serde=serdes.String(), value_serde=serdes.Json()
                )
                for r in reader.read_records_to_list():
                    out.append(Event(topic, r.key, orjson.dumps(r.value), r.timestamp, 0))
    return out


def restarted_generator_customers() -> list[Event]:
    """The profiles a second generator run re-sends an hour later (changelog updates)."""
    later = CONFIG.with_(seed=CONFIG.seed + 1, start_ms=START_MS + 3_600_000, duration_s=1)
    return [e for e in generate_events(later) if e.topic == domain.CUSTOMERS]


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("lake")
    events = build_lake(root)
    land_events(root, [*restarted_generator_customers(), *stream_outputs(events)])
    yield root


def resources_for(lake: Path) -> dict:
    """The embedded deployment's resources, on the lake at ``lake``."""
    return platform_resources({"LAKE_ROOT": str(lake)})


def _checks_by_name(result) -> dict:
    return {c.check_name: c for c in result.get_asset_check_evaluations()}


def _check_name(dataset: str) -> str:
    return f"gx_{dataset.replace('-', '_')}"


def _suite(dataset: str, rows: pd.DataFrame, **kwargs) -> Validation:
    return run_suite(dataset, prepare(dataset, rows), expectations(dataset, **kwargs))


def _failed(validation: Validation) -> set[tuple[str, str, str]]:
    return {(f["expectation"], str(f["column"]), f["severity"]) for f in validation.failures}


def test_gx_checks_pass_on_the_generated_lake(lake: Path) -> None:
    # what the platform produces on purpose is there ...
    orders = read_topic(domain.ORDERS, lake)
    assert orders["order_id"].duplicated().sum() > 20  # re-sends of the same orders
    customers = read_topic(domain.CUSTOMERS, lake)
    assert customers["customer_id"].duplicated().sum() == CONFIG.customers  # updates
    revenue = read_topic(domain.REVENUE_5M, lake)
    assert len(revenue) >= 11 * len(domain.REGIONS)
    assert len(read_topic(domain.ENRICHED_ORDERS, lake)) == len(orders)
    deduped = read_topic(domain.ORDERS_DEDUPED, lake)
    assert len(deduped) == orders["order_id"].nunique()
    # ... and every check is green, through Dagster
    result = materialize(
        GX_CHECKS,
        selection=AssetSelection.checks(*GX_CHECKS),
        instance=DagsterInstance.ephemeral(),
        resources=resources_for(lake),
    )
    assert result.success
    checks = _checks_by_name(result)
    assert set(checks) == {_check_name(d) for d in DATASETS}
    for name, evaluation in checks.items():
        meta = {k: v.value for k, v in evaluation.metadata.items()}
        assert evaluation.passed, (name, meta)
        assert meta["rows"] > 0 and meta["evaluated_expectations"] >= 5, (name, meta)
        assert meta["unsuccessful_expectations"] == 0, (name, meta)
    assert checks["gx_customers"].metadata["rows"].value == CONFIG.customers


def test_contract_breaks_are_errors(lake: Path) -> None:
    orders = read_topic(domain.ORDERS, lake)
    customer_ids = read_topic(domain.CUSTOMERS, lake)["customer_id"].tolist()
    assert _suite(domain.ORDERS, orders, customer_ids=customer_ids).success

    # the incident: a different order under an existing id (another amount and customer)
    collided = pd.concat([orders, orders.head(1).assign(amount=12.5, customer_id="c-00002")])
    # plus a null id, a negative amount, an unknown region, an event time in seconds
    broken = collided.copy()
    broken.loc[broken.index[1], "order_id"] = None
    broken.loc[broken.index[2:5], "amount"] = -1.0
    broken.loc[broken.index[5:8], "region"] = "MARS"
    broken.loc[broken.index[8], "event_time"] = START_MS // 1000
    validation = _suite(domain.ORDERS, broken.reset_index(drop=True))
    assert _failed(validation) == {
        ("expect_column_values_to_be_between", "_payloads_per_id", "critical"),
        ("expect_column_values_to_not_be_null", "order_id", "critical"),
        ("expect_column_values_to_be_between", "amount", "critical"),
        ("expect_column_values_to_be_in_set", "region", "critical"),
        ("expect_column_values_to_be_between", "event_time", "critical"),
    }
    result = to_check_result(validation, asset_key=AssetKey(["lake", "orders"]))
    assert not result.passed and result.severity == AssetCheckSeverity.ERROR
    assert result.metadata["contract_failures"].value == 5
    only_collision = _suite(domain.ORDERS, collided.reset_index(drop=True))
    assert _failed(only_collision) == {
        ("expect_column_values_to_be_between", "_payloads_per_id", "critical")
    }

    # the deduplicated stream: two different orders under one id
    deduped = read_topic(domain.ORDERS_DEDUPED, lake)
    assert _suite(domain.ORDERS_DEDUPED, deduped).success
    twice = deduped.copy()
    twice.loc[twice.index[1], "order_id"] = twice.loc[twice.index[0], "order_id"]
    validation = _suite(domain.ORDERS_DEDUPED, twice)
    assert _failed(validation) == {("expect_column_values_to_be_unique", "order_id", "critical")}
    assert to_check_result(validation).severity == AssetCheckSeverity.ERROR

    # customers: a profile in a second partition makes two current profiles for one id
    customers = read_topic(domain.CUSTOMERS, lake)
    moved = customers.head(1).assign(
        _partition=(customers["_partition"].iloc[0] + 1) % 4, _offset=10**9, tier="gold"
    )
    nameless = customers.head(1).assign(customer_id=None, _offset=10**9 + 1)
    validation = _suite(domain.CUSTOMERS, pd.concat([customers, moved, nameless]))
    assert _failed(validation) == {
        ("expect_column_values_to_be_unique", "customer_id", "critical"),
        ("expect_column_values_to_not_be_null", "customer_id", "critical"),
    }

    # closed windows: a result that changed, a window of the wrong size
    revenue = read_topic(domain.REVENUE_5M, lake)
    assert _suite(domain.REVENUE_5M, revenue).success
    changed = revenue.head(1).assign(order_count=revenue["order_count"].iloc[0] + 1)
    stretched = revenue.iloc[[1]].assign(window_end=revenue["window_end"].iloc[1] + 60_000)
    validation = _suite(domain.REVENUE_5M, pd.concat([revenue, changed, stretched]))
    assert {(e, c) for e, c, s in _failed(validation) if s == "critical"} == {
        ("expect_column_values_to_be_between", "_results_per_window"),
        ("expect_column_values_to_be_between", "_window_size"),
    }
    assert to_check_result(validation).severity == AssetCheckSeverity.ERROR

    # enriched: within a credit limit without a customer to have one
    enriched = read_topic(domain.ENRICHED_ORDERS, lake)
    unknown = enriched.index[~enriched["customer_known"]]
    assert len(unknown) > 0
    bad = enriched.copy()
    bad.loc[unknown[0], "within_credit_limit"] = True
    validation = _suite(domain.ENRICHED_ORDERS, bad)
    assert _failed(validation) == {
        (
            "expect_column_pair_values_to_be_in_set",
            "['customer_known', 'within_credit_limit']",
            "critical",
        )
    }


def test_advisory_findings_are_warnings(lake: Path) -> None:
    orders = read_topic(domain.ORDERS, lake)
    # re-sends of the same orders beyond the tolerated rate: handled downstream, advisory
    resent = pd.concat([orders, orders.head(int(len(orders) * 0.08))], ignore_index=True)
    validation = _suite(domain.ORDERS, resent)
    assert _failed(validation) == {
        ("expect_column_proportion_of_unique_values_to_be_between", "order_id", "warning")
    }
    result = to_check_result(validation)
    assert not result.passed and result.severity == AssetCheckSeverity.WARN
    assert result.metadata["contract_failures"].value == 0
    assert result.metadata["advisory_failures"].value == 1
    # orders of customers without a profile, more than the injected share
    validation = _suite(domain.ORDERS, orders, customer_ids=["c-00001"])
    assert _failed(validation) == {("expect_column_values_to_be_in_set", "customer_id", "warning")}
    # a closed window emitted twice with the same result (a restart re-sending it)
    revenue = read_topic(domain.REVENUE_5M, lake)
    validation = _suite(domain.REVENUE_5M, pd.concat([revenue, revenue.head(2)]))
    assert _failed(validation) == {
        (
            "expect_compound_columns_to_be_unique",
            "['region', 'window_start']",
            "warning",
        )
    }
    assert to_check_result(validation).severity == AssetCheckSeverity.WARN


def test_blocking_checks_guard_what_is_built_from_their_table() -> None:
    from dagster import Definitions

    from assets import data_defs

    defs = Definitions(
        assets=data_defs.ASSETS,
        asset_checks=data_defs.ASSET_CHECKS,
        resources=platform_resources({}),
    )
    graph = defs.get_repository_def().asset_graph
    for check in GX_CHECKS:
        (spec,) = check.check_specs
        dataset = spec.asset_key.path[-1]
        assert spec.blocking == bool(graph.get(spec.asset_key).child_keys), dataset
        assert spec.blocking == (dataset in BLOCKING)
    assert {d for d in DATASETS if d in BLOCKING} == {
        domain.ORDERS,
        domain.CUSTOMERS,
        domain.REVENUE_5M,
    }


def test_a_broken_contract_blocks_the_dbt_marts_an_advisory_finding_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from assets.dbt_assets import DBT_ASSETS
    from assets.keys import dbt_key

    lake = tmp_path / "lake"
    events = build_lake(lake)
    guard = [c for c in GX_CHECKS if "gx_orders" in {k.name for k in c.check_keys}]
    marts = [dbt_key("stg_orders"), dbt_key("daily_revenue_by_region")]

    def run():
        result = materialize(
            [*DBT_ASSETS, *guard],
            selection=AssetSelection.assets(*marts) | AssetSelection.checks(*guard),
            instance=DagsterInstance.ephemeral(),
            resources=resources_for(lake),
            raise_on_error=False,
        )
        built = {e.asset_key for e in result.get_asset_materialization_events()}
        return result, _checks_by_name(result)["gx_orders"], built

    orders = [e for e in events if e.topic == domain.ORDERS]
    valid = [e for e in orders if domain.parse_record(domain.ORDERS, e.value) is not None]
    # a producer retrying too much: 8 % re-sends of the same orders (advisory)
    land_events(lake, valid[: int(len(valid) * 0.08)])
    result, check, built = run()
    assert not check.passed and check.severity == AssetCheckSeverity.WARN
    assert result.success and built == set(marts)

    # the incident: another generator's order under an id already taken (contract)
    first = valid[0]
    other = {**orjson.loads(first.value), "amount": 77.7, "customer_id": "c-00003"}
    land_events(lake, [Event(domain.ORDERS, first.key, orjson.dumps(other), first.timestamp, 0)])
    result, check, built = run()
    assert not check.passed and check.severity == AssetCheckSeverity.ERROR
    assert not result.success and not built  # no mart is built on it


def test_dbt_build_is_green_on_the_fixture_lake(lake: Path) -> None:
    from assets.dbt_assets import DBT_ASSETS

    # behind the blocking checks of its sources, green on what the generator produces
    guards = [
        c for c in GX_CHECKS if {k.name for k in c.check_keys} & {"gx_orders", "gx_customers"}
    ]
    result = materialize(
        [*DBT_ASSETS, *guards],
        selection=AssetSelection.assets(*DBT_ASSETS) | AssetSelection.checks(*guards),
        instance=DagsterInstance.ephemeral(),
        resources=resources_for(lake),
    )
    assert result.success
    assert {"gx_orders", "gx_customers"} <= set(_checks_by_name(result))
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
