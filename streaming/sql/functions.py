"""Python functions callable from SQL: scalar (``@udf``), table (``@udtf``) and aggregate
(``@udaf``) functions, in the shape of PyFlink's.

A function is registered by decorating it (the decorators register it for every
``compile``), by ``compile(text, functions={"name": fn})``, or by ``CREATE [TEMPORARY
[SYSTEM]] FUNCTION name AS 'module.attr' LANGUAGE PYTHON`` in the SQL text (``load``).
Type hints give the SQL result types (``int`` BIGINT, ``float`` DOUBLE, ``str`` STRING,
``bool`` BOOLEAN); ``result_type=`` (a SQL type name) overrides them.

- A scalar function is called once per row with its argument values (NULL as ``None``).
- A table function is a generator (or returns an iterable): each item is one row, a tuple
  of its columns (a bare value for one column); ``result_types=`` names the column types.
- An aggregate function is a class (or instance) with ``create_accumulator()``,
  ``accumulate(acc, *args)`` and ``get_value(acc)``, and ``retract(acc, *args)`` to
  aggregate an updating input, ``merge(acc, accs)`` for SESSION windows. The accumulator
  is changed in place, as PyFlink's; it lives in a state store as JSON, so it must be made
  of lists, dicts, strings, numbers, booleans and None.

A function that raises fails its record with a ``FunctionError`` that names the function:
the runtime's processing exception handler decides (``log_and_continue`` skips the record,
and with ``errors.dead.letter.queue.topic.name`` it goes to the dead-letter topic with the
reason in its headers), as for any failing processor.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import typing
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Union

from sqlglot import exp
from sqlglot.errors import ParseError

from streaming.sql.catalog import TYPE_KINDS

_HINT_KINDS: dict[Any, str] = {int: "BIGINT", float: "DOUBLE", str: "STRING", bool: "BOOLEAN"}


class FunctionError(RuntimeError):
    """A Python function called from SQL raised: the record it was called for fails."""


class FunctionDefinitionError(ValueError):
    """A Python function that cannot be used from SQL (no result type, not callable)."""


@dataclass(frozen=True)
class ScalarFunction:
    """A Python function returning one value per call."""

    name: str
    fn: Callable[..., Any]
    result_kind: str

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args)


@dataclass(frozen=True)
class TableFunction:
    """A Python function returning 0..n rows per call, of ``len(result_kinds)`` columns."""

    name: str
    fn: Callable[..., Iterable[Any]]
    result_kinds: tuple[str, ...]

    def __call__(self, *args: Any) -> Iterable[Any]:
        return self.fn(*args)


@dataclass(frozen=True)
class AggregateFunction:
    """A Python aggregate: ``impl`` has create_accumulator, accumulate, get_value (and
    maybe retract, merge)."""

    name: str
    impl: Any
    result_kind: str

    @property
    def retracts(self) -> bool:
        return callable(getattr(self.impl, "retract", None))

    @property
    def merges(self) -> bool:
        return callable(getattr(self.impl, "merge", None))


Function = ScalarFunction | TableFunction | AggregateFunction

#: the functions the decorators registered, by lower-case name
_DECORATED: dict[str, Function] = {}


def sql_kind(type_name: str) -> str:
    """The value kind of a SQL type name such as ``'BIGINT'`` or ``'VARCHAR(10)'``."""
    try:
        data_type = exp.DataType.build(type_name)
    except (ParseError, ValueError):
        raise FunctionDefinitionError(f"unknown SQL type {type_name!r}") from None
    kind = TYPE_KINDS.get(data_type.this.name.upper())
    if kind is None:
        raise FunctionDefinitionError(f"unsupported SQL type {type_name!r}")
    return kind


def hint_kind(hint: Any) -> str | None:
    """The value kind of a Python type hint (``int | None`` is ``int``), None if unknown."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (Union, type(int | None)) and len(args) == 1:
        hint = args[0]
    return _HINT_KINDS.get(hint)


