"""Compiling tables defined by a query: ``CREATE TABLE ... AS SELECT``, ``CREATE
[TEMPORARY] VIEW ... AS SELECT`` and subqueries in FROM.

- ``CREATE TABLE t [(columns, PRIMARY KEY ...)] WITH (...) AS SELECT ...`` declares
  ``t`` with the query's columns (``derived``) and compiles the query into it as
  ``INSERT INTO t`` would; later statements read ``t`` from its topic.
- ``CREATE VIEW v [(names)] AS SELECT ...`` compiles the query once, into a stream kept
  in the topology instead of a topic (``Compiler.write``); statements that read ``v`` use
  that stream (``Compiler.source_of``): an append view as a KStream, an updating one
  (it has a key) as a KTable of it (``to_table``, which repartitions after a key change).
- ``FROM (SELECT ...) [AS q]`` (also as a join side) is an anonymous view named by its
  alias (without one, ``subquery$n``) for the one statement. A window TVF inside it is
  its own; a windowed aggregation in a view or a subquery emits final results (one row
  per window once it closes, append-only), as everywhere without EMIT CHANGES.
- A subquery that deduplicates (``ROW_NUMBER()`` filtered on 1 in the outer WHERE,
  ``dedup``) is a view of the deduplicated rows; one that ranks (``ROW_NUMBER()``
  filtered on ``<= N``, ``topn``) an upsert view of the top rows keyed by the partition
  and the row number, or over a window aggregation's results partitioned by the window
  an append view of each window's top rows; the outer WHERE loses that condition.
  Partitioned by the window directly over a window TVF, the subquery reads the TVF's
  rows (``window_rank``) and ranks each window once it closes.
- A window over a ``PROCTIME()`` column gives no time attribute (its bounds are plain
  columns, as in Flink); a view that passes a ``PROCTIME()`` column through keeps it as
  its processing time.
- A view of final window results keeps its first window bound as its time attribute:
  its rows are re-stamped to it (``ColumnTimestamper``) and the table is marked
  ``window_bound``, so a later GROUP BY of that column is one window per value.
- A view's windows close on a quiet input as those of the table it reads (its FROM
  table, the left one of a join) do: it takes that table's ``'window.close.quiet'``.
- An updating view (a non-windowed aggregation) is keyed by its GROUP BY columns; those
  its SELECT list leaves out are added to it as hidden ``$column`` outputs. A query over
  a table keeps the table's Kafka keys, so it must select the table's key.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from sqlglot import exp

from streaming.sql import dedup as dedups
from streaming.sql import topn as topns
from streaming.sql import window_join, window_rank
from streaming.sql.catalog import INFERRED, OBJECT_KEY_FORMATS, TableDef, schema_elements, table_def
from streaming.sql.derived import (
    WINDOW_COLUMNS,
    Output,
    QuerySources,
    is_aggregation,
    is_windowed,
    outputs,
    passthrough,
    span,
    time_attribute,
    upsert_key,
    window_column,
)
from streaming.sql.errors import SqlError, error_at, node_offset
from streaming.sql.rewrite import Statement, WindowTvf
from streaming.sql.stars import expand_over_source
from streaming.sql.timestamps import ColumnTimestamper, ProctimeStamper


class DerivedTables:
    """Defines tables and views from queries for one ``Compiler``."""

    def __init__(self, compiler: Any) -> None:
        self.compiler = compiler
        self.source = compiler.source
        #: how many subqueries without an alias have been named
        self.unaliased = 0

    def error(self, node: exp.Expr | int, message: str) -> SqlError:
        offset = node if isinstance(node, int) else node_offset(node)
        return error_at(self.source, offset, message)

    def create(self, statement: Statement, create: exp.Create) -> None:
        """``CREATE TABLE ... AS SELECT`` or ``CREATE [TEMPORARY] VIEW ... AS SELECT``."""
        kind = str(create.args.get("kind") or "").upper()
        if kind not in ("TABLE", "VIEW"):
            raise self.error(create, f"CREATE {kind} ... AS is not supported")
        select = create.expression
        if not isinstance(select, exp.Select):
            raise self.error(create, f"CREATE {kind} ... AS needs a SELECT")
        target = create.this
        schema = target if isinstance(target, exp.Schema) else None
        name_node = schema.this if schema is not None else target
        names: list[str] = []
        kinds: dict[str, str] = {}
        primary_key: tuple[str, ...] = ()
        if schema is not None and kind == "VIEW":
            names = [item.name for item in schema.expressions]
        elif schema is not None:
            kinds, primary_key = schema_elements(schema, self.source)
            names = list(kinds)
        if kind == "VIEW" and statement.watermark is not None:
            raise self.error(statement.watermark.offset, "a view takes no WATERMARK")
        if kind == "TABLE" and statement.watermark is not None:
            raise self.error(
                statement.watermark.offset,
                "CREATE TABLE ... AS SELECT takes no WATERMARK: the time attribute is the query's",
            )
        self.define(
            statement,
            select,
            name_node,
            create,
            names=names,
            kinds=kinds,
            primary_key=primary_key,
            view=kind == "VIEW",
        )

    def define(
        self,
        statement: Statement,
        select: exp.Select,
        name_node: exp.Expr,
        create: exp.Create,
        *,
        names: list[str],
        kinds: dict[str, str],
        primary_key: tuple[str, ...],
        view: bool,
    ) -> TableDef:
        """Declare the table of ``select``'s output and compile the query into it."""
        compiler = self.compiler
        name = name_node.name
        if name in compiler.tables:
            raise self.error(name_node, f"table {name} already exists")
        with self.subqueries(statement, select) as outer:
            expand_over_source(select, outer, compiler.tables)
            columns = outputs(select, self.source)
            if names and len(names) != len(columns):
                raise self.error(
                    name_node,
                    f"{name} lists {len(names)} columns, its query has {len(columns)}",
                )
            sources = self.sources(select)
            stamped = self._proctime_output(select, columns, sources, view)
            time_column = window_column(sources.left)
            windowed = is_windowed(select, outer.window_tvf is not None, time_column)
            final = outer.final(windowed)
            key = primary_key or upsert_key(
                select, columns, sources, windowed=windowed, final=final
            )
            updating_source = sources.left.is_upsert and (
                sources.right is None or sources.right.is_upsert
            )
            if not key and updating_source and not is_aggregation(select):
                keys = ", ".join(sources.left.primary_key) or "none"
                raise self.error(
                    name_node,
                    f"the result of {name} is updating (it reads the table "
                    f"{sources.left.name}) but has no key: select its primary key ({keys})",
                )
            if view and not key and is_aggregation(select) and not (windowed and final):
                columns = self.expose_group_key(select, columns)
                key = upsert_key(select, columns, sources, windowed=windowed, final=final)
            size = (
                self.window_size(outer, select, time_column, sources.left.proctime)
                if final
                else None
            )
            watermark = time_attribute(select, columns, sources, size, time_column)
            renamed = {c.name: n for c, n in zip(columns, names, strict=False)}
            if watermark is not None:
                watermark = replace(
                    watermark, column=renamed.get(watermark.column, watermark.column)
                )
            key = tuple(renamed.get(k, k) for k in key) if not primary_key else key
            table_columns = {
                renamed.get(c.name, c.name): kinds.get(renamed.get(c.name, c.name), INFERRED)
                for c in columns
            }
            table = table_def(name, table_columns, key, create, watermark, self.source, view=view)
            if view:  # its rows are the source's: so is its quiet close
                table = replace(table, window_close_quiet_ms=sources.left.window_close_quiet_ms)
            proctime = sources.left.proctime
            if view and proctime is not None and not is_aggregation(select):
                # the column passed through keeps its values: the processing time
                qualifiers = (sources.left.name, sources.left_alias)
                passed = passthrough(columns, proctime, qualifiers)
                table = replace(table, proctime=renamed.get(passed, passed) if passed else None)
            if stamped is not None:
                table = replace(table, proctime=renamed.get(stamped, stamped))
            if watermark is not None and is_aggregation(select):
                table = replace(table, window_bound=True)
            if updating_source and not is_aggregation(select):
                table = self.keep_source_key(table, sources.left, name_node)
            table = compiler.tables[name] = compiler.declare_table(table)
            compiler.inferring.add(name)
            try:
                compiler.dispatch_query(outer, select, table)
            finally:
                compiler.inferring.discard(name)
            if stamped is not None:
                column = renamed.get(stamped, stamped)
                compiler.views[name] = compiler.views[name].process_values(
                    lambda: ProctimeStamper(column)
                )
            if view and watermark is not None and is_aggregation(select):
                # a window's rows come out at its close: their time becomes the bound's
                column = watermark.column
                compiler.views[name] = compiler.views[name].process_values(
                    lambda: ColumnTimestamper(column)
                )
        return table

    def _proctime_output(
        self, select: exp.Select, columns: list[Any], sources: Any, view: bool
    ) -> str | None:
        """The output column ``PROCTIME() AS p`` of a view that projects and filters one
        append stream (``SELECT *, PROCTIME() AS p_time FROM bid``): its call is taken
        out (the column starts NULL) and the view's rows get the processing time in it
        (``ProctimeStamper``), so the column is the view's processing-time attribute, as a
        table's ``p AS PROCTIME()``. None if there is no such column."""
        found = [
            c
            for c in columns
            if isinstance(c.node, exp.Anonymous)
            and c.node.name.upper() == "PROCTIME"
            and not c.node.expressions
        ]
        if not found:
            return None
        simple = (
            view
            and not is_aggregation(select)
            and not select.args.get("joins")
            and not sources.left.is_upsert
            and sources.left.proctime is None
            and len(found) == 1
        )
        if not simple:
            raise self.error(
                found[0].node,
                "PROCTIME() in a query is supported in a view that projects and filters one "
                "append stream (one such column, the stream without a processing time "
                "of its own) only",
            )
        found[0].node.replace(exp.cast(exp.null(), exp.DataType.build("TIMESTAMP")))
        return str(found[0].name)

    def keep_source_key(self, table: TableDef, source: TableDef, at: exp.Expr) -> TableDef:
        """A query over a table keeps its rows' Kafka keys (``to_stream`` of the filtered
        table): the new table's key must be the source's, written the same way."""
        if table.key_format != source.key_format and "key.format" in table.options:
            raise self.error(
                at,
                f"{table.name} keeps the keys of {source.name}: its 'key.format' is "
                f"{source.key_format!r}",
            )
        if len(table.key_fields) != len(source.key_fields) or (
            source.key_format in OBJECT_KEY_FORMATS and table.key_fields != source.key_fields
        ):
            raise self.error(
                at,
                f"{table.name} keeps the keys of {source.name}: its key is "
                f"({', '.join(source.key_fields)})"
                + (
                    f", not renamed ('key.format' {source.key_format})"
                    if source.key_format in OBJECT_KEY_FORMATS
                    else ""
                ),
            )
        return replace(table, key_format=source.key_format)

    def expose_group_key(self, select: exp.Select, columns: list[Output]) -> list[Output]:
        """Add the GROUP BY columns to an updating view's SELECT list (named ``$column``)
        so its rows carry their group's key: the view is then a table keyed by the
        group, as Flink keeps an aggregation's rows by group even when the SELECT list
        leaves its columns out."""
        group = select.args.get("group")
        taken = {c.name for c in columns}
        for item in group.expressions if group else []:
            if isinstance(item, exp.Column) and item.name not in WINDOW_COLUMNS:
                hidden = f"${item.table}.{item.name}" if item.table else f"${item.name}"
                if hidden not in taken:
                    select.append("expressions", exp.alias_(item.copy(), hidden, quoted=True))
                    taken.add(hidden)
        return outputs(select, self.source)

    def window_size(
        self,
        statement: Statement,
        select: exp.Select,
        time_column: str | None,
        proctime: str | None,
    ) -> int | None:
        """The size of the query's TUMBLE or HOP window (1 ms: a GROUP BY the window
        bound of window results; None: no such window, or one over the processing time
        ``proctime``, whose bounds are plain columns as in Flink)."""
        tvf = statement.window_tvf
        if tvf is not None:
            on_event_time = tvf.kind in ("TUMBLE", "HOP") and tvf.column != proctime
            return tvf.size_ms if on_event_time else None
        group = select.args.get("group")
        for item in group.expressions if group else []:
            if isinstance(item, exp.Anonymous) and item.name.upper() in ("TUMBLE", "HOP"):
                window = self.compiler.group_window(item)
                return int(window.size_ms) if window.column != proctime else None
            if isinstance(item, exp.Column) and item.name == time_column:
                return 1
        return None

    def sources(self, select: exp.Select) -> QuerySources:
        """The tables a query reads (its subqueries already replaced by their views)."""
        from_ = select.args.get("from_") or select.args.get("from")
        if from_ is None or not isinstance(from_.this, exp.Table):
            raise self.error(select, "SELECT needs FROM <table>")
        left = self.compiler.table(from_.this)
        joins = select.args.get("joins") or []
        joined = [self.compiler.table(j.this) for j in joins if isinstance(j.this, exp.Table)]
        # a chain with a stream in it is a stream: the right table stands for the others
        streams = [table for table in joined if not table.is_upsert]
        right = (streams or joined or [None])[0]
        return QuerySources(left, from_.this.alias or left.name, right)

    @contextmanager
    def subqueries(self, statement: Statement, select: exp.Select) -> Iterator[Statement]:
        """Compile each ``(SELECT ...) AS q`` in ``select``'s FROM and joins into a view
        ``q`` and put the table ``q`` in its place; yields the statement for the outer
        query (without the window TVF of a subquery). The views last for the block."""
        from_ = select.args.get("from_") or select.args.get("from")
        nodes = [from_.this] if from_ is not None else []
        nodes += [join.this for join in select.args.get("joins") or []]
        defined: list[str] = []
        outer_tvfs = list(statement.window_tvfs)
        window_joined = window_join.joins_subqueries(select)
        try:
            for node in nodes:
                if not isinstance(node, exp.Subquery):
                    continue
                alias = node.args.get("alias")
                inner_select = node.this
                first = node is nodes[0] and from_ is not None
                dedup = dedups.find(select, node) if first else None
                read = (
                    self.from_table(inner_select) if isinstance(inner_select, exp.Select) else None
                )
                if (
                    dedup is not None
                    and read is not None
                    and not dedups.by_time(dedup, read, self.from_alias(inner_select))
                ):
                    dedup = None  # ROW_NUMBER() = 1 ordered by another column: Top-1
                topn = topns.find(select, node) if first and dedup is None else None
                if dedup is not None:
                    dedup = dedups.prepare(inner_select, dedup, read)
                over_tvf = self._over_tvf(statement, node)
                if topn is not None and topn.by_window and over_tvf is not None:
                    # the subquery reads the TVF's rows, the TVF is consumed
                    read = window_rank.windowed_rows(self.compiler, inner_select, over_tvf)
                    delay = read.watermark.delay_ms if read.watermark is not None else 0
                    topn = replace(topn, tvf_delay_ms=delay, tvf_time=over_tvf.column)
                if topn is not None:
                    topn = topns.prepare(inner_select, topn, read)
                if not isinstance(inner_select, exp.Select):
                    raise self.error(node, "a subquery in FROM needs a SELECT")
                start, end = span(node)
                own = tuple(t for t in statement.window_tvfs if start <= t.offset <= end)
                outer_tvfs = [t for t in outer_tvfs if t not in own]
                if topn is not None and topn.tvf_delay_ms is not None:
                    own = ()
                window_input = None
                if window_joined and own and dedup is None and topn is None:
                    consumed, window_input = window_join.prepare_input(
                        self.compiler, inner_select, own[0], over_tvf
                    )
                    own = () if consumed else own
                inner = replace(
                    statement, window_tvf=own[0] if own else None, window_tvfs=own, emit=None
                )
                # Flink needs no alias: an unaliased subquery gets an internal name
                name_node = alias.this if alias is not None and node.alias else self.unnamed()
                create = exp.Create(this=exp.Table(this=name_node.copy()), kind="VIEW")
                self.define(
                    inner,
                    inner_select,
                    name_node,
                    create,
                    names=[c.name for c in alias.columns] if alias is not None else [],
                    kinds={},
                    primary_key=(),
                    view=True,
                )
                defined.append(name_node.name)
                if window_input is not None:
                    self.compiler.window_join_inputs[name_node.name] = window_input
                if dedup is not None:
                    view = self.compiler.tables[name_node.name]
                    self.compiler.views[view.name] = dedups.deduplicate(self.compiler, view, dedup)
                    dedups.drop_condition(select, dedup)
                if topn is not None:
                    view = topns.rank(self.compiler, self.compiler.tables[name_node.name], topn)
                    topns.drop_condition(select, topn)
                    topns.expand_star(select, view)
                node.replace(exp.Table(this=name_node.copy()))
            yield replace(
                statement,
                window_tvf=outer_tvfs[0] if outer_tvfs else None,
                window_tvfs=tuple(outer_tvfs),
            )
        finally:
            for name in defined:
                self.compiler.tables.pop(name, None)
                self.compiler.window_join_inputs.pop(name, None)

    @staticmethod
    def _over_tvf(statement: Statement, subquery: exp.Subquery) -> WindowTvf | None:
        """The window TVF the query of ``subquery`` reads directly (its FROM is the table
        of a TVF inside it), if it does."""
        inner = subquery.this
        from_ = inner.args.get("from_") if isinstance(inner, exp.Select) else None
        if from_ is None or not isinstance(from_.this, exp.Table):
            return None
        start, end = span(subquery)
        return next(
            (
                t
                for t in statement.window_tvfs
                if t.table == from_.this.name and start <= t.offset <= end
            ),
            None,
        )

    def from_table(self, select: exp.Select) -> TableDef | None:
        """The declared table (or view) ``select`` reads FROM, if it reads one by name."""
        from_ = select.args.get("from_") or select.args.get("from")
        node = from_.this if from_ is not None else None
        return self.compiler.tables.get(node.name) if isinstance(node, exp.Table) else None

    @staticmethod
    def from_alias(select: exp.Select) -> str:
        """The alias (else the name) of the table ``select`` reads FROM ("" for none)."""
        from_ = select.args.get("from_") or select.args.get("from")
        node = from_.this if from_ is not None else None
        return str(node.alias_or_name) if isinstance(node, exp.Table) else ""

    def unnamed(self) -> exp.Identifier:
        """The name of a subquery in FROM without an alias: ``subquery$n``, ``n`` counting
        the compilation's unaliased subqueries (nested ones included), past table names."""
        self.unaliased += 1
        while f"subquery${self.unaliased}" in self.compiler.tables:
            self.unaliased += 1
        return exp.to_identifier(f"subquery${self.unaliased}", quoted=True)
