"""Statements -> StreamsBuilder calls.

``CREATE TABLE`` adds a table to the catalog; ``INSERT INTO sink SELECT ...`` builds the
topology that reads the source table's topic (or joins several, see ``joins``), filters,
projects or aggregates, and writes JSON rows to the sink's topic (key: the sink's key
columns, or null without them, as Flink writes). Query columns go to the sink's columns
by position, as in Flink.

- Stateless: ``filter`` + ``map`` (stream), ``filter`` + ``map_values`` (upsert table; the
  source key passes through, deletes stay deletes).
- ``GROUP BY`` on a stream: ``group_by`` (JSON list of the group values as the key) +
  ``aggregate``; with TUMBLE/HOP (group-window functions or window TVFs) over
  ``TimeWindows`` whose grace is the source's WATERMARK delay; with CUMULATE over
  ``CumulateWindows`` (the same grace); with SESSION over
  ``SessionWindows`` (the same grace; accumulators merge when a row bridges two
  sessions). A windowed aggregation emits each window once when it closes (the default,
  as Flink's window aggregations; ``EMIT FINAL`` says so): over TUMBLE/HOP with
  ``EmitStrategy.on_window_close`` (its progress is committed with the offsets, so a
  restart never emits a closed window again), over CUMULATE and SESSION with
  ``suppress(until_window_closes)``; under ``EMIT CHANGES`` it emits every update (one
  per key per commit, as the engine's store cache does). A window over a ``PROCTIME()``
  column takes each row's record time from it, has no grace and closes on the wall
  clock (``close_when_quiet(0)``). A source table's
  ``'window.close.quiet'`` becomes ``close_when_quiet`` of every windowed aggregation
  over it (and so of its ``suppress``): its windows close on the wall clock once the
  table is quiet that long.
- window_start / window_end are epoch ms inside the query; a sink column of type
  TIMESTAMP gets them as ``'yyyy-MM-dd HH:mm:ss.SSS'`` (UTC), a BIGINT column as ms.
- SESSION_START is the session's first row time, SESSION_END its last row time plus the
  gap (Flink's bound; Kafka's session window ends at the last row). A session that merges
  into a longer one is deleted: a tombstone for its sink key under EMIT CHANGES (nothing
  on a sink without key columns or on final sessions, never emitted).
- HAVING filters the aggregated rows. A row that fails it is a tombstone for its sink key
  under EMIT CHANGES (it retracts the row if an earlier update of the key passed, as
  Flink's retraction does; a delete of a key that never passed is harmless on an upsert
  sink). Without sink key columns, or on final windows (one row per window, nothing
  earlier to retract), it is dropped.
- ``EMIT FINAL`` on a non-windowed aggregate is an error: such a result never closes.
- An aggregation's result is updating (updates, tombstones) unless it is windowed and
  final (not ``EMIT CHANGES``): into an append-only sink (no primary key, not
  ``upsert-kafka``) it is an error at the INSERT, as Flink rejects it.
- ``GROUP BY`` on an updating input (an upsert table, an updating view): ``KTable``
  ``group_by`` + ``KGroupedTable.aggregate`` with an adder and a subtractor (the
  accumulators of ``aggregates`` that take rows back); windows need an append stream.
- The aggregate's state store is named after the sink table (a queryable store); the
  compiler records it in ``results`` (``MaterializedResult``) for pull queries.
- ``CREATE TABLE ... AS SELECT``, ``CREATE VIEW`` and subqueries in FROM are
  ``views.DerivedTables``: a query writes to its sink's topic or, for a view, keeps its
  output stream (``write``) for the statements that read the view (``source_of``).
  Every statement that reads a table shares its topic's source node.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError
from sqlglot.tokens import TokenType

from streaming import serdes
from streaming.dsl import (
    BufferConfig,
    EmitStrategy,
    Grouped,
    Materialized,
    Named,
    Produced,
    Repartitioned,
    SessionWindows,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    Windows,
)
from streaming.sql import aggregates, functions, java_functions, source_columns
from streaming.sql.catalog import INFERRED, OBJECT_KEY_FORMATS, TableDef, table_from_ddl
from streaming.sql.changelog_sink import OCCURRENCE, project_changelog_view
from streaming.sql.derived import is_aggregation, window_column
from streaming.sql.errors import SqlError, error_at, node_offset
from streaming.sql.expressions import NUMERIC, Compiled, compile_expression
from streaming.sql.file_tables import write_files
from streaming.sql.functions import Functions
from streaming.sql.join_groups import aggregation_over_join
from streaming.sql.join_star import expand_join_star
from streaming.sql.joins import JoinCompiler
from streaming.sql.late import late_row
from streaming.sql.lateral import expand_lateral_stars, lateral_view, take_lateral
from streaming.sql.match_recognize import bind_clauses, match_view, take_match, unconsumed
from streaming.sql.over import over_calls, over_view
from streaming.sql.registry_tables import registry_columns, table_from_registry
from streaming.sql.regular_join import RegularJoin, refuse_state_ttl_hint
from streaming.sql.regular_join_shapes import is_regular
from streaming.sql.results import MaterializedResult
from streaming.sql.rewrite import (
    SESSION_ALIAS,
    Statement,
    WindowTvf,
    interval_ms,
    split_statements,
    tokenize,
)
from streaming.sql.scopes import GroupScope, RowScope, row_of
from streaming.sql.settings import Settings
from streaming.sql.stars import expand_over_source, expand_stars
from streaming.sql.timestamps import (
    ColumnTimestampExtractor,
    ProctimeStamper,
    format_timestamp,
)
from streaming.sql.tvf_rows import expand_tvf_stars, reads_tvf_rows, tvf_rows_view
from streaming.sql.unsupported import (
    NOT_YET,
    check_tokens,
    check_tree,
    explain_parse_error,
    keyword_offset,
)
from streaming.sql.views import DerivedTables
from streaming.sql.window_join import WindowInput, WindowJoin, is_window_join, semi_joins
from streaming.windowed import TimeWindow


@dataclass(frozen=True)
class Window:
    """A TUMBLE, HOP, CUMULATE or SESSION window over ``column`` (for CUMULATE the slide
    is the step; for SESSION, size and slide are the gap)."""

    kind: str
    column: str
    size_ms: int
    slide_ms: int
    offset: int


@dataclass(frozen=True)
class CumulateWindows(Windows):
    """Flink's CUMULATE windows: from each ``size``-aligned start ``s`` the windows
    ``[s, s + step)``, ``[s, s + 2 * step)`` ... ``[s, s + size)``.

    A window store keys a window by its start, which these windows share; so the window
    ending at ``e`` is kept as ``[e - step, e)`` (the step's slice it ends with, a distinct
    start per window) and its real start is that start rounded down to ``size``
    (``real_start``). ``size()`` is the step, so a windowed key's end (its start plus the
    size) is the window's real end, when it closes; the store's retention must be longer
    (``retention_ms``), as a record's windows' kept starts reach up to the largest
    window's size ahead of it."""

    step_ms: int
    size_ms: int
    grace_ms: int

    def windows_for(self, timestamp: int) -> dict[int, TimeWindow]:
        step, size = self.step_ms, self.size_ms
        start = timestamp // size * size
        first_end = start + ((timestamp - start) // step + 1) * step
        return {
            end - step: TimeWindow(end - step, end)
            for end in range(first_end, start + size + 1, step)
        }

    def size(self) -> int:
        return self.step_ms

    def grace_period_ms(self) -> int:
        return self.grace_ms

    def retention_ms(self) -> int:
        """How long the window store keeps a window from its kept start."""
        return self.size_ms + self.grace_ms

    def real_start(self, kept_start: int) -> int:
        """The start of the window kept as ``[kept_start, kept_start + step)``."""
        return kept_start // self.size_ms * self.size_ms


def close_when_quiet(windowed: Any, table: TableDef, window: Window) -> Any:
    """A windowed stream over ``table``, with its ``'window.close.quiet'`` if it sets one.
    A window over the processing time closes on the wall clock as soon as it passes the
    window's end (a quiet time of 0), as Flink's processing-time windows fire."""
    quiet_ms = 0 if window.column == table.proctime else table.window_close_quiet_ms
    return windowed if quiet_ms is None else windowed.close_when_quiet(quiet_ms)


def upsert_hint(sink: TableDef) -> str:
    """How an append-only sink could take an updating result."""
    if sink.is_file:
        return "a 'filesystem' sink takes appended rows only: write to an 'upsert-kafka' table"
    return "give the sink a PRIMARY KEY (or use 'upsert-kafka')"


def fill_columns(insert: exp.Insert, select: exp.Select, sink: TableDef, source: str) -> None:
    """``INSERT INTO sink (c, a) SELECT ...``: the SELECT list put in the sink's column
    order, NULL for the columns the list leaves out (as Flink does); nothing to do
    without a column list."""
    target = insert.this
    if not isinstance(target, exp.Schema) or not target.expressions:
        return
    listed = [column.name for column in target.expressions]
    for column in target.expressions:
        if column.name not in sink.columns:
            raise error_at(
                source, node_offset(column), f"unknown column {column.name} in table {sink.name}"
            )
        if listed.count(column.name) > 1:
            raise error_at(source, node_offset(column), f"column {column.name} is listed twice")
    items = select.expressions
    if len(items) != len(listed):
        raise error_at(
            source,
            node_offset(target),
            f"the query has {len(items)} columns, the column list {len(listed)}",
        )
    by_name = dict(zip(listed, items, strict=True))
    select.set("expressions", [by_name.get(name, exp.Null()) for name in sink.columns])


def _group_expressions(items: list[exp.Expr]) -> dict[str, int]:
    """The GROUP BY items that are expressions (not columns), by SQL text: their index in
    the grouping key, which the SELECT list reads them from."""
    return {item.sql(): i for i, item in enumerate(items) if not isinstance(item, exp.Column)}


def parse(statement: Statement, source: str) -> exp.Expr:
    """sqlglot's tree of one prepared statement; a parse error becomes a ``SqlError``."""
    check_tokens(statement, source)
    try:
        # The whole text as context: the error's offset is then the context's length.
        trees = sqlglot.parse(statement.text, error_message_context=len(statement.text))
    except ParseError as e:
        named = explain_parse_error(statement, source)
        if named is not None:
            raise named from None
        error = e.errors[0] if e.errors else {}
        offset = len(error.get("start_context") or "")
        description = error.get("description") or "cannot parse the statement"
        raise error_at(source, offset, f"syntax error: {description}") from None
    parsed = [tree for tree in trees if tree is not None]
    if len(parsed) != 1:
        raise error_at(source, statement.start, "expected one statement here")
    return parsed[0]


class Compiler:
    """Compiles statements one by one into one ``StreamsBuilder``."""

    def __init__(
        self,
        source: str,
        *,
        late_topic: str | None = None,
        functions: Functions | None = None,
    ) -> None:
        self.source = source
        #: the Python functions its statements may call (``sql.functions``)
        self.functions = functions or Functions()
        #: the names CREATE FUNCTION statements gave
        self.created_functions: set[str] = set()
        #: where the rows a time-windowed aggregation leaves out as late go (None: nowhere)
        self.late_topic = late_topic
        #: (windowed table, its sink table) whose late rows go to ``late_topic``
        self._late_tables: list[tuple[Any, str]] = []
        self.builder = StreamsBuilder()
        self.tables: dict[str, TableDef] = {}
        self.explained = False
        #: sink table name -> its aggregation's state store, for pull queries
        self.results: dict[str, MaterializedResult] = {}
        self._names: set[str] = set()
        #: view name -> the stream of its rows (sink key, row), as a sink topic would get
        self.views: dict[str, Any] = {}
        #: table name -> its topic's KStream / KTable (one source node per topic)
        self._sources: dict[str, Any] = {}
        #: topic -> the table whose source node reads it
        self._topics: dict[str, str] = {}
        #: tables read into a versioned store (FOR SYSTEM_TIME AS OF)
        self.versioned: set[str] = set()
        self.statement_start = 0
        #: tables whose column kinds come from the query being compiled
        self.inferring: set[str] = set()
        self.derived = DerivedTables(self)
        #: the options of the SET statements so far
        self.settings = Settings()
        #: view name -> its side of a window join (``window_join``), while it compiles
        self.window_join_inputs: dict[str, WindowInput] = {}

    @property
    def topics_read(self) -> dict[str, str]:
        """Table name -> topic of every table the compiled statements read."""
        return {table: topic for topic, table in self._topics.items()}

    def compile_all(self) -> None:
        """Compile every statement of the source text."""
        with functions.active(self.functions):
            for statement in split_statements(self.source):
                self.explained |= statement.explain
                self.statement_start = statement.start
                self.compile_statement(statement, parse(statement, self.source))
                if statement.laterals:
                    raise self.error(
                        statement.laterals[0].offset,
                        f"LATERAL TABLE after a join or a window TVF {NOT_YET}",
                    )
                if (error := unconsumed(statement, self.source)) is not None:
                    raise error
            self._write_late_rows()

    def _write_late_rows(self) -> None:
        """Each time-windowed aggregation's late rows to ``late_topic`` (``sql.late``),
        built after every statement so that the other nodes keep their generated names."""
        for table, result in self._late_tables:
            table.late_records(Named.as_(self.unique(f"{result}-late"))).map_values(
                lambda late, result=result: late_row(late, result)
            ).to(self.late_topic, Produced(key_serde=serdes.Json(), value_serde=serdes.Json()))
        self._late_tables.clear()

    def error(self, node: exp.Expr | int, message: str) -> SqlError:
        offset = node if isinstance(node, int) else node_offset(node)
        return error_at(self.source, offset, message)

    def declare_table(self, table: TableDef) -> TableDef:
        """The catalog entry of a table (or view) being declared: ``table`` as is here; a
        subclass may adapt it (the platform renames its topic) before any query uses it."""
        return table

    def compile_statement(self, statement: Statement, tree: exp.Expr) -> None:
        semi_joins(tree, statement.window_tvfs)
        check_tree(tree, statement, self.source, over_aggregations=True)
        bind_clauses(tree, statement, self.source)
        expand_stars(
            tree,
            self.tables,
            over_tvf=bool(statement.window_tvfs),
            lateral_after=frozenset(lateral.after for lateral in statement.laterals),
        )
        expand_lateral_stars(tree, statement, self.tables)
        expand_tvf_stars(tree, statement, self.tables)
        if isinstance(tree, exp.Create) and str(tree.args.get("kind")).upper() == "FUNCTION":
            self.create_function(statement, tree)
        elif isinstance(tree, exp.Create) and tree.expression is not None:
            if statement.metadata:
                raise self.error(
                    statement.metadata[0].offset,
                    "METADATA columns belong to a table over a topic, not to CREATE ... AS",
                )
            self.derived.create(statement, tree)
        elif isinstance(tree, exp.Create) and (
            isinstance(tree.this, exp.Schema) or registry_columns(tree, self.source)
        ):
            if isinstance(tree.this, exp.Schema):
                table = table_from_ddl(tree, statement.watermark, self.source, statement.metadata)
            else:
                table = table_from_registry(tree, statement.watermark, self.source)
            if table.name in self.tables:
                raise self.error(tree.this, f"table {table.name} already exists")
            self.tables[table.name] = self.declare_table(table)
        elif isinstance(tree, exp.Insert):
            self.compile_insert(statement, tree)
        elif isinstance(tree, exp.Set):
            self.settings.apply(tree, self.source, statement.start)
        elif isinstance(tree, exp.Create) and tree.find(exp.LikeProperty):
            raise self.error(tree, "CREATE TABLE ... LIKE is not supported yet: list the columns")
        elif isinstance(tree, exp.Create):
            raise self.error(tree, "CREATE TABLE needs a column list or AS SELECT")
        elif isinstance(tree, exp.Select):
            raise self.error(
                statement.start,
                "a SELECT needs INSERT INTO <sink> here: pull and push queries go to a running "
                "application (streaming.sql.pull, or POST to its query server's /sql)",
            )
        elif isinstance(tree, exp.Command):
            rest = tree.expression
            rest = rest.name if isinstance(rest, exp.Expr) else str(rest or "")
            words = f"{tree.this} {rest}".split()
            raise self.error(statement.start, f"{' '.join(words[:3])} ... is not supported")
        else:
            raise self.error(tree, f"unsupported statement {tree.key.upper()}")

    def create_function(self, statement: Statement, create: exp.Create) -> None:
        """``CREATE [TEMPORARY [SYSTEM]] FUNCTION [IF NOT EXISTS] name AS 'module.attr'
        LANGUAGE PYTHON``: the Python function at that path, callable by ``name``; ``AS
        'a.b.Class' [LANGUAGE JAVA]``: the Python stand-in registered for that Java class
        (``java_functions``)."""
        name = create.this.name
        path = create.expression
        if not isinstance(path, exp.Literal) or not path.is_string:
            raise self.error(create.this, f"CREATE FUNCTION {name} needs AS 'module.function'")
        at = self.keyword(statement, TokenType.STRING)
        language = create.find(exp.LanguageProperty)
        spoken = language.name.upper() if language is not None else "JAVA"
        if spoken not in ("PYTHON", "JAVA"):
            raise self.error(
                at, f"CREATE FUNCTION {name}: LANGUAGE {spoken} is not supported: PYTHON or JAVA"
            )
        stand_in = java_functions.registered(path.this) if spoken == "JAVA" else None
        if spoken == "JAVA" and stand_in is None:
            known = ", ".join(java_functions.registered_names()) or "none"
            raise self.error(
                at,
                f"CREATE FUNCTION {name}: the Java class {path.this} cannot be loaded here (no "
                "JVM) and no Python function is registered for it "
                f"(streaming.sql.java_functions; registered: {known}): write it in Python "
                "and add LANGUAGE PYTHON, or register a Python stand-in for the class",
            )
        if name.lower() in self.created_functions:
            if create.args.get("exists"):
                return
            raise self.error(create.this, f"function {name} already exists")
        try:
            if stand_in is None or isinstance(stand_in, str):
                function = functions.load(name, stand_in or path.this)
            else:
                function = functions.as_function(name, stand_in)
        except functions.FunctionDefinitionError as e:
            raise self.error(at, f"CREATE FUNCTION {name}: {e}") from None
        self.created_functions.add(name.lower())
        self.functions.add(name, function)

    def keyword(self, statement: Statement, token_type: TokenType) -> int:
        """Offset of the statement's first token of ``token_type`` (else its start)."""
        for token in tokenize(statement.text):
            if token.token_type == token_type:
                return token.start
        return statement.start

    def table(self, node: exp.Expr) -> TableDef:
        table = node.this if isinstance(node, exp.Schema) else node
        name = table.name
        if name not in self.tables:
            raise self.error(table, f"unknown table {name}")
        return self.tables[name]

    def unique(self, name: str) -> str:
        """A processor/store name not used yet in this topology, made of the characters a
        Kafka topic name may hold (stores and repartitions name topics after it)."""
        name = re.sub(r"[^a-zA-Z0-9._-]", "-", name)
        candidate, n = name, 1
        while candidate in self._names:
            n += 1
            candidate = f"{name}-{n}"
        self._names.add(candidate)
        return candidate

    # -- INSERT INTO sink SELECT ... ---------------------------------------------------

    def compile_insert(self, statement: Statement, insert: exp.Insert) -> None:
        sink = self.table(insert.this)
        if sink.is_view:
            raise self.error(insert.this, f"{sink.name} is a view: INSERT INTO needs a table")
        select = insert.expression
        if not isinstance(select, exp.Select):
            raise self.error(insert, "INSERT INTO needs a SELECT")
        if sink.computed or sink.metadata or sink.proctime:
            sink = source_columns.sink_table(insert, sink, self.source)
        fill_columns(insert, select, sink, self.source)
        self.compile_query(statement, select, sink)

    def compile_query(self, statement: Statement, select: exp.Select, sink: TableDef) -> None:
        """The topology of ``select`` writing into ``sink`` (a table's topic or a view)."""
        with self.derived.subqueries(statement, select) as outer:
            expand_over_source(select, outer, self.tables)
            self.dispatch_query(outer, select, sink)

    def dispatch_query(self, statement: Statement, select: exp.Select, sink: TableDef) -> None:
        if select.args.get("joins"):
            self.join_query(statement, select, sink)
            return
        for clause, word in (("order", "ORDER BY"), ("limit", "LIMIT"), ("distinct", "DISTINCT")):
            if select.args.get(clause):
                at = keyword_offset(select.args[clause], statement, word.split()[0])
                raise self.error(at, f"{word} is not supported yet")
        from_ = select.args.get("from_") or select.args.get("from")
        if from_ is None or not isinstance(from_.this, exp.Table):
            raise self.error(select, "SELECT needs FROM <table>")
        source = self.table(from_.this)
        if source.is_global:
            raise self.error(
                from_.this,
                f"{source.name} is a global table: it is read only as the table of a "
                f"stream-table join (FROM stream JOIN {source.name} ON ...)",
            )
        alias = from_.this.alias or None
        recognized = take_match(statement, source.name)
        if recognized is not None:
            source = match_view(self, select, source, alias, recognized)
            alias = alias or from_.this.name
        tvf = reads_tvf_rows(statement, select)
        if tvf is not None:
            alias = alias or from_.this.name
            source = tvf_rows_view(self, select, tvf)
        lateral = take_lateral(statement, alias or source.name)
        if lateral is not None:
            source = lateral_view(self, select, source, alias, lateral)
            alias = alias or from_.this.name
        if over_calls(select):
            if select.args.get("group") is not None:
                raise self.error(
                    select.args["group"], "an OVER aggregation with GROUP BY is not supported yet"
                )
            keep = self.predicate(select.args.get("where"), RowScope(source, self.source, alias))
            source = over_view(self, select, source, alias, keep)
            alias = alias or from_.this.name
        rows = RowScope(source, self.source, alias)
        where = self.predicate(select.args.get("where"), rows)
        group = select.args.get("group")
        has_aggregate = any(functions.has_aggregate(e) for e in select.expressions)
        if group is None and not has_aggregate:
            if select.args.get("having"):
                raise self.error(select.args["having"], "HAVING needs GROUP BY or an aggregate")
            if statement.emit == "FINAL":
                raise self.error(statement.emit_offset, "EMIT FINAL needs a windowed aggregation")
            self.stateless(statement, select, source, sink, rows, where)
        else:
            self.aggregation(statement, select, source, sink, rows, where)

    def predicate(
        self, where: exp.Expr | None, rows: Any, clause: str = "WHERE"
    ) -> Callable[[dict[str, Any]], bool]:
        """``row -> bool`` of a WHERE or HAVING clause (NULL is false)."""
        if where is None:
            return lambda row: True
        compiled = compile_expression(where.this, rows)
        if compiled.kind not in ("BOOLEAN", "NULL"):
            raise self.error(
                where.this,
                f"type mismatch: {clause} needs a BOOLEAN, {where.this.sql()} is {compiled.kind}",
            )
        fn = compiled.fn
        return lambda row: fn(row) is True

    def projection(
        self, select: exp.Select, sink: TableDef, scope: Any, at: int
    ) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """``row -> sink row``: the SELECT list mapped by position onto the sink's columns."""
        items = select.expressions
        star = next((e for e in items if isinstance(e, exp.Star)), None)
        if star is not None:
            raise self.error(
                node_offset(star, at), "SELECT * is not supported yet: name the columns"
            )
        names = list(sink.columns)
        if len(items) != len(names):
            raise self.error(
                at, f"the query has {len(items)} columns, sink {sink.name} has {len(names)}"
            )
        fns = []
        for item, name in zip(items, names, strict=True):
            expression = item.this if isinstance(item, exp.Alias) else item
            compiled = compile_expression(expression, scope)
            fns.append(self.sink_value(compiled, expression, sink, name))
        pairs = list(zip(names, fns, strict=True))
        return lambda row: {name: fn(row) for name, fn in pairs}

    def sink_value(
        self, compiled: Compiled, node: exp.Expr, sink: TableDef, name: str
    ) -> Callable[[Any], Any]:
        """The evaluator of one output column, converted to the sink column's type."""
        target, kind = sink.columns[name], compiled.kind
        if sink.name in self.inferring and target == INFERRED:
            # the column's kind is the query's (a NULL literal: STRING)
            target = sink.columns[name] = "STRING" if kind == "NULL" else kind
        compatible = (
            kind == "NULL"
            or kind == target
            or (kind in NUMERIC and target in NUMERIC)
            or (target == "TIMESTAMP" and kind in ("BIGINT", "STRING"))
            or (target == "BIGINT" and kind == "TIMESTAMP")
        )
        if not compatible:
            raise self.error(
                node,
                f"type mismatch: {node.sql()} is {kind}, sink column {sink.name}.{name} is {target}",
            )
        fn = compiled.fn
        if target == "TIMESTAMP" and kind in ("TIMESTAMP", "BIGINT"):
            return lambda row: v if not isinstance(v := fn(row), int) else format_timestamp(v)
        return fn

    def write(self, out: Any, sink: TableDef) -> None:
        """Send a stream of (sink key, sink row) to the sink's topic, or keep it as the
        rows of a view."""
        if sink.is_view:
            self.views[sink.name] = out
        elif sink.is_file:
            write_files(self, out, sink)
        else:
            stamp = source_columns.written_timestamp(sink)
            if stamp is not None:
                out = out.process_values(
                    lambda: source_columns.RecordTimestampWriter(stamp),
                    named=Named.as_(self.unique(f"{sink.name}-timestamp")),
                )
            out.to(sink.topic, key_serde=sink.key_serde(), value_serde=sink.value_serde())

    def source_of(self, table: TableDef, materialized: Materialized | None = None) -> Any:
        """The table's topic as a KStream (append) or KTable (upsert, in ``materialized``
        when given), with its event-time column as the timestamp; a view's rows as they
        were written (an upsert view as a table of them)."""
        if table.is_view:
            rows = self.views[table.name]
            if not table.is_upsert:
                return rows
            store = materialized or Materialized.with_(table.key_serde(), serdes.Json())
            return rows.to_table(store)
        if table.is_file:
            raise self.error(
                self.statement_start,
                f"{table.name} is a 'filesystem' table: it is read only as the table of a "
                f"lookup join (FROM stream JOIN {table.name} FOR SYSTEM_TIME AS OF "
                "stream.proctime ON ...)",
            )
        extractor: Any = source_columns.source_extractor(table, self.source)
        if extractor is None and table.watermark:
            extractor = ColumnTimestampExtractor(table.watermark.column)
        serde_args = dict(
            key_serde=table.key_serde(),
            value_serde=table.value_serde(),
            timestamp_extractor=extractor,
        )
        if table.name in self.versioned:
            raise self.error(
                self.statement_start,
                f"{table.name} is read FOR SYSTEM_TIME AS OF (into a versioned store): "
                "reading it again is not supported yet",
            )
        # a topic has one source node: every query that reads the table shares it
        if materialized is None and table.name in self._sources:
            return self._sources[table.name]
        other = self._topics.setdefault(table.topic, table.name)
        if other != table.name:
            raise self.error(
                self.statement_start,
                f"tables {other} and {table.name} both read the topic {table.topic}: a topic "
                "has one source in a topology, so declare it once",
            )
        source: Any
        if table.is_global:
            source = self.builder.global_table(table.topic, **serde_args)
        elif table.is_upsert:
            source = self.builder.table(table.topic, materialized=materialized, **serde_args)
        else:
            source = self.builder.stream(table.topic, **serde_args)
            if table.proctime is not None:
                column = table.proctime
                source = source.process_values(
                    lambda: ProctimeStamper(column),
                    named=Named.as_(self.unique(f"{table.name}-proctime")),
                )
        if materialized is None:
            self._sources[table.name] = source
        return source

    # -- joins -------------------------------------------------------------------------

    def join_query(self, statement: Statement, select: exp.Select, sink: TableDef) -> None:
        """``SELECT ... FROM l JOIN r ON ...``: the joined rows filtered and projected; an
        aggregation over the join aggregates a subquery of it (``join_groups``); a regular
        join that the DSL's joins do not run compiles on its own (``regular_join``)."""
        expand_join_star(select, self.table, self.source)
        for clause, word in (("order", "ORDER BY"), ("limit", "LIMIT"), ("distinct", "DISTINCT")):
            if select.args.get(clause):
                at = keyword_offset(select.args[clause], statement, word.split()[0])
                raise self.error(at, f"{word} over a join is not supported yet")
        if is_aggregation(select) or select.args.get("having"):
            from_ = select.args.get("from_") or select.args.get("from")
            if from_ is None or not isinstance(from_.this, exp.Table):
                raise self.error(select, "SELECT needs FROM <table>")
            left = self.table(from_.this)
            outer = aggregation_over_join(select, left, from_.this.alias or left.name, self.source)
            self.compile_query(statement, outer, sink)
            return
        if statement.emit == "FINAL":
            raise self.error(statement.emit_offset, "EMIT FINAL needs a windowed aggregation")
        if is_window_join(self, select):
            WindowJoin(self, statement, select, sink).build()
            return
        if statement.window_tvf is not None:
            raise self.error(
                statement.window_tvf.offset, "a window TVF in a join is not supported yet"
            )
        if is_regular(self, select):
            RegularJoin(self, statement, select, sink).build()
            return
        refuse_state_ttl_hint(select, self.source)
        plan = JoinCompiler(self, select, sink)
        joined, is_table = plan.build()
        where = self.predicate(select.args.get("where"), plan.scope)
        project = self.projection(
            select, sink, plan.scope, self.keyword(statement, TokenType.SELECT)
        )
        if is_table:
            self.require_upsert_sink(
                statement, sink, "a join of two tables updates and deletes its rows"
            )
            keyed = dict(plan.keyed_by)
            scope = plan.scope
            assert scope is not None

            def owner(column: exp.Column, alone: bool) -> TableDef | None:
                alias = scope.entry_of(column).alias
                # alone (not in a COALESCE), the column must not be NULL-padded
                if alone and alias in plan.padded:
                    return None
                return keyed.get(alias)

            self.require_kept_key(statement, select, sink, tuple(keyed.values()), owner=owner)
            table = joined.filter(lambda k, v: isinstance(v, dict) and where(v))
            table = table.map_values(lambda v: None if v is None else project(v))
            self.write(table.to_stream(), sink)
            return
        out = joined.filter(lambda k, v: where(v)).map(
            lambda k, v: (sink.key_of(row := project(v)), row)
        )
        self.write(out, sink)

    def require_upsert_sink(self, statement: Statement, sink: TableDef, why: str) -> None:
        """An updating result needs a sink with a key to update (a view keeps its rows)."""
        if sink.is_upsert or sink.is_view:
            return
        # as Flink: "Table sink doesn't support consuming update and delete changes"
        raise self.error(
            self.keyword(statement, TokenType.INSERT),
            f"the sink {sink.name} is append-only (no PRIMARY KEY, 'connector' = "
            f"'{sink.connector}') but the result is updating: {why}; " + upsert_hint(sink),
        )

    def require_kept_key(
        self,
        statement: Statement,
        select: exp.Select,
        sink: TableDef,
        sources: tuple[TableDef, ...],
        owner: Callable[[exp.Column, bool], TableDef | None] | None = None,
    ) -> None:
        """Rows of a table keep their Kafka keys on the way to the sink (``to_stream``: a
        delete has no row to take a new key from), so the sink's key columns must receive
        the key columns of one of ``sources``, written the same way. ``owner`` (a join's
        rows) names the source a column reference reads (alone, or in a COALESCE), None
        for a table whose key the rows do not keep or, alone, a column an outer join may
        leave NULL: a key column of the same name in another table is not the key."""
        if sink.is_view:
            return
        fed: dict[str, set[str]] = {}
        for item, name in zip(select.expressions, sink.columns, strict=False):
            expression = item.this if isinstance(item, exp.Alias) else item
            # a key column, or COALESCE of key columns (a FULL join's key of either side)
            parts = (
                expression.args.get("expressions", [])
                if isinstance(expression, exp.Coalesce)
                else []
            )
            columns = [expression.this, *parts] if parts else [expression]
            if all(isinstance(c, exp.Column) for c in columns) and all(
                owner is None or c.name in getattr(owner(c, not parts), "key_fields", ())
                for c in columns
            ):
                fed[name] = {c.name for c in columns}
        given = [fed.get(k, set()) for k in sink.key_fields]
        width = {len(source.key_fields) for source in sources}
        if (
            width == {len(given)}
            and all(sink.key_format == source.key_format for source in sources)
            and all(
                names and all(any(s.key_fields[i] == n for s in sources) for n in names)
                for i, names in enumerate(given)
            )
            and (
                sink.key_format == "raw"
                or any(sink.key_fields == source.key_fields for source in sources)
            )
        ):
            return
        source = sources[0]
        raise self.error(
            self.keyword(statement, TokenType.INSERT),
            f"the rows of {source.name} keep its key ({', '.join(source.key_fields)}, "
            f"'key.format' {source.key_format}): select it into the key of the sink "
            f"{sink.name} ({', '.join(sink.key_fields) or 'none'}, 'key.format' "
            f"{sink.key_format})"
            + (", under the same names" if source.key_format in OBJECT_KEY_FORMATS else ""),
        )

    def stateless(
        self,
        statement: Statement,
        select: exp.Select,
        source: TableDef,
        sink: TableDef,
        rows: RowScope,
        where: Callable,
    ) -> None:
        project = self.projection(select, sink, rows, self.keyword(statement, TokenType.SELECT))
        if OCCURRENCE in source.columns:  # a regular join's changelog
            project_changelog_view(self, statement, source, sink, project, where)
            return
        stream = self.source_of(source)
        if source.is_upsert:
            self.require_upsert_sink(
                statement,
                sink,
                source.updated_by
                or f"the rows of {source.name} (an upsert table) are updated and deleted",
            )
            self.require_kept_key(statement, select, sink, (source,))
            table = stream.filter(lambda k, v: isinstance(v, dict) and where(v))
            table = table.map_values(lambda v: None if v is None else project(v))
            self.write(table.to_stream(), sink)
            return
        out = stream.filter(lambda k, v: isinstance(v, dict) and where(v)).map(
            lambda k, v: (sink.key_of(row := project(v)), row)
        )
        self.write(out, sink)

    # -- GROUP BY ----------------------------------------------------------------------

    def window_of(
        self, statement: Statement, group: exp.Group | None, source: TableDef
    ) -> tuple[Window | None, list[exp.Expr]]:
        """The window (TVF or group-window function) and the remaining GROUP BY items."""
        items = list(group.expressions) if group else []
        window: Window | None = None
        tvf: WindowTvf | None = statement.window_tvf
        if tvf is not None:
            window = Window(tvf.kind, tvf.column, tvf.size_ms, tvf.slide_ms, tvf.offset)
            items = [
                i
                for i in items
                if not (isinstance(i, exp.Column) and i.name in ("window_start", "window_end"))
            ]
        for item in list(items):
            if isinstance(item, exp.Anonymous) and item.name.upper() in (
                "TUMBLE",
                "HOP",
                SESSION_ALIAS,
            ):
                window = self.group_window(item)
                items.remove(item)
        column = window_column(source)
        for item in items if window is None and column is not None else []:
            if isinstance(item, exp.Column) and item.name == column:
                # window results grouped by their window bound: one window per bound value
                window = Window("TUMBLE", column, 1, 1, node_offset(item))
        if window is not None:
            self.check_time_attribute(window, source)
        return window, items

    def group_window(self, call: exp.Anonymous) -> Window:
        name, args = call.name.upper(), call.expressions
        name = "SESSION" if name == SESSION_ALIAS else name
        expected = 3 if name == "HOP" else 2
        if len(args) != expected or not isinstance(args[0], exp.Column):
            shape = {
                "TUMBLE": "TUMBLE(ts, size)",
                "HOP": "HOP(ts, slide, size)",
                "SESSION": "SESSION(ts, gap)",
            }[name]
            raise self.error(call, f"{name} takes {shape}")
        intervals = [interval_ms(a, self.source) for a in args[1:]]
        return Window(name, args[0].name, intervals[-1], intervals[0], node_offset(call))

    def check_time_attribute(self, window: Window, source: TableDef) -> None:
        if window.column not in source.columns:
            raise self.error(
                window.offset, f"unknown column {window.column} in table {source.name}"
            )
        on_proctime = window.column == source.proctime
        if not on_proctime and (
            source.watermark is None or source.watermark.column != window.column
        ):
            raise self.error(
                window.offset,
                f"{window.column} is not a time attribute of {source.name}: declare WATERMARK "
                f"FOR {window.column} (event time) or {window.column} AS PROCTIME() "
                "(processing time)",
            )
        if window.size_ms <= 0 or window.slide_ms <= 0 or window.slide_ms > window.size_ms:
            raise self.error(
                window.offset, "a window needs a positive size and a slide no larger than it"
            )

    def aggregation(
        self,
        statement: Statement,
        select: exp.Select,
        source: TableDef,
        sink: TableDef,
        rows: RowScope,
        where: Callable,
    ) -> None:
        window, items = self.window_of(statement, select.args.get("group"), source)
        if source.is_upsert and window is not None:
            raise self.error(
                window.offset,
                f"a window over the updating table {source.name} is not supported: windows "
                "need an append stream",
            )
        # a group key is a column (by its name) or an expression (by its SQL text, which
        # the SELECT list repeats: GROUP BY DATE_FORMAT(ts, 'yyyy-MM-dd'))
        group_columns: list[str] = []
        group_keys: list[Compiled] = []
        for item in items:
            if functions.has_aggregate(item) or item.find(exp.Window) is not None:
                raise self.error(item, f"GROUP BY {item.sql()}: an aggregate is not allowed here")
            group_keys.append(compile_expression(item, rows))
            group_columns.append(item.name if isinstance(item, exp.Column) else item.sql())
        tvf = statement.window_tvf
        missing = [c for c in tvf.partition if c not in group_columns] if tvf else []
        if tvf is not None and missing:
            raise self.error(
                tvf.offset,
                f"GROUP BY needs the SESSION's PARTITION BY columns: {', '.join(missing)}",
            )
        if statement.emit == "FINAL" and window is None:
            raise self.error(
                statement.emit_offset,
                "EMIT FINAL needs a windowed aggregation: a non-windowed result never closes",
            )
        final = statement.final(window is not None)
        scope = GroupScope(
            rows, group_columns, window is not None, expressions=_group_expressions(items)
        )
        project = self.projection(select, sink, scope, self.keyword(statement, TokenType.SELECT))
        having_node = select.args.get("having")
        having = self.predicate(having_node, scope, "HAVING") if having_node else None
        if sink.is_view and not sink.is_upsert and not final:
            raise self.error(
                select,
                f"the result of {sink.name} is updating but has no key: "
                + (
                    "a view of an aggregation without GROUP BY is not supported yet"
                    if not group_columns
                    else "put every GROUP BY column in its SELECT list"
                ),
            )
        if not sink.is_upsert and not final:
            # as Flink: "Table sink doesn't support consuming update changes"
            raise self.error(
                self.keyword(statement, TokenType.INSERT),
                f"the sink {sink.name} is append-only (no PRIMARY KEY, 'connector' = "
                f"'{sink.connector}') but the result is updating: "
                + (
                    "a windowed aggregation under EMIT CHANGES updates its rows"
                    if window is not None
                    else "a non-windowed aggregation updates its rows"
                )
                + "; "
                + upsert_hint(sink)
                + (
                    ", or leave EMIT CHANGES out (one final row per window)"
                    if window is not None
                    else ""
                ),
            )
        specs = scope.specs
        session_window = window if window is not None and window.kind == "SESSION" else None
        for spec in specs if session_window is not None else []:
            if spec.python is not None and not spec.python.merges:
                assert session_window is not None
                raise self.error(
                    session_window.offset,
                    f"aggregate function {spec.python.name} has no merge(): a SESSION window "
                    "merges the accumulators of the sessions a row joins",
                )
        key_fns = [key.fn for key in group_keys]
        rows_in = self.source_of(source).filter(lambda k, v: isinstance(v, dict) and where(v))
        on_proctime = window is not None and window.column == source.proctime
        group_name = self.unique(f"{sink.name}-group-by")
        grouping = Grouped.with_(
            key_serde=serdes.Json(),
            value_serde=serdes.Json(),
            name=group_name,
        )
        # a processing-time window has no late rows to wait for
        grace = source.watermark.delay_ms if source.watermark and not on_proctime else 0
        time_windows: TimeWindows | None = None
        cumulate: CumulateWindows | None = None
        if window is not None and window.kind == "CUMULATE":
            cumulate = CumulateWindows(window.slide_ms, window.size_ms, grace)
        elif window is not None and window.kind != "SESSION":
            time_windows = TimeWindows.of_size_and_grace(window.size_ms, grace)
            if window.slide_ms != window.size_ms:
                time_windows = time_windows.advance_by(window.slide_ms)
        # The store is named after the sink table (the queryable name pull queries look
        # up); a second aggregation into the same sink gets a suffixed name.
        store_name = self.unique(sink.name)
        emit_on_close = time_windows is not None and final
        if on_proctime:
            assert window is not None
            # a window over the processing time assigns each row when the aggregation
            # processes it, after the repartition, as Flink's window operator does: a row
            # that waited in the repartition topic is never late for its window
            repartitioned = rows_in.select_key(lambda k, v: [fn(v) for fn in key_fns]).repartition(
                Repartitioned.with_(serdes.Json(), serdes.Json()).with_name(group_name)
            )
            grouped = repartitioned.process_values(
                lambda column=window.column: ProctimeStamper(column, stamp_record=True),
                named=Named.as_(self.unique(f"{sink.name}-proctime")),
            ).group_by_key(grouping)
        elif source.is_upsert:
            # an updating input: KGroupedTable.aggregate takes each old row back
            grouped = rows_in.group_by(lambda k, v: ([fn(v) for fn in key_fns], v), grouping)
        else:
            grouped = rows_in.group_by(lambda k, v: [fn(v) for fn in key_fns], grouping)
        store = (
            Materialized.as_(store_name)
            .with_key_serde(serdes.Json())
            .with_value_serde(serdes.Json())
        )
        init, add = aggregates.initializer(specs), aggregates.aggregator(specs)
        values = aggregates.results
        split: Callable[[Any], tuple[Any, tuple[int, int] | None]]
        if source.is_upsert:
            init, values = aggregates.updating_initializer(specs), aggregates.updating_results
            table = grouped.aggregate(
                init,
                aggregates.adder(specs),
                aggregates.subtractor(specs),
                materialized=store,
            )
            split = lambda k: (k, None)  # noqa: E731
        elif window is None:
            table = grouped.aggregate(init, add, materialized=store)
            split = lambda k: (k, None)  # noqa: E731
        else:
            if window.kind == "SESSION":
                gap = window.size_ms
                sessions = SessionWindows.of_inactivity_gap_and_grace(gap, grace)
                table = close_when_quiet(grouped.windowed_by(sessions), source, window).aggregate(
                    init, add, aggregates.merger(specs), materialized=store
                )
                split = lambda k: (k.key, (k.window.start, k.window.end + gap))  # noqa: E731
            elif cumulate is not None:
                # emitted once, when the watermark passes the window's end (suppress below)
                windows = cumulate
                kept = store.with_retention(windows.retention_ms())
                table = close_when_quiet(grouped.windowed_by(windows), source, window).aggregate(
                    init, add, materialized=kept
                )
                split = lambda k: (  # noqa: E731
                    k.key,
                    (windows.real_start(k.window.start), k.window.end),
                )
                if self.late_topic is not None:
                    self._late_tables.append((table, sink.name))
            else:
                assert time_windows is not None  # a tumbling or hopping window
                windowed = close_when_quiet(grouped.windowed_by(time_windows), source, window)
                if emit_on_close:
                    windowed = windowed.emit_strategy(EmitStrategy.on_window_close())
                table = windowed.aggregate(init, add, materialized=store)
                split = lambda k: (k.key, (k.window.start, k.window.end))  # noqa: E731
                if self.late_topic is not None:
                    self._late_tables.append((table, sink.name))
            if final and not emit_on_close:
                table = table.suppress(
                    Suppressed.until_window_closes(BufferConfig.unbounded()).with_name(
                        self.unique(f"{sink.name}-final")
                    )
                )

        def output(group: tuple[Any, tuple[int, int] | None], acc: Any) -> tuple[Any, Any]:
            """(sink key, sink row) of a (grouping key, window bounds); the row is None (a
            delete) for a merged-away session or a row that fails HAVING."""
            key, bounds = group
            group_row = row_of(key, bounds, values(specs, init() if acc is None else acc))
            row = project(group_row)
            if acc is None or (having is not None and not having(group_row)):
                return sink.key_of(row), None
            return sink.key_of(row), row

        # views have no pull queries, nor have CUMULATE windows (kept under another start)
        if sink.name not in self.results and not sink.is_view and cumulate is None:
            kind = (
                "keyvalue"
                if window is None
                else "session"
                if window.kind == "SESSION"
                else "window"
            )
            self.results[sink.name] = MaterializedResult(
                table=sink.name,
                store=store_name,
                kind=kind,
                group_columns=tuple(group_columns),
                group_kinds=tuple(key.kind for key in group_keys),
                window_size_ms=None if window is None else window.size_ms,
                session_gap_ms=window.size_ms if window is not None and kind == "session" else 0,
                row=lambda key, bounds, acc: output((key, bounds), acc)[1],
            )
        out = table.to_stream().map(lambda k, acc: output(split(k), acc))
        may_delete = having is not None or (window is not None and window.kind == "SESSION")
        if may_delete and (not sink.key_fields or final):
            out = out.filter(lambda k, row: row is not None)
        self.write(out, sink)
