"""Top-N as Flink writes it: ``ROW_NUMBER()`` in a subquery in FROM, filtered on N.

    SELECT cols FROM (
      SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY sales DESC) AS row_num
      FROM shop_sales
    ) WHERE row_num <= 5                      -- or row_num < 6, row_num = 1

keeps the first N rows of each partition ``k`` by the ORDER BY columns (rows that tie
in the order they were read). The result is updating, as Flink's rank: a row entering
the top N moves the rows after it down one place. Here the subquery becomes an upsert
view keyed by (``k``, ``row_num``): every place whose row changed is written again, the
row with its new ``row_num`` (Flink's rank with the ranking number updates those rows
too). Over an append-only input a partition's top N only fills and changes, no place
empties, so there are no deletes. Its sink needs a PRIMARY KEY of the partition columns
and the row number, as any updating result here.

Partitioned by ``window_start`` and ``window_end`` over a window aggregation's results
it is a window Top-N: an append-only view of each window's top N rows, forwarded once
when a later window's results come (``WindowRankRows``).

An ORDER BY of the table's time attribute with ``= 1`` is deduplication (``dedup``);
RANK() and DENSE_RANK(), Top-N over an updating input and without the row number in the
result are not supported.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from streaming import serdes
from streaming.dsl import Named, Repartitioned
from streaming.sql.catalog import TableDef
from streaming.sql.errors import error_at, node_offset
from streaming.sql.timestamps import parse_timestamp
from streaming.state.stores import Stores
from streaming.topology.processor import Processor, Record

#: the columns of a window TVF's (or a window aggregation's) window bounds
WINDOW_BOUNDS = {"window_start", "window_end"}
#: added to a window end in a pending window's index key, so negative times sort too
_INDEX_OFFSET = 1 << 62
#: the key of the largest window end read in a window Top-N's store
_LAST_END = "last-end"


@dataclass(frozen=True)
class TopN:
    """A recognised Top-N: its ``ROW_NUMBER() OVER (...)``, the row number's name, the
    partition and order columns (name, descending), N and the outer WHERE condition."""

    window: exp.Window
    row_number: str
    partition: tuple[str, ...]
    order: tuple[tuple[str, bool], ...]
    limit: int
    condition: exp.Expr
    #: a window Top-N: partitioned by ``window_start`` and ``window_end`` (and maybe more)
    by_window: bool = False


def find(select: exp.Select, subquery: exp.Expr) -> TopN | None:
    """The Top-N of ``subquery`` (in ``select``'s FROM), or None when it is not one."""
    inner = subquery.this if isinstance(subquery, exp.Subquery) else None
    if not isinstance(inner, exp.Select):
        return None
    found = [
        (item.alias, item.this)
        for item in inner.expressions
        if isinstance(item, exp.Alias)
        and isinstance(item.this, exp.Window)
        and isinstance(item.this.this, exp.RowNumber)
    ]
    if len(found) != 1:
        return None
    name, window = found[0]
    partition = window.args.get("partition_by") or []
    order = window.args.get("order")
    ordered = order.expressions if order is not None else []
    bounds = {p.name for p in partition if isinstance(p, exp.Column)} & WINDOW_BOUNDS
    if (
        not all(isinstance(p, exp.Column) for p in partition)
        or bounds not in (set(), WINDOW_BOUNDS)  # one bound alone is no window Top-N
        or not ordered
        or not all(isinstance(o.this, exp.Column) for o in ordered)
        or window.args.get("spec") is not None
    ):
        return None
    limit = _limit(select.args.get("where"), name)
    if limit is None:
        return None
    condition, n = limit
    return TopN(
        window=window,
        row_number=name,
        partition=tuple(p.name for p in partition),
        order=tuple((o.this.name, bool(o.args.get("desc"))) for o in ordered),
        limit=n,
        condition=condition,
        by_window=bool(bounds),
    )


def _limit(where: exp.Expr | None, name: str) -> tuple[exp.Expr, int] | None:
    """The conjunct of WHERE that bounds the row number (``rn <= N``, ``rn < N + 1``,
    ``rn = 1``) and N."""
    if where is None:
        return None
    for term in where.this.flatten() if isinstance(where.this, exp.And) else [where.this]:
        if not isinstance(term, exp.EQ | exp.LTE | exp.LT):
            continue
        column, literal = term.this, term.expression
        if not (isinstance(column, exp.Column) and column.name == name):
            continue
        if not (isinstance(literal, exp.Literal) and not literal.is_string):
            continue
        if not literal.this.isdigit():
            continue
        n = int(literal.this) - (1 if isinstance(term, exp.LT) else 0)
        if isinstance(term, exp.EQ) and n != 1:
            continue
        if n >= 1:
            return term, n
    return None


def prepare(inner: exp.Select, topn: TopN, source: TableDef | None) -> TopN:
    """The subquery without its ``ROW_NUMBER()`` column (``*`` is the columns of its FROM
    table ``source``) and with the ORDER BY and PARTITION BY columns it does not select
    as hidden ``$column`` outputs; returns the Top-N over the subquery's columns."""
    items: list[exp.Expr] = []
    for item in inner.expressions:
        if isinstance(item, exp.Alias) and item.this is topn.window:
            continue
        if isinstance(item, exp.Star) and source is not None:
            items.extend(exp.column(column) for column in source.columns)
            continue
        items.append(item)
    names = {item.alias_or_name for item in items}

    def output(column: str) -> str:
        if column in names:
            return column
        items.append(exp.alias_(exp.column(column), f"${column}", quoted=True))
        names.add(f"${column}")
        return f"${column}"

    prepared = dataclasses.replace(
        topn,
        order=tuple((output(column), desc) for column, desc in topn.order),
        partition=tuple(output(column) for column in topn.partition),
    )
    inner.set("expressions", items)
    return prepared


def drop_condition(select: exp.Select, topn: TopN) -> None:
    """The outer WHERE without its bound on the row number (the view has N rows)."""
    where = select.args["where"]
    terms = where.this.flatten() if isinstance(where.this, exp.And) else [where.this]
    rest = [term for term in terms if term is not topn.condition]
    select.set("where", exp.Where(this=exp.and_(*rest)) if rest else None)


def expand_star(select: exp.Select, view: TableDef) -> None:
    """The outer ``SELECT *`` as the columns of the Top-N view (its row number last, as
    Flink's), without the hidden ``$column`` outputs."""
    items: list[exp.Expr] = []
    for item in select.expressions:
        if isinstance(item, exp.Star):
            items.extend(exp.column(c, quoted=True) for c in view.columns if c[:1] != "$")
        else:
            items.append(item)
    select.set("expressions", items)


def rank(compiler: Any, table: TableDef, topn: TopN) -> TableDef:
    """The upsert view of the top N rows of the view ``table`` (already compiled), keyed
    by the partition columns and the row number; registered in its place."""
    at = node_offset(topn.window)
    source = compiler.source
    if table.is_upsert:
        raise error_at(source, at, "Top-N of an updating input is not supported yet")
    for column in (*topn.partition, *(c for c, _ in topn.order)):
        if column not in table.columns:
            raise error_at(
                source,
                at,
                f"{column}: unknown column of the subquery ({', '.join(table.columns)})",
            )
    if topn.row_number in table.columns:
        raise error_at(source, at, f"{topn.row_number}: a column of the subquery already")
    if topn.by_window:
        return _rank_windows(compiler, table, topn)
    key = (*topn.partition, topn.row_number)
    view = dataclasses.replace(
        table,
        columns={**table.columns, topn.row_number: "BIGINT"},
        primary_key=key,
        key_fields=key,
        key_format="json",
        watermark=None,
    )
    compiler.tables[table.name] = view
    store = compiler.unique(f"{table.name}-top-n")
    compiler.builder.add_state_store(
        Stores.key_value_store_builder(
            Stores.persistent_key_value_store(store), serdes.Json(), serdes.Json()
        )
    )
    partition = topn.partition
    keyed = (
        compiler.views[table.name]
        .filter(lambda k, v: isinstance(v, dict))
        .select_key(lambda k, row: [row.get(c) for c in partition])
        .repartition(
            Repartitioned.with_(serdes.Json(), serdes.Json()).with_name(
                compiler.unique(f"{table.name}-top-n")
            )
        )
    )
    compiler.views[table.name] = keyed.process(
        lambda: RankRows(topn.order, topn.limit, partition, topn.row_number, store),
        store,
        named=Named.as_(compiler.unique(f"{table.name}-rank")),
    )
    return view


def _rank_windows(compiler: Any, table: TableDef, topn: TopN) -> TableDef:
    """The append-only view of each window's top N rows of the window aggregation's
    results ``table``, out once the window's results are all in."""
    view = dataclasses.replace(
        table, columns={**table.columns, topn.row_number: "BIGINT"}, watermark=None
    )
    compiler.tables[table.name] = view
    store = compiler.unique(f"{table.name}-window-top-n")
    compiler.builder.add_state_store(
        Stores.key_value_store_builder(
            Stores.persistent_key_value_store(store), serdes.String(), serdes.Json()
        )
    )
    # every window of a partition (without the bounds) to the same task, in order
    rest = tuple(c for c in topn.partition if c.lstrip("$") not in WINDOW_BOUNDS)
    end = next(c for c in topn.partition if c.lstrip("$") == "window_end")
    keyed = (
        compiler.views[table.name]
        .filter(lambda k, v: isinstance(v, dict))
        .select_key(lambda k, row: [row.get(c) for c in rest])
        .repartition(
            Repartitioned.with_(serdes.Json(), serdes.Json()).with_name(
                compiler.unique(f"{table.name}-window-top-n")
            )
        )
    )
    compiler.views[table.name] = keyed.process(
        lambda: WindowRankRows(topn.order, topn.limit, topn.partition, end, topn.row_number, store),
        store,
        named=Named.as_(compiler.unique(f"{table.name}-window-rank")),
    )
    return view


def _compare(a: dict[str, Any], b: dict[str, Any], order: tuple[tuple[str, bool], ...]) -> int:
    """-1, 0 or 1 as row ``a`` sorts before, with or after ``b`` (NULL first ascending,
    last descending, as Flink's)."""
    for column, descending in order:
        x, y = a.get(column), b.get(column)
        if x == y:
            continue
        if x is None:
            result = -1
        elif y is None:
            result = 1
        else:
            result = -1 if x < y else 1
        return -result if descending else result
    return 0


class RankRows(Processor):
    """Keeps each partition's first ``limit`` rows by ``order``; forwards every place
    whose row changed as (key of partition and row number, the row with its number)."""

    def __init__(
        self,
        order: tuple[tuple[str, bool], ...],
        limit: int,
        partition: tuple[str, ...],
        row_number: str,
        store: str,
    ) -> None:
        self.order = order
        self.limit = limit
        self.partition = partition
        self.row_number = row_number
        self.store_name = store

    def init(self, context: Any) -> None:
        super().init(context)
        #: partition key -> its top rows, in order
        self.store = context.get_state_store(self.store_name)

    def process(self, record: Record) -> None:
        row, key = record.value, record.key
        if not isinstance(row, dict):
            return
        top: list[dict[str, Any]] = self.store.get(key) or []
        place = len(top)
        for i, other in enumerate(top):
            if _compare(row, other, self.order) < 0:  # ties stay in the order read
                place = i
                break
        if place >= self.limit:
            return
        top = [*top[:place], row, *top[place:]][: self.limit]
        self.store.put(key, top)
        for i in range(place, len(top)):
            ranked = {**top[i], self.row_number: i + 1}
            out_key = {**{c: ranked.get(c) for c in self.partition}, self.row_number: i + 1}
            self.context.forward(Record(out_key, ranked, record.timestamp))


class WindowRankRows(Processor):
    """Keeps each partition's first ``limit`` rows by ``order`` per window (the partition
    holds the window bounds) and forwards them, with their row numbers, once: when a row of
    a window that ends later comes (a window aggregation emits its windows in the order of
    their ends, each window's rows together). A row of a window already forwarded is
    dropped."""

    def __init__(
        self,
        order: tuple[tuple[str, bool], ...],
        limit: int,
        partition: tuple[str, ...],
        end: str,
        row_number: str,
        store: str,
    ) -> None:
        self.order = order
        self.limit = limit
        self.partition = partition
        self.end = end
        self.row_number = row_number
        self.store_name = store

    def init(self, context: Any) -> None:
        super().init(context)
        #: index (window end, partition values) -> its top rows; _LAST_END -> the last end
        self.store = context.get_state_store(self.store_name)

    def process(self, record: Record) -> None:
        row = record.value
        if not isinstance(row, dict):
            return
        end = parse_timestamp(row.get(self.end))
        if end is None:
            return
        last = self.store.get(_LAST_END)
        if isinstance(last, int) and end < last:
            return  # its window was forwarded
        index = _window_index(end, [row.get(c) for c in self.partition])
        top: list[dict[str, Any]] = self.store.get(index) or []
        place = len(top)
        for i, other in enumerate(top):
            if _compare(row, other, self.order) < 0:  # ties stay in the order read
                place = i
                break
        if place < self.limit:
            self.store.put(index, [*top[:place], row, *top[place:]][: self.limit])
        if not isinstance(last, int) or end > last:
            self.store.put(_LAST_END, end)
            self._forward_before(end, record.timestamp)

    def _forward_before(self, end: int, timestamp: int) -> None:
        """Forward the top rows of every window that ends before ``end``, in end order."""
        for index, top in list(self.store.range(None, _window_index(end, None))):
            if index == _LAST_END:
                continue
            self.store.delete(index)
            for i, row in enumerate(top):
                self.context.forward(Record(None, {**row, self.row_number: i + 1}, timestamp))


def _window_index(end: int, partition: list[Any] | None) -> str:
    """A window's key in the store: its end (fixed width, so the keys sort by it) then
    its partition values."""
    return f"{end + _INDEX_OFFSET:020d}" + ("" if partition is None else json.dumps(partition))
