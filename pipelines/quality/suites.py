"""The expectation suites: which rules each dataset must satisfy, and how much each matters.

Every expectation is one of two kinds (its GX ``severity``):

- a **contract** (``critical``): data that breaks it is wrong, whatever produced it. A
  failed contract fails the check with Dagster severity ERROR, and a blocking check keeps
  the assets downstream of the lake table (batch, reconciliation, dbt marts) from building
  on it.
- **advisory** (``warning``): worth a look, but the platform tolerates it (the generator
  injects some of it on purpose and the downstream steps handle it). Advisory failures
  alone fail the check with severity WARN, which never blocks.

Uniqueness is a contract only where it is promised: the deduplicated stream's order ids,
the current profile per customer id, and one result per closed 5-minute window. The raw
``orders`` topic carries re-sends of the same order on purpose (2 % by default), so it gets
a duplicate *rate* (advisory) and the contract that one id never names two different
orders; the compacted ``customers`` changelog carries updates, so its suite validates the
latest profile per id (:func:`prepare`), not the changelog.

Validated frames (``prepare``):

- ``orders``: the valid rows, plus ``_payloads_per_id`` (distinct order contents sharing the
  row's ``order_id``; a re-send repeats the content, so it must be 1);
- ``customers``: the latest row per ``(customer_id, _partition)``, i.e. the compacted
  topic's current state (a key lives in one partition, so the ids must be unique);
- ``revenue-per-region-5m``: the rows plus ``_window_size`` (``window_end - window_start``),
  ``_window_offset`` (``window_start`` modulo the window size) and ``_results_per_window``
  (distinct ``(revenue_cents, order_count)`` per ``(region, window_start)``: a closed
  window's result may be re-sent after a restart, but never changes);
- ``enriched-orders``, ``orders-deduped``: the valid rows as landed.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: a Dagster code location loads without pandas
    import pandas as pd

from pipelines import domain
from pipelines.lake.records import META_FIELDS

CONTRACT = "critical"
ADVISORY = "warning"

# Raw orders: at most this share of rows may be re-sends (the generator injects 2 %).
RAW_MAX_DUPLICATE_RATE = 0.05
# Shares of orders allowed to name a customer without a profile (the generator injects 1 %).
REFERENTIAL_MOSTLY = 0.95
KNOWN_CUSTOMER_MOSTLY = 0.95
# No real order is worth more (the generator's fraud pattern goes up to 50,000).
MAX_ORDER_AMOUNT = 1_000_000
# Sane event times: after 2020-01-01 (a timestamp in seconds lands in 1970) and at most a
# day ahead of the check's clock (microseconds land in the year 50,000).
EARLIEST_EVENT_TIME_MS = 1_577_836_800_000
LATEST_EVENT_TIME_AHEAD_MS = 24 * domain.HOUR_MS

ORDER_PAYLOAD = ("customer_id", "amount", "region", "location", "event_time")
ALL_LOCATIONS = sorted({loc for locs in domain.LOCATIONS.values() for loc in locs})


def _columns(topic: str) -> list[str]:
    return [*domain.SCHEMAS[topic], *(f.name for f in META_FIELDS)]


def _distinct_per(frame: pd.DataFrame, keys: list[str], values: list[str]) -> pd.Series:
    """Per row: how many distinct ``values`` combinations share the row's ``keys``."""
    import pandas as pd

    if frame.empty:
        return pd.Series([], dtype="int64", index=frame.index)
    distinct = frame[keys + values].drop_duplicates()
    counts = distinct.groupby(keys, dropna=False).size().rename("_n").reset_index()
    merged = frame[keys].merge(counts, on=keys, how="left")
    return pd.Series(merged["_n"].to_numpy(), index=frame.index, dtype="int64")


def prepare(dataset: str, frame: pd.DataFrame) -> pd.DataFrame:
    """The frame ``dataset``'s suite validates, from the lake rows ``frame`` (see the
    module docstring)."""
    frame = frame.drop(columns=["event_hour"], errors="ignore")
    if dataset == domain.ORDERS:
        return frame.assign(
            _payloads_per_id=_distinct_per(frame, ["order_id"], list(ORDER_PAYLOAD))
        )
    if dataset == domain.CUSTOMERS:
        order = [c for c in ("_partition", "_offset") if c in frame.columns]
        ordered = frame.sort_values(order, kind="stable") if order else frame
        keys = ["customer_id", "_partition"] if "_partition" in frame.columns else ["customer_id"]
        return ordered.drop_duplicates(keys, keep="last").reset_index(drop=True)
    if dataset in (domain.REVENUE_5M, "batch_revenue_5m"):
        size = frame["window_end"] - frame["window_start"]
        return frame.assign(
            _window_size=size,
            _window_offset=frame["window_start"] % domain.REVENUE_WINDOW_MS,
            _results_per_window=_distinct_per(
                frame, ["region", "window_start"], ["revenue_cents", "order_count"]
            ),
        )
    return frame


