"""Top-N as Flink writes it: a ranking function in a subquery in FROM, filtered on N.

    SELECT cols FROM (
      SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY sales DESC) AS row_num
      FROM shop_sales
    ) WHERE row_num <= 5             -- or row_num < 6, row_num = 1, row_num = 5 (the 5th)

keeps the first N rows of each partition ``k`` by the ORDER BY columns (rows that tie
in the order they were read). ``RANK()`` and ``DENSE_RANK()`` number rows that tie
alike (``RANK()`` then skips, ``DENSE_RANK()`` does not), so ``<= N`` may keep more
than N rows (Flink's batch ranks; Flink's streaming rank runs ROW_NUMBER() only). The
result is updating, as Flink's rank: here an upsert view whose every change is written
as the difference between a partition's ranked rows before and after a row came: an
upsert per row whose place or number changed, a delete per key that left.

- Its key: with ``ROW_NUMBER()`` in the outer SELECT list (or ``SELECT *``), the
  partition columns and the row number (Flink's rank with its number rewrites those
  places); otherwise (the number left out, or ``RANK()`` / ``DENSE_RANK()``, whose
  numbers are not unique) the row's own key: the input's key for an updating input,
  every column of the row over an append-only one. The sink needs that PRIMARY KEY.
- Over an append-only input a partition keeps its top rows only (no row leaves but by
  being pushed out). Over an updating input (a GROUP BY result, an upsert table: Flink's
  "retract rank") every row of the partition is kept (a row that goes lets a lower one
  back in): ``KGroupedTable.aggregate`` of the partition's ranked rows, the old version
  of a row taken out by the subtractor, then ``RankChanges`` writes the differences.
- ``row_num = N`` for N > 1 keeps the N first rows and filters the N-th in the outer
  query.

Partitioned by ``window_start`` and ``window_end`` over a window aggregation's results
it is a window Top-N: an append-only view of each window's top N rows, forwarded once
when a later window's results come (``WindowRankRows``). Directly over a window TVF it
is a window Top-N or window deduplication of the TVF's rows (``window_rank``).

An ORDER BY of the table's time attribute with ``ROW_NUMBER() = 1`` is deduplication
(``dedup``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from streaming import serdes
from streaming.dsl import Grouped, Materialized, Named, Repartitioned
from streaming.sql import rank_columns, window_rank
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


#: the ranking functions of Top-N, by sqlglot node
RANKINGS = {exp.RowNumber: "ROW_NUMBER", exp.Rank: "RANK", exp.DenseRank: "DENSE_RANK"}


@dataclass(frozen=True)
class TopN:
    """A recognised Top-N: its ranking ``function() OVER (...)``, the rank column's name,
    the partition and order columns (name, descending), N and the outer WHERE condition."""

    window: exp.Window
    row_number: str
    partition: tuple[str, ...]
    order: tuple[tuple[str, bool], ...]
    limit: int
    condition: exp.Expr
    #: a window Top-N: partitioned by ``window_start`` and ``window_end`` (and maybe more)
    by_window: bool = False
    #: ROW_NUMBER, RANK or DENSE_RANK
    function: str = "ROW_NUMBER"
    #: the outer SELECT list has the rank column (by name or ``*``)
    numbered: bool = True
    #: the condition keeps one number (``rn = N``, N > 1): it stays in the outer WHERE
    exact: bool = False
    #: the outer query reads the rank column anywhere but in the limit's condition (a
    #: row whose number alone changes is then written again)
    reads_number: bool = True
    #: a window Top-N directly over a window TVF: the WATERMARK delay of its table and
    #: its time attribute
    tvf_delay_ms: int | None = None
    tvf_time: str | None = None


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
        and type(item.this.this) in RANKINGS
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
    numbered = any(
        isinstance(item, exp.Star) or any(c.name == name for c in item.find_all(exp.Column))
        for item in select.expressions
    )
    exact = isinstance(condition, exp.EQ) and n > 1
    elsewhere = any(
        column.name == name and not _within(column, condition)
        for column in select.find_all(exp.Column)
    )
    return TopN(
        window=window,
        row_number=name,
        partition=tuple(rank_columns.reference(p) for p in partition),
        order=tuple((rank_columns.reference(o.this), bool(o.args.get("desc"))) for o in ordered),
        limit=n,
        condition=condition,
        by_window=bool(bounds),
        function=RANKINGS[type(window.this)],
        numbered=numbered,
        exact=exact,
        reads_number=numbered or exact or elsewhere,
    )


def _within(node: exp.Expr, ancestor: exp.Expr) -> bool:
    """Whether ``node`` is ``ancestor`` or inside it."""
    parent: exp.Expr | None = node
    while parent is not None and parent is not ancestor:
        parent = parent.parent
    return parent is not None


def _limit(where: exp.Expr | None, name: str) -> tuple[exp.Expr, int] | None:
    """The conjunct of WHERE that bounds the row number (``rn <= N``, ``rn < N + 1``,
    ``rn = N``) and N."""
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
        if n >= 1:
            return term, n
    return None


def prepare(inner: exp.Select, topn: TopN, source: TableDef | None) -> TopN:
    """The subquery without its ``ROW_NUMBER()`` column (``*`` is the columns of its FROM
    table ``source``) and with the ORDER BY and PARTITION BY columns it does not select
    as hidden outputs (``rank_columns``); returns the Top-N over the subquery's columns."""
    items: list[exp.Expr] = []
    for item in inner.expressions:
        if isinstance(item, exp.Alias) and item.this is topn.window:
            continue
        if isinstance(item, exp.Star) and source is not None:
            items.extend(exp.column(column) for column in source.columns)
            continue
        items.append(item)
    prepared = dataclasses.replace(
        topn,
        order=tuple((rank_columns.output(items, ref), desc) for ref, desc in topn.order),
        partition=tuple(rank_columns.output(items, ref) for ref in topn.partition),
    )
    inner.set("expressions", items)
    return prepared


