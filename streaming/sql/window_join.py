"""Window joins as Flink runs them: two window TVF inputs joined on their windows.

    SELECT ... FROM (SELECT * FROM TABLE(TUMBLE(TABLE L, DESCRIPTOR(ts), INTERVAL '5' MINUTES))) L
    [LEFT | RIGHT | FULL [OUTER]] JOIN
         (SELECT * FROM TABLE(TUMBLE(TABLE R, DESCRIPTOR(ts), INTERVAL '5' MINUTES))) R
    ON L.window_start = R.window_start AND L.window_end = R.window_end AND L.k = R.k [AND ...]

Each input is a subquery of a window TVF (TUMBLE, HOP or CUMULATE over the event time,
the same window on both sides): its rows (``SELECT *`` or named columns, filtered by
its WHERE), or a window aggregation over it (``GROUP BY window_start, window_end, ...``),
or an aggregation of such results by their window (Nexmark q5's maximum per window). The
ON clause must equate both window bounds, which an aggregation may rename (``window_start
AS starttime``: ``bound_outputs``); its other equalities are the join key and its other
conditions decide which rows of a window and key match.

``FROM (subquery) L WHERE [NOT] EXISTS (SELECT * FROM (subquery) R WHERE ...)`` and
``L.x IN (SELECT y FROM (subquery) R WHERE ...)`` are window semi and anti joins
(``semi_joins``): each left row of a window once if some (no) right row matches.

The join keeps each window's rows of both sides (``WindowJoinProcessor``, one state
store per side) and, once stream time passes the window's end plus the WATERMARK delay,
emits the window's joined rows (an outer join's unmatched rows padded with NULLs) once:
the result is append-only, as Flink's. Stream time is the smaller of the two sides' (as
Flink's watermark is the smaller of its inputs'): a side's time is its largest record
time less its WATERMARK delay; a window aggregation's rows are at their window's end
(their windows closed upstream). A row of a window already emitted is late and dropped.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from sqlglot import exp

from streaming import serdes
from streaming.dsl import Named, Repartitioned
from streaming.sql import window_rank
from streaming.sql.catalog import TableDef
from streaming.sql.derived import is_aggregation, output_names, span
from streaming.sql.join_conditions import JoinScope, OnClause, ScopeTable, _conjuncts, read_path
from streaming.sql.join_state import change
from streaming.sql.regular_join import OUTER, JoinedChanges, RegularJoin, _key_value
from streaming.sql.regular_join_shapes import first_join
from streaming.sql.rewrite import WindowTvf
from streaming.sql.timestamps import parse_timestamp
from streaming.topology.processor import Processor, Record

#: added to a window end in a window's index key, so negative times sort too
_INDEX_OFFSET = 1 << 62
#: the key of both sides' stream times in the left store (window indexes start with a digit)
_STREAM_TIME = "stream-time"
#: the window bounds a window join equates
BOUNDS = ("window_start", "window_end")


@dataclass(frozen=True)
class WindowInput:
    """One side of a window join: its window TVF, its WATERMARK delay, whether its
    rows are a window aggregation's (at their window's end) rather than the TVF's, and
    the names of its window bounds (renamed by an aggregation, ``window_start AS
    starttime``; None: the side does not pass that bound through)."""

    tvf: WindowTvf
    delay_ms: int
    aggregated: bool
    start: str | None = "window_start"
    end: str | None = "window_end"
    #: an aggregation of window results (a subquery of a window aggregation): its rows
    #: come out after the other side's by its own window's delay
    nested: bool = False


def joins_subqueries(select: exp.Select) -> bool:
    """Whether ``select`` joins two subqueries (the shape of a window join)."""
    from_ = select.args.get("from_") or select.args.get("from")
    joins = select.args.get("joins") or []
    return (
        from_ is not None
        and isinstance(from_.this, exp.Subquery)
        and len(joins) == 1
        and isinstance(joins[0].this, exp.Subquery)
    )


def semi_joins(tree: exp.Expr, tvfs: tuple[WindowTvf, ...]) -> None:
    """Rewrite ``FROM (subquery) L WHERE [NOT] EXISTS (SELECT * FROM (subquery) R WHERE
    conditions)`` into a SEMI (ANTI) join of the two subqueries on the conditions, and
    ``L.x IN (SELECT y FROM (subquery) R WHERE conditions)`` into a SEMI join on them and
    ``L.x = R.y``: the shapes of Flink's window semi and anti joins, when both subqueries
    hold one of the statement's window TVFs ``tvfs``. ``SELECT *`` selects L's columns."""
    for select in list(tree.find_all(exp.Select)):
        from_ = select.args.get("from_")
        where = select.args.get("where")
        if from_ is None or not isinstance(from_.this, exp.Subquery) or where is None:
            continue
        if select.args.get("joins") or not from_.this.alias:
            continue
        terms = _conjuncts(where.this)
        for term in terms:
            negated = isinstance(term, exp.Not)
            exists = term.this if negated else term
            inner = exists.this if isinstance(exists, exp.Exists) else None
            member = term.args.get("query") if isinstance(term, exp.In) else None
            if member is not None:  # x IN (SELECT y FROM ... WHERE c): EXISTS (... c AND x = y)
                inner = member.this if isinstance(member, exp.Subquery) else member
            if not isinstance(inner, exp.Select):
                continue
            inner_from = inner.args.get("from_")
            if (
                inner_from is None
                or not isinstance(inner_from.this, exp.Subquery)
                or not inner_from.this.alias
                or inner.args.get("where") is None
                or inner.args.get("joins")
            ):
                continue
            if not all(_holds_tvf(node, tvfs) for node in (from_.this, inner_from.this)):
                continue
            on = inner.args["where"].this
            if member is not None:
                selected = inner.expressions
                if len(selected) != 1 or not isinstance(selected[0], exp.Column):
                    continue
                column = exp.column(selected[0].name, table=inner_from.this.alias, quoted=True)
                on = exp.and_(*_conjuncts(on), exp.EQ(this=term.this.copy(), expression=column))
            join = exp.Join(this=inner_from.this, on=on, kind="ANTI" if negated else "SEMI")
            rest = [t for t in terms if t is not term]
            select.set("where", exp.Where(this=exp.and_(*rest)) if rest else None)
            select.set("joins", [join])
            alias = from_.this.alias
            select.set(
                "expressions",
                [
                    exp.Column(this=exp.Star(), table=exp.to_identifier(alias))
                    if isinstance(e, exp.Star)
                    else e
                    for e in select.expressions
                ],
            )
            break


def _holds_tvf(node: exp.Expr, tvfs: tuple[WindowTvf, ...]) -> bool:
    """Whether one of the window TVFs ``tvfs`` is inside ``node``."""
    start, end = span(node)
    return any(start <= t.offset <= end for t in tvfs)


def prepare_input(
    compiler: Any, inner: exp.Select, own: WindowTvf, over: WindowTvf | None
) -> tuple[bool, WindowInput | None]:
    """A window join's subquery ``inner`` over the TVF ``own``: (whether the TVF is
    consumed here, its ``WindowInput``, None for a SESSION window's aggregation). The
    TVF's rows become a view (with ``window_start``, ``window_end`` and ``window_time``)
    that ``inner`` reads; a window aggregation keeps its TVF."""
    source: TableDef | None = compiler.tables.get(own.table)
    delay = source.watermark.delay_ms if source is not None and source.watermark else 0
    if over is None or is_aggregation(inner):
        if own.kind not in ("TUMBLE", "HOP", "CUMULATE"):
            return False, None  # SESSION windows' results join as other views do
        bounds = bound_outputs(inner)
        from_ = inner.args.get("from_") or inner.args.get("from")
        nested = from_ is not None and isinstance(from_.this, exp.Subquery)
        start, end = bounds.get(BOUNDS[0]), bounds.get(BOUNDS[1])
        return False, WindowInput(own, 0, True, start, end, nested)
    view = window_rank.windowed_rows(compiler, inner, over, "a window join")
    with_time = dataclasses.replace(view, columns={**view.columns, "window_time": "BIGINT"})
    compiler.tables[view.name] = with_time
    compiler.views[view.name] = compiler.views[view.name].map_values(
        lambda row: {**row, "window_time": row["window_end"] - 1}
    )
    return True, WindowInput(own, delay, False)


def bound_outputs(select: exp.Select) -> dict[str, str]:
    """Window bound (``window_start``, ``window_end``) -> the name of the output of
    ``select`` that passes it through: a bound of its window TVF, or over a subquery in
    FROM an output of the subquery that is a bound (Nexmark q5's ``GROUP BY
    CountBids.starttime, CountBids.endtime``, both grouped: the windows stay windows)."""
    from_ = select.args.get("from_") or select.args.get("from")
    node = from_.this if from_ is not None else None
    if isinstance(node, exp.Subquery) and isinstance(node.this, exp.Select):
        nested = bound_outputs(node.this)
        group = select.args.get("group")
        grouped = (
            {c.name for c in group.expressions if isinstance(c, exp.Column)} if group else set()
        )
        if is_aggregation(select) and not set(nested.values()) <= grouped:
            return {}
    else:
        nested = {bound: bound for bound in BOUNDS}
    by_name = {name: bound for bound, name in nested.items()}
    found: dict[str, str] = {}
    for item, name in zip(select.expressions, output_names(select.expressions), strict=True):
        column = item.this if isinstance(item, exp.Alias) else item
        if isinstance(column, exp.Column) and column.name in by_name:
            found.setdefault(by_name[column.name], name)
    return found


def is_window_join(compiler: Any, select: exp.Select) -> bool:
    """Whether ``select`` joins two window join inputs (``prepare_input``) on both of
    their window bounds; renamed bounds (Flink's windows keep their window properties
    through a rename) when a side aggregates window results (Nexmark q5), whose rows come
    out later than the other side's by more than an interval join's grace."""
    found = first_join(compiler, select)
    if found is None or len(select.args["joins"]) != 1:
        return False
    inputs = compiler.window_join_inputs
    join = found[1]
    names = (found[0].name, join.this.name)
    if not all(name in inputs for name in names):
        return False
    sides = [inputs[name] for name in names]
    if any(
        side.start is None
        or side.end is None
        or not {side.start, side.end} <= set(compiler.tables[name].columns)
        for side, name in zip(sides, names, strict=True)
    ):
        return False
    if not any(side.aggregated for side in sides):
        return True  # the TVFs' rows: the ON clause must equate the bounds (``step``)
    renamed = any((side.start, side.end) != BOUNDS for side in sides)
    if renamed and not any(side.nested for side in sides):
        # window results renamed (Nexmark q8) come out at their windows' close on both
        # sides: they join as other views do, an interval join whose grace covers that
        return False
    # window results whose ON clause does not equate both bounds join as other views do
    on = join.args.get("on")
    equalities = {
        frozenset((term.this.name, term.expression.name))
        for term in (_conjuncts(on) if on is not None else [])
        if isinstance(term, exp.EQ)
        and all(isinstance(c, exp.Column) for c in (term.this, term.expression))
    }
    return all(
        frozenset((getattr(sides[0], b), getattr(sides[1], b))) in equalities
        for b in ("start", "end")
    )


class WindowJoin(RegularJoin):
    """Compiles one INSERT (or view) whose query is a window join (``is_window_join``)."""

    def step(self, left: JoinedChanges, join: exp.Join) -> tuple[JoinedChanges, JoinScope]:
        """The window join of the FROM subquery's rows with the joined subquery's."""
        compiler = self.compiler
        right = compiler.table(join.this)
        alias = join.this.alias or right.name
        nested = tuple(replace(t, path=("left", *t.path)) for t in left.tables)
        scope = JoinScope((*nested, ScopeTable(alias, right, ("right",))), self.source)
        mode = (join.kind or "").upper()
        if mode in ("SEMI", "ANTI"):
            join.set("kind", None)
        else:
            mode = ""
        side = OnClause(scope, self.select, join, self.source).side
        keys, condition = self.conditions(scope, join)
        inputs = compiler.window_join_inputs
        sides: tuple[WindowInput, WindowInput] = (
            inputs[left.tables[0].table.name],
            inputs[right.name],
        )
        a, b = (dataclasses.replace(s.tvf, table="", column="", offset=0, end=0) for s in sides)
        if a != b:
            raise self.error(
                join, "a window join needs the same window (kind, size and step) on both sides"
            )
        pairs = [(k[1], k[2]) for k in keys]
        starts = (sides[0].start, sides[1].start)
        ends = (sides[0].end, sides[1].end)
        if starts not in pairs or ends not in pairs:
            raise self.error(
                join.args.get("on") or join,
                f"a window join needs {scope.left_alias}.{starts[0]} = "
                f"{scope.right_alias}.{starts[1]} AND {scope.left_alias}.{ends[0]} = "
                f"{scope.right_alias}.{ends[1]} in its ON clause",
            )
        end_at = pairs.index(ends)
        null_safe = frozenset(self.null_safe)
        readers = [read_path(path[1:], column) for path, column, _ in keys]
        left_changes = left.changes.map(
            lambda k, v: (
                [_key_value(read(v["row"])) for read in readers],
                {"side": "left", "op": v["op"], "row": v["row"]},
            )
        )
        right_changes = self.table_changes(right, None).map(
            lambda k, v: (
                [_key_value(v["row"].get(c)) for _, _, c in keys],
                {"side": "right", "op": v["op"], "row": v["row"]},
            )
        )
        name = compiler.unique(f"{left.tables[0].table.name}-{right.name}-window-join")
        stores = (self.store(f"{name}-left"), self.store(f"{name}-right"))
        outer = OUTER[side]
        joined = (
            left_changes.merge(right_changes)
            .repartition(Repartitioned.with_(serdes.Json(), serdes.Json()).with_name(name))
            .process(
                lambda: WindowJoinProcessor(
                    *stores, outer, condition, end_at, sides, null_safe, mode
                ),
                *stores,
                named=Named.as_(compiler.unique(f"{name}-process")),
            )
        )
        return JoinedChanges(joined, scope.tables, False, None), scope

    def conditions(
        self, scope: JoinScope, join: exp.Join
    ) -> tuple[list[tuple[tuple[str, ...], str, str]], Callable[[Any, Any], bool]]:
        """As a regular join's, with ``a IS NOT DISTINCT FROM b`` of a column of each side
        a key column too, on which NULL meets NULL (``null_safe``: their positions)."""
        safe: set[tuple[str, str]] = set()
        on = join.args.get("on")
        for term in _conjuncts(on) if on is not None else []:
            if isinstance(term, exp.NullSafeEQ) and all(
                isinstance(c, exp.Column) for c in (term.this, term.expression)
            ):
                safe.add((term.this.name, term.expression.name))
                safe.add((term.expression.name, term.this.name))
                term.replace(exp.EQ(this=term.this.copy(), expression=term.expression.copy()))
        keys, condition = super().conditions(scope, join)
        #: the positions of the IS NOT DISTINCT FROM columns in the join key
        self.null_safe = [i for i, (_, a, b) in enumerate(keys) if (a, b) in safe]
        return keys, condition


class WindowJoinProcessor(Processor):
    """Keeps each window's rows of both sides (by window end and join key) and emits the
    window's joined rows once stream time passes its end (see the module docstring)."""

    def __init__(
        self,
        left_store: str,
        right_store: str,
        outer: dict[str, bool],
        condition: Any,
        end_at: int,
        sides: tuple[WindowInput, WindowInput],
        null_safe: frozenset[int] = frozenset(),
        mode: str = "",
    ) -> None:
        self.store_names = (left_store, right_store)
        #: "SEMI" or "ANTI": each left row once if some (no) right row matches
        self.mode = mode
        self.null_safe = null_safe
        self.outer = outer
        self.condition = condition
        self.end_at = end_at
        self.sides = sides

    def init(self, context: Any) -> None:
        super().init(context)
        self.stores = tuple(context.get_state_store(n) for n in self.store_names)

    def process(self, record: Record) -> None:
        value, key = record.value, record.key
        if not isinstance(value, dict) or not isinstance(key, list):
            return
        end = parse_timestamp(key[self.end_at])
        if end is None:
            return
        at = 0 if value["side"] == "left" else 1
        times: list[int | None] = self.stores[0].get(_STREAM_TIME) or [None, None]
        before = _progress(times)
        if before is not None and end <= before:
            return  # its window was emitted: a late row
        side = self.sides[at]
        time = end - 1 if side.aggregated else record.timestamp - side.delay_ms
        if times[at] is None or time > times[at]:  # type: ignore[operator]
            times[at] = time
            self.stores[0].put(_STREAM_TIME, times)
        index = _index(end, key)
        rows = self.stores[at].get(index) or []
        rows.append(value["row"])
        self.stores[at].put(index, rows)
        after = _progress(times)
        if after is not None and (before is None or after > before):
            self._emit_until(after)

    def _emit_until(self, time: int) -> None:
        """Emit the joined rows of every window that ends at or before ``time``, in end
        order, and forget its rows."""
        until = _index(time, None) + "\uffff"
        indexes: set[str] = set()
        for store in self.stores:
            indexes.update(k for k, _ in store.range(None, until) if k != _STREAM_TIME)
        for index in sorted(indexes):
            lefts = self.stores[0].get(index) or []
            rights = self.stores[1].get(index) or []
            for store in self.stores:
                store.delete(index)
            key = json.loads(index[20:])
            end = int(index[:20]) - _INDEX_OFFSET
            self._join(key, lefts, rights, end - 1)

    def _join(self, key: list[Any], lefts: list[Any], rights: list[Any], ts: int) -> None:
        """Forward one window and key's joined rows (a NULL in the key matches nothing,
        but in an IS NOT DISTINCT FROM column)."""
        keyed = all(v is not None for i, v in enumerate(key) if i not in self.null_safe)
        if self.mode:
            for left in lefts:
                found = keyed and any(self.condition(left, right) for right in rights)
                if found == (self.mode == "SEMI"):
                    self._forward(key, left, None, ts)
            return
        matched_rights: set[int] = set()
        for left in lefts:
            found = False
            for i, right in enumerate(rights):
                if keyed and self.condition(left, right):
                    found = True
                    matched_rights.add(i)
                    self._forward(key, left, right, ts)
            if not found and self.outer["left"]:
                self._forward(key, left, None, ts)
        if self.outer["right"]:
            for i, right in enumerate(rights):
                if i not in matched_rights:
                    self._forward(key, None, right, ts)

    def _forward(self, key: list[Any], left: Any, right: Any, ts: int) -> None:
        self.context.forward(Record(key, change("+", {"left": left, "right": right}), ts))


def _progress(times: list[int | None]) -> int | None:
    """Stream time: the smaller of both sides' (None until both have read a row)."""
    if times[0] is None or times[1] is None:
        return None
    return min(times[0], times[1])


def _index(end: int, key: list[Any] | None) -> str:
    """A window's key in the stores: its end (fixed width, so the keys sort by it) then
    its join key."""
    return f"{end + _INDEX_OFFSET:020d}" + ("" if key is None else json.dumps(key))
