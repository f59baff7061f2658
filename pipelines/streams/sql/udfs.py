"""Python functions the platform's SQL applications call (``CREATE FUNCTION ... LANGUAGE
PYTHON`` in their files)."""

from __future__ import annotations

import math

from pipelines import domain

#: how long after a small charge a large one still counts (``fraud.sql``'s WITHIN)
CARD_TESTING_WITHIN_MS = domain.CARD_TESTING_WITHIN_MS


def region_of(location: str | None) -> str | None:
    """The region of one of the platform's locations (``domain.LOCATIONS``), NULL for
    another."""
    return _REGION_OF.get(location) if location is not None else None


_REGION_OF = {city: region for region, cities in domain.LOCATIONS.items() for city in cities}


def risk_score(
    small_amount: float | None, large_amount: float | None, gap_ms: int | None
) -> float | None:
    """How strongly a small charge followed by a large one looks like card testing, from 0
    to 1: mostly the jump (a thousandfold or more is 1), then how soon the large one came
    (at once is 1, at the end of the window 0). NULL if an input is."""
    if small_amount is None or large_amount is None or gap_ms is None:
        return None
    ratio = large_amount / max(small_amount, 0.01)
    jump = min(1.0, math.log10(max(ratio, 1.0)) / 3)
    speed = min(1.0, max(0.0, 1.0 - gap_ms / CARD_TESTING_WITHIN_MS))
    return round(0.7 * jump + 0.3 * speed, 4)
