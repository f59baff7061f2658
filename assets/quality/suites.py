"""The expectation suites: which rules each dataset must satisfy."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from assets import domain
from assets.lake.records import META_FIELDS

# Shares of rows allowed to break a rule on raw data (the generator injects duplicates
# and unknown customers on purpose; the derived data must be exact).
RAW_DUPLICATE_MOSTLY = 0.95
REFERENTIAL_MOSTLY = 0.95


def _columns(topic: str) -> list[str]:
    return [*domain.SCHEMAS[topic], *(f.name for f in META_FIELDS)]


def expectations(dataset: str, *, customer_ids: Iterable[str] | None = None) -> list[Any]:
    """The GX expectations of ``dataset`` (a topic name, or ``batch_<result>``)."""
    import great_expectations as gx

    E = gx.expectations
    if dataset == domain.ORDERS:
        rules = [
            E.ExpectTableColumnsToMatchSet(column_set=_columns(domain.ORDERS), exact_match=False),
            *(
                E.ExpectColumnValuesToNotBeNull(column=c)
                for c in ("order_id", "customer_id", "amount", "region", "event_time")
            ),
            E.ExpectColumnValuesToBeBetween(column="amount", min_value=0, max_value=1_000_000),
            E.ExpectColumnValuesToBeInSet(column="region", value_set=list(domain.REGIONS)),
            E.ExpectColumnValuesToBeUnique(column="order_id", mostly=RAW_DUPLICATE_MOSTLY),
        ]
        if customer_ids is not None:
            rules.append(
                E.ExpectColumnValuesToBeInSet(
                    column="customer_id",
                    value_set=sorted(set(customer_ids)),
                    mostly=REFERENTIAL_MOSTLY,
                )
            )
        return rules
    if dataset == domain.CUSTOMERS:
        return [
            E.ExpectTableColumnsToMatchSet(
                column_set=_columns(domain.CUSTOMERS), exact_match=False
            ),
            E.ExpectColumnValuesToNotBeNull(column="customer_id"),
            E.ExpectColumnValuesToBeUnique(column="customer_id"),
            E.ExpectColumnValuesToBeInSet(column="tier", value_set=list(domain.TIERS)),
            E.ExpectColumnValuesToBeBetween(column="credit_limit", min_value=0, strict_min=True),
        ]
    if dataset == domain.ENRICHED_ORDERS:
        return [
            *(
                E.ExpectColumnValuesToNotBeNull(column=c)
                for c in ("order_id", "customer_id", "customer_known", "within_credit_limit")
            ),
            E.ExpectColumnValuesToBeBetween(column="amount", min_value=0, max_value=1_000_000),
        ]
    if dataset in (domain.REVENUE_5M, "batch_revenue_5m"):
        return [
            *(
                E.ExpectColumnValuesToNotBeNull(column=c)
                for c in ("region", "window_start", "window_end", "revenue", "order_count")
            ),
            E.ExpectColumnValuesToBeInSet(column="region", value_set=list(domain.REGIONS)),
            E.ExpectColumnValuesToBeBetween(column="order_count", min_value=1),
            E.ExpectColumnValuesToBeBetween(column="revenue", min_value=0),
            E.ExpectCompoundColumnsToBeUnique(column_list=["region", "window_start"]),
        ]
    if dataset == domain.ORDERS_DEDUPED:
        return [
            E.ExpectColumnValuesToNotBeNull(column="order_id"),
            E.ExpectColumnValuesToBeUnique(column="order_id"),
        ]
    raise KeyError(f"no expectation suite for {dataset!r}")


DATASETS = (
    domain.ORDERS,
    domain.CUSTOMERS,
    domain.ENRICHED_ORDERS,
    domain.REVENUE_5M,
    domain.ORDERS_DEDUPED,
)
