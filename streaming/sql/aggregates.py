"""Aggregate functions as JSON-serializable accumulators: COUNT, COUNT(DISTINCT), SUM,
AVG, MIN, MAX.

An accumulator is a list with one state per aggregate of the query (a number, ``[sum,
count]`` for AVG, the list of distinct values seen for COUNT(DISTINCT)), so the state
store and its changelog hold plain JSON. NULL arguments are skipped, as in SQL;
``COUNT(*)`` counts rows. AVG returns a DOUBLE. COUNT(DISTINCT) tells TRUE from 1 (1 and 1.0 are one value). MIN /
MAX of a TIMESTAMP compare instants (epoch ms) and keep the value of the row that has it,
as it was (source text, or epoch ms). ``merger`` combines two accumulators, as
session windows need when a record bridges two sessions.

Over an updating input (a table: rows change and go away) the accumulator must also
take rows back (``subtractor``, for ``KGroupedTable.aggregate``): it starts with the
group's row count (the group is gone, a delete, when it reaches 0), SUM and AVG keep
``[sum, count]``, and MIN, MAX and COUNT(DISTINCT) keep their values with how often each
was seen (``[[value, n], ...]``), so a retracted extreme falls back to the next one.

A Python aggregate function (``functions.AggregateFunction``, function ``PYTHON``) keeps
its own accumulator as the state: ``accumulate`` adds a row, ``retract`` takes one back,
``merge`` joins two sessions, each on a copy (the store's state is never changed in
place); a raise fails the record with a ``FunctionError``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streaming.sql.expressions import sql_equal
from streaming.sql.functions import AggregateFunction, call_failed

Row = dict[str, Any]


@dataclass(frozen=True)
class AggregateSpec:
    """One aggregate call: its function, its argument (None for ``COUNT(*)``), its key."""

    function: str
    argument: Callable[[Row], Any] | None
    sql: str
    #: MIN/MAX: what values are compared by (epoch ms of a TIMESTAMP); None: the values
    order: Callable[[Any], Any] | None = None
    #: PYTHON: the Python aggregate function (``argument`` gives its argument list)
    python: AggregateFunction | None = None


def _python(spec: AggregateSpec, method: str, *args: Any) -> Any:
    """Call the Python aggregate's ``method``; a raise names the function."""
    assert spec.python is not None
    try:
        return getattr(spec.python.impl, method)(*args)
    except Exception as e:
        raise call_failed(f"{spec.python.name}.{method}", args[1:], e) from e


def _python_change(spec: AggregateSpec, state: Any, row: Row, method: str) -> Any:
    """A copy of ``state`` with the row accumulated (or retracted)."""
    assert spec.argument is not None
    state = copy.deepcopy(state)
    _python(spec, method, state, *spec.argument(row))
    return state


def initial(spec: AggregateSpec) -> Any:
    """The state before any row."""
    if spec.python is not None:
        return _python(spec, "create_accumulator")
    if spec.function == "COUNT":
        return 0
    if spec.function == "COUNT_DISTINCT":
        return []
    return [0, 0] if spec.function == "AVG" else None


def add(spec: AggregateSpec, state: Any, row: Row) -> Any:
    """The state after one more row."""
    if spec.python is not None:
        return _python_change(spec, state, row, "accumulate")
    value = 1 if spec.argument is None else spec.argument(row)
    if value is None:
        return state
    if spec.function == "COUNT":
        return state + 1
    if spec.function == "COUNT_DISTINCT":
        # a new list: the accumulator the store holds is never changed in place
        return state if _seen(value, state) else [*state, value]
    if spec.function == "AVG":
        return [state[0] + value, state[1] + 1]
    if spec.order is not None and spec.order(value) is None:
        return state  # an unreadable TIMESTAMP counts as NULL
    if state is None:
        return value
    if spec.function == "SUM":
        return state + value
    return _extreme(spec, state, value)


def _seen(value: Any, values: list[Any]) -> bool:
    """Whether ``value`` is among ``values`` by SQL equality (TRUE is not 1)."""
    return any(sql_equal(value, v) for v in values)


def _extreme(spec: AggregateSpec, a: Any, b: Any) -> Any:
    """MIN or MAX of two values (by ``spec.order`` when set); the earlier one on a tie."""
    order = spec.order or (lambda v: v)
    if spec.function == "MIN":
        return b if order(b) < order(a) else a
    return b if order(b) > order(a) else a