def _return_hint(fn: Any) -> Any:
    try:
        return typing.get_type_hints(fn).get("return")
    except (NameError, TypeError):
        return None


def _scalar_kind(name: str, fn: Callable[..., Any], result_type: str | None) -> str:
    if result_type is not None:
        return sql_kind(result_type)
    kind = hint_kind(_return_hint(fn))
    if kind is None:
        raise FunctionDefinitionError(
            f"function {name} needs a return type hint (int, float, str, bool) or result_type="
        )
    return kind


def _row_kinds(name: str, fn: Callable[..., Any], result_types: Any) -> tuple[str, ...]:
    """A table function's column kinds: ``result_types`` or its ``Iterator[...]`` hint."""
    if result_types is not None:
        types = [result_types] if isinstance(result_types, str) else list(result_types)
        return tuple(sql_kind(t) for t in types)
    hint = _return_hint(fn)
    item = typing.get_args(hint)[0] if typing.get_args(hint) else None
    items = typing.get_args(item) if typing.get_origin(item) is tuple else (item,)
    kinds = tuple(hint_kind(i) for i in items)
    if not kinds or any(k is None for k in kinds):
        raise FunctionDefinitionError(
            f"table function {name} needs a return type hint (Iterator[str], "
            "Iterator[tuple[str, int]]) or result_types="
        )
    return tuple(k for k in kinds if k is not None)


def scalar(
    fn: Callable[..., Any], name: str | None = None, result_type: str | None = None
) -> ScalarFunction:
    """``fn`` as a scalar function (its name, or ``name``)."""
    called: str = name or getattr(fn, "__name__", None) or "function"
    return ScalarFunction(called, fn, _scalar_kind(called, fn, result_type))


def table(
    fn: Callable[..., Any], name: str | None = None, result_types: Any = None
) -> TableFunction:
    """``fn`` as a table function."""
    called: str = name or getattr(fn, "__name__", None) or "function"
    return TableFunction(called, fn, _row_kinds(called, fn, result_types))


def aggregate(
    impl: Any, name: str | None = None, result_type: str | None = None
) -> AggregateFunction:
    """A class (instantiated without arguments) or instance as an aggregate function."""
    instance = impl() if isinstance(impl, type) else impl
    called = name or (impl.__name__ if isinstance(impl, type) else type(impl).__name__)
    for method in ("create_accumulator", "accumulate", "get_value"):
        if not callable(getattr(instance, method, None)):
            raise FunctionDefinitionError(f"aggregate function {called} has no {method}()")
    if result_type is not None:
        kind = sql_kind(result_type)
    else:
        found = hint_kind(_return_hint(instance.get_value))
        if found is None:
            raise FunctionDefinitionError(
                f"aggregate function {called} needs a return type hint on get_value() or "
                "result_type="
            )
        kind = found
    return AggregateFunction(called, instance, kind)


def _decorator(make: Callable[..., Function], fn: Any, **options: Any) -> Any:
    def register(target: Any) -> Any:
        function = make(target, **options)
        _DECORATED[function.name.lower()] = function
        return function

    return register if fn is None else register(fn)


def udf(fn: Any = None, *, name: str | None = None, result_type: str | None = None) -> Any:
    """Decorator: a scalar function callable from SQL by its name (PyFlink's ``@udf``)."""
    return _decorator(scalar, fn, name=name, result_type=result_type)


def udtf(fn: Any = None, *, name: str | None = None, result_types: Any = None) -> Any:
    """Decorator: a table function for ``LATERAL TABLE(name(...))`` (PyFlink's ``@udtf``)."""
    return _decorator(table, fn, name=name, result_types=result_types)


def udaf(cls: Any = None, *, name: str | None = None, result_type: str | None = None) -> Any:
    """Decorator of an aggregate function's class (PyFlink's ``@udaf``)."""
    return _decorator(aggregate, cls, name=name, result_type=result_type)


