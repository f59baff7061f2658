"""Helpers shared by the ported Kafka tests (this module holds no tests)."""

from __future__ import annotations

import inspect


def is_check_supplier_call() -> bool:
    """Kafka's ``StreamsTestUtils.isCheckSupplierCall``: the mock processor suppliers do not
    count the processors ``ApiUtils.checkSupplier`` (``check_supplier`` here) asks for."""
    return any(frame.function == "check_supplier" for frame in inspect.stack()[1:6])
