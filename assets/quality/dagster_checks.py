"""Great Expectations suites as Dagster asset checks on the lake's assets."""

from dagster import AssetCheckResult, AssetChecksDefinition, asset_check

from assets import domain
from assets.keys import lake_key
from assets.lake.duck import read_topic
from assets.lake.paths import lake_root
from assets.quality.suites import DATASETS, expectations
from assets.quality.validate import run_suite, to_check_result


def gx_check(dataset: str) -> AssetChecksDefinition:
    """The GX suite of ``dataset`` as an asset check on ``lake/<dataset>``."""
    extra = [lake_key(domain.CUSTOMERS)] if dataset == domain.ORDERS else []

    @asset_check(
        asset=lake_key(dataset),
        name=f"gx_{dataset.replace('-', '_')}",
        additional_deps=extra,
        description=f"Great Expectations suite {dataset!r}: schema, not-null, ranges, uniqueness"
        + (", referential orders -> customers" if extra else ""),
    )
    def _check() -> AssetCheckResult:
        lake = lake_root()
        frame = read_topic(dataset, lake)
        customer_ids = None
        if dataset == domain.ORDERS:
            customer_ids = read_topic(domain.CUSTOMERS, lake)["customer_id"].dropna().tolist()
        frame = frame.drop(columns=["event_hour"], errors="ignore")
        validation = run_suite(dataset, frame, expectations(dataset, customer_ids=customer_ids))
        return to_check_result(validation)

    return _check


GX_CHECKS = [gx_check(dataset) for dataset in DATASETS]
