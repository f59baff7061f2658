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
NULLs). WHERE filters and the SELECT list projects the joined changes. A chain of
joins is left-deep, each join's changes the left input of the next.

The result is a changelog, as Flink's: an INNER join of two append streams only
inserts, so it goes into any sink; any other (an outer join, or a table on either side)
retracts rows it emitted, so its sink needs a PRIMARY KEY (an append-only sink is an
error, as in Flink) and a ``SinkUpsertMaterializer`` turns the changes into the sink
key's final rows; in a view (or subquery) the changes become an upsert view keyed by
the whole row and its occurrence (``CountOccurrences``). ``SET 'table.exec.state.ttl'``
and the ``STATE_TTL`` hint bound the state of all of them. Which joins are regular:
``regular_join_shapes``.
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
from streaming.sql.changelog_sink import add_store, write_updating
from streaming.sql.errors import SqlError, error_at, node_offset
from streaming.sql.expressions import NUMERIC, compile_expression
from streaming.sql.join_conditions import (
    JoinScope,
    OnClause,
    ScopeTable,
    _conjuncts,
    read_path,
)
from streaming.sql.join_state import ChangelogNormalize, StreamingJoin, change
from streaming.sql.regular_join_shapes import first_join
from streaming.sql.rewrite import Statement
from streaming.sql.settings import state_ttl_hint

#: the preserved sides of each kind of join
OUTER = {
    "INNER": {"left": False, "right": False},
    "LEFT": {"left": True, "right": False},
    "RIGHT": {"left": False, "right": True},
    "FULL": {"left": True, "right": True},
}


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
        found = first_join(compiler, select)
        assert found is not None  # is_regular said so
        self.first: exp.Table = found[0]
        self.joins: list[exp.Join] = select.args["joins"]
        self.ttl = compiler.settings.state_ttl_ms
        aliases = [self.first.alias or self.first.name]
        names = {aliases[0], self.first.name}
        if compiler.table(self.first).is_global:
            raise self.error(
                self.first,
                f"{self.first.name} is a global table: it joins only as the table of a "
                "stream-table join (FROM stream JOIN global_table ON ...)",
            )
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
        if sink.is_view and sink.watermark is not None:
            # as Flink's: a regular join's rows carry no time attribute (its record times
            # are those of the rows that made each change, not a column's)
            sink = compiler.tables[sink.name] = replace(sink, watermark=None)
        if not current.updating:
            compiler.write(changes.map(lambda k, v: (sink.key_of(v["row"]), v["row"])), sink)
            return
        write_updating(compiler, changes, sink, self.ttl)

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
        return add_store(self.compiler, name)

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
