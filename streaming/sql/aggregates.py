"""Aggregate functions as JSON-serializable accumulators: COUNT, COUNT(DISTINCT), SUM,
AVG, MIN, MAX.

An accumulator is a list with one state per aggregate of the query (a number, ``[sum,
count]`` for AVG, the list of distinct values seen for COUNT(DISTINCT)), so the state
store and its changelog hold plain JSON. NULL arguments are skipped, as in SQL;
``COUNT(*)`` counts rows. AVG returns a DOUBLE. ``merger`` combines two accumulators, as
session windows need when a record bridges two sessions.
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
    if spec.function == "COUNT_DISTINCT":
        return []
    return [0, 0] if spec.function == "AVG" else None


def add(spec: AggregateSpec, state: Any, row: Row) -> Any:
    """The state after one more row."""
    value = 1 if spec.argument is None else spec.argument(row)
    if value is None:
        return state
    if spec.function == "COUNT":
        return state + 1
    if spec.function == "COUNT_DISTINCT":
        # a new list: the accumulator the store holds is never changed in place
        return state if value in state else [*state, value]
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
    if spec.function == "COUNT_DISTINCT":
        return len(state)
    return state


def merge(spec: AggregateSpec, a: Any, b: Any) -> Any:
    """The state of two merged groups of rows (two sessions joined by a record)."""
    if spec.function == "COUNT":
        return a + b
    if spec.function == "COUNT_DISTINCT":
        return [*a, *(v for v in b if v not in a)]
    if spec.function == "AVG":
        return [a[0] + b[0], a[1] + b[1]]
    if a is None or b is None:
        return b if a is None else a
    if spec.function == "SUM":
        return a + b
    return min(a, b) if spec.function == "MIN" else max(a, b)


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


def merger(specs: list[AggregateSpec]) -> Callable[[Any, list[Any], list[Any]], list[Any]]:
    """``Merger(key, a, b)`` for the DSL's session-windowed ``aggregate``."""
    return lambda key, a, b: [merge(spec, x, y) for spec, x, y in zip(specs, a, b, strict=True)]
