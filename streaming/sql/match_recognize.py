"""MATCH_RECOGNIZE as Flink runs it: row pattern recognition on the Processor API.

    SELECT T.small_amount, T.large_amount
    FROM payments MATCH_RECOGNIZE (
      PARTITION BY card ORDER BY ts
      MEASURES A.amount AS small_amount, B.amount AS large_amount
      ONE ROW PER MATCH
      AFTER MATCH SKIP PAST LAST ROW
      PATTERN (A B) WITHIN INTERVAL '10' MINUTE
      DEFINE A AS A.amount < 5, B AS B.amount > A.amount * 100
    ) AS T

reads a view of the matches: one row per match (Flink's only mode) of the PARTITION BY
columns then the MEASURES, append-only, stamped with the time of the match's last row.

- ORDER BY starts with the time attribute, ascending: the WATERMARK column (event time:
  a row waits until the watermark, stream time minus the WATERMARK delay less 1 ms,
  reaches it, so the rows of a partition are matched in time order; a row at or behind
  the watermark when it is read is late and dropped, as Flink's CEP operator drops it)
  or the ``PROCTIME()`` column (rows are matched as they are read). Further ORDER BY
  columns order the rows of one time.
- PATTERN: variables with ``*``, ``+``, ``?``, ``{n}``, ``{n,}``, ``{,m}``, ``{n,m}``,
  greedy or reluctant (``?`` after them), matched as Flink's CEP does (``row_pattern``);
  WITHIN bounds the time from a match's first row to its last (exclusive).
- DEFINE and MEASURES: ``A.col`` is the last row mapped to ``A`` (in DEFINE of ``A``, the
  row being tried), a bare ``col`` the last row of the match; ``FIRST(A.col, n)`` /
  ``LAST(A.col, n)`` the n-th row from the first / last one of ``A`` (or of the match);
  ``PREV(col, n)`` the row ``n`` (default 1) before the last one among the match's rows;
  aggregates (COUNT, SUM, AVG, MIN, MAX, Python aggregate functions) over the rows of one
  variable (or of the match); ``MATCH_ROWTIME()`` the time of the match's last row (the
  view's time attribute, so a window aggregation can follow). A variable without DEFINE
  takes every row.
- AFTER MATCH SKIP: PAST LAST ROW, TO NEXT ROW (the default, as Calcite's), TO FIRST v,
  TO LAST v (``row_pattern.Skip``).

The rows are re-keyed by the PARTITION BY columns (a repartition topic), then
``MatchRecognize`` keeps, per partition, the partial matches (and the count of rows fed)
in a state store, and the rows waiting for the watermark in a second one, with an index
of when each partition's first partial match times out (WITHIN): the watermark ends
them in every partition, as Flink's operator does (on processing time, the partition's
next row does). Not supported, as in Flink: ALL ROWS PER MATCH, SUBSET, pattern groups,
alternation, PERMUTE, anchors, ``A??``, CLASSIFIER(), NEXT().
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from streaming import serdes
from streaming.dsl import Named, Repartitioned
from streaming.sql import aggregates
from streaming.sql.catalog import TableDef
from streaming.sql.derived import span
from streaming.sql.errors import SqlError, error_at, node_offset
from streaming.sql.expressions import Compiled, compile_expression, fail
from streaming.sql.match_clause import MatchClause
from streaming.sql.rewrite import Statement, Watermark, interval_ms
from streaming.sql.row_pattern import (
    Element,
    MatchContext,
    Matcher,
    PatternError,
    Skip,
    parse_pattern,
)
from streaming.sql.scopes import GroupScope, RowScope
from streaming.sql.timestamps import parse_timestamp
from streaming.state.stores import Stores
from streaming.topology.processor import Processor, Record

#: added to an event time in a waiting row's index key, so negative times sort too
_INDEX_OFFSET = 1 << 62
#: keys of the stream time and the arrival counter in the state store (partition keys
#: are JSON lists)
_STREAM_TIME = "stream-time"
_SEQUENCE = "sequence"


def take_match(statement: Statement, table: str) -> MatchClause | None:
    """The statement's next MATCH_RECOGNIZE if it reads ``table``."""
    clauses = statement.match_recognize
    if clauses and clauses[0].after == table:
        return clauses.pop(0)
    return None


