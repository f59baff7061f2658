"""Regular (unbounded) joins as Flink runs them: ``FROM l [LEFT | RIGHT | FULL [OUTER]]
JOIN r ON l.a = r.b [AND l.c = r.d ...] [AND <other conditions>]`` over two streams
without a time bound, or a stream or table with a table where the lookup, key and
foreign-key joins (``join_steps``) do not apply (RIGHT or FULL, a table first, a column
that is not the table's key, an outer join with further conditions).

Both sides' rows go, as changes (an append stream's rows are inserts; an upsert table's
records pass ``ChangelogNormalize``, which retracts a key's previous row), through one
repartition topic keyed by the join key to a ``StreamingJoin`` that keeps every row of
both sides (``join_state``). The equalities are the join key; the other ON conditions
decide which rows of a key match (for an outer join, whether a row comes out padded with
NULLs). WHERE filters and the SELECT list projects the joined changes.

The result is a changelog, as Flink's: an INNER join of two append streams only
inserts, so it goes into any sink; any other (an outer join, or a table on either side)
retracts rows it emitted, so its sink needs a PRIMARY KEY (an append-only sink is an
error, as in Flink) and a ``SinkUpsertMaterializer`` turns the changes into the sink
key's final rows. ``SET 'table.exec.state.ttl'`` bounds the state of all three.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlglot import exp
from sqlglot.tokens import TokenType

from streaming import serdes
from streaming.dsl import Named, Repartitioned
from streaming.sql.catalog import TableDef
from streaming.sql.errors import SqlError, error_at, node_offset
from streaming.sql.expressions import NUMERIC, compile_expression
from streaming.sql.join_conditions import JoinScope, OnClause, ScopeTable, _conjuncts
from streaming.sql.join_inputs import plain_key
from streaming.sql.join_state import (
    ChangelogNormalize,
    SinkUpsertMaterializer,
    StreamingJoin,
    change,
)
from streaming.sql.rewrite import Statement
from streaming.state.stores import Stores

#: the preserved sides of each kind of join
OUTER = {
    "INNER": {"left": False, "right": False},
    "LEFT": {"left": True, "right": False},
    "RIGHT": {"left": False, "right": True},
    "FULL": {"left": True, "right": True},
}


def _tables(compiler: Any, select: exp.Select) -> tuple[exp.Table, exp.Join] | None:
    """The FROM table and the one join of ``select``, or None for other shapes."""
    from_ = select.args.get("from_") or select.args.get("from")
    joins = select.args.get("joins") or []
    if from_ is None or not isinstance(from_.this, exp.Table) or len(joins) != 1:
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
    """Whether ``select``'s join is a regular join that the DSL joins of ``join_steps``
    do not run: two streams without a time bound, or a stream or table with a table that
    is neither a lookup (stream first, INNER or LEFT, on the table's key), nor a join on
    both tables' keys, nor an INNER or LEFT foreign-key join. Chains of joins, global
    tables and ``FOR SYSTEM_TIME AS OF`` keep their own path."""
    found = _tables(compiler, select)
    if found is None:
        return False
    first, join = found
    left, right = compiler.table(first), compiler.table(join.this)
    if left.is_global or right.is_global or join.this.args.get("version") is not None:
        return False
    copy = select.copy()
    _, copied = _tables(compiler, copy) or (None, join)
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


def _key_value(value: Any) -> Any:
    """A join column's value as the join key holds it (a whole float as its integer, so
    that an INT column meets a DOUBLE one)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class RegularJoin:
    """Compiles one INSERT (or view) whose query is a regular join (``is_regular``)."""

    def __init__(
        self, compiler: Any, statement: Statement, select: exp.Select, sink: TableDef
    ) -> None:
        self.compiler = compiler
        self.statement = statement
        self.select = select
        self.sink = sink
        self.source = compiler.source
        found = _tables(compiler, select)
        assert found is not None
        self.first, self.join = found
        self.left = compiler.table(self.first)
        self.right = compiler.table(self.join.this)
        self.scope = _scope(compiler, self.first, self.join)
        # reads the kind of join and takes a comma join's equalities from WHERE
        self.side = OnClause(self.scope, select, self.join, self.source).side
        self.outer = OUTER[self.side]
        self.updating = self.side != "INNER" or self.left.is_upsert or self.right.is_upsert

    def error(self, node: exp.Expr | int, message: str) -> SqlError:
        offset = node if isinstance(node, int) else node_offset(node)
        return error_at(self.source, offset, message)

    def why_updating(self) -> str:
        if self.side != "INNER":
            return (
                f"a regular {self.side} join emits a row padded with NULLs and retracts it "
                "when its match arrives"
            )
        table = self.left if self.left.is_upsert else self.right
        return f"a regular join with the table {table.name} retracts rows when it changes"

    def build(self) -> None:
        """The join's topology, writing into the sink."""
        compiler, sink = self.compiler, self.sink
        keys, condition = self.conditions()
        if self.updating:
            if sink.is_view:
                raise self.error(
                    self.join,
                    f"a regular {self.side} join in a view or subquery is not supported yet "
                    f"({self.why_updating()}): INSERT it into a table with a PRIMARY KEY",
                )
            compiler.require_upsert_sink(self.statement, sink, self.why_updating())
        where = compiler.predicate(self.select.args.get("where"), self.scope)
        project = compiler.projection(
            self.select, sink, self.scope, compiler.keyword(self.statement, TokenType.SELECT)
        )
        ttl = compiler.settings.state_ttl_ms
        left = self.changes("left", self.left, [k[0] for k in keys], ttl)
        right = self.changes("right", self.right, [k[1] for k in keys], ttl)
        name = compiler.unique(f"{self.left.name}-{self.right.name}-join")
        stores = (self.store(f"{name}-left"), self.store(f"{name}-right"))
        outer = self.outer
        joined = (
            left.merge(right)
            .repartition(Repartitioned.with_(serdes.Json(), serdes.Json()).with_name(name))
            .process(
                lambda: StreamingJoin(*stores, outer, condition, ttl),
                *stores,
                named=Named.as_(compiler.unique(f"{name}-process")),
            )
        )
        changes = joined.filter(lambda k, v: where(v["row"])).map_values(
            lambda v: change(v["op"], project(v["row"]))
        )
        if not self.updating:
            compiler.write(changes.map(lambda k, v: (sink.key_of(v["row"]), v["row"])), sink)
            return
        materializer = self.store(compiler.unique(f"{sink.name}-upsert-materializer"))
        upserts = (
            changes.select_key(lambda k, v: sink.key_of(v["row"]))
            .repartition(
                Repartitioned.with_(serdes.Json(), serdes.Json()).with_name(
                    compiler.unique(f"{sink.name}-upsert")
                )
            )
            .process(
                lambda: SinkUpsertMaterializer(materializer, ttl),
                materializer,
                named=Named.as_(compiler.unique(f"{sink.name}-materialize")),
            )
        )
        compiler.write(upserts, sink)

    def store(self, name: str) -> str:
        self.compiler.builder.add_state_store(
            Stores.key_value_store_builder(
                Stores.persistent_key_value_store(name), serdes.Json(), serdes.Json()
            )
        )
        return name

    def conditions(self) -> tuple[list[tuple[str, str]], Callable[[Any, Any], bool]]:
        """The (left column, right column) pairs of the ON clause's equalities, the join
        key, and ``(left_row, right_row) -> bool`` of its other conditions (NULL: no
        match)."""
        on = self.join.args.get("on")
        if on is None:
            raise self.error(self.join, "a join needs an equality on a column of each table")
        keys: list[tuple[str, str]] = []
        rest: list[exp.Expr] = []
        for term in _conjuncts(on):
            if (
                isinstance(term, exp.EQ)
                and isinstance(term.this, exp.Column)
                and isinstance(term.expression, exp.Column)
            ):
                a, b = self.scope.side_of(term.this), self.scope.side_of(term.expression)
                if a[0] != b[0]:
                    columns = {a[0]: term.this, b[0]: term.expression}
                    self.check_types(term, columns["left"], columns["right"])
                    keys.append((columns["left"].name, columns["right"].name))
                    continue
            rest.append(term)
        if not keys:
            raise self.error(
                on,
                f"a regular join needs an equality on a column of each table (ON "
                f"{self.scope.left_alias}.x = {self.scope.right_alias}.y): a join without "
                "one is not supported yet",
            )
        if not rest:
            return keys, lambda left, right: True
        compiled = compile_expression(exp.and_(*rest), self.scope)
        if compiled.kind not in ("BOOLEAN", "NULL"):
            raise self.error(rest[0], f"a join condition needs a BOOLEAN, got {compiled.kind}")
        fn = compiled.fn
        return keys, lambda left, right: fn({"left": left, "right": right}) is True

    def check_types(self, node: exp.Expr, left: exp.Column, right: exp.Column) -> None:
        kinds = [self.scope.side_of(c)[1].columns[c.name] for c in (left, right)]
        if kinds[0] != kinds[1] and not set(kinds) <= set(NUMERIC):
            raise self.error(
                node,
                f"type mismatch: join columns {node.sql()} are {kinds[0]} and {kinds[1]}",
            )

    def changes(self, side: str, table: TableDef, columns: list[str], ttl: int | None) -> Any:
        """One side's rows as changes tagged with the side, keyed by the join key."""
        compiler = self.compiler
        source = compiler.source_of(table)
        if table.is_upsert:
            store = self.store(compiler.unique(f"{table.name}-changelog-normalize"))
            rows = source.to_stream().process(
                lambda: ChangelogNormalize(store, ttl),
                store,
                named=Named.as_(compiler.unique(f"{table.name}-normalize")),
            )
        else:
            rows = source.filter(lambda k, v: isinstance(v, dict)).map_values(
                lambda v: change("+", v)
            )
        return rows.map(
            lambda k, v: (
                [_key_value(v["row"].get(c)) for c in columns],
                {"side": side, "op": v["op"], "row": v["row"]},
            )
        )
