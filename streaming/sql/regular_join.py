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
from dataclasses import dataclass, replace
from typing import Any

from sqlglot import exp
from sqlglot.tokens import TokenType

from streaming import serdes
from streaming.dsl import Named, Repartitioned
from streaming.sql.catalog import TableDef
from streaming.sql.errors import SqlError, error_at, node_offset
from streaming.sql.expressions import NUMERIC, compile_expression
from streaming.sql.join_conditions import (
    JoinScope,
    OnClause,
    ScopeTable,
    _conjuncts,
    read_path,
)
from streaming.sql.join_inputs import plain_key
from streaming.sql.join_state import (
    ChangelogNormalize,
    CountOccurrences,
    SinkUpsertMaterializer,
    StreamingJoin,
    change,
)
from streaming.sql.rewrite import Statement
from streaming.sql.settings import state_ttl_hint
from streaming.state.stores import Stores

#: the hidden column of an updating join's view: which copy of its row a row is
OCCURRENCE = "$occurrence"

#: the preserved sides of each kind of join
OUTER = {
    "INNER": {"left": False, "right": False},
    "LEFT": {"left": True, "right": False},
    "RIGHT": {"left": False, "right": True},
    "FULL": {"left": True, "right": True},
}


def _tables(compiler: Any, select: exp.Select) -> tuple[exp.Table, exp.Join] | None:
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
    found = _tables(compiler, select)
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
    found = _tables(compiler, select)
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


def refuse_state_ttl_hint(select: exp.Select, source: str) -> None:
    """A STATE_TTL hint on a join that is not a regular join is an error: the state of
    the DSL's joins is bounded by their windows or tables."""
    hint = select.args.get("hint")
    if hint is not None:
        raise error_at(
            source,
            node_offset(hint, node_offset(select)),
            "STATE_TTL applies to regular joins here (this join is a lookup, interval, "
            "temporal or key join, whose state its windows or tables bound)",
        )