def result(spec: AggregateSpec, state: Any) -> Any:
    """The aggregate's value from its state."""
    if spec.python is not None:
        return _python(spec, "get_value", state)
    if spec.function == "AVG":
        return state[0] / state[1] if state[1] else None
    if spec.function == "COUNT_DISTINCT":
        return len(state)
    return state


def merge(spec: AggregateSpec, a: Any, b: Any) -> Any:
    """The state of two merged groups of rows (two sessions joined by a record)."""
    if spec.python is not None:
        merged = copy.deepcopy(a)
        _python(spec, "merge", merged, [b])
        return merged
    if spec.function == "COUNT":
        return a + b
    if spec.function == "COUNT_DISTINCT":
        return [*a, *(v for v in b if not _seen(v, a))]
    if spec.function == "AVG":
        return [a[0] + b[0], a[1] + b[1]]
    if a is None or b is None:
        return b if a is None else a
    if spec.function == "SUM":
        return a + b
    return _extreme(spec, a, b)


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


# -- over an updating input: accumulators that take rows back --------------------------

_MULTISET = ("MIN", "MAX", "COUNT_DISTINCT")


def _initial_updating(spec: AggregateSpec) -> Any:
    if spec.python is not None:
        return initial(spec)
    if spec.function == "COUNT":
        return 0
    return [] if spec.function in _MULTISET else [0, 0]


def _change(spec: AggregateSpec, state: Any, row: Row, sign: int) -> Any:
    """The state with ``row`` added (``sign`` 1) or taken back (``sign`` -1)."""
    if spec.python is not None:
        return _python_change(spec, state, row, "accumulate" if sign > 0 else "retract")
    value = 1 if spec.argument is None else spec.argument(row)
    if value is None or (spec.order is not None and spec.order(value) is None):
        return state
    if spec.function == "COUNT":
        return state + sign
    if spec.function not in _MULTISET:  # SUM, AVG
        return [state[0] + sign * value, state[1] + sign]
    counts = [[v, n] for v, n in state]  # a new list: the store's state is never changed
    for pair in counts:
        if sql_equal(pair[0], value):
            pair[1] += sign
            return [p for p in counts if p[1] > 0]
    return [*counts, [value, 1]] if sign > 0 else counts


def _result_updating(spec: AggregateSpec, state: Any) -> Any:
    if spec.python is not None:
        return result(spec, state)
    if spec.function == "COUNT":
        return state
    if spec.function == "COUNT_DISTINCT":
        return len(state)
    if spec.function in ("MIN", "MAX"):
        best = None
        for value, _ in state:
            best = value if best is None else _extreme(spec, best, value)
        return best
    if not state[1]:
        return None
    return state[0] / state[1] if spec.function == "AVG" else state[0]


def updating_initializer(specs: list[AggregateSpec]) -> Callable[[], list[Any]]:
    """``Initializer`` of ``KGroupedTable.aggregate``: ``[row count, state, ...]``."""
    return lambda: [0, *(_initial_updating(spec) for spec in specs)]


def adder(specs: list[AggregateSpec]) -> Callable[[Any, Row, list[Any]], list[Any]]:
    """``adder(key, row, accumulator)`` of ``KGroupedTable.aggregate``."""
    return lambda key, row, acc: [
        acc[0] + 1,
        *(_change(spec, state, row, 1) for spec, state in zip(specs, acc[1:], strict=True)),
    ]


def subtractor(specs: list[AggregateSpec]) -> Callable[[Any, Row, list[Any]], list[Any] | None]:
    """``subtractor(key, old row, accumulator)``: None (the group is deleted) when its
    last row goes."""

    def subtract(key: Any, row: Row, acc: list[Any]) -> list[Any] | None:
        if acc[0] <= 1:
            return None
        states = zip(specs, acc[1:], strict=True)
        return [acc[0] - 1, *(_change(spec, state, row, -1) for spec, state in states)]

    return subtract


def updating_results(specs: list[AggregateSpec], acc: list[Any]) -> list[Any]:
    """The aggregates' values from an accumulator of ``updating_initializer``."""
    return [_result_updating(spec, state) for spec, state in zip(specs, acc[1:], strict=True)]
