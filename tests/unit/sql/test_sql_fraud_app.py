"""The platform's SQL fraud application (``pipelines/streams/sql/fraud.sql``) through the
test driver: card testing and impossible travel found by MATCH_RECOGNIZE, with Python
functions (a risk score of a match, a location's region in DEFINE)."""

from __future__ import annotations

from typing import Any

import pytest

from pipelines import domain
from pipelines.streams.config import StreamAppConfig
from pipelines.streams.sql import FRAUD_SQL
from pipelines.streams.sql.udfs import region_of, risk_score
from streaming import TopologyTestDriver, serdes

MINUTE = domain.MINUTE_MS
T0 = 1_700_000_000_000


def order(
    order_id: str, customer: str, amount: float, minute: float, location: str = "Berlin"
) -> dict[str, Any]:
    return {
        "order_id": order_id,
        "customer_id": customer,
        "amount": amount,
        "region": "EU",
        "location": location,
        "event_time": T0 + int(minute * MINUTE),
    }


def alerts(orders: list[dict[str, Any]]) -> list[tuple[str | None, dict[str, Any]]]:
    config = StreamAppConfig()
    # the platform's gate rejects orders stamped too far ahead of the wall clock
    with TopologyTestDriver(FRAUD_SQL.build(config), initial_wall_clock_time_ms=T0) as driver:
        source = driver.create_input_topic(config.orders_topic, key_serde=serdes.String())
        for row in orders:
            source.pipe_input(row["order_id"], row, timestamp=row["event_time"])
        out = driver.create_output_topic(config.fraud_sql_topic, key_serde=serdes.String())
        return [(r.key, r.value) for r in out.read_records_to_list()]


def test_a_small_charge_then_a_large_one_within_minutes_is_an_alert():
    orders = [
        order("o1", "c1", 2.50, 0),  # the card test
        order("o2", "c1", 40.0, 1),  # an ordinary order between is allowed
        order("o3", "c1", 900.0, 2),  # the spend: an alert
        order("o4", "c2", 1.00, 0),
        order("o5", "c2", 700.0, 6),  # 6 minutes later: outside WITHIN
        order("o6", "c3", 800.0, 0),  # large first, then small: no card test
        order("o7", "c3", 3.00, 1),
        order("o8", "c4", 4.99, 3),
        order("o9", "c4", 499.99, 4),  # not large enough
        order("o10", "c9", 50.0, 30),  # later orders move the watermark past the rest
    ]
    out = alerts(orders)
    assert out == [
        (
            "c1",
            {
                "rule": "small_then_large",
                "customer_id": "c1",
                "order_id": "o3",
                "amount": 900.0,
                "event_time": T0 + 2 * MINUTE,
                "location": "Berlin",
                "first_order_id": "o1",
                "first_amount": 2.5,
                "first_event_time": T0,
                "first_location": "Berlin",
                "risk": risk_score(2.5, 900.0, 2 * MINUTE),
            },
        )
    ]


def test_orders_out_of_order_are_matched_in_event_time_order():
    # the large order arrives first but happened after the small one: still an alert,
    # once the watermark (1 minute behind the latest order) passes both
    orders = [
        order("o2", "c1", 1200.0, 1),
        order("o1", "c1", 1.0, 0),
        order("o3", "c2", 20.0, 10),
    ]
    out = alerts(orders)
    assert [(v["first_order_id"], v["order_id"]) for _, v in out] == [("o1", "o2")]


def test_two_orders_from_different_regions_within_minutes_are_impossible_travel():
    orders = [
        order("o1", "c1", 40.0, 0, "Berlin"),
        order("o2", "c1", 50.0, 3, "Tokyo"),  # APAC 3 minutes after EU: an alert
        order("o3", "c1", 60.0, 5, "Paris"),  # and back to EU: another (SKIP TO LAST)
        order("o4", "c2", 40.0, 0, "Toronto"),
        order("o5", "c2", 40.0, 1, "Chicago"),  # same region: no alert
        order("o6", "c3", 40.0, 0, "Rome"),
        order("o7", "c3", 40.0, 11, "Lima"),  # 11 minutes later: outside WITHIN
        order("o8", "c4", 40.0, 0, "Madrid"),
        order("o9", "c4", 40.0, 1, "Atlantis"),  # not one of the platform's locations
        order("o10", "c9", 50.0, 30),  # later orders move the watermark past the rest
    ]
    out = alerts(orders)
    assert [
        (key, v["rule"], v["first_order_id"], v["first_location"], v["order_id"], v["location"])
        for key, v in out
    ] == [
        ("c1", "impossible_travel", "o1", "Berlin", "o2", "Tokyo"),
        ("c1", "impossible_travel", "o2", "Tokyo", "o3", "Paris"),
    ]
    assert all(v["risk"] is None for _, v in out)


@pytest.mark.parametrize(
    ("small", "large", "gap", "expected"),
    [
        (1.0, 1000.0, 0, 1.0),  # a thousandfold jump at once
        (1.0, 1000.0, domain.CARD_TESTING_WITHIN_MS, 0.7),  # at the end of the window
        (10.0, 10.0, 0, 0.3),  # no jump
        (None, 10.0, 0, None),
    ],
)
def test_risk_score(small, large, gap, expected):
    assert risk_score(small, large, gap) == expected


def test_region_of():
    assert [region_of(c) for c in ("Berlin", "Tokyo", "Lima", "Atlantis", None)] == [
        "EU",
        "APAC",
        "LATAM",
        None,
        None,
    ]