def drop_condition(select: exp.Select, topn: TopN) -> None:
    """The outer WHERE without its bound on the row number (the view has N rows); the
    N-th row alone (``rn = N``) stays a filter."""
    if topn.exact:
        return
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
    as the module says; registered in its place."""
    at = node_offset(topn.window)
    source = compiler.source
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
        if table.is_upsert:
            raise error_at(source, at, "window Top-N of an updating input is not supported")
        if topn.tvf_delay_ms is not None:
            # window deduplication keeping the last row: of rows at one time, the last
            # read (Flink's rule); ranked rows that tie otherwise stay in the order read
            keep_last = (
                topn.function == "ROW_NUMBER"
                and topn.limit == 1
                and [(rank_columns.base_name(c), d) for c, d in topn.order]
                == [(topn.tvf_time, True)]
            )
            ranking = Ranking(
                topn.order,
                topn.function,
                topn.limit,
                topn.row_number,
                _no_key,
                latest_first=keep_last,
            )
            return window_rank.rank_tvf_windows(compiler, table, topn, ranking, topn.tvf_delay_ms)
        return _rank_windows(compiler, table, topn)
    if topn.function == "ROW_NUMBER" and topn.numbered:
        key: tuple[str, ...] = (*topn.partition, topn.row_number)
        key_format = "json"
    else:
        key = table.key_fields if table.is_upsert else _visible(table)
        key_format = "raw" if len(key) == 1 else "json"
    view = dataclasses.replace(
        table,
        columns={**table.columns, topn.row_number: "BIGINT"},
        primary_key=key,
        key_fields=key,
        key_format=key_format,
        watermark=None,
        updated_by=f"Top-N ({topn.function}() OVER (PARTITION BY ... ORDER BY ...)) updates "
        "its rows",
    )
    compiler.tables[table.name] = view
    ranking = Ranking(
        topn.order, topn.function, topn.limit, topn.row_number, view.key_of, topn.reads_number
    )
    partition = topn.partition
    name = compiler.unique(f"{table.name}-top-n")
    store = compiler.unique(f"{table.name}-top-n")
    compiler.builder.add_state_store(
        Stores.key_value_store_builder(
            Stores.persistent_key_value_store(store), serdes.Json(), serdes.Json()
        )
    )
    if table.is_upsert:
        # every row of a partition, the old version of an updated row taken out
        rows = compiler.source_of(table).filter(lambda k, v: isinstance(v, dict))
        grouped = rows.group_by(
            lambda k, row: ([row.get(c) for c in partition], row),
            Grouped.with_(key_serde=serdes.Json(), value_serde=serdes.Json(), name=name),
        )
        partitions = grouped.aggregate(
            list,
            lambda k, row, rows: ranking.insert(rows, row),
            lambda k, row, rows: ranking.remove(rows, row),
            materialized=Materialized.as_(compiler.unique(f"{table.name}-rank-rows"))
            .with_key_serde(serdes.Json())
            .with_value_serde(serdes.Json()),
        )
        compiler.views[table.name] = partitions.to_stream().process(
            lambda: RankChanges(ranking, store),
            store,
            named=Named.as_(compiler.unique(f"{table.name}-rank")),
        )
        return view
    keyed = (
        compiler.views[table.name]
        .filter(lambda k, v: isinstance(v, dict))
        .select_key(lambda k, row: [row.get(c) for c in partition])
        .repartition(Repartitioned.with_(serdes.Json(), serdes.Json()).with_name(name))
    )
    compiler.views[table.name] = keyed.process(
        lambda: RankRows(ranking, store),
        store,
        named=Named.as_(compiler.unique(f"{table.name}-rank")),
    )
    return view


def _no_key(row: dict[str, Any]) -> None:
    """The key of an append-only view's row: none."""
    return None


