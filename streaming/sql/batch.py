"""A streaming SQL query as a DuckDB batch query: the lambda check applied to SQL.

``to_duckdb(text)`` translates the query of an ``INSERT INTO sink SELECT ...`` statement
(our dialect, see ``streaming.sql``) into DuckDB SQL over one relation per source table,
named after the table and holding the rows of its topic (the JSON fields as columns);
several INSERTs into one sink give the UNION ALL of their queries.
Run over the same events, the batch query gives each window's final result, which is
what the streaming application writes for every window that closed on time (the check:
stream == batch, windows that dropped late rows left out).

What is rewritten, and why (sqlglot transpiles the rest):

- every source table becomes ``(SELECT *, <event time in epoch ms> AS __event_ms FROM t)``:
  the ``WATERMARK`` column read as epoch ms (BIGINT as is; TIMESTAMP text or ISO-8601
  parsed, UTC unless the text names an offset, read then through ``TIMESTAMPTZ``; a number
  in a TIMESTAMP column taken as ms, as ``timestamps.parse_timestamp`` does). Rows without a readable event time are left out (the stream would use the Kafka
  record's timestamp, which a batch relation does not have);
- the window TVFs ``TABLE(TUMBLE|HOP|CUMULATE(TABLE t, DESCRIPTOR(ts), ...))`` add
  ``window_start`` and ``window_end`` (epoch ms) to those rows, one row per window (HOP:
  every window of ``slide``-aligned starts >= 0 that holds the row, as Kafka's
  ``TimeWindows``; CUMULATE: every window of the row's ``size``-aligned start that ends
  after it); the
  group-window functions ``TUMBLE(ts, size)`` / ``HOP(ts, slide, size)`` in GROUP BY do the
  same under internal names, and ``TUMBLE_START/END`` / ``HOP_START/END`` read them;
- ``SESSION(ts, gap)`` in GROUP BY (``SESSION_START/END``) and the SESSION TVF: each row
  gets its session's bounds, the sessions of each GROUP BY key merged as the stream merges
  them (rows at most the gap apart, inclusive; the end is the last row plus the gap:
  ``batch_sessions``);
- a window bound (or a BIGINT column) written to a TIMESTAMP sink column is formatted as
  ``'yyyy-MM-dd HH:mm:ss.SSS'`` (UTC), as the streaming sink writes it;
- ``CAST`` is ``TRY_CAST`` (a value that does not convert is NULL) and a cast to an
  integer type truncates (DuckDB rounds); ``/`` and ``%`` by zero are NULL; ``/`` of two
  integer operands truncates (the operands' types are inferred from the columns,
  literals, casts, COUNT and SUM, arithmetic and COALESCE / CASE / IF of integers);
- a comparison (``=``, ``<``, ``BETWEEN``, ...) with a TIMESTAMP column compares instants,
  as the stream does: both sides as epoch ms (TIMESTAMP columns and text literals read as
  above, INTERVALs as ms), in SELECT, WHERE and HAVING, so also a comma join's time bound;
- ``JOIN r FOR SYSTEM_TIME AS OF l.ts``: DuckDB's ``ASOF [LEFT] JOIN`` on the equality
  and ``l.__event_ms >= r.__event_ms``, so each stream row meets the table row as of its
  time (the relation of ``r`` holds every version: its changelog rows, with their time
  attribute); a plain stream-table join is an ordinary join against the relation as
  given (its current rows); in an interval join's ON clause, time attributes are compared
  as epoch ms and INTERVALs are milliseconds; RIGHT joins and chains of joins stay as
  written (DuckDB joins them left-deep, as the stream does); a regular join
  (``regular_join``) stays as written: the final rows of its streaming result (its
  retractions applied) are the batch rows, an upsert table's relation holding its current
  rows; ``SELECT *`` / ``t.*`` over a join is the tables' declared columns, as the stream
  expands it (not the relations' helper columns);
- ``JOIN r FOR SYSTEM_TIME AS OF l.proctime`` (a ``PROCTIME()`` column, or one a merged
  subquery adds, as Nexmark's q13 writes it) is Flink's lookup join on processing time:
  each row meets the table's rows as they are when it is processed; here an ordinary
  [LEFT] join against the relation as given, so the batch meets the table as it is when
  it runs. A ``filesystem`` table (a bounded lookup table) not given as a relation is
  read from its files when the query runs (``batch_files``: DuckDB's ``read_csv`` /
  ``read_json`` with its declared columns, partition columns from the directories);
- into a ``filesystem`` sink, the query gives the rows its files hold: the sink's
  columns, partition columns included;
- ``HOUR`` and ``DATE_FORMAT`` (a literal pattern) are DuckDB expressions computing what
  the built-ins compute (``batch_builtins``; SPLIT_INDEX and REGEXP_EXTRACT: below);
- query columns are named after the sink's columns, by position;
- a table's computed and METADATA columns are added to its relation (``batch_columns``):
  its METADATA columns read the relation's ``_timestamp``, ``_partition`` and ``_offset``
  columns (the record's metadata as the lake stores it).

A view or subquery in FROM (the first relation) that projects and filters one table is
merged into the query (its columns replaced by their expressions, its WHERE ANDed in). A Top-N or
deduplication subquery (``ROW_NUMBER()`` / ``RANK()`` / ``DENSE_RANK()`` over one table, its
window TVF or a GROUP BY of one) runs as written, its time attribute ordered as epoch ms
(``batch_rank``), ``ROW_NUMBER()``'s ties broken by the order the stream reads the rows
(``batch_order``: the relation's ``_offset``, else its rows' order). A window join of two
window TVF subqueries, or of their window aggregations (whatever the bounds' names, an
aggregation of such an aggregation included), joins each side's rows or final window
results as written (``batch_window_join``). Any other subquery in FROM or
JOIN is translated on its own and read as a relation (``batch_subqueries``).

A Python scalar function (``streaming.sql.functions``, a ``CREATE FUNCTION`` of a Java
class's Python stand-in included: ``java_functions``) is registered on the DuckDB
connection under its SQL name while the query runs (``BatchQuery.run``), its parameter
and result types from its type hints. DuckDB's DECIMAL results (arithmetic with a decimal
literal) come back as floats, the DOUBLEs the stream computes.

MATCH_RECOGNIZE over a table runs the stream's own matcher over each partition's rows
in DuckDB (``batch_match``).

The Flink built-ins SPLIT_INDEX and REGEXP_EXTRACT run in DuckDB as the stream's own
Python functions, registered the same way under internal names (``batch_builtins``).

A Python aggregate function in a GROUP BY is a registered scalar function over the
group's arguments in input order, calling what the stream calls (``batch_aggregates``).

A Python table function (``LATERAL TABLE``) is a registered scalar function returning the
list of its rows, UNNESTed (``batch_lateral``).

Not translated (``SqlError``): windows on processing time (a window TVF over a ``PROCTIME()`` column: they depend on when the
rows are processed), other views, a window over a subquery, and anything the compiler rejects (the statements are compiled first). Known differences:
MIN/MAX of TIMESTAMP text compare the text (chronological for one format, as the platform
writes); AVG and SUM of DOUBLEs may differ in the last bits (summation order); the
stream joins two plain window aggregations whose bounds are renamed (Nexmark q8) as an
interval join, which drops a side's row that comes out later than its grace allows (the
batch joins it).
EMIT FINAL / CHANGES are ignored: a batch result is final.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import sqlglot
from sqlglot import exp

from streaming.sql import (
    batch_aggregates,
    batch_builtins,
    batch_files,
    batch_lateral,
    batch_match,
    batch_order,
    batch_rank,
    batch_sessions,
    batch_subqueries,
    batch_window_join,
    builtins,
    window_join,
)
from streaming.sql.batch_columns import columns_relation
from streaming.sql.catalog import TableDef
from streaming.sql.compiler import Compiler, fill_columns, parse
from streaming.sql.errors import SqlError, error_at, node_offset
from streaming.sql.functions import (
    AggregateFunction,
    Functions,
    ScalarFunction,
    active,
    hint_kind,
    is_aggregate_call,
)
from streaming.sql.join_star import expand_join_star
from streaming.sql.rewrite import SESSION_ALIAS, Statement, interval_ms, split_statements
from streaming.sql.stars import expand_over_subqueries
from streaming.sql.timestamps import parse_timestamp
from streaming.sql.tvf_rows import expand_star, reads_tvf_rows, with_tvf_columns

#: internal column names of the translation (never a source column's)
EVENT_MS = "__event_ms"
GROUP_WINDOW_START = "__window_start"
GROUP_WINDOW_END = "__window_end"

_BOUND_FUNCTIONS = {
    "TUMBLE_START": GROUP_WINDOW_START,
    "TUMBLE_END": GROUP_WINDOW_END,
    "HOP_START": GROUP_WINDOW_START,
    "HOP_END": GROUP_WINDOW_END,
    "SESSION_START": GROUP_WINDOW_START,
    "SESSION_END": GROUP_WINDOW_END,
}
_INTEGER_TYPES = {"BIGINT", "INT", "SMALLINT", "TINYINT"}
_TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%g"


@dataclass(frozen=True)
class BatchFunction:
    """A Python scalar function as DuckDB registers it: name, DuckDB parameter and return
    types (from the function's type hints)."""

    name: str
    fn: Callable[..., Any]
    parameters: tuple[str, ...]
    returns: str


_DUCKDB_TYPES = {"STRING": "VARCHAR", "BIGINT": "BIGINT", "DOUBLE": "DOUBLE", "BOOLEAN": "BOOLEAN"}


@dataclass(frozen=True)
class BatchQuery:
    """A translated INSERT: the DuckDB ``sql``, the source ``tables`` it reads (the
    relations to provide, by table name) and the ``sink`` whose columns it returns."""

    sql: str
    tables: tuple[TableDef, ...]
    sink: TableDef
    #: the Python scalar functions it calls, registered on the connection while it runs
    functions: tuple[BatchFunction, ...] = ()
    #: the tables read with their input order (``batch_order``: a ranking's ties)
    input_order: tuple[str, ...] = ()

    @property
    def columns(self) -> tuple[str, ...]:
        """The result's columns: the sink's, in order."""
        return tuple(self.sink.columns)

    def run(self, con: Any, relations: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The result rows over ``relations`` (table name -> anything DuckDB can register:
        a pandas DataFrame, an Arrow table, a relation) on connection ``con``; a
        ``filesystem`` table not in ``relations`` is read from its files as they are now
        (``batch_files``)."""
        given = dict(relations)
        for table in self.tables:
            if table.is_file and table.name not in given:
                given[table.name] = con.sql(batch_files.read_sql(table))
        missing = [t.name for t in self.tables if t.name not in given]
        if missing:
            raise ValueError(f"no relation for table(s) {missing}")
        for table in self.tables:
            batch_order.register(con, table.name, given[table.name], table.name in self.input_order)
        for function in self.functions:
            # NULLs reach the function, as in the stream
            con.create_function(
                function.name,
                function.fn,
                list(function.parameters),
                function.returns,
                null_handling="special",
            )
        try:
            cursor = con.execute(self.sql)
            names = [d[0] for d in cursor.description]
            return [
                dict(zip(names, map(_as_stream_value, row), strict=True))
                for row in cursor.fetchall()
            ]
        finally:
            for table in self.tables:
                batch_order.unregister(con, table.name, table.name in self.input_order)
            for function in self.functions:
                con.remove_function(function.name)


def _as_stream_value(value: Any) -> Any:
    """A result value as the stream holds it: DuckDB's DECIMAL (its type of arithmetic
    with a decimal literal, ``0.908 * price``) as a float, the DOUBLE the stream computes."""
    return float(value) if isinstance(value, Decimal) else value


def to_duckdb(
    text: str, sink: str | None = None, *, functions: dict[str, Any] | None = None
) -> BatchQuery:
    """The DuckDB translation of the INSERTs in ``text`` writing ``sink`` (default: the
    only sink written), the UNION ALL of their queries when there are several (each
    sink row comes from one of them). ``text`` holds the CREATE TABLE statements too; it is compiled first, so
    whatever the streaming compiler rejects fails here with the same ``SqlError``.
    ``functions``: the Python functions it calls, as for ``streaming.sql.compile``."""
    try:
        given = Functions(functions)
    except ValueError as e:
        raise SqlError(str(e), line=1, column=1) from None
    compiler = Compiler(text, functions=given)
    compiler.compile_all()
    inserts = []
    for statement in split_statements(text):
        tree = parse(statement, text)
        if isinstance(tree, exp.Insert):
            inserts.append((statement, tree))
    chosen = [(s, t) for s, t in inserts if sink is None or _target(t) == sink]
    sinks = sorted({_target(t) for _, t in chosen})
    if len(sinks) != 1:
        what = f"an INSERT INTO {sink}" if sink else "INSERTs into one sink"
        found = f"INSERTs into {', '.join(sinks)} (name the sink)" if sinks else "none"
        raise SqlError(f"expected {what} in the statements, found {found}", line=1, column=1)
    queries = [_translate(text, compiler, s, t) for s, t in chosen]
    return queries[0] if len(queries) == 1 else _union_all(queries)


def _translate(
    text: str, compiler: Compiler, statement: Statement, insert: exp.Insert
) -> BatchQuery:
    """The DuckDB translation of one INSERT of ``text`` (compiled by ``compiler``)."""
    with active(compiler.functions):
        translated = _Translation(text, compiler.tables, statement, insert).translate()
    tree = sqlglot.parse_one(translated.sql, read="duckdb")
    _refuse_builtins(text, statement.start, insert, tree, compiler.functions)
    calls = list(tree.find_all(exp.Anonymous))
    registered = _batch_functions(text, statement.start, insert, calls, compiler.functions)
    ordered = batch_order.INPUT_ORDER in translated.sql
    input_order = tuple(t.name for t in translated.tables) if ordered else ()
    every = (*translated.functions, *registered)
    return dataclasses.replace(translated, functions=every, input_order=input_order)


def _union_all(queries: list[BatchQuery]) -> BatchQuery:
    """The INSERTs into one sink as one query: the UNION ALL of their rows (what the
    sink receives from all of them), reading and registering what any of them does; a
    function registered under a name an earlier query registers differently (each
    MATCH_RECOGNIZE's matcher is ``batch_match.FUNCTION``) is renamed in its query."""
    functions: dict[str, BatchFunction] = {}
    parts = []
    for i, query in enumerate(queries):
        sql = query.sql
        for function in query.functions:
            if functions.setdefault(function.name, function) != function:
                renamed = f"{function.name}_{i}"
                call = re.compile(rf"(?<![\w\"]){re.escape(function.name)}(?=\s*\()", re.I)
                sql = call.sub(renamed, sql)
                functions[renamed] = dataclasses.replace(function, name=renamed)
        parts.append(f"SELECT * FROM ({sql})")
    tables = {t.name: t for q in queries for t in q.tables}
    input_order = dict.fromkeys(name for q in queries for name in q.input_order)
    return BatchQuery(
        " UNION ALL ".join(parts),
        tuple(tables.values()),
        queries[0].sink,
        tuple(functions.values()),
        tuple(input_order),
    )


def _refuse_builtins(
    text: str, at: int, insert: exp.Insert, tree: exp.Expr, functions: Functions
) -> None:
    """A ``SqlError`` for a call of a Flink built-in of ``streaming.sql.builtins`` (not
    shadowed by a Python function) in the translated query: DuckDB's functions of those
    names differ (or are missing), so they are not translated yet."""
    for call in tree.find_all(exp.Func):
        name = call.name if isinstance(call, exp.Anonymous) else call.sql_name()
        if builtins.lookup(name) is None or functions.get(name) is not None:
            continue
        written = [
            c
            for c in insert.find_all(exp.Func)
            if (c.name if isinstance(c, exp.Anonymous) else c.sql_name()).upper() == name.upper()
        ]
        raise error_at(
            text,
            node_offset(written[0]) if written else at,
            f"{name.upper()} is not translated to batch SQL yet",
        )


def _batch_functions(
    text: str, at: int, insert: exp.Insert, calls: list[exp.Anonymous], functions: Functions
) -> tuple[BatchFunction, ...]:
    """The Python functions among ``calls`` (of the translated query, views inlined), as
    DuckDB registers them; a Python aggregate, or a scalar function without type hints on
    its parameters, is a ``SqlError`` (at its call in ``insert`` if there, else ``at``)."""
    found: dict[str, BatchFunction] = {}
    for call in calls:
        udaf = functions.get(batch_aggregates.aggregate_name(call.name) or "")
        if isinstance(udaf, AggregateFunction):
            found[call.name.lower()] = BatchFunction(
                call.name.lower(),
                batch_aggregates.scalar(udaf),
                ("VARCHAR",),
                _DUCKDB_TYPES.get(udaf.result_kind, "VARCHAR"),
            )
            continue
        builtin = batch_builtins.python_builtin(call.name)
        if builtin is not None:
            found[builtin.name] = BatchFunction(
                builtin.name, builtin.fn, builtin.parameters, builtin.returns
            )
            continue
        function = functions.get(call.name)
        written = [c for c in insert.find_all(exp.Anonymous) if c.name.lower() == call.name.lower()]
        offset = node_offset(written[0]) if written else at
        if isinstance(function, AggregateFunction):
            raise error_at(
                text,
                offset,
                f"{function.name} (a Python aggregate function) is not translated to batch SQL",
            )
        if not isinstance(function, ScalarFunction) or call.name.lower() in found:
            continue
        try:
            hints = typing.get_type_hints(function.fn)
        except (NameError, TypeError):
            hints = {}
        names = list(inspect.signature(function.fn).parameters)
        kinds = [hint_kind(hints.get(n)) for n in names]
        if any(k is None for k in kinds):
            raise error_at(
                text,
                offset,
                f"function {function.name} needs type hints (int, float, str, bool) on its "
                "parameters to run in DuckDB",
            )
        found[call.name.lower()] = BatchFunction(
            call.name.lower(),
            function.fn,
            tuple(_DUCKDB_TYPES[k] for k in kinds if k is not None),
            _DUCKDB_TYPES.get(function.result_kind, "VARCHAR"),
        )
    return tuple(found.values())


def _target(insert: exp.Insert) -> str:
    node = insert.this
    return (node.this if isinstance(node, exp.Schema) else node).name


def _epoch_ms_sql(column: str, kind: str) -> str:
    """DuckDB SQL for the epoch ms of a time attribute of ``kind`` (NULL if unreadable)."""
    quoted = exp.to_identifier(column).sql("duckdb")
    if kind == "BIGINT":
        return f"TRY_CAST({quoted} AS BIGINT)"
    return _timestamp_ms_sql(quoted)


#: a time of day followed by a UTC offset (``+02:00``, ``+0200``, ``-03``)
_OFFSET_PATTERN = r"\d:\d\d(:\d\d(\.\d*)?)?\s*[+-]\d\d(:?\d\d)?$"


def _timestamp_ms_sql(value: str) -> str:
    """DuckDB SQL for the epoch ms of the TIMESTAMP value ``value`` (SQL) as
    ``timestamps.parse_timestamp`` reads it: a number is ms; text is ISO-8601 or SQL style,
    UTC unless it names an offset (read through TIMESTAMPTZ: the instant, whatever the
    session's time zone); NULL if unreadable."""
    text = f"TRIM(REPLACE(CAST({value} AS VARCHAR), 'Z', ''))"
    return (
        f"COALESCE(TRY_CAST(TRY_CAST({value} AS DOUBLE) AS BIGINT), "
        f"CASE WHEN regexp_matches({text}, '{_OFFSET_PATTERN}') "
        f"THEN epoch_ms(TRY_CAST({text} AS TIMESTAMPTZ)) "
        f"ELSE epoch_ms(TRY_CAST({text} AS TIMESTAMP)) END)"
    )


def _format_ms(node: exp.Expr) -> exp.Expr:
    """``'yyyy-MM-dd HH:mm:ss.SSS'`` (UTC) of an epoch-ms expression."""
    return sqlglot.parse_one(
        f"strftime(make_timestamp(CAST(({node.sql('duckdb')}) AS BIGINT) * 1000), "
        f"'{_TIMESTAMP_FORMAT}')",
        read="duckdb",
    )


class _Translation:
    """One INSERT's query rewritten for DuckDB."""

    def __init__(
        self, source: str, tables: dict[str, TableDef], statement: Statement, insert: exp.Insert
    ) -> None:
        self.source = source
        self.tables = tables
        self.statement = statement
        self.insert = insert
        self.sink = tables[_target(insert)]
        #: alias (or name) -> table, of the tables in FROM / JOIN
        self.scope: dict[str, TableDef] = {}

    def error(self, node: exp.Expr | int, message: str) -> SqlError:
        at = node if isinstance(node, int) else node_offset(node)
        return error_at(self.source, at, message)

    def translate(self) -> BatchQuery:
        select = self.insert.expression.copy()
        expand_over_subqueries(select, self.statement, self.tables, self.source)
        rows_tvf = reads_tvf_rows(self.statement, select)
        if rows_tvf is not None:
            expand_star(select, self.tables[rows_tvf.table])
        from_ = select.args.get("from_") or select.args.get("from")
        joins = select.args.get("joins") or []
        if joins and not window_join.joins_subqueries(select):
            expand_join_star(select, lambda node: self.tables[node.name], self.source)
        fill_columns(self.insert, select, self.sink, self.source)
        tvf = self.statement.window_tvf
        windowed = self.tables.get(tvf.table) if tvf is not None else None
        if tvf is not None and windowed is not None and windowed.proctime == tvf.column:
            raise self.error(
                tvf.offset,
                f"{tvf.kind} over {tvf.column}, the processing time of {tvf.table} "
                "(PROCTIME()), is not translated to batch SQL: its windows depend on when "
                "the rows are processed",
            )
        if window_join.joins_subqueries(select):
            sql, read_tables = batch_window_join.translate(self, select)
            return BatchQuery(sql, read_tables, self.sink)
        if self.statement.laterals:
            group_bounds = (GROUP_WINDOW_START, GROUP_WINDOW_END)
            sql, read_table, rows = batch_lateral.translate(self, select, from_, group_bounds)
            function = BatchFunction(rows.name, rows.fn, rows.parameters, rows.returns)
            return BatchQuery(sql, (read_table,), self.sink, (function,))
        while self._inline(select, from_):
            pass
        if self.statement.match_recognize:
            sql, read_table, matches = batch_match.translate(self, select, from_, EVENT_MS)
            function = BatchFunction(batch_match.FUNCTION, matches, ("VARCHAR",), "VARCHAR")
            return BatchQuery(sql, (read_table,), self.sink, (function,))
        if not joins:
            ranking = batch_rank.find(from_.this, self.tables)
            if ranking is not None:
                sql = batch_rank.translate(self, select, ranking, EVENT_MS)
                return BatchQuery(sql, (self.tables[ranking.table.name],), self.sink)
        if batch_subqueries.reads_subquery(select):
            sql, read_tables = batch_subqueries.translate(self, select, EVENT_MS)
            return BatchQuery(sql, read_tables, self.sink)
        read = [from_.this, *(j.this for j in joins)]
        for node in read:
            self.scope[node.alias_or_name] = self._source_table(node)
        if rows_tvf is not None:
            # the window columns: TIMESTAMPs (epoch ms in the relation)
            self.scope[from_.this.alias_or_name] = with_tvf_columns(
                self.scope[from_.this.alias_or_name]
            )
        self._no_processing_time(select)
        window = self._group_window(select)
        bounds = ("window_start", "window_end") if tvf is not None else None
        if window is not None:
            bounds = (GROUP_WINDOW_START, GROUP_WINDOW_END)
        spec = (tvf.kind, tvf.size_ms, tvf.slide_ms) if tvf is not None else window
        if spec is not None and bounds is not None and spec[0] == "SESSION":
            sql = batch_sessions.translate(self, select, from_, spec[1], bounds, EVENT_MS)
            return BatchQuery(sql, (self.tables[read[0].name],), self.sink)
        from_.set("this", self._relation(from_.this, spec, bounds))
        named: tuple[str, ...] | None = bounds
        if rows_tvf is not None and bounds is not None:
            from_.this.this.select("window_end - 1 AS window_time", copy=False)
            named = (*bounds, "window_time")
        for join in joins:
            self._join(join, from_.this.alias_or_name)
        self._rewrite_expressions(select)
        self._name_columns(select, named)
        return BatchQuery(
            select.sql("duckdb"),
            tuple(self.tables[n.name] for n in read),
            self.sink,
        )

    def _no_processing_time(self, select: exp.Select) -> None:
        """A query that reads a ``PROCTIME()`` column depends on when it runs: it has no
        batch translation."""
        for column in select.find_all(exp.Column):
            tables = [self.scope[column.table]] if column.table in self.scope else []
            for table in tables or self.scope.values():
                if table.proctime == column.name:
                    raise self.error(
                        column,
                        f"{column.name} is the processing time of {table.name} (PROCTIME()): "
                        "a query over it is not translated to batch SQL",
                    )

    def _view_query(self, name: str) -> exp.Expr | None:
        """The query of the view ``name`` (its ``CREATE VIEW ... AS``), or None."""
        for statement in split_statements(self.source):
            tree = parse(statement, self.source)
            if not (isinstance(tree, exp.Create) and tree.expression is not None):
                continue
            target = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
            if target.name == name and str(tree.args.get("kind") or "").upper() == "VIEW":
                if isinstance(tree.this, exp.Schema):
                    return None  # renamed columns: not inlined
                return tree.expression
        return None

    def _inline(self, select: exp.Select, from_: exp.Expr) -> bool:
        """Merge a simple view or subquery in FROM (the first relation) into ``select``: a
        projection and filter of one declared table (or of another such view), no GROUP BY,
        DISTINCT, aggregates, joins or windows. Its columns become their expressions over
        the table (under the view's alias; in the joins' ON and AS OF too, an unqualified
        name of a joined table's column left to that table) and its WHERE joins the outer
        one. True if merged."""
        node = from_.this
        if isinstance(node, exp.Subquery):
            inner = node.this
        elif isinstance(node, exp.Table) and node.name in self.tables:
            if not self.tables[node.name].is_view:
                return False
            inner = self._view_query(node.name)
        else:
            return False
        if not isinstance(inner, exp.Select):
            return False
        inner_from = inner.args.get("from_") or inner.args.get("from")
        base = inner_from.this if inner_from is not None else None
        simple = (
            isinstance(base, exp.Table)
            and base.name in self.tables
            and not any(inner.args.get(k) for k in ("joins", "group", "having", "distinct"))
            and not any(inner.args.get(k) for k in ("limit", "order", "with", "qualify"))
            and not any(e.find(exp.AggFunc, exp.Window) for e in inner.expressions)
        )
        if not simple:
            return False
        assert isinstance(base, exp.Table)
        alias = node.alias_or_name or base.alias_or_name  # a subquery needs no alias
        inner_alias = base.alias_or_name

        def requalify(expression: exp.Expr) -> exp.Expr:
            def visit(n: exp.Expr) -> exp.Expr:
                if isinstance(n, exp.Column) and n.table in ("", inner_alias):
                    return exp.column(n.name, table=alias)
                return n

            return expression.copy().transform(visit)

        mapping: dict[str, exp.Expr] = {}
        for item in inner.expressions:
            if isinstance(item, exp.Star):
                for column in self.tables[base.name].columns:
                    mapping[column] = exp.column(column, table=alias)
            elif item.alias_or_name:
                expression = item.this if isinstance(item, exp.Alias) else item
                mapping[item.alias_or_name] = requalify(expression)

        # an unqualified name of a joined table's column is that table's
        joined = {
            column
            for join in select.args.get("joins") or []
            if isinstance(join.this, exp.Table) and join.this.name in self.tables
            for column in self.tables[join.this.name].columns
        }

        def substitute(n: exp.Expr) -> exp.Expr:
            if not isinstance(n, exp.Column) or n.table not in ("", alias):
                return n
            if not n.table and n.name in joined:
                return n
            if n.name not in mapping:
                return n  # a window TVF's window_start / window_end (compiled: no others)
            value = mapping[n.name].copy()
            return value if isinstance(value, exp.Column) else exp.Paren(this=value)

        for key in ("expressions", "where", "group", "having"):
            value = select.args.get(key)
            if isinstance(value, list):
                select.set(key, [v.transform(substitute) for v in value])
            elif value is not None:
                select.set(key, value.transform(substitute))
        for join in select.args.get("joins") or []:
            for key in ("on", "this"):
                if join.args.get(key) is not None:
                    join.set(key, join.args[key].transform(substitute))
        inner_where = inner.args.get("where")
        if inner_where is not None:
            condition = requalify(inner_where.this)
            select.where(condition, copy=False)  # ANDed with the outer WHERE
        from_.set(
            "this", exp.Table(this=exp.to_identifier(base.name), alias=exp.to_identifier(alias))
        )
        return True

    def _source_table(self, node: exp.Expr) -> TableDef:
        """The declared table read by a FROM / JOIN item (``SqlError`` for anything else:
        subqueries and views are not translated)."""
        if isinstance(node, exp.Table) and node.name in self.tables:
            table = self.tables[node.name]
            if not table.is_view:
                return table
            raise self.error(
                node,
                f"{node.name} is a view: views are not translated to batch SQL (only a "
                "projection and filter of one table, as the only relation, is merged into "
                "the query)",
            )
        raise self.error(
            node,
            "a subquery in FROM is not translated to batch SQL (only a projection and filter "
            "of one table, as the only relation, is merged into the query)",
        )

    # -- windows -------------------------------------------------------------------------

    def _group_window(self, select: exp.Select) -> tuple[str, int, int] | None:
        """A TUMBLE/HOP/SESSION group-window function in GROUP BY, replaced by the internal window
        bound columns: ``(kind, size_ms, slide_ms)``, or None."""
        group = select.args.get("group")
        if group is None:
            return None
        found = None
        for item in list(group.expressions):
            if not isinstance(item, exp.Anonymous):
                continue
            name = item.name.upper()
            if name not in ("TUMBLE", "HOP", SESSION_ALIAS):
                continue
            intervals = [interval_ms(a, self.source) for a in item.expressions[1:]]
            found = ("SESSION" if name == SESSION_ALIAS else name, intervals[-1], intervals[0])
            item.replace(exp.column(GROUP_WINDOW_START))
            group.append("expressions", exp.column(GROUP_WINDOW_END))
        return found

    def _relation(
        self,
        table: exp.Table,
        window: tuple[str, int, int] | None,
        bounds: tuple[str, str] | None,
    ) -> exp.Expr:
        """The table as a subquery with ``__event_ms`` (and the window bounds, one row per
        window) under the table's alias."""
        definition = self.tables[table.name]
        name = columns_relation(self, definition, _format_ms)
        if definition.watermark is None:
            timed = f"SELECT *, CAST(NULL AS BIGINT) AS {EVENT_MS} FROM {name}"
        else:
            column = definition.watermark.column
            ms = _epoch_ms_sql(column, definition.columns[column])
            timed = (
                f"SELECT * FROM (SELECT *, {ms} AS {EVENT_MS} FROM {name}) AS __read "
                f"WHERE {EVENT_MS} IS NOT NULL"
            )
        sql = timed
        if window is not None and bounds is not None:
            kind, size, slide = window
            start, end = bounds
            if kind == "TUMBLE":
                ws = f"({EVENT_MS} - (({EVENT_MS} % {size}) + {size}) % {size})"
                sql = f"SELECT *, {ws} AS {start}, {ws} + {size} AS {end} FROM ({timed}) AS __timed"
            elif kind == "CUMULATE":
                # the window of each step's end from the row's step on to the size's end
                ws = f"({EVENT_MS} - (({EVENT_MS} % {size}) + {size}) % {size})"
                sql = (
                    f"SELECT * EXCLUDE (__step, __ws), __ws AS {start}, "
                    f"__ws + __step * {slide} AS {end} "
                    f"FROM (SELECT *, {ws} AS __ws FROM ({timed}) AS __timed, "
                    f"range(1, {size // slide + 1}) AS __steps(__step)) AS __cumulated "
                    f"WHERE __ws + __step * {slide} > {EVENT_MS}"
                )
            else:
                last = f"({EVENT_MS} - (({EVENT_MS} % {slide}) + {slide}) % {slide})"
                hops = -(-size // slide)
                sql = (
                    f"SELECT * EXCLUDE (__hop, __ws), __ws AS {start}, __ws + {size} AS {end} "
                    f"FROM (SELECT *, {last} - __hop * {slide} AS __ws FROM ({timed}) AS __timed, "
                    f"range(0, {hops}) AS __hops(__hop)) AS __hopped "
                    f"WHERE __ws + {size} > {EVENT_MS} AND __ws >= 0"
                )
        alias = table.alias_or_name
        relation = sqlglot.parse_one(sql, read="duckdb")
        assert isinstance(relation, exp.Select)
        return relation.subquery(alias)

    # -- joins ---------------------------------------------------------------------------

    def _join(self, join: exp.Join, left_alias: str) -> None:
        """The right side as a timed subquery; FOR SYSTEM_TIME AS OF -> ASOF join; time
        attributes and INTERVALs in ON as epoch ms."""
        table = join.this
        version = table.args.get("version")
        alias = table.alias_or_name
        definition = self.tables[table.name]
        join.set("this", self._relation(table, None, None))
        on = join.args.get("on")
        if on is not None:
            join.set("on", self._times_as_ms(on).transform(self._instants))
        if version is None:
            return
        if self._as_of_proctime(version.expression):
            # a lookup join (Flink's, on processing time): each row meets the table's rows
            # as they are when it is processed; here, as they are when the batch runs
            table.set("version", None)
            return
        if definition.watermark is None:
            raise self.error(table, f"FOR SYSTEM_TIME AS OF needs a WATERMARK on {definition.name}")
        # the time of the row AS OF names (in a chain, any table joined before)
        at = version.expression
        if isinstance(at, exp.Column) and at.table:
            left_alias = at.table
        as_of = exp.GTE(
            this=exp.column(EVENT_MS, table=left_alias),
            expression=exp.column(EVENT_MS, table=alias),
        )
        join.set("on", exp.and_(join.args.get("on"), as_of))
        join.set("method", "ASOF")

    def _as_of_proctime(self, at: exp.Expr) -> bool:
        """Whether ``FOR SYSTEM_TIME AS OF at`` is on processing time: ``PROCTIME()`` (a
        merged subquery's column) or a table's PROCTIME() column."""
        while isinstance(at, exp.Paren):
            at = at.this
        if isinstance(at, exp.Anonymous) and at.name.upper() == "PROCTIME":
            return True
        if not isinstance(at, exp.Column):
            return False
        tables = [self.scope[at.table]] if at.table in self.scope else list(self.scope.values())
        return any(t.proctime == at.name for t in tables)

    def _times_as_ms(self, condition: exp.Expr) -> exp.Expr:
        """``condition`` with time attribute columns as ``__event_ms`` and INTERVALs as ms."""

        def rewrite(node: exp.Expr) -> exp.Expr:
            if isinstance(node, exp.Interval):
                return exp.Literal.number(interval_ms(node, self.source))
            if isinstance(node, exp.Column) and self._is_time_attribute(node):
                return exp.column(EVENT_MS, table=node.table or None)
            return node

        return condition.transform(rewrite)

    def _is_time_attribute(self, column: exp.Column) -> bool:
        tables = [self.scope[column.table]] if column.table in self.scope else []
        if not column.table:
            tables = [t for t in self.scope.values() if column.name in t.columns]
        return any(t.watermark is not None and t.watermark.column == column.name for t in tables)

    # -- expressions ---------------------------------------------------------------------

    def _rewrite_expressions(self, select: exp.Select) -> None:
        """CAST -> TRY_CAST (truncating to integers), safe and typed division, window
        bound functions -> the internal bound columns."""

        def rewrite(node: exp.Expr) -> exp.Expr:
            if isinstance(node, exp.Anonymous) and is_aggregate_call(node):
                args = [a.transform(rewrite) for a in node.expressions]
                return batch_aggregates.call(node, args, [self._kind(a) for a in node.expressions])
            if isinstance(node, exp.Anonymous) and node.name.upper() in _BOUND_FUNCTIONS:
                return exp.column(_BOUND_FUNCTIONS[node.name.upper()])
            if batch_builtins.called_builtin(node) is not None:
                called = node.copy()
                for key, value in list(called.args.items()):
                    if isinstance(value, exp.Expr):
                        called.set(key, value.transform(rewrite))
                    elif isinstance(value, list):
                        called.set(key, [v.transform(rewrite) for v in value])
                translated = batch_builtins.translate(called, _timestamp_ms_sql, self.error)
                if translated is not None:
                    return translated
            if not isinstance(node, exp.Cast | exp.Div | exp.Mod):
                return node
            # the operands first: sqlglot does not descend into a returned replacement
            operands = {
                key: node.args[key].transform(rewrite)
                for key in ("this", "expression")
                if isinstance(node.args.get(key), exp.Expr)
            }
            if isinstance(node, exp.Cast):
                return self._try_cast(node, operands["this"])
            if isinstance(node, exp.Div):
                return self._division(operands["this"], operands["expression"])
            return exp.Mod(this=operands["this"], expression=_nullif_zero(operands["expression"]))

        for key in ("expressions", "where", "group", "having"):
            value = select.args.get(key)
            if isinstance(value, list):
                select.set(key, [v.transform(rewrite).transform(self._instants) for v in value])
            elif value is not None:
                select.set(key, value.transform(rewrite).transform(self._instants))

    def _instants(self, node: exp.Expr) -> exp.Expr:
        """A comparison with a TIMESTAMP operand as a comparison of epoch ms."""
        if isinstance(node, _COMPARISONS) and any(self._is_timestamp(o) for o in _operands(node)):
            compared = node.copy()
            for key in ("this", "expression", "low", "high"):
                operand = compared.args.get(key)
                if isinstance(operand, exp.Expr):
                    compared.set(key, self._as_ms(operand))
            return compared
        return node

    def _column_kinds(self, column: exp.Column) -> set[str]:
        kinds = {
            t.columns.get(column.name)
            for alias, t in self.scope.items()
            if not column.table or column.table == alias
        }
        kinds.discard(None)
        return {k for k in kinds if k is not None}

    def _is_timestamp(self, node: exp.Expr) -> bool:
        """``node`` is a TIMESTAMP column (or one plus or minus an INTERVAL)."""
        if isinstance(node, exp.Paren):
            return self._is_timestamp(node.this)
        if isinstance(node, exp.Add | exp.Sub):
            return self._is_timestamp(node.this)
        return isinstance(node, exp.Column) and self._column_kinds(node) == {"TIMESTAMP"}

    def _as_ms(self, node: exp.Expr) -> exp.Expr:
        """A comparison operand as epoch ms, as the stream compares TIMESTAMPs (instants):
        TIMESTAMP columns and text read as ``parse_timestamp`` does, INTERVALs in ms."""
        if isinstance(node, exp.Paren):
            return exp.Paren(this=self._as_ms(node.this))
        if isinstance(node, exp.Add | exp.Sub):
            return node.__class__(
                this=self._as_ms(node.this), expression=self._as_ms(node.expression)
            )
        if isinstance(node, exp.Interval):
            return exp.Literal.number(interval_ms(node, self.source))
        if isinstance(node, exp.Cast) and node.to.is_type("timestamp") and node.this.is_string:
            return self._as_ms(node.this)  # TIMESTAMP '...'
        if isinstance(node, exp.Literal) and node.is_string:
            millis = parse_timestamp(node.this)
            return exp.null() if millis is None else exp.Literal.number(millis)
        if isinstance(node, exp.Column) and self._column_kinds(node) == {"TIMESTAMP"}:
            return sqlglot.parse_one(_timestamp_ms_sql(node.sql("duckdb")), read="duckdb")
        return node

    def _try_cast(self, node: exp.Cast, inner: exp.Expr) -> exp.Expr:
        """``TRY_CAST(inner AS type)`` of ``node``, truncating toward zero to integers."""
        target = node.to.this.name if hasattr(node.to.this, "name") else str(node.to.this)
        if target.upper() in _INTEGER_TYPES:
            # a DOUBLE (or numeric text) truncated toward zero, as the stream's int() does
            inner = exp.func("TRUNC", exp.TryCast(this=inner, to=exp.DataType.build("DOUBLE")))
        return exp.TryCast(this=inner, to=node.to)

    def _division(self, left: exp.Expr, right: exp.Expr) -> exp.Expr:
        """``left / right``: NULL by zero, truncated when both are integers."""
        quotient = exp.Div(this=left, expression=_nullif_zero(right))
        if self._kind(left) == "BIGINT" and self._kind(right) == "BIGINT":
            return exp.TryCast(this=exp.func("TRUNC", quotient), to=exp.DataType.build("BIGINT"))
        return quotient

    def _kind(self, node: exp.Expr) -> str:
        """BIGINT when ``node`` is surely an integer (columns, literals, casts, COUNT, SUM,
        arithmetic of integers, COALESCE / CASE / IF / NULLIF of integers), else OTHER."""
        if isinstance(node, exp.Paren):
            return self._kind(node.this)
        if isinstance(node, exp.Literal):
            return "BIGINT" if not node.is_string and node.is_int else "OTHER"
        if isinstance(node, exp.Column):
            kinds = {
                t.columns.get(node.name)
                for alias, t in self.scope.items()
                if not node.table or node.table == alias
            }
            kinds.discard(None)
            return "BIGINT" if kinds == {"BIGINT"} else "OTHER"
        if isinstance(node, exp.Cast):
            name = node.to.this.name if hasattr(node.to.this, "name") else str(node.to.this)
            return "BIGINT" if name.upper() in _INTEGER_TYPES else "OTHER"
        if isinstance(node, exp.Count):
            return "BIGINT"
        if isinstance(node, exp.Sum | exp.Min | exp.Max):
            return self._kind(node.this)
        if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Mod):
            both = {self._kind(node.this), self._kind(node.expression)}
            return "BIGINT" if both == {"BIGINT"} else "OTHER"
        if isinstance(node, exp.Neg | exp.Nullif | exp.Abs):
            return self._kind(node.this)
        if isinstance(node, exp.Coalesce):
            return self._all_integers([node.this, *node.expressions])
        if isinstance(node, exp.If):
            return self._all_integers([node.args.get("true"), node.args.get("false")])
        if isinstance(node, exp.Case):
            values = [i.args.get("true") for i in node.args.get("ifs") or []]
            return self._all_integers([*values, node.args.get("default")])
        return "OTHER"

    def _all_integers(self, nodes: list[exp.Expr | None]) -> str:
        """BIGINT when every present node is (a NULL literal or ELSE left out aside)."""
        kinds = {self._kind(n) for n in nodes if n is not None and not isinstance(n, exp.Null)}
        return "BIGINT" if kinds == {"BIGINT"} else "OTHER"

    def _name_columns(self, select: exp.Select, bounds: tuple[str, ...] | None) -> None:
        """The SELECT list aliased by the sink's columns (by position); window bounds and
        BIGINT columns into TIMESTAMP sink columns formatted as the stream writes them."""
        names = list(self.sink.columns)
        items = select.expressions
        if len(items) != len(names):
            raise self.error(select, f"the query has {len(items)} columns, sink has {len(names)}")
        bound_names = set(bounds or ())
        named = []
        for item, name in zip(items, names, strict=True):
            expression = item.this if isinstance(item, exp.Alias) else item
            if self.sink.columns[name] == "TIMESTAMP":
                is_bound = isinstance(expression, exp.Column) and expression.name in bound_names
                if is_bound or self._kind(expression) == "BIGINT":
                    expression = _format_ms(expression)
            named.append(exp.alias_(expression, name, quoted=True))
        select.set("expressions", named)


_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.Between)


def _operands(node: exp.Expr) -> list[exp.Expr]:
    keys = ("this", "expression", "low", "high")
    return [v for k in keys if isinstance(v := node.args.get(k), exp.Expr)]


def _nullif_zero(node: exp.Expr) -> exp.Expr:
    return exp.func("NULLIF", node, exp.Literal.number(0))
