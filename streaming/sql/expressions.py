"""SQL expression -> Python callable over a row, with its value kind checked at compile time.

``compile_expression(node, scope)`` returns ``Compiled(fn, kind)``: ``fn(row)`` evaluates
the expression over ``row`` (a dict), ``kind`` is one of STRING, BIGINT, DOUBLE, BOOLEAN,
TIMESTAMP or NULL (unknown). A ``Scope`` resolves column names, aggregates and window
functions, so the same compiler serves rows of a source table and rows after GROUP BY.

NULL follows SQL: operators and functions of NULL give NULL, AND/OR are three-valued, a
WHERE that is NULL drops the row. ``/`` of two integers truncates and ``%`` keeps the
dividend's sign (as in Flink); a comparison with a TIMESTAMP compares epoch ms (window
bounds are ms, source columns text); CASE tells TRUE from 1. A CAST
that cannot convert gives NULL (Flink's TRY_CAST; a stream job should not stop on one
bad row).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, cast

from sqlglot import exp

from streaming.sql import builtins, functions
from streaming.sql.catalog import type_kind
from streaming.sql.errors import SqlError, error_at, node_offset
from streaming.sql.timestamps import parse_timestamp

Row = dict[str, Any]
NUMERIC = ("BIGINT", "DOUBLE")


@dataclass(frozen=True)
class Compiled:
    """An evaluator ``fn(row) -> value`` and the kind of value it returns."""

    fn: Callable[[Row], Any]
    kind: str


class Scope(Protocol):
    """What column names, aggregates and window functions mean where an expression is."""

    @property
    def source(self) -> str: ...

    def column(self, node: exp.Column) -> Compiled: ...

    def aggregate(self, node: exp.AggFunc) -> Compiled: ...

    def window_function(self, node: exp.Anonymous) -> Compiled: ...


def fail(scope: Scope, node: exp.Expr, message: str) -> SqlError:
    """A ``SqlError`` at ``node`` (at the nearest enclosing node with a position when
    sqlglot kept none for it, as for ``CURRENT_TIMESTAMP``)."""
    at: exp.Expr | None = node
    while at is not None and node_offset(at, -1) < 0:
        at = at.parent
    return error_at(scope.source, node_offset(at) if at is not None else 0, message)


def compile_expression(node: exp.Expr, scope: Scope) -> Compiled:
    """Compile ``node`` in ``scope`` (raises ``SqlError`` for what is unknown or wrong)."""
    group_key = getattr(scope, "group_key", None)  # after GROUP BY an expression
    if group_key is not None and not isinstance(node, exp.Column):
        from_key = group_key(node)
        if from_key is not None:
            return cast(Compiled, from_key)
    if isinstance(node, exp.Func) and not isinstance(node, exp.Anonymous | exp.AggFunc):
        # a Python scalar function named as a function sqlglot knows (SPLIT, REVERSE), or
        # a built-in one sqlglot parses to a node of its own (HOUR, REGEXP_EXTRACT)
        function = functions.lookup(node.sql_name()) or builtins.lookup(node.sql_name())
        if isinstance(function, functions.ScalarFunction):
            return _python_call(_as_call(node), function, scope)
    for types, handler in _HANDLERS:
        if isinstance(node, types):
            return handler(node, scope)
    raise fail(scope, node, f"unsupported expression {node.sql()}")


def _literal(node: exp.Literal, scope: Scope) -> Compiled:
    if node.is_string:
        text = node.this
        return Compiled(lambda row: text, "STRING")
    number = float(node.this) if any(c in node.this for c in ".eE") else int(node.this)
    return Compiled(lambda row: number, "DOUBLE" if isinstance(number, float) else "BIGINT")


def _constant(node: exp.Expr, scope: Scope) -> Compiled:
    if isinstance(node, exp.Boolean):
        truth = bool(node.this)
        return Compiled(lambda row: truth, "BOOLEAN")
    return Compiled(lambda row: None, "NULL")


def _numeric(compiled: Compiled, node: exp.Expr, scope: Scope, what: str) -> None:
    if compiled.kind not in (*NUMERIC, "NULL"):
        raise fail(
            scope, node, f"type mismatch: {what} needs numbers, {node.sql()} is {compiled.kind}"
        )


def _divide(a: Any, b: Any) -> Any:
    if b == 0:
        return None
    if isinstance(a, int) and isinstance(b, int):
        quotient = abs(a) // abs(b)
        return quotient if (a >= 0) == (b >= 0) else -quotient
    return a / b


def _remainder(a: Any, b: Any) -> Any:
    """``a % b`` as Flink/Java computes it: truncated, with the sign of ``a`` (-7 % 3 is
    -1); NULL for a zero divisor, as ``/``."""
    if b == 0:
        return None
    if isinstance(a, int) and isinstance(b, int):
        remainder = abs(a) % abs(b)
        return remainder if a >= 0 else -remainder
    return math.fmod(a, b)


_ARITHMETIC: dict[type, tuple[str, Callable[[Any, Any], Any]]] = {
    exp.Add: ("+", operator.add),
    exp.Sub: ("-", operator.sub),
    exp.Mul: ("*", operator.mul),
    exp.Div: ("/", _divide),
    exp.Mod: ("%", _remainder),
}


def _arithmetic(node: exp.Binary, scope: Scope) -> Compiled:
    symbol, op = _ARITHMETIC[type(node)]
    if isinstance(node, exp.Add | exp.Sub) and isinstance(node.expression, exp.Interval):
        return _shifted_time(node, scope)
    left, right = compile_expression(node.this, scope), compile_expression(node.expression, scope)
    _numeric(left, node.this, scope, symbol)
    _numeric(right, node.expression, scope, symbol)
    kind = "BIGINT" if left.kind == right.kind == "BIGINT" else "DOUBLE"
    lf, rf = left.fn, right.fn

    def evaluate(row: Row) -> Any:
        a, b = lf(row), rf(row)
        return None if a is None or b is None else op(a, b)

    return Compiled(evaluate, kind)


def _shifted_time(node: exp.Add | exp.Sub, scope: Scope) -> Compiled:
    """``ts + INTERVAL ...`` / ``ts - INTERVAL ...``: a TIMESTAMP, as epoch ms."""
    from streaming.sql.rewrite import interval_ms

    time = compile_expression(node.this, scope)
    if time.kind not in ("TIMESTAMP", "NULL"):
        raise fail(scope, node, f"type mismatch: {node.sql()} adds an INTERVAL to a {time.kind}")
    shift = interval_ms(node.expression, scope.source, node_offset(node))
    shift = -shift if isinstance(node, exp.Sub) else shift
    millis = as_epoch_ms(time, node.this)
    return Compiled(lambda row: None if (t := millis(row)) is None else t + shift, "TIMESTAMP")


def _between(node: exp.Between, scope: Scope) -> Compiled:
    """``x BETWEEN low AND high``: ``x >= low AND x <= high``."""
    low = exp.GTE(this=node.this.copy(), expression=node.args["low"].copy())
    high = exp.LTE(this=node.this.copy(), expression=node.args["high"].copy())
    return compile_expression(exp.And(this=low, expression=high), scope)


def _negate(node: exp.Neg, scope: Scope) -> Compiled:
    inner = compile_expression(node.this, scope)
    _numeric(inner, node.this, scope, "-")
    fn = inner.fn
    return Compiled(lambda row: None if (v := fn(row)) is None else -v, inner.kind)


_COMPARISON: dict[type, Callable[[Any, Any], bool]] = {
    exp.EQ: operator.eq,
    exp.NEQ: operator.ne,
    exp.GT: operator.gt,
    exp.GTE: operator.ge,
    exp.LT: operator.lt,
    exp.LTE: operator.le,
}


def _comparable(left: Compiled, right: Compiled, node: exp.Expr, scope: Scope) -> None:
    kinds = {left.kind, right.kind} - {"NULL"}
    if len(kinds) > 1 and not kinds <= set(NUMERIC) and not kinds <= {"STRING", "TIMESTAMP"}:
        raise fail(
            scope,
            node,
            f"type mismatch: cannot compare {left.kind} with {right.kind} in {node.sql()}",
        )


def is_constant(node: exp.Expr) -> bool:
    """Whether ``node`` reads nothing of a row (a literal, or operators of literals)."""
    return node.find(exp.Column, exp.AggFunc, exp.Anonymous) is None


def as_epoch_ms(compiled: Compiled, node: exp.Expr) -> Callable[[Row], Any]:
    """``compiled``'s values as epoch ms (``parse_timestamp``; NULL when unreadable): a
    window bound is epoch ms, a source TIMESTAMP column holds JSON text (or ms). A
    constant is converted once, here."""
    fn = compiled.fn
    if is_constant(node):
        millis = parse_timestamp(fn({}))
        return lambda row: millis
    return lambda row: parse_timestamp(fn(row))


def _comparison(node: exp.Binary, scope: Scope) -> Compiled:
    op = _COMPARISON[type(node)]
    left, right = compile_expression(node.this, scope), compile_expression(node.expression, scope)
    _comparable(left, right, node, scope)
    lf, rf = left.fn, right.fn
    if "TIMESTAMP" in (left.kind, right.kind):
        # compare instants, not text (or int with text)
        lf, rf = as_epoch_ms(left, node.this), as_epoch_ms(right, node.expression)

    def evaluate(row: Row) -> Any:
        a, b = lf(row), rf(row)
        return None if a is None or b is None else op(a, b)

    return Compiled(evaluate, "BOOLEAN")


def _boolean(compiled: Compiled, node: exp.Expr, scope: Scope, what: str) -> None:
    if compiled.kind not in ("BOOLEAN", "NULL"):
        raise fail(
            scope, node, f"type mismatch: {what} needs a BOOLEAN, {node.sql()} is {compiled.kind}"
        )


def _logic(node: exp.Connector, scope: Scope) -> Compiled:
    left, right = compile_expression(node.this, scope), compile_expression(node.expression, scope)
    word = "AND" if isinstance(node, exp.And) else "OR"
    _boolean(left, node.this, scope, word)
    _boolean(right, node.expression, scope, word)
    lf, rf = left.fn, right.fn
    decisive = word == "OR"  # the value that decides the result alone

    def evaluate(row: Row) -> Any:
        a, b = lf(row), rf(row)
        if a is decisive or b is decisive:
            return decisive
        return None if a is None or b is None else not decisive

    return Compiled(evaluate, "BOOLEAN")


def _not(node: exp.Not, scope: Scope) -> Compiled:
    inner = compile_expression(node.this, scope)
    _boolean(inner, node.this, scope, "NOT")
    fn = inner.fn
    return Compiled(lambda row: None if (v := fn(row)) is None else not v, "BOOLEAN")


def _is_null(node: exp.Is, scope: Scope) -> Compiled:
    if not isinstance(node.expression, exp.Null):
        raise fail(scope, node, f"unsupported expression {node.sql()}")
    fn = compile_expression(node.this, scope).fn
    return Compiled(lambda row: fn(row) is None, "BOOLEAN")


def _in(node: exp.In, scope: Scope) -> Compiled:
    """``x IN (a, b, ...)`` over a list of expressions: NULL when ``x`` is NULL, or when
    nothing matches and a NULL is in the list (SQL's three-valued logic)."""
    if node.args.get("query") is not None or not node.expressions:
        raise fail(scope, node, f"IN with a subquery is not supported yet: {node.sql()}")
    subject = compile_expression(node.this, scope)
    options = [compile_expression(option, scope) for option in node.expressions]
    for option, option_node in zip(options, node.expressions, strict=True):
        _comparable(subject, option, option_node, scope)
    subject_fn, option_fns = subject.fn, [option.fn for option in options]

    def evaluate(row: Row) -> Any:
        value = subject_fn(row)
        if value is None:
            return None
        values = [fn(row) for fn in option_fns]
        if any(sql_equal(value, v) for v in values if v is not None):
            return True
        return None if None in values else False

    return Compiled(evaluate, "BOOLEAN")


def _paren(node: exp.Paren, scope: Scope) -> Compiled:
    return compile_expression(node.this, scope)


def _case(node: exp.Case, scope: Scope) -> Compiled:
    subject = compile_expression(node.this, scope) if node.this else None
    branches = []
    kinds = set()
    for branch in node.args.get("ifs") or []:
        condition = compile_expression(branch.this, scope)
        if subject is None:
            _boolean(condition, branch.this, scope, "WHEN")
        result = compile_expression(branch.args["true"], scope)
        kinds.add(result.kind)
        branches.append((condition.fn, result.fn))
    default = compile_expression(node.args["default"], scope) if node.args.get("default") else None
    if default is not None:
        kinds.add(default.kind)
    default_fn = default.fn if default else (lambda row: None)
    subject_fn = subject.fn if subject else None

    def evaluate(row: Row) -> Any:
        value = subject_fn(row) if subject_fn else True
        for condition, result in branches:
            if sql_equal(condition(row), value) and (subject_fn is None or value is not None):
                return result(row)
        return default_fn(row)

    return Compiled(evaluate, _common_kind(kinds))


def _if(node: exp.If, scope: Scope) -> Compiled:
    """``IF(condition, then, else)`` (Flink's): the CASE of one branch."""
    branch = exp.If(this=node.this, true=node.args["true"])
    return _case(exp.Case(ifs=[branch], default=node.args.get("false")), scope)


def sql_equal(a: Any, b: Any) -> bool:
    """``a = b`` with SQL types: a BOOLEAN equals only a BOOLEAN (Python's ``True == 1``
    does not hold); 1 and 1.0 are equal numbers."""
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    return bool(a == b)


def _common_kind(kinds: set[str]) -> str:
    kinds = kinds - {"NULL"}
    if not kinds:
        return "NULL"
    if kinds <= set(NUMERIC):
        return "DOUBLE" if "DOUBLE" in kinds else "BIGINT"
    return kinds.pop() if len(kinds) == 1 else "NULL"


def _cast_to(kind: str) -> Callable[[Any], Any]:
    def to_string(v: Any) -> str:
        return ("TRUE" if v else "FALSE") if isinstance(v, bool) else str(v)

    def to_int(v: Any) -> int:
        return int(float(v)) if isinstance(v, str) else int(v)

    def to_bool(v: Any) -> bool:
        if isinstance(v, str):
            if v.strip().lower() not in ("true", "false"):
                raise ValueError(v)
            return v.strip().lower() == "true"
        return bool(v)

    def identity(v: Any) -> Any:
        return v

    converters: dict[str, Callable[[Any], Any]] = {
        "STRING": to_string,
        "BIGINT": to_int,
        "DOUBLE": float,
        "BOOLEAN": to_bool,
    }
    return converters.get(kind, identity)


def _cast(node: exp.Cast, scope: Scope) -> Compiled:
    inner = compile_expression(node.this, scope)
    kind = type_kind(node.to, scope.source)
    convert, fn = _cast_to(kind), inner.fn

    def evaluate(row: Row) -> Any:
        value = fn(row)
        if value is None:
            return None
        try:
            return convert(value)
        except (TypeError, ValueError):
            return None

    return Compiled(evaluate, kind)


def _coalesce(node: exp.Coalesce, scope: Scope) -> Compiled:
    parts = [compile_expression(e, scope) for e in [node.this, *node.expressions]]
    fns = [p.fn for p in parts]

    def evaluate(row: Row) -> Any:
        for fn in fns:
            value = fn(row)
            if value is not None:
                return value
        return None

    return Compiled(evaluate, _common_kind({p.kind for p in parts}))


def _string_arg(node: exp.Expr, scope: Scope, what: str) -> Compiled:
    compiled = compile_expression(node, scope)
    if compiled.kind not in ("STRING", "NULL"):
        raise fail(
            scope, node, f"type mismatch: {what} needs a STRING, {node.sql()} is {compiled.kind}"
        )
    return compiled


def _case_change(node: exp.Func, scope: Scope) -> Compiled:
    name = "UPPER" if isinstance(node, exp.Upper) else "LOWER"
    fn = _string_arg(node.this, scope, name).fn
    method = str.upper if name == "UPPER" else str.lower
    return Compiled(lambda row: None if (v := fn(row)) is None else method(v), "STRING")


def _concat(node: exp.Expr, scope: Scope) -> Compiled:
    args = [node.this, node.expression] if isinstance(node, exp.DPipe) else node.expressions
    convert = _cast_to("STRING")
    fns = [compile_expression(a, scope).fn for a in args]

    def evaluate(row: Row) -> Any:
        values = [fn(row) for fn in fns]
        return None if any(v is None for v in values) else "".join(convert(v) for v in values)

    return Compiled(evaluate, "STRING")


def _substring(node: exp.Substring, scope: Scope) -> Compiled:
    text = _string_arg(node.this, scope, "SUBSTRING").fn
    start = compile_expression(node.args["start"], scope) if node.args.get("start") else None
    length = compile_expression(node.args["length"], scope) if node.args.get("length") else None
    for part, arg in ((start, "start"), (length, "length")):
        if part is not None:
            _numeric(part, node.args[arg], scope, "SUBSTRING")
    start_fn = start.fn if start else (lambda row: 1)
    length_fn = length.fn if length else (lambda row: -1)

    def evaluate(row: Row) -> Any:
        value, first, count = text(row), start_fn(row), length_fn(row)
        if value is None or first is None or count is None:
            return None
        begin = max(int(first) - 1, 0)
        return value[begin:] if count < 0 else value[begin : begin + int(count)]

    return Compiled(evaluate, "STRING")


def _length(node: exp.Length, scope: Scope) -> Compiled:
    fn = _string_arg(node.this, scope, "CHAR_LENGTH").fn
    return Compiled(lambda row: None if (v := fn(row)) is None else len(v), "BIGINT")


def _trim(node: exp.Trim, scope: Scope) -> Compiled:
    fn = _string_arg(node.this, scope, "TRIM").fn
    return Compiled(lambda row: None if (v := fn(row)) is None else v.strip(), "STRING")


def _column(node: exp.Column, scope: Scope) -> Compiled:
    return scope.column(node)


def _aggregate(node: exp.AggFunc, scope: Scope) -> Compiled:
    return scope.aggregate(node)


def _filtered_aggregate(node: exp.Filter, scope: Scope) -> Compiled:
    """``agg(x) FILTER (WHERE c)`` as ``agg(CASE WHEN c THEN x END)`` (``COUNT(*)``:
    ``COUNT(CASE WHEN c THEN 1 END)``): the aggregates skip the NULL of a row that fails
    ``c``, as a filtered aggregate skips the row."""
    aggregate, where = node.this, node.expression
    if not isinstance(aggregate, exp.Count | exp.Sum | exp.Avg | exp.Min | exp.Max):
        raise fail(scope, node, f"FILTER on {aggregate.sql()} is not supported yet")
    condition = where.this if isinstance(where, exp.Where) else where
    rewritten = aggregate.copy()
    argument = rewritten.this
    distinct = isinstance(argument, exp.Distinct)
    value = argument.expressions[0] if distinct and argument.expressions else argument
    if value is None or isinstance(value, exp.Star):
        value = exp.Literal.number(1)
    case = exp.Case(ifs=[exp.If(this=condition.copy(), true=value.copy())])
    if distinct:
        argument.set("expressions", [case])
    else:
        rewritten.set("this", case)
    rewritten.parent = node.parent
    return scope.aggregate(rewritten)


def _anonymous(node: exp.Anonymous, scope: Scope) -> Compiled:
    function = functions.lookup(node.name) or builtins.lookup(node.name)
    if isinstance(function, functions.AggregateFunction):
        return scope.aggregate(node)  # type: ignore[arg-type]  # GroupScope takes it
    if isinstance(function, functions.TableFunction):
        raise fail(
            scope, node, f"{function.name} is a table function: call it in LATERAL TABLE(...)"
        )
    if isinstance(function, functions.ScalarFunction):
        return _python_call(node, function, scope)
    if node.name.upper() == "PROCTIME":
        raise fail(
            scope,
            node,
            "PROCTIME() in a query is not supported yet: declare the processing time as a "
            "computed column of the table (p AS PROCTIME())",
        )
    return scope.window_function(node)


def _as_call(node: exp.Func) -> exp.Anonymous:
    """``node`` as a plain call of its name with its arguments in order (positions kept)."""
    args: list[exp.Expr] = []
    for value in node.args.values():
        args.extend(v for v in (value if isinstance(value, list) else [value]) if v is not None)
    call = exp.Anonymous(this=node.sql_name(), expressions=args)
    call.parent = node.parent
    return call


def _python_call(node: exp.Anonymous, function: functions.ScalarFunction, scope: Scope) -> Compiled:
    """A call of a Python scalar function: its arguments evaluated, then the function; a
    raise fails the record with a ``FunctionError`` naming the function."""
    fns = [compile_expression(arg, scope).fn for arg in node.expressions]
    wrong = functions.check_arity(function.fn, len(fns))
    if wrong is not None:
        raise fail(scope, node, f"function {function.name} {wrong}")
    call, name = function.fn, function.name

    def evaluate(row: Row) -> Any:
        args = [fn(row) for fn in fns]
        try:
            return call(*args)
        except Exception as e:
            raise functions.call_failed(name, args, e) from e

    return Compiled(evaluate, function.result_kind)


_HANDLERS: list[tuple[Any, Callable[[Any, Scope], Compiled]]] = [
    (exp.Column, _column),
    (exp.Literal, _literal),
    ((exp.Boolean, exp.Null), _constant),
    (exp.Paren, _paren),
    (tuple(_ARITHMETIC), _arithmetic),
    (exp.Neg, _negate),
    (tuple(_COMPARISON), _comparison),
    ((exp.And, exp.Or), _logic),
    (exp.Not, _not),
    (exp.Is, _is_null),
    (exp.In, _in),
    (exp.Case, _case),
    (exp.If, _if),
    (exp.Between, _between),
    (exp.Cast, _cast),
    (exp.Coalesce, _coalesce),
    ((exp.Upper, exp.Lower), _case_change),
    ((exp.Concat, exp.DPipe), _concat),
    (exp.Substring, _substring),
    (exp.Length, _length),
    (exp.Trim, _trim),
    ((exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max), _aggregate),
    (exp.Filter, _filtered_aggregate),
    (exp.Anonymous, _anonymous),
]
