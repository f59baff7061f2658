"""Window Top-N and window deduplication directly over a window TVF, as Flink runs them.

    SELECT * FROM (
      SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end[, k]
                                   ORDER BY rowtime DESC) AS rownum
      FROM TABLE(TUMBLE(TABLE T1, DESCRIPTOR(rowtime), INTERVAL '5' SECOND))
    ) WHERE rownum <= 1           -- window deduplication (keep last); <= N: window Top-N

ranks the rows of each window (TUMBLE, HOP or CUMULATE over the event time) and writes
its top rows once, append-only, when stream time passes the window's end plus the
WATERMARK delay (Flink's watermark; Kafka Streams' grace, as the window aggregations
here). A row of a window already written is late and dropped, as Flink's.

The TVF's rows are a view of the table (``windowed_rows``): each row once per window
that holds it, with ``window_start`` and ``window_end`` (epoch ms) added, its record time
its event time. The subquery reads that view; ``WindowTvfRankRows`` keeps each window's
top rows (the window bounds and the other PARTITION BY columns its index) until the
window closes.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from sqlglot import exp

from streaming import serdes
from streaming.dsl import Named, Repartitioned
from streaming.sql import rank_columns
from streaming.sql.catalog import TableDef
from streaming.sql.errors import error_at
from streaming.sql.rewrite import WindowTvf
from streaming.sql.timestamps import parse_timestamp
from streaming.state.stores import Stores
from streaming.topology.processor import Processor, Record

#: added to a window end in a waiting window's index key, so negative times sort too
_INDEX_OFFSET = 1 << 62
#: the key of the stream time in the store (window indexes start with a digit)
_STREAM_TIME = "stream-time"


def windows_of(tvf: WindowTvf, ts: int) -> list[tuple[int, int]]:
    """The (start, end) of every window of ``tvf`` that holds the time ``ts``: TUMBLE's
    one, HOP's of ``slide``-aligned starts >= 0 (as Kafka's ``TimeWindows``), CUMULATE's
    of the row's ``size``-aligned start that end after it."""
    size, slide = tvf.size_ms, tvf.slide_ms
    if tvf.kind == "TUMBLE":
        start = ts - ts % size
        return [(start, start + size)]
    if tvf.kind == "CUMULATE":
        start = ts - ts % size
        first = start + ((ts - start) // slide + 1) * slide
        return [(start, end) for end in range(first, start + size + 1, slide)]
    last = ts - ts % slide
    starts = (last - hop * slide for hop in range(-(-size // slide)))
    return sorted((s, s + size) for s in starts if s >= 0 and s + size > ts)


def windowed_rows(
    compiler: Any,
    select: exp.Select,
    tvf: WindowTvf,
    what: str = "window Top-N or window deduplication",
) -> TableDef:
    """The view of the TVF's rows (each row per window, with its bounds), put in the FROM
    of ``select`` in place of the TVF's table (for ``what``, named in errors)."""
    source: TableDef = compiler.tables[tvf.table]
    at = tvf.offset
    if tvf.kind not in ("TUMBLE", "HOP", "CUMULATE"):
        raise error_at(
            compiler.source,
            at,
            f"{what} over a {tvf.kind} window is not supported",
        )
    if source.watermark is None or source.watermark.column != tvf.column:
        raise error_at(
            compiler.source,
            at,
            f"{what} over {tvf.column} needs it to be the "
            f"WATERMARK column of {source.name} (the processing time is not supported)",
        )
    if source.is_upsert:
        raise error_at(compiler.source, at, f"a window TVF over the updating table {source.name}")
    name = compiler.unique(f"{source.name}$windows")
    view = dataclasses.replace(
        source,
        name=name,
        columns={**source.columns, "window_start": "BIGINT", "window_end": "BIGINT"},
        topic="",
        connector="view",
        primary_key=(),
        key_fields=(),
    )
    compiler.tables[name] = view
    column = tvf.column

    def expand(row: Any) -> list[dict[str, Any]]:
        ts = parse_timestamp(row.get(column)) if isinstance(row, dict) else None
        if ts is None:
            return []
        return [
            {**row, "window_start": start, "window_end": end} for start, end in windows_of(tvf, ts)
        ]

    compiler.views[name] = compiler.source_of(source).flat_map_values(expand)
    from_ = select.args.get("from_") or select.args.get("from")
    table = from_.this if from_ is not None else None
    assert isinstance(table, exp.Table)  # DerivedTables._over_tvf found the TVF's table
    table.set("this", exp.to_identifier(name, quoted=True))
    return view


def rank_tvf_windows(
    compiler: Any, table: TableDef, topn: Any, ranking: Any, delay: int
) -> TableDef:
    """The append-only view of each window's top rows of the view ``table`` (a query of
    a TVF's rows, whose table's WATERMARK delay is ``delay``), registered in its place:
    out once its window closes."""
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
    bound = rank_columns.base_name
    rest = tuple(c for c in topn.partition if bound(c) not in ("window_start", "window_end"))
    end = next(c for c in topn.partition if bound(c) == "window_end")
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
        lambda: WindowTvfRankRows(ranking, topn.partition, end, delay, store),
        store,
        named=Named.as_(compiler.unique(f"{table.name}-window-rank")),
    )
    return view


class WindowTvfRankRows(Processor):
    """Keeps each window's top rows (``ranking``; the partition holds the window bounds)
    and forwards them, with their numbers, once stream time (the largest record time
    read) passes the window's end plus ``delay_ms``; a row of a window already closed is
    dropped."""

    def __init__(
        self, ranking: Any, partition: tuple[str, ...], end: str, delay_ms: int, store: str
    ) -> None:
        self.ranking = ranking
        self.partition = partition
        self.end = end
        self.delay_ms = delay_ms
        self.store_name = store

    def init(self, context: Any) -> None:
        super().init(context)
        #: index (window end, partition values) -> its top rows; _STREAM_TIME -> stream time
        self.store = context.get_state_store(self.store_name)

    def process(self, record: Record) -> None:
        row = record.value
        if not isinstance(row, dict):
            return
        end = parse_timestamp(row.get(self.end))
        if end is None:
            return
        before = self.store.get(_STREAM_TIME)
        stream_time = record.timestamp if not isinstance(before, int) else before
        stream_time = max(stream_time, record.timestamp)
        if stream_time != before:
            self.store.put(_STREAM_TIME, stream_time)
        if isinstance(before, int) and end + self.delay_ms <= before:
            return  # its window closed: a late row
        index = _index(end, [row.get(c) for c in self.partition])
        top: list[dict[str, Any]] = self.store.get(index) or []
        kept = self.ranking.insert(top, row)  # ties stay in the order read
        kept = kept[: len(self.ranking.numbers(kept))]
        if kept != top:
            self.store.put(index, kept)
        self._close_until(stream_time - self.delay_ms)

    def _close_until(self, time: int) -> None:
        """Forward the top rows of every window that ends at or before ``time``, in end
        order."""
        for index, top in list(self.store.range(None, _index(time, None) + "\uffff")):
            if index == _STREAM_TIME:
                continue
            self.store.delete(index)
            end = int(index[:20]) - _INDEX_OFFSET
            for row in self.ranking.top(top):
                self.context.forward(Record(None, row, end - 1))


def _index(end: int, partition: list[Any] | None) -> str:
    """A window's key in the store: its end (fixed width, so the keys sort by it) then
    its partition values."""
    return f"{end + _INDEX_OFFSET:020d}" + ("" if partition is None else json.dumps(partition))
