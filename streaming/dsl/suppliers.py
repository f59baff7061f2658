"""Checks on the processor suppliers users hand to the DSL."""

from __future__ import annotations

from typing import Any


def check_supplier(supplier: Any) -> None:
    """Kafka's ``ApiUtils.checkSupplier``: every task needs its own processor, so a supplier
    must make a new one on every call."""
    if callable(supplier) and supplier() is supplier():
        kind = getattr(supplier, "__qualname__", type(supplier).__qualname__)
        raise ValueError(
            f"{kind} generates single reference. {kind}#get() must return a new object each "
            "time it is called."
        )