def bind_clauses(tree: exp.Expr, statement: Statement, source: str) -> None:
    """Bind each MATCH_RECOGNIZE of the statement to the FROM it follows, once parsed: a
    subquery before it is named (its alias, else ``match$n``) so the clause reads the
    subquery's view; ``SELECT *`` over it becomes its columns (the PARTITION BY columns,
    then the MEASURES names), before views and subqueries read SELECT lists."""
    clauses = statement.match_recognize
    for i, clause in enumerate(clauses):
        if clause.subquery_end is not None and not clause.after:
            clauses[i] = dataclasses.replace(clause, after=_name_subquery(tree, clause, i))
    pending = list(clauses)
    for select in tree.find_all(exp.Select):
        from_ = select.args.get("from_")
        if from_ is None:
            continue
        name = from_.this.alias_or_name if isinstance(from_.this, exp.Subquery) else None
        if isinstance(from_.this, exp.Table):
            name = from_.this.name
        bound = next((c for c in pending if c.after == name), None)
        if bound is None:
            continue
        pending.remove(bound)
        if select.args.get("joins"):
            raise error_at(
                source,
                bound.offset,
                "MATCH_RECOGNIZE in a join is not supported yet: join its view",
            )
        items = select.expressions
        if len(items) == 1 and isinstance(items[0], exp.Star):
            select.set("expressions", [exp.column(c, quoted=True) for c in columns_of(bound)])


def _name_subquery(tree: exp.Expr, clause: MatchClause, n: int) -> str:
    """The name of the subquery in FROM that ends right before ``clause`` (given one if it
    has none)."""
    before = [
        q
        for q in tree.find_all(exp.Subquery)
        if isinstance(q.parent, exp.From) and span(q)[1] < clause.offset
    ]
    outer = [q for q in before if not any(q is not o and _inside(q, o) for o in before)]
    if not outer:
        return ""  # not after a FROM subquery: refused as unread (``unconsumed``)
    subquery = max(outer, key=lambda q: span(q)[0])
    if not subquery.alias:
        subquery.set("alias", exp.TableAlias(this=exp.to_identifier(f"match${n + 1}", quoted=True)))
    return subquery.alias


def _inside(node: exp.Expr, other: exp.Expr) -> bool:
    parent = node.parent
    while parent is not None:
        if parent is other:
            return True
        parent = parent.parent
    return False


def columns_of(clause: MatchClause) -> list[str]:
    """The names of a MATCH_RECOGNIZE's columns, as written (checked when compiled)."""
    node = clause.node
    names = [c.name for c in node.args.get("partition_by") or [] if isinstance(c, exp.Column)]
    for measure in node.args.get("measures") or []:
        if isinstance(measure.this, exp.Alias):
            names.append(measure.this.alias)
    return names


@dataclass
class VariableRowScope(RowScope):
    """The columns of one row, qualified by a pattern variable or not (inside FIRST,
    LAST, PREV and aggregates: the row is the one they chose)."""

    variables: frozenset[str] = frozenset()

    def column(self, node: exp.Column) -> Compiled:
        if node.table and node.table not in self.variables:
            raise fail(self, node, f"unknown pattern variable {node.table} in {node.sql()}")
        name = node.name
        if name not in self.table.columns:
            raise fail(self, node, f"unknown column {name} in table {self.table.name}")
        return Compiled(lambda row: row.get(name), self.table.columns[name])