def _key_value(value: Any) -> Any:
    """A join column's value as the join key holds it (a whole float as its integer, so
    that an INT column meets a DOUBLE one)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


@dataclass(frozen=True)
class JoinedChanges:
    """The changes of one table, or of the joins so far, and where each table's row sits
    in their rows (``ScopeTable.path``)."""

    changes: Any
    tables: tuple[ScopeTable, ...]
    updating: bool
    #: the state TTL of this input's side of the next join
    ttl_ms: int | None


class RegularJoin:
    """Compiles one INSERT (or view) whose query is a regular join (``is_regular``): a
    chain ``FROM a JOIN b ON ... JOIN c ON ...`` is left-deep, each join's changes the
    left input of the next (rows nested as ``JoinScope`` reads them)."""

    def __init__(
        self, compiler: Any, statement: Statement, select: exp.Select, sink: TableDef
    ) -> None:
        self.compiler = compiler
        self.statement = statement
        self.select = select
        self.sink = sink
        self.source = compiler.source
        found = _tables(compiler, select)
        assert found is not None  # is_regular said so
        self.first: exp.Table = found[0]
        self.joins: list[exp.Join] = select.args["joins"]
        self.ttl = compiler.settings.state_ttl_ms
        aliases = [self.first.alias or self.first.name]
        names = {aliases[0], self.first.name}
        for join in self.joins:
            if not isinstance(join.this, exp.Table):
                raise self.error(join, "a join needs a table on each side")
            table = compiler.table(join.this)
            if table.is_global or join.this.args.get("version") is not None:
                raise self.error(
                    join.this,
                    f"{table.name}: a global table or FOR SYSTEM_TIME AS OF after a regular "
                    "join is not supported yet",
                )
            alias = join.this.alias or table.name
            if alias in aliases:
                raise self.error(join.this, f"both tables are called {alias}")
            aliases.append(alias)
            names.update((alias, table.name))
        #: the STATE_TTL hint's TTL of each input it names (by alias or table name)
        self.hinted = state_ttl_hint(select, self.source)
        for name, (_, at) in self.hinted.items():
            if name not in names:
                raise self.error(
                    at,
                    f"STATE_TTL names {name}, which is no input of the join "
                    f"({', '.join(sorted(names))})",
                )
        #: (kind of join, why its result is updating or None), one per join
        self.kinds: list[tuple[str, str | None]] = []

    def error(self, node: exp.Expr | int, message: str) -> SqlError:
        offset = node if isinstance(node, int) else node_offset(node)
        return error_at(self.source, offset, message)

    def ttl_of(self, node: exp.Table, table: TableDef) -> int | None:
        """The state TTL of a table's side of a join: its STATE_TTL hint (by alias, else
        by name), else ``'table.exec.state.ttl'``."""
        for name in (node.alias or table.name, table.name):
            if name in self.hinted:
                return self.hinted[name][0]
        return self.ttl

    def build(self) -> None:
        """The joins' topology, writing into the sink."""
        compiler, sink = self.compiler, self.sink
        table = compiler.table(self.first)
        alias = self.first.alias or table.name
        first_ttl = self.ttl_of(self.first, table)
        current = JoinedChanges(
            self.table_changes(table, first_ttl),
            (ScopeTable(alias, table, ()),),
            table.is_upsert,
            first_ttl,
        )
        scope: JoinScope | None = None
        for join in self.joins:
            current, scope = self.step(current, join)
        assert scope is not None
        where = compiler.predicate(self.select.args.get("where"), scope)
        project = compiler.projection(
            self.select, sink, scope, compiler.keyword(self.statement, TokenType.SELECT)
        )
        changes = current.changes.filter(lambda k, v: where(v["row"])).map_values(
            lambda v: change(v["op"], project(v["row"]))
        )
        if not current.updating:
            compiler.write(changes.map(lambda k, v: (sink.key_of(v["row"]), v["row"])), sink)
            return
        if sink.is_view:
            self.updating_view(changes)
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
                lambda: SinkUpsertMaterializer(materializer, self.ttl),
                materializer,
                named=Named.as_(compiler.unique(f"{sink.name}-materialize")),
            )
        )
        compiler.write(upserts, sink)

    def updating_view(self, changes: Any) -> None:
        """An updating join's changes as the rows of the view (or subquery) ``sink``: an
        upsert view keyed by every column and the row's occurrence (a hidden
        ``OCCURRENCE`` column), so each copy of a row is a row of its own that a
        retraction deletes (``CountOccurrences``)."""
        compiler, sink = self.compiler, self.sink
        columns = tuple(sink.columns)
        view = replace(
            sink,
            columns={**sink.columns, OCCURRENCE: "BIGINT"},
            primary_key=(*columns, OCCURRENCE),
            key_fields=(*columns, OCCURRENCE),
            key_format="json",
            watermark=None,
        )
        compiler.tables[sink.name] = view
        store = self.store(compiler.unique(f"{sink.name}-occurrences"))
        ttl = self.ttl
        rows = (
            changes.select_key(lambda k, v: [v["row"].get(c) for c in columns])
            .repartition(
                Repartitioned.with_(serdes.Json(), serdes.Json()).with_name(
                    compiler.unique(f"{sink.name}-occurrences")
                )
            )
            .process(
                lambda: CountOccurrences(store, OCCURRENCE, ttl),
                store,
                named=Named.as_(compiler.unique(f"{sink.name}-count")),
            )
        )
        compiler.write(rows, view)

    def step(self, left: JoinedChanges, join: exp.Join) -> tuple[JoinedChanges, JoinScope]:
        """One join: ``left`` joined with the table of ``join``."""
        compiler = self.compiler
        right = compiler.table(join.this)
        alias = join.this.alias or right.name
        nested = tuple(replace(t, path=("left", *t.path)) for t in left.tables)
        scope = JoinScope((*nested, ScopeTable(alias, right, ("right",))), self.source)
        # reads the kind of join and takes a comma join's equalities from WHERE
        side = OnClause(scope, self.select, join, self.source).side
        keys, condition = self.conditions(scope, join)
        updating = left.updating or right.is_upsert or side != "INNER"
        if updating and not left.updating:
            self.check_sink(join, side, right)
        readers = [read_path(path[1:], column) for path, column, _ in keys]
        left_changes = left.changes.map(
            lambda k, v: (
                [_key_value(read(v["row"])) for read in readers],
                {"side": "left", "op": v["op"], "row": v["row"]},
            )
        )
        right_ttl = self.ttl_of(join.this, right)
        right_changes = self.table_changes(right, right_ttl).map(
            lambda k, v: (
                [_key_value(v["row"].get(c)) for _, _, c in keys],
                {"side": "right", "op": v["op"], "row": v["row"]},
            )
        )
        first = left.tables[0].table.name
        name = compiler.unique(f"{first}-{right.name}-join")
        stores = (self.store(f"{name}-left"), self.store(f"{name}-right"))
        outer, ttls = OUTER[side], (left.ttl_ms, right_ttl)
        joined = (
            left_changes.merge(right_changes)
            .repartition(Repartitioned.with_(serdes.Json(), serdes.Json()).with_name(name))
            .process(
                lambda: StreamingJoin(*stores, outer, condition, ttls),
                *stores,
                named=Named.as_(compiler.unique(f"{name}-process")),
            )
        )
        return JoinedChanges(joined, scope.tables, updating, self.ttl), scope

    def check_sink(self, join: exp.Join, side: str, right: TableDef) -> None:
        """An updating join needs a sink with a key (a view keeps its changes)."""
        if side != "INNER":
            why = (
                f"a regular {side} join emits a row padded with NULLs and retracts it when "
                "its match arrives"
            )
        else:
            why = f"a regular join with the table {right.name} retracts rows when it changes"
        self.compiler.require_upsert_sink(self.statement, self.sink, why)

    def store(self, name: str) -> str:
        self.compiler.builder.add_state_store(
            Stores.key_value_store_builder(
                Stores.persistent_key_value_store(name), serdes.Json(), serdes.Json()
            )
        )
        return name

    def conditions(
        self, scope: JoinScope, join: exp.Join
    ) -> tuple[list[tuple[tuple[str, ...], str, str]], Callable[[Any, Any], bool]]:
        """The ON clause's equalities, the join key: (the path of the left input's table
        in the joined row, its column, the right table's column) each; and ``(left_row,
        right_row) -> bool`` of its other conditions (NULL: no match)."""
        on = join.args.get("on")
        if on is None:
            raise self.error(join, "a join needs an equality on a column of each table")
        keys: list[tuple[tuple[str, ...], str, str]] = []
        rest: list[exp.Expr] = []
        for term in _conjuncts(on):
            if (
                isinstance(term, exp.EQ)
                and isinstance(term.this, exp.Column)
                and isinstance(term.expression, exp.Column)
            ):
                a, b = scope.side_of(term.this), scope.side_of(term.expression)
                if a[0] != b[0]:
                    columns = {a[0]: term.this, b[0]: term.expression}
                    self.check_types(scope, term, columns["left"], columns["right"])
                    path = scope.entry_of(columns["left"]).path
                    keys.append((path, columns["left"].name, columns["right"].name))
                    continue
            rest.append(term)
        if not keys:
            raise self.error(
                on,
                f"a regular join needs an equality on a column of each table (ON "
                f"{scope.left_alias}.x = {scope.right_alias}.y): a join without one is not "
                "supported yet",
            )
        if not rest:
            return keys, lambda left, right: True
        compiled = compile_expression(exp.and_(*rest), scope)
        if compiled.kind not in ("BOOLEAN", "NULL"):
            raise self.error(rest[0], f"a join condition needs a BOOLEAN, got {compiled.kind}")
        fn = compiled.fn
        return keys, lambda left, right: fn({"left": left, "right": right}) is True

    def check_types(
        self, scope: JoinScope, node: exp.Expr, left: exp.Column, right: exp.Column
    ) -> None:
        kinds = [scope.side_of(c)[1].columns[c.name] for c in (left, right)]
        if kinds[0] != kinds[1] and not set(kinds) <= set(NUMERIC):
            raise self.error(
                node,
                f"type mismatch: join columns {node.sql()} are {kinds[0]} and {kinds[1]}",
            )

    def table_changes(self, table: TableDef, ttl: int | None) -> Any:
        """A table's rows as changes (values ``{"op", "row"}``); an upsert table's pass a
        changelog normalizer whose state has the TTL ``ttl``."""
        compiler = self.compiler
        source = compiler.source_of(table)
        if table.is_upsert:
            store = self.store(compiler.unique(f"{table.name}-changelog-normalize"))
            return source.to_stream().process(
                lambda: ChangelogNormalize(store, ttl),
                store,
                named=Named.as_(compiler.unique(f"{table.name}-normalize")),
            )
        return source.filter(lambda k, v: isinstance(v, dict)).map_values(lambda v: change("+", v))
