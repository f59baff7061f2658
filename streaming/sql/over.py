"""OVER aggregations as Flink runs them on a stream.

    SELECT product, amount,
      SUM(amount) OVER (PARTITION BY product ORDER BY order_time
        RANGE BETWEEN INTERVAL '1' HOUR PRECEDING AND CURRENT ROW) AS one_hour_sum
    FROM orders

gives one row per input row (append-only): the row with the aggregates over its frame,
the rows of its partition (PARTITION BY, else all rows) ordered by the table's WATERMARK
column (ascending) that end at it:

- ``RANGE BETWEEN INTERVAL ... PRECEDING AND CURRENT ROW``: the rows at most the interval
  before it; rows at the same time are peers and see each other;
- ``ROWS BETWEEN n PRECEDING AND CURRENT ROW``: the row and the ``n`` rows before it (rows
  at one time in the order they were read);
- ``UNBOUNDED PRECEDING``: every row before it (without a frame: RANGE UNBOUNDED).

A row comes out once the watermark (stream time minus the WATERMARK delay, less 1 ms as
Flink's bounded out-of-orderness watermark) reaches its time, so that no row of its frame
can come after it. A late row is dropped, as Flink drops it: for an UNBOUNDED frame one
at or behind the watermark when it is read, for a bounded frame one at or before the
last time its partition emitted (Flink's rule for bounded frames). Every OVER of one SELECT must have the same window (Flink's rule for
streams); a named window (``OVER w ... WINDOW w AS (...)``) is one. WHERE filters the rows
before they are aggregated; the rows it leaves out still move stream time, as
Flink's watermarks come from the source, before WHERE.

The query reads a view of the rows with the aggregates as hidden ``$over<i>`` columns:
re-keyed by the PARTITION BY columns (a repartition topic), then ``OverAggregate``, whose
state holds per partition the rows waiting for the watermark and the rows still in the
frame (for an UNBOUNDED frame the accumulator instead) and the last time it emitted.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from streaming import serdes
from streaming.dsl import Named, Repartitioned
from streaming.sql import aggregates
from streaming.sql.aggregates import AggregateSpec
from streaming.sql.catalog import TableDef
from streaming.sql.errors import error_at, node_offset
from streaming.sql.expressions import compile_expression
from streaming.sql.rewrite import interval_ms
from streaming.sql.scopes import GroupScope, RowScope
from streaming.sql.timestamps import parse_timestamp
from streaming.state.stores import Stores
from streaming.topology.processor import Processor, Record

#: the ranking functions (Top-N, deduplication), which are no OVER aggregation
RANKINGS = (exp.RowNumber, exp.Rank, exp.DenseRank)
#: added to an event time in a waiting row's index key, so negative times sort too
_INDEX_OFFSET = 1 << 62
#: keys of the stream time and the arrival counter in the frame store (partition keys are
#: JSON lists)
_STREAM_TIME = "stream-time"
_SEQUENCE = "sequence"


@dataclass(frozen=True)
class Frame:
    """An OVER window: PARTITION BY columns, the ORDER BY column, ROWS or RANGE, and how
    far back the frame reaches (rows or ms; None: UNBOUNDED)."""

    partition: tuple[str, ...]
    order: str
    rows: bool
    preceding: int | None


def over_calls(select: exp.Select) -> list[exp.Window]:
    """The OVER aggregations of the SELECT list (not ranking functions)."""
    return [
        window
        for item in select.expressions
        for window in item.find_all(exp.Window)
        if not isinstance(window.this, RANKINGS)
    ]


def over_view(
    compiler: Any, select: exp.Select, source: TableDef, alias: str | None, where: Any
) -> TableDef:
    """The view of ``source``'s rows (those ``where`` keeps) with the OVER aggregates of
    ``select`` as ``$over<i>`` columns; the SELECT list reads those columns instead and
    loses its WHERE and WINDOW clauses."""
    text = compiler.source
    calls = over_calls(select)
    named = {w.alias_or_name: w for w in select.args.get("windows") or []}
    frames = [_frame(text, source, _resolve(text, call, named)) for call in calls]
    for call, frame in zip(calls, frames, strict=True):
        if frame != frames[0]:
            raise error_at(
                text,
                node_offset(call),
                "the OVER windows of one SELECT must be the same (as Flink's on a stream)",
            )
    frame = frames[0]
    if source.is_upsert:
        raise error_at(
            text,
            node_offset(calls[0]),
            f"an OVER aggregation of the updating table {source.name} is not supported "
            "(Flink's needs an append-only input)",
        )
    scope = GroupScope(RowScope(source, text, alias), [], False)
    compiled = []
    for call in calls:
        if not isinstance(call.this, exp.AggFunc):
            raise error_at(
                text, node_offset(call), f"{call.this.sql()} OVER (...): not an aggregate"
            )
        compiled.append(compile_expression(call.this, scope))
    names = [f"$over{i}" for i in range(len(calls))]
    for call, name in zip(calls, names, strict=True):
        call.replace(exp.column(name, quoted=True))
    select.set("where", None)
    select.set("windows", None)
    specs = list(scope.specs)
    values = [c.fn for c in compiled]
    assert source.watermark is not None
    delay = source.watermark.delay_ms
    store = compiler.unique(f"{source.name}-over")
    waiting = compiler.unique(f"{source.name}-over-waiting")
    builder = compiler.builder
    builder.add_state_store(
        Stores.key_value_store_builder(
            Stores.persistent_key_value_store(store), serdes.Json(), serdes.Json()
        )
    )
    builder.add_state_store(
        Stores.key_value_store_builder(
            Stores.persistent_key_value_store(waiting), serdes.String(), serdes.Json()
        )
    )
    partition = frame.partition
    keyed = (
        compiler.source_of(source)
        .filter(lambda k, v: isinstance(v, dict))
        .select_key(lambda k, row: [row.get(c) for c in partition])
        .repartition(
            Repartitioned.with_(serdes.Json(), serdes.Json()).with_name(
                compiler.unique(f"{source.name}-over")
            )
        )
    )
    view = dataclasses.replace(
        source,
        name=compiler.unique(f"{source.name}-over-view"),
        connector="view",
        columns={**source.columns, **{n: c.kind for n, c in zip(names, compiled, strict=True)}},
        options={k: v for k, v in source.options.items() if k != "table.type"},
    )
    compiler.views[view.name] = keyed.process(
        lambda: OverAggregate(frame, specs, values, names, where, delay, store, waiting),
        store,
        waiting,
        named=Named.as_(compiler.unique(f"{source.name}-over-aggregate")),
    )
    return view


def _resolve(text: str, call: exp.Window, named: dict[str, exp.Window]) -> exp.Window:
    """The window of ``call``: its own, or the named window ``OVER w`` refers to."""
    if any(call.args.get(arg) for arg in ("partition_by", "order", "spec")):
        return call
    name = call.alias_or_name
    if name and name in named:
        return named[name]
    if name:
        raise error_at(text, node_offset(call), f"unknown window {name}")
    return call


def _frame(text: str, source: TableDef, window: exp.Window) -> Frame:
    """The frame of an OVER window, or an error saying what Flink does not run."""
    at = node_offset(window)
    partition = window.args.get("partition_by") or []
    for column in partition:
        if not isinstance(column, exp.Column):
            raise error_at(text, node_offset(column), "PARTITION BY takes columns")
        if column.name not in source.columns:
            raise error_at(
                text,
                node_offset(column),
                f"PARTITION BY {column.name}: unknown column of {source.name}",
            )
    order = window.args.get("order")
    ordered = order.expressions if order is not None else []
    watermark = source.watermark.column if source.watermark is not None else None
    if len(ordered) != 1 or not isinstance(ordered[0].this, exp.Column):
        raise error_at(
            text,
            node_offset(order) if order is not None else at,
            "an OVER aggregation orders by one time attribute: ORDER BY "
            f"{watermark or 'the WATERMARK column'}",
        )
    column = ordered[0].this
    if source.proctime is not None and column.name == source.proctime:
        raise error_at(
            text,
            node_offset(column),
            f"an OVER aggregation ordered by processing time ({column.name}, PROCTIME()) "
            "is not supported yet: order by the WATERMARK column",
        )
    if column.name != watermark:
        raise error_at(
            text,
            node_offset(column),
            f"ORDER BY {column.name}: an OVER aggregation orders by the time attribute "
            f"(the WATERMARK column{' ' + watermark if watermark else ''} of {source.name})",
        )
    if ordered[0].args.get("desc"):
        raise error_at(
            text,
            node_offset(column),
            f"ORDER BY {column.name} DESC: an OVER aggregation orders by ascending time",
        )
    spec = window.args.get("spec")
    if spec is None:  # Flink's default frame
        return Frame(tuple(c.name for c in partition), column.name, False, None)
    rows = str(spec.args.get("kind") or "").upper() == "ROWS"
    end = spec.args.get("end")
    if str(end or "").upper() != "CURRENT ROW" or spec.args.get("end_side"):
        raise error_at(
            text,
            _spec_offset(spec, at),
            "an OVER frame ends at CURRENT ROW (FOLLOWING rows are not supported on a stream)",
        )
    start, side = spec.args.get("start"), str(spec.args.get("start_side") or "").upper()
    preceding: int | None
    if str(start).upper() == "UNBOUNDED" and side == "PRECEDING":
        preceding = None
    elif str(start).upper() == "CURRENT ROW" and not side:
        preceding = 0
    elif side != "PRECEDING":
        raise error_at(
            text, _spec_offset(spec, at), "an OVER frame starts PRECEDING or at CURRENT ROW"
        )
    elif rows:
        if not (isinstance(start, exp.Literal) and not start.is_string and start.this.isdigit()):
            raise error_at(
                text,
                _spec_offset(spec, at),
                f"ROWS BETWEEN {start.sql()} PRECEDING: ROWS needs a number of rows",
            )
        preceding = int(start.this)
    else:
        if not isinstance(start, exp.Interval):
            raise error_at(
                text,
                _spec_offset(spec, at),
                f"RANGE BETWEEN {start.sql()} PRECEDING: RANGE on time needs an INTERVAL",
            )
        preceding = interval_ms(start, text, _spec_offset(spec, at))
    return Frame(tuple(c.name for c in partition), column.name, rows, preceding)


def _spec_offset(spec: exp.Expr, default: int) -> int:
    offsets = [
        node_offset(n)
        for n in spec.walk()
        if getattr(n, "meta", None) and isinstance(n.meta.get("start"), int)
    ]
    return min(offsets) if offsets else default


class OverAggregate(Processor):
    """Forwards each row ``where`` keeps with its OVER aggregates as ``names``, in time
    order per partition key, once the watermark reaches its time; every row moves stream
    time."""

    def __init__(
        self,
        frame: Frame,
        specs: list[AggregateSpec],
        values: list[Any],
        names: list[str],
        where: Any,
        delay_ms: int,
        store: str,
        waiting_store: str,
    ) -> None:
        self.frame = frame
        self.specs = specs
        self.values = values
        self.names = names
        self.where = where
        self.delay_ms = delay_ms
        self.store_name = store
        self.waiting_name = waiting_store

    def init(self, context: Any) -> None:
        super().init(context)
        #: partition key -> {"rows": rows in the frame, "acc": accumulator (UNBOUNDED)}
        self.store = context.get_state_store(self.store_name)
        #: index (time, partition key, arrival) -> a row waiting for the watermark
        self.waiting = context.get_state_store(self.waiting_name)
        stored = self.store.get(_STREAM_TIME)
        self.stream_time = stored if isinstance(stored, int) else None
        self.sequence = self.store.get(_SEQUENCE) or 0

    def process(self, record: Record) -> None:
        row, key = record.value, record.key
        if not isinstance(row, dict):
            return
        ts = parse_timestamp(row.get(self.frame.order))
        if ts is None:
            return
        before = self.stream_time
        if self._late(key, ts, before):
            return
        if self.where(row):
            self.sequence += 1
            self.store.put(_SEQUENCE, self.sequence)
            self.waiting.put(_index(ts, key) + f"\x00{self.sequence:020d}", row)
        stream_time = ts if before is None else max(before, ts)
        if stream_time != before:
            self.stream_time = stream_time
            self.store.put(_STREAM_TIME, stream_time)
        self._emit_until(stream_time - self.delay_ms - 1)

    def _late(self, key: Any, ts: int, stream_time: int | None) -> bool:
        """Whether a row at ``ts`` comes too late, by Flink's rules: for an UNBOUNDED
        frame, at or behind the watermark; for a bounded one, at or before the last time
        its partition emitted."""
        if self.frame.preceding is None:
            return stream_time is not None and ts <= stream_time - self.delay_ms - 1
        state = self.store.get(key)
        return state is not None and ts <= state["last"]

    def _emit_until(self, watermark: int) -> None:
        """Aggregate and forward the waiting rows at or before ``watermark``, in time
        order, the rows of one key and time together (peers)."""
        due = list(self.waiting.range(None, _index(watermark, None) + "\uffff"))
        groups: dict[str, list[dict[str, Any]]] = {}
        for index, row in due:
            self.waiting.delete(index)
            groups.setdefault(index.split("\x00")[0], []).append(row)
        for prefix, rows in groups.items():
            key = json.loads(prefix[20:])
            ts = int(prefix[:20]) - _INDEX_OFFSET
            for out in self._aggregate(key, ts, rows):
                self.context.forward(Record(key, out, ts))

    def _aggregate(self, key: Any, ts: int, peers: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The peers (rows of ``key`` at ``ts``, in arrival order) with their aggregates;
        the key's frame state moves past them."""
        frame = self.frame
        state = self.store.get(key) or {"rows": [], "acc": None}
        outputs = []
        if frame.preceding is None:  # UNBOUNDED: an accumulator
            acc = state["acc"] if state["acc"] is not None else self._initial()
            if frame.rows:
                for row in peers:
                    acc = self._add(acc, row)
                    outputs.append(self._output(row, acc))
            else:
                for row in peers:
                    acc = self._add(acc, row)
                outputs = [self._output(row, acc) for row in peers]
            self.store.put(key, {"rows": [], "acc": acc, "last": ts})
            return outputs
        kept: list[list[Any]] = state["rows"]
        if frame.rows:
            for row in peers:
                kept = [*kept, [ts, row]][-(frame.preceding + 1) :]
                outputs.append(self._output(row, self._over(kept)))
        else:
            kept = [pair for pair in kept if pair[0] >= ts - frame.preceding]
            kept += [[ts, row] for row in peers]
            acc = self._over(kept)
            outputs = [self._output(row, acc) for row in peers]
        self.store.put(key, {"rows": kept, "acc": None, "last": ts})
        return outputs

    def _initial(self) -> list[Any]:
        return [aggregates.initial(spec) for spec in self.specs]

    def _add(self, acc: list[Any], row: dict[str, Any]) -> list[Any]:
        return [aggregates.add(spec, s, row) for spec, s in zip(self.specs, acc, strict=True)]

    def _over(self, kept: list[list[Any]]) -> list[Any]:
        acc = self._initial()
        for _, row in kept:
            acc = self._add(acc, row)
        return acc

    def _output(self, row: dict[str, Any], acc: list[Any]) -> dict[str, Any]:
        aggs = {"aggs": aggregates.results(self.specs, acc)}
        return {**row, **{n: fn(aggs) for n, fn in zip(self.names, self.values, strict=True)}}


def _index(ts: int, key: Any) -> str:
    """A waiting row's key prefix: its time (fixed width, so the keys sort by it) then
    its partition key."""
    return f"{ts + _INDEX_OFFSET:020d}" + ("" if key is None else json.dumps(key))