def expectations(
    dataset: str,
    *,
    customer_ids: Iterable[str] | None = None,
    now_ms: int | None = None,
) -> list[Any]:
    """The GX expectations of ``dataset`` (a topic name, or ``batch_<result>``), to run on
    ``prepare(dataset, rows)``; ``now_ms`` (default: the wall clock) bounds event times."""
    import great_expectations as gx
    from great_expectations.expectations.metadata_types import FailureSeverity

    E = gx.expectations
    contract, advisory = FailureSeverity(CONTRACT), FailureSeverity(ADVISORY)
    now = int(time.time() * 1000) if now_ms is None else now_ms

    def not_null(*columns: str, severity: FailureSeverity = contract) -> list[Any]:
        return [E.ExpectColumnValuesToNotBeNull(column=c, severity=severity) for c in columns]

    def sane_event_time(column: str = "event_time") -> list[Any]:
        return [
            E.ExpectColumnValuesToBeBetween(
                column=column,
                min_value=EARLIEST_EVENT_TIME_MS,
                max_value=now + LATEST_EVENT_TIME_AHEAD_MS,
                severity=contract,
            ),
            # the stream applications dead-letter these instead of processing them
            E.ExpectColumnValuesToBeBetween(
                column=column,
                max_value=now + domain.MAX_EVENT_TIME_AHEAD_MS,
                severity=advisory,
            ),
        ]

    def positive_amount(column: str = "amount") -> Any:
        return E.ExpectColumnValuesToBeBetween(
            column=column, min_value=0, strict_min=True, max_value=MAX_ORDER_AMOUNT
        )

    def known_region(column: str = "region") -> Any:
        return E.ExpectColumnValuesToBeInSet(column=column, value_set=list(domain.REGIONS))

    if dataset == domain.ORDERS:
        rules = [
            E.ExpectTableColumnsToMatchSet(column_set=_columns(domain.ORDERS), exact_match=False),
            *not_null("order_id", "customer_id", "amount", "region", "event_time"),
            positive_amount(),
            known_region(),
            *sane_event_time(),
            # a re-send repeats the order; two different orders never share an id
            E.ExpectColumnValuesToBeBetween(column="_payloads_per_id", min_value=1, max_value=1),
            E.ExpectColumnProportionOfUniqueValuesToBeBetween(
                column="order_id", min_value=1 - RAW_MAX_DUPLICATE_RATE, severity=advisory
            ),
            E.ExpectColumnValuesToBeInSet(
                column="location", value_set=ALL_LOCATIONS, severity=advisory
            ),
        ]
        if customer_ids is not None:
            rules.append(
                E.ExpectColumnValuesToBeInSet(
                    column="customer_id",
                    value_set=sorted(set(customer_ids)),
                    mostly=REFERENTIAL_MOSTLY,
                    severity=advisory,
                )
            )
        return rules
    if dataset == domain.CUSTOMERS:
        return [
            E.ExpectTableColumnsToMatchSet(
                column_set=_columns(domain.CUSTOMERS), exact_match=False
            ),
            *not_null("customer_id"),
            # one current profile per customer
            E.ExpectColumnValuesToBeUnique(column="customer_id"),
            E.ExpectColumnValuesToBeInSet(column="tier", value_set=list(domain.TIERS)),
            known_region("home_region"),
            E.ExpectColumnValuesToBeBetween(column="credit_limit", min_value=0, strict_min=True),
            # the fraud rule new_location compares orders with them
            *not_null("known_locations", "name", severity=advisory),
        ]
    if dataset == domain.ENRICHED_ORDERS:
        return [
            *not_null("order_id", "customer_id", "customer_known", "within_credit_limit"),
            positive_amount(),
            known_region(),
            E.ExpectColumnValuesToBeInSet(column="tier", value_set=list(domain.TIERS)),
            # no credit limit to be within for an unknown customer
            E.ExpectColumnPairValuesToBeInSet(
                column_A="customer_known",
                column_B="within_credit_limit",
                value_pairs_set=[(True, True), (True, False), (False, False)],
            ),
            E.ExpectColumnValuesToBeInSet(
                column="customer_known",
                value_set=[True],
                mostly=KNOWN_CUSTOMER_MOSTLY,
                severity=advisory,
            ),
        ]
    if dataset in (domain.REVENUE_5M, "batch_revenue_5m"):
        return [
            *not_null("region", "window_start", "window_end", "revenue", "order_count"),
            known_region(),
            E.ExpectColumnValuesToBeBetween(column="order_count", min_value=1),
            E.ExpectColumnValuesToBeBetween(column="revenue", min_value=0),
            E.ExpectColumnValuesToBeBetween(
                column="_window_size",
                min_value=domain.REVENUE_WINDOW_MS,
                max_value=domain.REVENUE_WINDOW_MS,
            ),
            E.ExpectColumnValuesToBeBetween(column="_window_offset", min_value=0, max_value=0),
            *sane_event_time("window_start")[:1],
            # a closed window's result is final: re-sent after a restart maybe, never changed
            E.ExpectColumnValuesToBeBetween(column="_results_per_window", min_value=1, max_value=1),
            E.ExpectCompoundColumnsToBeUnique(
                column_list=["region", "window_start"], severity=advisory
            ),
        ]
    if dataset == domain.ORDERS_DEDUPED:
        return [
            *not_null("order_id", "event_time"),
            # what the dedup application promises
            E.ExpectColumnValuesToBeUnique(column="order_id"),
            positive_amount(),
            known_region(),
            *sane_event_time(),
        ]
    raise KeyError(f"no expectation suite for {dataset!r}")


DATASETS = (
    domain.ORDERS,
    domain.CUSTOMERS,
    domain.ENRICHED_ORDERS,
    domain.REVENUE_5M,
    domain.ORDERS_DEDUPED,
)
