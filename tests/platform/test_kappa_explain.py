"""Kappa's comparison of live and replayed results (``pipelines.streams.kappa``), broker-less:
which differences the records each side dropped as late account for."""

from __future__ import annotations

from pipelines.streams import kappa


def _window(region: str, start: int, cents: int, orders: int) -> tuple[None, dict, int]:
    value = {"region": region, "window_start": start, "revenue_cents": cents, "order_count": orders}
    return (None, value, start)


def _late(region: str, start: int, amount: float, result: str = "revenue_5m") -> dict:
    return {"region": region, "window_start": start, "amount": amount, "result": result}


def test_a_window_that_differs_by_what_one_side_dropped_as_late_is_explained() -> None:
    live = [_window("EU", 0, 1_000, 3), _window("NA", 0, 500, 1)]
    replay = [_window("EU", 0, 750, 2), _window("NA", 0, 400, 1)]
    c = kappa.compare("windowed-revenue", live, replay)
    assert len(c.different) == 2
    # the replay dropped a 2.50 order of EU's window as late; NA's difference has no cause
    kappa.explain("windowed-revenue", c, [], [_late("EU", 0, 2.5), _late("EU", 0, 9.0, "x")])
    assert c.unexplained == [(("NA", 0), (500, 1), (400, 1))]


def test_late_rows_on_both_sides_count_against_each_other() -> None:
    live = [_window("EU", 0, 900, 2)]
    replay = [_window("EU", 0, 1_000, 3)]
    c = kappa.compare("windowed-revenue-sql", live, replay)
    kappa.explain("windowed-revenue-sql", c, [_late("EU", 0, 1.0, "any")], [])
    assert c.unexplained == []
    c = kappa.compare("windowed-revenue-sql", live, replay)
    kappa.explain("windowed-revenue-sql", c, [_late("EU", 0, 2.0, "any")], [])
    assert len(c.unexplained) == 1  # 2.00 dropped, but the windows differ by 1.00


def test_a_burst_is_one_alert_per_customer_and_window_whichever_order_raised_it() -> None:
    def burst(order: str) -> tuple[str, dict, int]:
        alert = {"rule": "rapid_burst", "customer_id": "c1", "window_start": 0, "order_id": order}
        return ("c1", alert, 0)

    high = ("c2", {"rule": "high_value", "customer_id": "c2", "order_id": "o9"}, 0)
    c = kappa.compare("fraud-alerts", [burst("o4"), high], [burst("o5"), high])
    assert (c.equal, c.only_live, c.only_replayed, c.different) == (2, 0, 0, [])


def test_applications_without_late_rows_keep_every_difference() -> None:
    live = [(None, {"order_id": "o1", "customer_known": True, "within_credit_limit": True}, 0)]
    replay = [(None, {"order_id": "o1", "customer_known": True, "within_credit_limit": False}, 0)]
    c = kappa.compare("enriched-orders", live, replay)
    kappa.explain("enriched-orders", c, [], [])
    assert len(c.unexplained) == 1