@dataclass
class PatternScope:
    """DEFINE and MEASURES expressions: evaluated over a ``MatchContext``."""

    rows: VariableRowScope
    #: the time attribute MATCH_ROWTIME() reads (None: the table has no WATERMARK)
    rowtime: str | None

    @property
    def source(self) -> str:
        return self.rows.source

    def column(self, node: exp.Column) -> Compiled:
        compiled = self.rows.column(node)
        variable, read = node.table or None, compiled.fn
        return Compiled(_navigate(variable, -1, read), compiled.kind)

    def aggregate(self, node: exp.AggFunc) -> Compiled:
        variable = self.variable(node)
        group = GroupScope(self.rows, [], False)
        compiled = group.aggregate(node)
        spec = group.specs[0]

        def evaluate(ctx: Any) -> Any:
            state = aggregates.initial(spec)
            for row in ctx.of(variable):
                state = aggregates.add(spec, state, row)
            return aggregates.result(spec, state)

        return Compiled(evaluate, compiled.kind)

    def window_function(self, node: exp.Anonymous) -> Compiled:
        name = node.name.upper()
        args = node.expressions
        if name in ("FIRST", "LAST", "PREV"):
            if not args or len(args) > 2:
                raise fail(self, node, f"{name} takes (expression[, offset])")
            offset = self.offset(node, args[1]) if len(args) == 2 else int(name == "PREV")
            inner = compile_expression(args[0], self.rows)
            variable = None if name == "PREV" else self.variable(args[0])
            index = offset if name == "FIRST" else -1 - offset
            read = inner.fn
            return Compiled(_navigate(variable, index, read), inner.kind)
        if name == "MATCH_ROWTIME":
            column = self.rowtime
            if column is None:
                raise fail(
                    self, node, "MATCH_ROWTIME() needs ORDER BY the WATERMARK column (event time)"
                )
            return Compiled(_navigate(None, -1, lambda row: row.get(column)), "TIMESTAMP")
        if name in ("NEXT", "CLASSIFIER", "MATCH_PROCTIME", "RUNNING", "FINAL"):
            raise fail(self, node, f"{name}() in MATCH_RECOGNIZE is not supported (as in Flink)")
        raise fail(self, node, f"unknown function {node.name}")

    def offset(self, node: exp.Expr, literal: exp.Expr) -> int:
        if not (
            isinstance(literal, exp.Literal) and not literal.is_string and literal.this.isdigit()
        ):
            raise fail(self, node, f"the offset of {node.sql()} must be a whole number")
        return int(literal.this)

    def variable(self, node: exp.Expr) -> str | None:
        """The one pattern variable ``node``'s columns name (None: none names one)."""
        named = sorted({c.table for c in node.find_all(exp.Column) if c.table})
        if len(named) > 1:
            raise fail(
                self,
                node,
                f"{node.sql()} reads the rows of {', '.join(named)}: it may read one pattern "
                "variable's (as in Flink)",
            )
        return named[0] if named else None