def as_function(name: str, value: Any) -> Function:
    """What ``functions={name: value}`` or ``CREATE FUNCTION name AS '...'`` registers: a
    decorated function as it is; a generator function as a table function; a class (or
    instance) with ``accumulate`` as an aggregate function; any other function as a
    scalar function."""
    if isinstance(value, ScalarFunction | TableFunction | AggregateFunction):
        return value
    if callable(getattr(value, "accumulate", None)):
        return aggregate(value, name=name)
    if inspect.isgeneratorfunction(value):
        return table(value, name=name)
    if inspect.isclass(value) or not callable(value):
        raise FunctionDefinitionError(
            f"{name} is not a function (a {type(value).__name__}): give a function, a "
            "generator function or an aggregate function's class"
        )
    return scalar(value, name=name)


def load(name: str, path: str) -> Function:
    """The function at ``'module.attr'`` (``CREATE FUNCTION name AS 'module.attr'``)."""
    module_name, _, attr = path.rpartition(".")
    if not module_name:
        raise FunctionDefinitionError(f"'{path}' is not a module path: write 'module.function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise FunctionDefinitionError(f"cannot import module {module_name}: {e}") from None
    if not hasattr(module, attr):
        raise FunctionDefinitionError(f"module {module_name} has no attribute {attr}")
    return as_function(name, getattr(module, attr))


class Functions:
    """The functions one compilation can call: the decorated ones, those passed to
    ``compile`` and those its statements create."""

    def __init__(self, given: dict[str, Any] | None = None) -> None:
        self._by_name: dict[str, Function] = dict(_DECORATED)
        for name, value in (given or {}).items():
            self.add(name, as_function(name, value))

    def add(self, name: str, function: Function) -> None:
        self._by_name[name.lower()] = function

    def get(self, name: str) -> Function | None:
        return self._by_name.get(name.lower())

    def scalars(self) -> dict[str, ScalarFunction]:
        """The scalar functions, by lower-case name."""
        return {n: f for n, f in self._by_name.items() if isinstance(f, ScalarFunction)}


#: the functions of the compilation under way (expressions look calls up here)
_ACTIVE: ContextVar[Functions | None] = ContextVar("sql_functions", default=None)


@contextlib.contextmanager
def active(functions: Functions) -> Iterator[None]:
    """Make ``functions`` the ones SQL calls resolve to while compiling."""
    token = _ACTIVE.set(functions)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def lookup(name: str) -> Function | None:
    """The function called ``name`` in the compilation under way (decorated ones outside)."""
    functions = _ACTIVE.get()
    return functions.get(name) if functions is not None else _DECORATED.get(name.lower())


def is_aggregate_call(node: exp.Expr) -> bool:
    """Whether ``node`` is a call of a Python aggregate function."""
    return isinstance(node, exp.Anonymous) and isinstance(lookup(node.name), AggregateFunction)


def has_aggregate(node: exp.Expr) -> bool:
    """Whether ``node`` holds an aggregate: a built-in one or a Python one."""
    return node.find(exp.AggFunc) is not None or any(
        is_aggregate_call(n) for n in node.find_all(exp.Anonymous)
    )


def check_arity(function: Callable[..., Any], count: int, leading: int = 0) -> str | None:
    """Why ``function`` cannot take ``count`` arguments (after ``leading`` ones such as
    the accumulator), None if it can."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None  # a builtin without a signature: it says so when called
    try:
        signature.bind(*([None] * (leading + count)))
    except TypeError:
        return f"takes ({', '.join(list(signature.parameters)[leading:])}), not {count} arguments"
    return None


def call_failed(name: str, args: Any, error: Exception) -> FunctionError:
    """The error of a record whose call of ``name`` raised ``error``."""
    return FunctionError(f"function {name}{tuple(args)!r} raised {type(error).__name__}: {error}")
