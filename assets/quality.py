"""Great Expectations suites as Dagster asset checks on the lake's assets.

One check per dataset (``gx_<dataset>``). It fails with severity ERROR when a contract
expectation failed and WARN when only advisory ones did (``pipelines.quality.suites``). The
checks of tables other assets are built from are blocking: in a run that includes the
check, a contract failure stops the downstream assets (an advisory one does not).

- ``lake/orders``: batch recomputes, the reconciliation and the dbt marts read it;
- ``lake/customers``: the batch fraud recompute and dbt's ``customer_360``;
- ``lake/revenue-per-region-5m``: the reconciliation;
- ``lake/enriched-orders`` and ``lake/orders-deduped``: nothing is built from them (yet), so
  their checks report without blocking.
"""

from dagster import AssetCheckResult, AssetChecksDefinition, asset_check

from assets.keys import lake_key
from pipelines import domain
from pipelines.lake.duck import read_topic
from pipelines.quality.suites import DATASETS, expectations, prepare
from pipelines.quality.validate import run_suite, to_check_result
from resources.lake import LakeResource

BLOCKING = frozenset({domain.ORDERS, domain.CUSTOMERS, domain.REVENUE_5M})

_WHAT = {
    domain.ORDERS: "raw orders: ids, positive amounts, known regions, sane event times, one "
    "order per id; advisory: duplicate rate, unknown customers and locations",
    domain.CUSTOMERS: "the current profile per customer: one per id, known tier and region, "
    "positive credit limit",
    domain.ENRICHED_ORDERS: "enriched orders: ids, flags, amounts, regions, tiers; advisory: "
    "share of known customers",
    domain.REVENUE_5M: "5-minute revenue: aligned 5-minute windows, counts and revenue, one "
    "final result per window; advisory: each window emitted once",
    domain.ORDERS_DEDUPED: "deduplicated orders: unique order ids, amounts, regions, event times",
}


def gx_check(dataset: str) -> AssetChecksDefinition:
    """The GX suite of ``dataset`` as an asset check on ``lake/<dataset>``."""
    extra = [lake_key(domain.CUSTOMERS)] if dataset == domain.ORDERS else []
    blocking = dataset in BLOCKING

    @asset_check(
        asset=lake_key(dataset),
        name=f"gx_{dataset.replace('-', '_')}",
        additional_deps=extra,
        blocking=blocking,
        description=f"Great Expectations suite {dataset!r}: {_WHAT[dataset]}. ERROR when a "
        "contract fails, WARN when only advisory expectations do"
        + ("; blocks downstream assets on ERROR" if blocking else ""),
    )
    def _check(lake: LakeResource) -> AssetCheckResult:
        root = lake.path
        frame = prepare(dataset, read_topic(dataset, root))
        customer_ids = None
        if dataset == domain.ORDERS:
            customer_ids = read_topic(domain.CUSTOMERS, root)["customer_id"].dropna().tolist()
        validation = run_suite(dataset, frame, expectations(dataset, customer_ids=customer_ids))
        return to_check_result(validation)

    return _check


GX_CHECKS = [gx_check(dataset) for dataset in DATASETS]