def _navigate(variable: str | None, index: int, read: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``ctx -> read(row)`` of the ``index``-th row mapped to ``variable`` (None: of the
    match), NULL when there is no such row."""

    def evaluate(ctx: MatchContext) -> Any:
        rows = ctx.of(variable)
        return read(rows[index]) if -len(rows) <= index < len(rows) else None

    return evaluate


def _holds(fn: Callable[[Any], Any]) -> Callable[[MatchContext], bool]:
    """A DEFINE condition: TRUE takes the row, FALSE and NULL do not."""
    return lambda ctx: fn(ctx) is True


def _navigations(node: exp.Expr) -> exp.Expr:
    """``node`` with FIRST(...) / LAST(...) as plain calls (the scope's window functions)."""

    def plain(n: exp.Expr) -> exp.Expr:
        if isinstance(n, exp.First | exp.Last):
            args = [a for a in (n.this, n.args.get("expression")) if a is not None]
            call = exp.Anonymous(this=type(n).__name__.upper(), expressions=args)
            call.meta.update(n.meta)
            return call
        return n

    return node.transform(plain, copy=False)


@dataclass(frozen=True)
class CompiledMatch:
    """A MATCH_RECOGNIZE clause compiled: its matcher, the view's row of a match, its
    columns, and how the rows are ordered (the time column, the WATERMARK column or None
    for PROCTIME(), further (column, DESC))."""

    matcher: Matcher
    output: Callable[[MatchContext], dict[str, Any]]
    partition: list[str]
    columns: dict[str, str]
    order: str
    rowtime: str | None
    secondary: list[tuple[str, bool]]
    #: the measures that are MATCH_ROWTIME() (the view's time attribute)
    matched_rowtime: list[str]


def compile_match(text: str, source: TableDef, clause: MatchClause) -> CompiledMatch:
    """Compile ``clause`` over ``source``'s rows (``SqlError`` for what Flink refuses);
    the stream (``match_view``) and the batch translation (``batch_match``) share it."""
    node = clause.node
    if source.is_upsert:
        raise error_at(
            text,
            clause.offset,
            f"MATCH_RECOGNIZE over the updating table {source.name} is not supported (as in "
            "Flink, it reads an append-only table)",
        )
    rows_mode = node.args.get("rows")
    if rows_mode is not None and not str(rows_mode.name).upper().startswith("ONE ROW"):
        raise error_at(
            text,
            clause.keywords.get("ALL", clause.offset),
            "ALL ROWS PER MATCH is not supported (as in Flink): ONE ROW PER MATCH",
        )
    try:
        elements = parse_pattern(clause.pattern)
    except PatternError as e:
        raise error_at(text, clause.pattern_offset + e.offset, str(e)) from None
    variables = frozenset(e.variable for e in elements)
    skip = _skip(text, clause, elements)
    partition = _partition(text, node, source)
    order, rowtime, secondary = _order(text, clause, node, source)
    scope = PatternScope(VariableRowScope(source, text, None, variables), rowtime)
    conditions = _conditions(text, node, scope, variables)
    measures = _measures(text, node, scope, partition)
    within = None
    if clause.within is not None:
        within = interval_ms(clause.within, text, clause.within_offset)
        if within <= 0:
            raise error_at(text, clause.within_offset, "WITHIN needs a positive interval")
    columns = {c: source.columns[c] for c in partition}
    columns.update({name: compiled.kind for name, compiled in measures})
    return CompiledMatch(
        Matcher(elements, conditions, skip, within),
        _output(partition, measures),
        partition,
        columns,
        order,
        rowtime,
        secondary,
        [name for name, _ in measures if _is_match_rowtime(node, name)],
    )


def match_view(
    compiler: Any, select: exp.Select, source: TableDef, alias: str | None, clause: MatchClause
) -> TableDef:
    """The view of the matches of ``clause`` over ``source``'s rows: the PARTITION BY
    columns then the MEASURES; ``SELECT *`` becomes those columns."""
    compiled = compile_match(compiler.source, source, clause)
    matcher, output, partition = compiled.matcher, compiled.output, compiled.partition
    columns, order, rowtime = compiled.columns, compiled.order, compiled.rowtime
    secondary, matched_rowtime = compiled.secondary, compiled.matched_rowtime
    if len(select.expressions) == 1 and isinstance(select.expressions[0], exp.Star):
        select.set("expressions", [exp.column(c, quoted=True) for c in columns])
    event_time = rowtime is not None
    delay = source.watermark.delay_ms if event_time and source.watermark else 0
    store = compiler.unique(f"{source.name}-match")
    waiting = compiler.unique(f"{source.name}-match-waiting")
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
    keyed = (
        compiler.source_of(source)
        .filter(lambda k, v: isinstance(v, dict))
        .select_key(lambda k, row: [row.get(c) for c in partition])
        .repartition(
            Repartitioned.with_(serdes.Json(), serdes.Json()).with_name(
                compiler.unique(f"{source.name}-match-partitioned")
            )
        )
    )
    view = dataclasses.replace(
        source,
        name=compiler.unique(f"{source.name}-match-view"),
        connector="view",
        columns=columns,
        primary_key=(),
        key_fields=(),
        column_types={c: t for c, t in source.column_types.items() if c in partition},
        options={k: v for k, v in source.options.items() if k != "table.type"},
        watermark=(
            Watermark(matched_rowtime[0], delay, clause.offset) if matched_rowtime else None
        ),
        proctime=None,
        window_bound=False,
    )
    compiler.views[view.name] = keyed.process(
        lambda: MatchRecognize(
            matcher, output, order, secondary, event_time, delay, store, waiting
        ),
        store,
        waiting,
        named=Named.as_(compiler.unique(f"{source.name}-match-recognize")),
    )
    return view


def _skip(text: str, clause: MatchClause, elements: tuple[Element, ...]) -> Skip:
    """AFTER MATCH SKIP ..., checked against the pattern."""
    if not clause.skip:
        return Skip()
    at = clause.keywords.get("AFTER", clause.offset)
    words = list(clause.skip)
    said = " ".join(words).upper()
    if said in ("PAST LAST ROW", "TO NEXT ROW"):
        return Skip(said)
    if len(words) == 2 and words[0].upper() == "TO":
        words = ["TO", "LAST", words[1]]  # SKIP TO v is SKIP TO LAST v
    if len(words) != 3 or words[0].upper() != "TO" or words[1].upper() not in ("FIRST", "LAST"):
        raise error_at(text, at, f"cannot read AFTER MATCH SKIP {' '.join(words)}")
    mode, variable = f"TO {words[1].upper()}", words[2]
    names = [e.variable for e in elements]
    if variable not in names:
        raise error_at(
            text, at, f"AFTER MATCH SKIP {mode} {variable}: {variable} is no variable of PATTERN"
        )
    first = elements[0]
    if (
        variable == first.variable
        and first.minimum >= 1
        and (mode == "TO FIRST" or first.maximum == 1)
    ):
        raise error_at(
            text,
            at,
            f"AFTER MATCH SKIP {mode} {variable} skips to the first row of every match, where "
            "the next match would start again (an error in Flink too)",
        )
    return Skip(mode, variable)


def _partition(text: str, node: exp.MatchRecognize, source: TableDef) -> list[str]:
    partition = []
    for column in node.args.get("partition_by") or []:
        if not isinstance(column, exp.Column):
            raise error_at(text, node_offset(column), "PARTITION BY takes columns")
        if column.name not in source.columns:
            raise error_at(
                text,
                node_offset(column),
                f"PARTITION BY {column.name}: unknown column of {source.name}",
            )
        partition.append(column.name)
    return partition


def _order(
    text: str, clause: MatchClause, node: exp.MatchRecognize, source: TableDef
) -> tuple[str, str | None, list[tuple[str, bool]]]:
    """(time column, the rowtime column or None for PROCTIME(), further (column, DESC))."""
    order = node.args.get("order")
    ordered = order.expressions if order is not None else []
    watermark = source.watermark.column if source.watermark is not None else None
    attributes = [c for c in (watermark, source.proctime) if c]
    at = node_offset(order) if order is not None else clause.offset
    wanted = " or ".join(attributes) or "a time attribute (a WATERMARK or PROCTIME() column)"
    if not ordered or not isinstance(ordered[0].this, exp.Column):
        raise error_at(
            text, at, f"MATCH_RECOGNIZE needs ORDER BY a time attribute first: ORDER BY {wanted}"
        )
    first = ordered[0].this.name
    if first not in attributes or ordered[0].args.get("desc"):
        raise error_at(
            text,
            node_offset(ordered[0]),
            f"MATCH_RECOGNIZE orders by a time attribute first, ascending: ORDER BY {wanted}",
        )
    secondary = []
    for item in ordered[1:]:
        column = item.this
        if not isinstance(column, exp.Column) or column.name not in source.columns:
            raise error_at(
                text, node_offset(item), f"ORDER BY {item.sql()}: a column of {source.name}"
            )
        secondary.append((column.name, bool(item.args.get("desc"))))
    return first, (first if first == watermark else None), secondary


def _conditions(
    text: str, node: exp.MatchRecognize, scope: PatternScope, variables: frozenset[str]
) -> dict[str, Callable[[MatchContext], bool]]:
    conditions: dict[str, Callable[[MatchContext], bool]] = {}
    for item in node.args.get("define") or []:
        name = item.alias
        if name not in variables:
            raise error_at(
                text, node_offset(item), f"DEFINE {name}: {name} is no variable of PATTERN"
            )
        if name in conditions:
            raise error_at(text, node_offset(item), f"DEFINE {name} is given twice")
        condition = _navigations(item.this)
        compiled = compile_expression(condition, scope)
        if compiled.kind not in ("BOOLEAN", "NULL"):
            raise error_at(
                text,
                node_offset(condition),
                f"type mismatch: DEFINE {name} needs a BOOLEAN, {condition.sql()} is "
                f"{compiled.kind}",
            )
        conditions[name] = _holds(compiled.fn)
    return conditions


def _measures(
    text: str, node: exp.MatchRecognize, scope: PatternScope, partition: list[str]
) -> list[tuple[str, Compiled]]:
    measures: list[tuple[str, Compiled]] = []
    for measure in node.args.get("measures") or []:
        item = measure.this
        if not isinstance(item, exp.Alias):
            raise error_at(
                text, node_offset(item), f"the measure {item.sql()} needs a name: ... AS name"
            )
        name = item.alias
        if name in partition or any(name == n for n, _ in measures):
            raise error_at(text, node_offset(item), f"the column {name} is named twice")
        item.set("this", _navigations(item.this))
        measures.append((name, compile_expression(item.this, scope)))
    return measures


def _is_match_rowtime(node: exp.MatchRecognize, name: str) -> bool:
    """Whether the measure ``name`` is ``MATCH_ROWTIME()`` (the view's time attribute)."""
    for measure in node.args.get("measures") or []:
        item = measure.this
        if isinstance(item, exp.Alias) and item.alias == name:
            value = item.this
            return isinstance(value, exp.Anonymous) and value.name.upper() == "MATCH_ROWTIME"
    return False


def _output(
    partition: list[str], measures: list[tuple[str, Compiled]]
) -> Callable[[MatchContext], dict[str, Any]]:
    """The view's row of a match."""
    fns = [(name, compiled.fn) for name, compiled in measures]

    def row(match: MatchContext) -> dict[str, Any]:
        last = match.rows[-1][1]
        out = {c: last.get(c) for c in partition}
        out.update({name: fn(match) for name, fn in fns})  # type: ignore[arg-type]
        return out

    return row


class MatchRecognize(Processor):
    """Feeds each partition's rows, in ORDER BY order, to its partial matches (kept in
    ``store``) and forwards a row per match, stamped with its last row's time. On event
    time, rows wait in ``waiting_store`` until the watermark reaches them."""

    def __init__(
        self,
        matcher: Matcher,
        output: Callable[[MatchContext], dict[str, Any]],
        order: str,
        secondary: list[tuple[str, bool]],
        event_time: bool,
        delay_ms: int,
        store: str,
        waiting_store: str,
    ) -> None:
        self.matcher = matcher
        self.output = output
        self.order = order
        self.secondary = secondary
        self.event_time = event_time
        self.delay_ms = delay_ms
        self.store_name = store
        self.waiting_name = waiting_store

    def init(self, context: Any) -> None:
        super().init(context)
        #: partition key -> {"threads": partial matches, "completed": matches waiting for
        #: an earlier partial match to end, "seq": rows fed}
        self.store = context.get_state_store(self.store_name)
        #: index (time, arrival) -> [partition key, row] waiting for the watermark; and
        #: "~" (time a partition's first partial match times out, its key) -> the key
        self.waiting = context.get_state_store(self.waiting_name)
        stored = self.store.get(_STREAM_TIME)
        self.stream_time = stored if isinstance(stored, int) else None
        self.sequence = self.store.get(_SEQUENCE) or 0

    def process(self, record: Record) -> None:
        row, key = record.value, record.key
        if not isinstance(row, dict):
            return
        if not self.event_time:  # processing time: as read
            read = parse_timestamp(row.get(self.order))
            self._feed(key, record.timestamp if read is None else read, row)
            return
        ts = parse_timestamp(row.get(self.order))
        if ts is None:
            return
        before = self.stream_time
        if before is not None and ts <= before - self.delay_ms - 1:
            return  # late: the rows after it were matched already
        self.sequence += 1
        self.store.put(_SEQUENCE, self.sequence)
        self.waiting.put(f"{ts + _INDEX_OFFSET:020d}\x00{self.sequence:020d}", [key, row])
        stream_time = ts if before is None else max(before, ts)
        if stream_time != before:
            self.stream_time = stream_time
            self.store.put(_STREAM_TIME, stream_time)
            self._release(stream_time - self.delay_ms - 1)

    def _release(self, watermark: int) -> None:
        """Feed the waiting rows at or before ``watermark``, in ORDER BY order."""
        due = list(self.waiting.range(None, f"{watermark + _INDEX_OFFSET:020d}\uffff"))
        entries = [(int(index[:20]) - _INDEX_OFFSET, pair, index) for index, pair in due]
        if self.secondary:
            entries.sort(key=functools.cmp_to_key(self._compare))
        for ts, (key, row), index in entries:
            # taken out as it is fed: a row whose DEFINE raises is not fed again, the
            # rows after it stay for the next watermark
            self.waiting.delete(index)
            self._feed(key, ts, row)
        self._time_out(watermark)

    def _time_out(self, watermark: int) -> None:
        """End the partial matches WITHIN times out at ``watermark`` in every partition,
        as Flink's CEP operator does on the watermark (so a quiet partition's state goes
        and its waiting matches come out)."""
        due = list(self.waiting.range("~", f"~{watermark + _INDEX_OFFSET:020d}\uffff"))
        for index, key in due:
            self.waiting.delete(index)
            stored = self.store.get(key)
            if stored is None:
                continue
            state, matches = self.matcher.advance_time(stored, watermark)
            self._keep(key, stored, {**state, "seq": stored["seq"]})
            self._forward(key, matches, watermark)

    def _compare(self, a: tuple[int, list[Any], str], b: tuple[int, list[Any], str]) -> int:
        """ORDER BY time, then the further columns (NULL first ascending); arrival last."""
        if a[0] != b[0]:
            return -1 if a[0] < b[0] else 1
        for column, desc in self.secondary:
            x, y = a[1][1].get(column), b[1][1].get(column)
            if x == y:
                continue
            less = (x is None) or (y is not None and x < y)
            return (1 if less else -1) if desc else (-1 if less else 1)
        return 0

    def _feed(self, key: Any, ts: int, row: dict[str, Any]) -> None:
        stored = self.store.get(key) or {"threads": [], "completed": [], "seq": 0}
        seq = stored["seq"]
        state, matches = self.matcher.step(stored, seq, ts, row)
        self._keep(key, stored, {**state, "seq": seq + 1})
        self._forward(key, matches, ts)

    def _keep(self, key: Any, before: dict[str, Any], state: dict[str, Any]) -> None:
        """Store a partition's state, with the index entry of when it times out."""
        old, new = before.get("expires"), self.matcher.expires(state)
        if self.event_time and old != new:
            if old is not None:
                self.waiting.delete(_expiry(old, key))
            if new is not None:
                self.waiting.put(_expiry(new, key), key)
        self.store.put(key, {**state, "expires": new})

    def _forward(self, key: Any, matches: list[MatchContext], ts: int) -> None:
        """A row per match, stamped with its last row's time (event time) or ``ts``."""
        for match in matches:
            last = parse_timestamp(match.rows[-1][1].get(self.order)) if self.event_time else None
            self.context.forward(Record(key, self.output(match), ts if last is None else last))


def _expiry(expires: int, key: Any) -> str:
    """The waiting store's key of a partition's time-out index entry."""
    return f"~{expires + _INDEX_OFFSET:020d}\x00{json.dumps(key)}"


def unconsumed(statement: Statement, source: str) -> SqlError | None:
    """The error for a MATCH_RECOGNIZE the statement's query did not read (after a join,
    or where the query reads no table)."""
    if not statement.match_recognize:
        return None
    return error_at(
        source,
        statement.match_recognize[0].offset,
        "MATCH_RECOGNIZE reads the table, view or subquery of a FROM here",
    )
