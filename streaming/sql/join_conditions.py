"""The ON clause of a join: which columns it joins on and its time bound.

``JoinScope`` resolves ``alias.column`` and unambiguous column names on a joined row
``{"left": row, "right": row}`` (nested on the left for a chain of joins). ``OnClause``
reads one join's kind (INNER, LEFT, RIGHT, FULL) and conditions: one equality of a
column of the left input (any table joined before) and one of the joined table is the
join key; for two streams
a ``BETWEEN`` of the time attributes (``r.ts BETWEEN l.ts - INTERVAL ... AND l.ts +
INTERVAL ...``), or an equality of the two time attributes (``[0, 0]``), is the time
bound. An inner join also takes these from WHERE, as Flink does (a comma join ``FROM a,
b WHERE a.x = b.y``, a time bound in WHERE; for a join of two tables only), and its
further equalities and other conditions filter the joined rows (added to WHERE).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from streaming.sql.catalog import TableDef
from streaming.sql.errors import SqlError, error_at, node_offset
from streaming.sql.expressions import NUMERIC, Compiled, fail
from streaming.sql.rewrite import interval_ms


@dataclass(frozen=True)
class ScopeTable:
    """One table of a join: its alias and where its row sits in the joined row (``path``:
    the keys to follow, ``()`` for a table's own row)."""

    alias: str
    table: TableDef
    path: tuple[str, ...]


def read_path(path: tuple[str, ...], column: str) -> Callable[[Any], Any]:
    """``row -> value`` of ``column`` of the table at ``path`` in a joined row (None when
    an outer join left that table out)."""

    def read(row: Any) -> Any:
        for step in path:
            row = row.get(step) if isinstance(row, dict) else None
        return row.get(column) if isinstance(row, dict) else None

    return read


@dataclass
class JoinScope:
    """Columns of a joined row, by ``alias.column`` or by a column name that only one
    table has. The joined row of ``a JOIN b`` is ``{"left": a_row, "right": b_row}``; a
    chain nests it on the left: ``((a JOIN b) JOIN c)`` is ``{"left": {"left": a_row,
    "right": b_row}, "right": c_row}``. ``tables`` lists the tables in join order; the
    last one is the ``"right"`` side of the join being read, every other the ``"left"``."""

    tables: tuple[ScopeTable, ...]
    source: str

    @property
    def left(self) -> TableDef:
        """The first table (the FROM table)."""
        return self.tables[0].table

    @property
    def right(self) -> TableDef:
        """The table joined last."""
        return self.tables[-1].table

    @property
    def left_alias(self) -> str:
        return self.tables[0].alias

    @property
    def right_alias(self) -> str:
        return self.tables[-1].alias

    @property
    def left_is_upsert(self) -> bool:
        """Whether the left input is a table: all its tables are (one stream makes the
        joined rows a stream)."""
        return all(t.table.is_upsert for t in self.tables[:-1])

    def entry_of(self, node: exp.Column) -> ScopeTable:
        """The table a column reference names."""
        names = ", ".join(t.table.name for t in self.tables)
        if node.table:
            for entry in self.tables:
                if node.table == entry.alias:
                    if node.name not in entry.table.columns:
                        raise fail(
                            self, node, f"unknown column {node.name} in table {entry.table.name}"
                        )
                    return entry
            raise fail(self, node, f"unknown table {node.table} in {node.sql()}")
        found = [entry for entry in self.tables if node.name in entry.table.columns]
        if not found:
            raise fail(self, node, f"unknown column {node.name} in tables {names}")
        if len(found) > 1:
            qualified = " or ".join(f"{entry.alias}.{node.name}" for entry in found)
            raise fail(self, node, f"ambiguous column {node.name}: qualify it as {qualified}")
        return found[0]

    def side_of(self, node: exp.Column) -> tuple[str, TableDef]:
        """Which side (``"left"``: a table of the left input, ``"right"``: the table
        joined last) and table a column reference names."""
        entry = self.entry_of(node)
        return ("right" if entry is self.tables[-1] else "left"), entry.table

    def column(self, node: exp.Column) -> Compiled:
        entry = self.entry_of(node)
        return Compiled(read_path(entry.path, node.name), entry.table.columns[node.name])

    def aggregate(self, node: exp.AggFunc) -> Compiled:
        raise fail(self, node, f"aggregate {node.sql()} is not allowed here")

    def window_function(self, node: exp.Anonymous) -> Compiled:
        raise fail(self, node, f"unknown function {node.name}")


@dataclass(frozen=True)
class Equality:
    """``left.column = right.column`` of an ON clause (the columns of each side, and
    the alias of the left input's table whose column it is)."""

    left: str
    right: str
    node: exp.Expr
    left_alias: str = ""


@dataclass(frozen=True)
class TimeBound:
    """An interval join's bound: the right row's time in ``[left - before, left + after]``."""

    before_ms: int
    after_ms: int

    @property
    def empty(self) -> bool:
        """Whether no time is within the bound (its low end is above its high end)."""
        return self.before_ms + self.after_ms < 0


class OnClause:
    """The kind and conditions of one join of ``select`` (its left input: the tables
    joined before, ``scope.tables[:-1]``)."""

    def __init__(
        self,
        scope: JoinScope,
        select: exp.Select,
        join: exp.Join,
        source: str,
    ) -> None:
        self.scope = scope
        self.select = select
        self.join = join
        self.right = scope.right
        self.source = source
        #: why a BETWEEN in WHERE could not be the time bound of two streams
        self.bound_error: SqlError | None = None
        #: the inner join's conditions besides the key and bound, added to WHERE
        self.filtered: list[exp.Expr] = []
        self.adopt_where()
        self.side = self.join_side()

    def error(self, node: exp.Expr | int, message: str) -> SqlError:
        offset = node if isinstance(node, int) else node_offset(node)
        return error_at(self.source, offset, message)

    def join_side(self) -> str:
        """INNER, LEFT, RIGHT or FULL (USING is an error)."""
        side = (self.join.side or "").upper()
        kind = (self.join.kind or "").upper()
        if kind not in ("", "INNER", "OUTER"):
            raise self.error(self.join, f"{kind} JOIN is not supported yet")
        if self.join.args.get("using"):
            raise self.error(self.join, "JOIN ... USING is not supported yet: use ON")
        if self.join.args.get("on") is None:
            raise self.error(
                self.join, "a join needs an equality on a column of each table: ON a.x = b.y"
            )
        return side or "INNER"

    # -- the topology -------------------------------------------------------------------

    def adopt_where(self) -> None:
        """Move an inner join's conditions that Flink also takes from WHERE into ON: the
        equalities of a comma join (``FROM a, b WHERE a.x = b.y``) and, for two streams,
        a BETWEEN time bound on both time attributes. Other WHERE terms stay filters."""
        where = self.select.args.get("where")
        join = self.join
        inner = not join.side and (join.kind or "").upper() in ("", "INNER")
        chain = len(self.select.args.get("joins") or []) > 1
        if where is None or not inner or join.args.get("using") or chain:
            return
        on = join.args.get("on")
        comma = on is None and not join.kind
        streams = not self.scope.left_is_upsert and not self.right.is_upsert
        has_bound = on is not None and on.find(exp.Between) is not None
        moved, kept = [], []
        for term in _conjuncts(where.this):
            if streams and not has_bound and isinstance(term, exp.Between):
                self.bound_error = self.bound_error or self.why_not_bound(term)
            if comma and self.is_equality(term):
                moved.append(term)
            elif streams and not has_bound and isinstance(term, exp.Between) and self.bounds(term):
                moved.append(term)
                has_bound = True
            else:
                kept.append(term)
        if not moved:
            return
        join.set("on", exp.and_(*([on] if on is not None else []), *moved))
        self.select.set("where", exp.Where(this=exp.and_(*kept)) if kept else None)

    def is_equality(self, term: exp.Expr) -> bool:
        """Whether ``term`` is ``a.x = b.y`` on a column of each side."""
        if not (
            isinstance(term, exp.EQ)
            and isinstance(term.this, exp.Column)
            and isinstance(term.expression, exp.Column)
        ):
            return False
        try:
            return self.scope.side_of(term.this)[0] != self.scope.side_of(term.expression)[0]
        except SqlError:
            return False

    def why_not_bound(self, between: exp.Between) -> SqlError | None:
        """Why a BETWEEN of a WHERE clause is not a time bound of the two streams (None
        when it is one)."""
        try:
            self.time_bound(between)
        except SqlError as e:
            return e
        return None

    def bounds(self, between: exp.Between) -> bool:
        """Whether ``between`` is a valid time bound of the two sides."""
        try:
            self.time_bound(between)
        except SqlError:
            return False
        return True

    def is_time_attribute(self, node: exp.Column) -> bool:
        table = self.scope.side_of(node)[1]
        return table.watermark is not None and table.watermark.column == node.name

    def condition(self) -> tuple[Equality, TimeBound | None]:
        """The ON clause's key equality and (two streams) time bound. For two streams an
        equality of the two time attributes is the bound ``[0, 0]``; further equalities
        and other conditions of an inner join filter the joined rows (added to WHERE)."""
        on = self.join.args["on"]
        terms = _conjuncts(on)
        equality: Equality | None = None
        bound: TimeBound | None = None
        streams = not self.scope.left_is_upsert and not self.right.is_upsert
        filters: list[exp.Expr] = []
        unsupported: list[exp.Expr] = []
        for term in terms:
            if (
                isinstance(term, exp.EQ)
                and isinstance(term.this, exp.Column)
                and isinstance(term.expression, exp.Column)
            ):
                a, b = self.scope.side_of(term.this), self.scope.side_of(term.expression)
                if a[0] == b[0]:
                    raise self.error(
                        term,
                        f"a join needs an equality on a column of each table, {term.sql()} "
                        "compares one table's columns",
                    )
                if (
                    streams
                    and bound is None
                    and self.is_time_attribute(term.this)
                    and self.is_time_attribute(term.expression)
                ):
                    bound = TimeBound(0, 0)
                    continue
                if equality is not None:
                    if self.side != "INNER":
                        raise self.error(
                            term, f"a {self.side} join on several columns is not supported yet"
                        )
                    filters.append(term)
                    continue
                columns = {a[0]: term.this, b[0]: term.expression}
                left_alias = self.scope.entry_of(columns["left"]).alias
                equality = Equality(columns["left"].name, columns["right"].name, term, left_alias)
            elif isinstance(term, exp.Between):
                if bound is not None:
                    raise self.error(term, "a join takes one time bound")
                bound = self.time_bound(term)
            elif self.side == "INNER":
                unsupported.append(term)
                filters.append(term)  # an inner join's other conditions filter its rows
            else:
                raise self.error(
                    term,
                    f"unsupported join condition {term.sql()}: a {self.side} join needs an "
                    "equality on a column of each table (and, for two streams, a BETWEEN "
                    "time bound)",
                )
        if equality is None and unsupported:
            raise self.error(
                unsupported[0],
                f"unsupported join condition {unsupported[0].sql()}: a join needs an "
                "equality on a column of each table (and, for two streams, a BETWEEN time "
                "bound)",
            )
        if equality is None:
            raise self.error(on, "a join needs an equality on a column of each table: ON a.x = b.y")
        self.filtered = filters
        if filters:
            where = self.select.args.get("where")
            rest = [where.this] if where is not None else []
            self.select.set("where", exp.Where(this=exp.and_(*filters, *rest)))
        left_table = next(t.table for t in self.scope.tables if t.alias == equality.left_alias)
        left_kind = left_table.columns[equality.left]
        right_kind = self.right.columns[equality.right]
        if left_kind != right_kind and not {left_kind, right_kind} <= set(NUMERIC):
            raise self.error(
                equality.node,
                f"type mismatch: join columns {equality.node.sql()} are {left_kind} and "
                f"{right_kind}",
            )
        return equality, bound

    def time_point(self, node: exp.Expr) -> tuple[str, int]:
        """``side.ts [+|- INTERVAL ...]`` -> (side, offset ms); the column must be the
        side's time attribute."""
        offset = 0
        at = node_offset(node)
        if isinstance(node, exp.Add | exp.Sub) and isinstance(node.expression, exp.Interval):
            offset = interval_ms(node.expression, self.source, at)
            offset = -offset if isinstance(node, exp.Sub) else offset
            node = node.this
        if not isinstance(node, exp.Column):
            raise self.error(
                at, f"a join's time bound needs t.ts [+|- INTERVAL ...], got {node.sql()}"
            )
        side, table = self.scope.side_of(node)
        if table.proctime == node.name:
            raise self.error(
                node,
                f"a join bound on the processing time ({node.name} AS PROCTIME() of "
                f"{table.name}) is not supported yet: bound the join on event time "
                "(WATERMARK columns)",
            )
        if table.watermark is None or table.watermark.column != node.name:
            raise self.error(
                node,
                f"{node.name} is not a time attribute of {table.name}: declare WATERMARK FOR "
                f"{node.name}",
            )
        return side, offset

    def time_bound(self, between: exp.Between) -> TimeBound:
        """``x.ts BETWEEN y.ts + lo AND y.ts + hi`` as JoinWindows' before/after."""
        subject, _ = self.time_point(between.this)
        low_side, low = self.time_point(between.args["low"])
        high_side, high = self.time_point(between.args["high"])
        if low_side != high_side or low_side == subject:
            raise self.error(
                between,
                "a join's time bound compares one table's time with the other's: "
                "b.ts BETWEEN a.ts - INTERVAL ... AND a.ts + INTERVAL ...",
            )
        # right in [left + low, left + high], or left in [right + low, right + high]
        before, after = (-low, high) if subject == "right" else (high, -low)
        if before + after < 0 and self.side == "INNER":
            raise self.error(
                between, "the join's time bound is empty: its low end is above its high end"
            )
        # an outer join with an empty bound joins no row: it pads every preserved row
        return TimeBound(before, after)


def _conjuncts(node: exp.Expr) -> list[exp.Expr]:
    """The terms of ``a AND b AND ...`` (parentheses around the whole dropped)."""
    while isinstance(node, exp.Paren):
        node = node.this
    return list(node.flatten()) if isinstance(node, exp.And) else [node]


def bound_node(join: exp.Join) -> exp.Expr:
    """The BETWEEN of a join's ON clause (for errors)."""
    found = join.args["on"].find(exp.Between)
    return found if found is not None else join
