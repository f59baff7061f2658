"""Which joins are regular joins (``regular_join``): those the DSL joins of
``join_steps`` do not run.

A join of two tables is one when it is two streams without a time bound, or a stream or
table with a table that is neither a lookup (stream first, INNER or LEFT, on the table's
key), nor a join on both tables' keys written alike, nor an INNER or LEFT foreign-key
join. A chain of joins is one when its first join is, or a later join is one the chains
of ``joins`` never run. Global tables and ``FOR SYSTEM_TIME AS OF`` keep their path.
The decision reads a copy of the query: ``OnClause`` moves WHERE terms into ON.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from streaming.sql.catalog import TableDef
from streaming.sql.errors import SqlError
from streaming.sql.join_conditions import JoinScope, OnClause, ScopeTable, _conjuncts
from streaming.sql.join_inputs import plain_key


def first_join(compiler: Any, select: exp.Select) -> tuple[exp.Table, exp.Join] | None:
    """The FROM table and the first join of ``select``, or None for other shapes."""
    from_ = select.args.get("from_") or select.args.get("from")
    joins = select.args.get("joins") or []
    if from_ is None or not isinstance(from_.this, exp.Table) or not joins:
        return None
    if not isinstance(joins[0].this, exp.Table):
        return None
    return from_.this, joins[0]


def _scope(compiler: Any, first: exp.Table, join: exp.Join) -> JoinScope:
    left, right = compiler.table(first), compiler.table(join.this)
    return JoinScope(
        (
            ScopeTable(first.alias or left.name, left, ("left",)),
            ScopeTable(join.this.alias or right.name, right, ("right",)),
        ),
        compiler.source,
    )


def _time_bounded(scope: JoinScope, on: exp.Expr | None) -> bool:
    """Whether an ON clause bounds the two streams' times (an interval join): a BETWEEN,
    or an equality of the two time attributes."""
    if on is None:
        return False
    for term in _conjuncts(on):
        if isinstance(term, exp.Between):
            return True
        if isinstance(term, exp.EQ) and all(
            isinstance(c, exp.Column) for c in (term.this, term.expression)
        ):
            try:
                tables = [scope.side_of(c) for c in (term.this, term.expression)]
            except SqlError:
                return False
            if all(
                t.watermark is not None and t.watermark.column == c.name
                for (_, t), c in zip(tables, (term.this, term.expression), strict=True)
            ):
                return True
    return False


def _key_equality(scope: JoinScope, on: exp.Expr | None) -> bool:
    """Whether an ON clause equates a column of each side (a join key)."""
    for term in _conjuncts(on) if on is not None else []:
        if isinstance(term, exp.EQ) and all(
            isinstance(c, exp.Column) for c in (term.this, term.expression)
        ):
            try:
                if scope.side_of(term.this)[0] != scope.side_of(term.expression)[0]:
                    return True
            except SqlError:
                return False
    return False


def is_regular(compiler: Any, select: exp.Select) -> bool:
    """Whether ``select``'s joins are regular joins that the DSL joins of ``join_steps``
    do not run: two streams without a time bound, or a stream or table with a table that
    is neither a lookup (stream first, INNER or LEFT, on the table's key), nor a join on
    both tables' keys, nor an INNER or LEFT foreign-key join. A chain of joins is when
    its first join is, or a later one (``_later_regular``). Global tables and ``FOR
    SYSTEM_TIME AS OF`` keep their own path."""
    if _first_regular(compiler, select):
        return True
    found = first_join(compiler, select)
    if found is None:
        return False
    tables = [compiler.table(found[0]), compiler.table(found[1].this)]
    for join in select.args["joins"][1:]:
        if not isinstance(join.this, exp.Table):
            return False
        if _later_regular(compiler, tables, join):
            return True
        tables.append(compiler.table(join.this))
    return False


def _later_regular(compiler: Any, before: list[TableDef], join: exp.Join) -> bool:
    """Whether a join after the first of a chain is one the DSL joins of ``join_steps``
    never run there: a stream on its right without a time bound (they join streams
    only first, with one), a table on its right whose key no equality names, a RIGHT or FULL join of
    joined rows with a stream in them, or an outer join with conditions besides one
    equality."""
    right = compiler.table(join.this)
    if right.is_global or join.this.args.get("version") is not None:
        return False
    on = join.args.get("on")
    if on is None or join.args.get("using"):
        return False
    terms = _conjuncts(on)
    equalities = [
        t
        for t in terms
        if isinstance(t, exp.EQ) and all(isinstance(c, exp.Column) for c in (t.this, t.expression))
    ]
    if not equalities:
        return False
    side = (join.side or "INNER").upper()
    if not right.is_upsert:
        # with a time bound it is an interval join, which the join path names
        return not any(isinstance(t, exp.Between) for t in terms)
    names_key = any(
        plain_key(right, c.name)
        for t in equalities
        for c in (t.this, t.expression)
        if c.table in ("", join.this.alias or right.name)
    )
    if not names_key:
        return True
    if side in ("RIGHT", "FULL") and any(not t.is_upsert for t in before):
        return True
    return side != "INNER" and len(terms) > 1


def _first_regular(compiler: Any, select: exp.Select) -> bool:
    """Whether the first join of ``select`` is a regular join (see ``is_regular``)."""
    found = first_join(compiler, select)
    if found is None:
        return False
    first, join = found
    left, right = compiler.table(first), compiler.table(join.this)
    if left.is_global or right.is_global or join.this.args.get("version") is not None:
        return False
    copy = select.copy()
    if len(copy.args["joins"]) > 1:
        # a chain is regular when its first join is (the joins after it follow)
        copy.set("joins", copy.args["joins"][:1])
        copy.set("where", None)
    _, copied = first_join(compiler, copy) or (None, join)
    scope = _scope(compiler, first, copied)
    try:
        on = OnClause(scope, copy, copied, compiler.source)
    except SqlError:
        return False  # USING, no ON: the join path names it
    condition = copied.args.get("on")
    if not _key_equality(scope, condition) or _time_bounded(scope, condition):
        return False  # the join path names what is missing, or it is an interval join
    if not left.is_upsert and not right.is_upsert:
        return True
    try:
        equality, bound = on.condition()
    except SqlError:
        return True  # an outer join with further conditions, or on several columns
    if bound is not None:
        return False
    if not left.is_upsert:  # a stream with a table: a lookup join on the table's key
        return not (on.side in ("INNER", "LEFT") and plain_key(right, equality.right))
    if not right.is_upsert:
        return True  # a table with a stream
    if not plain_key(right, equality.right):
        return True
    if plain_key(left, equality.left):  # both keys
        same = left.key_format == right.key_format and (
            left.key_format == "raw" or equality.left == equality.right
        )
        return not same
    return on.side in ("RIGHT", "FULL")  # a foreign-key join is INNER or LEFT
