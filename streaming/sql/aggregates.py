"""Aggregate functions as JSON-serializable accumulators: COUNT, SUM, AVG, MIN, MAX.

An accumulator is a list with one state per aggregate of the query (a number, or
``[sum, count]`` for AVG), so the state store and its changelog hold plain JSON. NULL
arguments are skipped, as in SQL; ``COUNT(*)`` counts rows. AVG returns a DOUBLE.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Row = dict[str, Any]


@dataclass(frozen=True)
class AggregateSpec:
    """One aggregate call: its function, its argument (None for ``COUNT(*)``), its key."""

    function: str
    argument: Callable[[Row], Any] | None
    sql: str


def initial(spec: AggregateSpec) -> Any:
    """The state before any row."""
    if spec.function == "COUNT":
        return 0
    return [0, 0] if spec.function == "AVG" else None


def add(spec: AggregateSpec, state: Any, row: Row) -> Any:
    """The state after one more row."""
    value = 1 if spec.argument is None else spec.argument(row)
    if value is None:
        return state
    if spec.function == "COUNT":
        return state + 1
    if spec.function == "AVG":
        return [state[0] + value, state[1] + 1]
    if state is None:
        return value
    if spec.function == "SUM":
        return state + value
    return min(state, value) if spec.function == "MIN" else max(state, value)


def result(spec: AggregateSpec, state: Any) -> Any:
    """The aggregate's value from its state."""
    if spec.function == "AVG":
        return state[0] / state[1] if state[1] else None
    return state


def initializer(specs: list[AggregateSpec]) -> Callable[[], list[Any]]:
    """``Initializer`` for the DSL's ``aggregate``."""
    return lambda: [initial(spec) for spec in specs]


def aggregator(specs: list[AggregateSpec]) -> Callable[[Any, Row, list[Any]], list[Any]]:
    """``Aggregator(key, row, accumulator)`` for the DSL's ``aggregate``."""
    return lambda key, row, acc: [
        add(spec, state, row) for spec, state in zip(specs, acc, strict=True)
    ]


def results(specs: list[AggregateSpec], acc: list[Any]) -> list[Any]:
    """The aggregates' values from an accumulator."""
    return [result(spec, state) for spec, state in zip(specs, acc, strict=True)]