def _visible(table: TableDef) -> tuple[str, ...]:
    """The columns of ``table`` but the hidden ``$column`` outputs: a row's own key."""
    return tuple(c for c in table.columns if c[:1] != "$")


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
    ranking = Ranking(topn.order, topn.function, topn.limit, topn.row_number, _no_key)
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
        lambda: WindowRankRows(ranking, topn.partition, end, store),
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


@dataclass(frozen=True)
class Ranking:
    """How a partition's rows are ranked and written: ``order`` (column, descending),
    the ranking ``function``, the ``limit`` on its numbers, the rank column's name and
    the view's key of a ranked row."""

    order: tuple[tuple[str, bool], ...]
    function: str
    limit: int
    rank_column: str
    key_of: Callable[[dict[str, Any]], Any]
    #: a row whose number alone changed is written again (its reader reads the number)
    writes_number: bool = True
    #: a row goes before the rows it ties with (else after them)
    latest_first: bool = False

    def insert(self, rows: list[dict[str, Any]], row: dict[str, Any]) -> list[dict[str, Any]]:
        """``rows`` (ranked) with ``row`` in its place, after the rows it ties with (before
        them when ``latest_first``)."""
        place = len(rows)
        for i, other in enumerate(rows):
            compared = _compare(row, other, self.order)
            if compared < 0 or (compared == 0 and self.latest_first):
                place = i
                break
        return [*rows[:place], row, *rows[place:]]

    def remove(self, rows: list[dict[str, Any]], row: dict[str, Any]) -> list[dict[str, Any]]:
        """``rows`` without (the first copy of) ``row``."""
        for i, other in enumerate(rows):
            if other == row:
                return [*rows[:i], *rows[i + 1 :]]
        return rows

    def numbers(self, rows: list[dict[str, Any]]) -> list[int]:
        """The rank number of each of ``rows`` (ranked), up to the first past the limit."""
        numbers: list[int] = []
        for i, row in enumerate(rows):
            if i == 0:
                number = 1
            elif self.function == "ROW_NUMBER":
                number = i + 1
            elif _compare(rows[i - 1], row, self.order) == 0:
                number = numbers[-1]
            else:
                number = i + 1 if self.function == "RANK" else numbers[-1] + 1
            if number > self.limit:
                break
            numbers.append(number)
        return numbers

    def top(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The rows within the limit, each with its number."""
        return [
            {**row, self.rank_column: number}
            for row, number in zip(rows, self.numbers(rows), strict=False)
        ]

    def changes(
        self, before: list[dict[str, Any]], after: list[dict[str, Any]]
    ) -> list[tuple[Any, dict[str, Any] | None]]:
        """The (key, row) upserts and (key, None) deletes that turn the written rows
        ``before`` (as ``top`` gave them) into ``after``: deletes first, then the rows
        that changed, in rank order."""
        old = {json.dumps(self.key_of(row)): row for row in before}
        new = {json.dumps(self.key_of(row)): row for row in after}
        out: list[tuple[Any, dict[str, Any] | None]] = [
            (self.key_of(row), None) for key, row in old.items() if key not in new
        ]
        out.extend(
            (self.key_of(row), row)
            for key, row in new.items()
            if key not in old or self._differ(old[key], row)
        )
        return out

    def _differ(self, before: dict[str, Any], after: dict[str, Any]) -> bool:
        if self.writes_number:
            return before != after
        return {**before, self.rank_column: None} != {**after, self.rank_column: None}


class RankRows(Processor):
    """Keeps each partition's top rows of an append-only input (those within the limit)
    and forwards the changes each row makes (``Ranking.changes``)."""

    def __init__(self, ranking: Ranking, store: str) -> None:
        self.ranking = ranking
        self.store_name = store

    def init(self, context: Any) -> None:
        super().init(context)
        #: partition key -> its top rows, in order
        self.store = context.get_state_store(self.store_name)

    def process(self, record: Record) -> None:
        row, key = record.value, record.key
        if not isinstance(row, dict):
            return
        ranking = self.ranking
        rows: list[dict[str, Any]] = self.store.get(key) or []
        kept = ranking.insert(rows, row)
        kept = kept[: len(ranking.numbers(kept))]
        if kept == rows:
            return  # below the top rows
        self.store.put(key, kept)
        for out_key, out_row in ranking.changes(ranking.top(rows), ranking.top(kept)):
            self.context.forward(Record(out_key, out_row, record.timestamp))


class RankChanges(Processor):
    """Forwards the changes of each partition's ranked rows (an updating input's, every
    row kept by ``KGroupedTable.aggregate``) since the rows it last wrote."""

    def __init__(self, ranking: Ranking, store: str) -> None:
        self.ranking = ranking
        self.store_name = store

    def init(self, context: Any) -> None:
        super().init(context)
        #: partition key -> the rows written last (``Ranking.top``)
        self.store = context.get_state_store(self.store_name)

    def process(self, record: Record) -> None:
        rows = record.value if isinstance(record.value, list) else []
        top = self.ranking.top(rows)
        before: list[dict[str, Any]] = self.store.get(record.key) or []
        if top == before:
            return
        self.store.put(record.key, top)
        for out_key, out_row in self.ranking.changes(before, top):
            self.context.forward(Record(out_key, out_row, record.timestamp))


class WindowRankRows(Processor):
    """Keeps each partition's top rows (``ranking``) per window (the partition holds the
    window bounds) and forwards them, with their numbers, once: when a row of
    a window that ends later comes (a window aggregation emits its windows in the order of
    their ends, each window's rows together). A row of a window already forwarded is
    dropped."""

    def __init__(self, ranking: Ranking, partition: tuple[str, ...], end: str, store: str) -> None:
        self.ranking = ranking
        self.partition = partition
        self.end = end
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
        kept = self.ranking.insert(top, row)  # ties stay in the order read
        kept = kept[: len(self.ranking.numbers(kept))]
        if kept != top:
            self.store.put(index, kept)
        if not isinstance(last, int) or end > last:
            self.store.put(_LAST_END, end)
            self._forward_before(end, record.timestamp)

    def _forward_before(self, end: int, timestamp: int) -> None:
        """Forward the top rows of every window that ends before ``end``, in end order."""
        for index, top in list(self.store.range(None, _window_index(end, None))):
            if index == _LAST_END:
                continue
            self.store.delete(index)
            for row in self.ranking.top(top):
                self.context.forward(Record(None, row, timestamp))


def _window_index(end: int, partition: list[Any] | None) -> str:
    """A window's key in the store: its end (fixed width, so the keys sort by it) then
    its partition values."""
    return f"{end + _INDEX_OFFSET:020d}" + ("" if partition is None else json.dumps(partition))
