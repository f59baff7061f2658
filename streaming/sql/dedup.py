"""Deduplication as Flink writes it: ``ROW_NUMBER()`` in a subquery in FROM, filtered on 1.

    SELECT cols FROM (
      SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY t ASC) AS rn FROM table
    ) WHERE rn = 1                           -- or rn <= 1, rn < 2

keeps the first row of each key ``k``, ordered by the time attribute ``t``:

- ``t`` a ``PROCTIME()`` column (or the call ``PROCTIME()`` itself): the first row read,
  out at once (as Flink's, append-only).
- ``t`` the ``WATERMARK`` column: the row with the earliest ``t``, out once stream time
  passes ``t`` plus the WATERMARK delay (the watermark passed it, so no earlier row can
  come): append-only, one row per key, the rows Flink's deduplication ends with once its
  updates are compacted. A row more than the delay behind stream time is late and dropped,
  as a late row of a window is (Flink's takes it and retracts the row it had emitted).

The subquery becomes a view of the deduplicated rows (``DerivedTables.subqueries``):
re-keyed by ``k`` (a repartition topic), then ``FirstRow``, whose state keeps the key of
every row it emitted, for good (Flink's too, without ``'table.exec.state.ttl'``), and the
candidates still waiting for the watermark.

``ORDER BY t DESC`` keeps the last row of each key, as Flink's, an updating result: an
upsert view keyed by ``k`` (``LastRow``), each new row of a key replacing the previous
one at once. On ``PROCTIME()`` every row replaces; on the ``WATERMARK`` column a row
replaces when its ``t`` is at or after the kept row's (Flink's rule: a later row of the
same time wins, an earlier one is dropped), the kept time per key its state. Its sink
needs a PRIMARY KEY of ``k`` (a row whose ``k`` is NULL has no raw Kafka key: under
``'key.format' = 'raw'`` it updates nothing). ``= 1`` ordered by a column that is no time attribute is a
Top-1 (``topn``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from sqlglot import exp

from streaming import serdes
from streaming.dsl import Named, Repartitioned
from streaming.sql import rank_columns
from streaming.sql.catalog import TableDef
from streaming.sql.errors import SqlError, error_at, node_offset
from streaming.sql.timestamps import parse_timestamp
from streaming.state.stores import Stores
from streaming.topology.processor import Processor, Record

#: added to an event time in a candidate's index key, so negative times sort too
_INDEX_OFFSET = 1 << 62
#: the key of the stream time in the emitted-keys store (row keys are JSON lists)
_STREAM_TIME = "stream-time"
#: the order of a deduplication by the ``PROCTIME()`` call (no column of that name)
PROCTIME_CALL = "PROCTIME()"


@dataclass(frozen=True)
class Dedup:
    """A recognised deduplication: its ``ROW_NUMBER() OVER (...)`` and the outer WHERE
    condition on its row number."""

    window: exp.Window
    row_number: str
    partition: tuple[str, ...]
    order: str
    descending: bool
    condition: exp.Expr


def find(select: exp.Select, subquery: exp.Expr) -> Dedup | None:
    """The deduplication of ``subquery`` (in ``select``'s FROM), or None when it is not one
    (another use of ``ROW_NUMBER()`` is Top-N)."""
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
    if (
        not partition
        or not all(isinstance(p, exp.Column) for p in partition)
        or any(p.name in ("window_start", "window_end") for p in partition)  # window dedup
        or len(ordered) != 1
        or not (isinstance(ordered[0].this, exp.Column) or is_proctime_call(ordered[0].this))
        or window.args.get("spec") is not None
    ):
        return None
    condition = _first_row_condition(select.args.get("where"), name)
    if condition is None or _mentions(select, name, condition):
        return None
    return Dedup(
        window=window,
        row_number=name,
        partition=tuple(rank_columns.reference(p) for p in partition),
        order=(
            PROCTIME_CALL
            if is_proctime_call(ordered[0].this)
            else rank_columns.reference(ordered[0].this)
        ),
        descending=bool(ordered[0].args.get("desc")),
        condition=condition,
    )


def by_time(dedup: Dedup, table: TableDef, alias: str) -> bool:
    """Whether the deduplication orders by a time attribute of ``table`` (read as
    ``alias``; a column qualified by another table is not one), else, with ``= 1``, it
    is a Top-1 (``topn``)."""
    if dedup.order == PROCTIME_CALL:
        return True
    qualifier, _, name = dedup.order.rpartition(".")
    if qualifier not in ("", alias, table.name):
        return False
    watermark = table.watermark.column if table.watermark is not None else None
    return name in (table.proctime, watermark)


def is_proctime_call(node: exp.Expr) -> bool:
    """Whether ``node`` is ``PROCTIME()``: the processing time of the row, as Flink lets
    a deduplication order by it without a PROCTIME() column."""
    return (
        isinstance(node, exp.Anonymous) and node.name.upper() == "PROCTIME" and not node.expressions
    )


def _first_row_condition(where: exp.Expr | None, name: str) -> exp.Expr | None:
    """The conjunct of WHERE that keeps row number 1 only (``rn = 1``, ``rn <= 1``, ``rn < 2``)."""
    if where is None:
        return None
    for term in where.this.flatten() if isinstance(where.this, exp.And) else [where.this]:
        if not isinstance(term, exp.EQ | exp.LTE | exp.LT):
            continue
        column, literal = term.this, term.expression
        if not (isinstance(column, exp.Column) and column.name == name):
            continue
        if isinstance(literal, exp.Literal) and not literal.is_string:
            bound = 2 if isinstance(term, exp.LT) else 1
            if literal.this == str(bound):
                return term
    return None


def _mentions(select: exp.Select, name: str, condition: exp.Expr) -> bool:
    """Whether ``select`` reads the row number anywhere but in ``condition``."""
    for column in select.find_all(exp.Column):
        if column.name != name:
            continue
        parent: exp.Expr | None = column
        while parent is not None and parent is not condition:
            parent = parent.parent
        if parent is None:
            return True
    return False


def prepare(inner: exp.Select, dedup: Dedup, source: TableDef | None) -> Dedup:
    """The subquery without its ``ROW_NUMBER()`` column (``*`` is the columns of its FROM
    table ``source``) and with the ORDER BY and PARTITION BY columns it does not select
    as hidden outputs (``rank_columns``); returns the deduplication over the subquery's
    columns."""
    items: list[exp.Expr] = []
    for item in inner.expressions:
        if isinstance(item, exp.Alias) and item.this is dedup.window:
            continue
        if isinstance(item, exp.Star) and source is not None:
            items.extend(exp.column(column) for column in source.columns)
            continue
        items.append(item)
    prepared = replace(
        dedup,
        order=(
            dedup.order if dedup.order == PROCTIME_CALL else rank_columns.output(items, dedup.order)
        ),
        partition=tuple(rank_columns.output(items, ref) for ref in dedup.partition),
    )
    inner.set("expressions", items)
    return prepared


def drop_condition(select: exp.Select, dedup: Dedup) -> None:
    """The outer WHERE without its condition on the row number."""
    where = select.args["where"]
    terms = where.this.flatten() if isinstance(where.this, exp.And) else [where.this]
    rest = [term for term in terms if term is not dedup.condition]
    select.set("where", exp.Where(this=exp.and_(*rest)) if rest else None)


def deduplicate(compiler: Any, table: TableDef, dedup: Dedup) -> Any:
    """The rows of the view ``table`` (already compiled) deduplicated: the new stream of
    the view."""
    at = node_offset(dedup.window)
    source = compiler.source
    proctime = dedup.order in (table.proctime, PROCTIME_CALL)
    event_time = table.watermark is not None and table.watermark.column == dedup.order
    if not (proctime or event_time):
        raise error_at(
            source,
            at,
            f"Top-N (ROW_NUMBER() OVER (... ORDER BY {dedup.order})) is not supported yet: "
            "deduplication orders by a time attribute (the WATERMARK or a PROCTIME() column)",
        )
    if table.is_upsert:
        raise error_at(source, at, "deduplication of an updating input is not supported yet")
    unknown = [c for c in dedup.partition if c not in table.columns]
    if unknown:
        raise _unknown(source, at, unknown[0], table)
    if dedup.descending:
        return _last_rows(compiler, table, dedup, event_time)
    partition = dedup.partition
    seen = compiler.unique(f"{table.name}-dedup")
    builder = compiler.builder
    builder.add_state_store(
        Stores.key_value_store_builder(
            Stores.persistent_key_value_store(seen), serdes.Json(), serdes.Json()
        )
    )
    stores = [seen]
    pending = None
    if event_time:
        pending = compiler.unique(f"{table.name}-dedup-pending")
        builder.add_state_store(
            Stores.key_value_store_builder(
                Stores.persistent_key_value_store(pending), serdes.String(), serdes.Json()
            )
        )
        stores.append(pending)
    delay = table.watermark.delay_ms if event_time and table.watermark else 0
    keyed = (
        compiler.views[table.name]
        .select_key(lambda k, row: [row.get(c) for c in partition])
        .repartition(
            Repartitioned.with_(serdes.Json(), serdes.Json()).with_name(
                compiler.unique(f"{table.name}-dedup")
            )
        )
    )
    return keyed.process(
        lambda: FirstRow(dedup.order, delay, seen, pending),
        *stores,
        named=Named.as_(compiler.unique(f"{table.name}-first-row")),
    )


def _last_rows(compiler: Any, table: TableDef, dedup: Dedup, event_time: bool) -> Any:
    """The upsert view of each key's last row of the view ``table``, registered in its
    place; returns its stream of (key, row)."""
    key = dedup.partition
    view = replace(
        table,
        primary_key=key,
        key_fields=key,
        key_format="raw" if len(key) == 1 else "json",
        watermark=None,
        updated_by=(
            f"deduplication keeping the last row (ORDER BY {dedup.order.lstrip('$')} DESC) "
            "updates its rows"
        ),
    )
    compiler.tables[table.name] = view
    store = None
    if event_time:
        store = compiler.unique(f"{table.name}-last-row")
        compiler.builder.add_state_store(
            Stores.key_value_store_builder(
                Stores.persistent_key_value_store(store), serdes.Json(), serdes.Json()
            )
        )
    keyed = (
        compiler.views[table.name]
        .filter(lambda k, v: isinstance(v, dict))
        .select_key(lambda k, row: [row.get(c) for c in key])
        .repartition(
            Repartitioned.with_(serdes.Json(), serdes.Json()).with_name(
                compiler.unique(f"{table.name}-dedup")
            )
        )
    )
    return keyed.process(
        lambda: LastRow(dedup.order if event_time else None, store, view.key_of),
        *([store] if store is not None else []),
        named=Named.as_(compiler.unique(f"{table.name}-last-row")),
    )


def _unknown(source: str, at: int, column: str, table: TableDef) -> SqlError:
    return error_at(
        source,
        at,
        f"PARTITION BY {column}: unknown column of the subquery ({', '.join(table.columns)})",
    )


class FirstRow(Processor):
    """Forwards each key's first row: the first one read (``pending_store`` None) or the
    one of the earliest ``order`` time, once stream time is ``delay_ms`` past it."""

    def __init__(
        self, order: str, delay_ms: int, seen_store: str, pending_store: str | None
    ) -> None:
        self.order = order
        self.delay_ms = delay_ms
        self.seen_store = seen_store
        self.pending_store = pending_store

    def init(self, context: Any) -> None:
        super().init(context)
        #: key -> True once emitted; on event time the waiting candidate's time otherwise
        self.seen = context.get_state_store(self.seen_store)
        #: index (time, key) -> the waiting candidate row (event time only)
        self.pending = (
            None if self.pending_store is None else context.get_state_store(self.pending_store)
        )
        stored = self.seen.get(_STREAM_TIME)
        self.stream_time = stored if isinstance(stored, int) else None

    def process(self, record: Record) -> None:
        row, key = record.value, record.key
        if not isinstance(row, dict):
            return
        state = self.seen.get(key)
        if self.pending is None:  # processing time: the first row read
            if state is None:
                self.seen.put(key, True)
                self.context.forward(record)
            return
        ts = parse_timestamp(row.get(self.order))
        if ts is None:
            return
        before = self.stream_time
        stream_time = ts if before is None else max(before, ts)
        if stream_time != before:  # every row moves stream time, duplicates too
            self.stream_time = stream_time
            self.seen.put(_STREAM_TIME, stream_time)
        late = before is not None and ts + self.delay_ms < before  # the watermark passed it
        if not late and state is not True and (state is None or ts < state):
            if state is not None:
                self.pending.delete(_index(state, key))
            self.seen.put(key, ts)
            self.pending.put(_index(ts, key), row)
        self._emit_until(stream_time - self.delay_ms)

    def _emit_until(self, watermark: int) -> None:
        """Forward the candidates at or before ``watermark``, in time order."""
        assert self.pending is not None
        due = list(self.pending.range(None, _index(watermark, None) + "\uffff"))
        for index, row in due:
            key = json.loads(index[20:])
            self.seen.put(key, True)
            self.pending.delete(index)
            millis = int(index[:20]) - _INDEX_OFFSET
            self.context.forward(Record(key, row, millis))


class LastRow(Processor):
    """Forwards each row that replaces its key's last row: every row (``order`` None, the
    processing time), or one whose ``order`` time is at or after the kept row's."""

    def __init__(self, order: str | None, store: str | None, key_of: Callable[[Any], Any]) -> None:
        self.order = order
        self.store_name = store
        #: the view's key of a row (None for a NULL key in 'key.format' raw: no upsert)
        self.key_of = key_of

    def init(self, context: Any) -> None:
        super().init(context)
        #: key -> the time of its last row (event time only)
        self.store = None if self.store_name is None else context.get_state_store(self.store_name)

    def process(self, record: Record) -> None:
        row = record.value
        if not isinstance(row, dict):
            return
        out = Record(self.key_of(row), row, record.timestamp)
        if self.store is None or self.order is None:
            self.context.forward(out)
            return
        ts = parse_timestamp(row.get(self.order))
        if ts is None:
            return
        kept = self.store.get(record.key)
        if isinstance(kept, int) and ts < kept:
            return  # an earlier row than the kept one: not the last
        self.store.put(record.key, ts)
        self.context.forward(out)


def _index(ts: int, key: Any) -> str:
    """A candidate's key in the pending store: its time (fixed width, so the keys sort
    by it) then its row key."""
    return f"{ts + _INDEX_OFFSET:020d}" + ("" if key is None else json.dumps(key))
