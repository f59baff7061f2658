"""Joins -> the DSL's KStream/KTable joins, one DSL join per SQL join.

``FROM t1 [alias] [LEFT | RIGHT | FULL [OUTER]] JOIN t2 [alias] ON ... [JOIN t3 ON ...]``
is a left-deep chain ``((t1 JOIN t2) JOIN t3) ...``: each join's rows are the left input
of the next, and each ON clause may name any table joined before. A join maps by what
its two sides are (``join_steps``):

- stream-table (the left input a stream, the table an upsert table): ``KStream.join`` /
  ``left_join`` with the ``KTable``. The table is keyed by its key column, so the equality
  must name it; the stream is re-keyed by its join column (``select_key``, which makes the
  DSL repartition it) unless its Kafka key already is that column, written the same way
  (after a stream-table join the stream is keyed by that table's key). ``r FOR
  SYSTEM_TIME AS OF l.ts`` makes the table versioned (``Materialized.as_versioned``, a
  day of history) and the join buffers each stream row for the stream's WATERMARK delay
  (``Joined.with_grace_period``), so a row meets the table as of its time. A RIGHT
  stream-table join is an error (it would keep the table's rows; Flink has none either).
- stream-stream (an interval join, the first join of a chain): the ON clause also needs
  ``r.ts BETWEEN l.ts - INTERVAL ... AND l.ts + INTERVAL ...`` on the two time attributes;
  ``KStream.join`` / ``left_join`` / ``outer_join`` with ``JoinWindows`` whose before/after
  come from the bounds and whose grace is the larger WATERMARK delay of the two.
  Both sides are re-keyed by their join column where needed, written the same way.
- table-table: ``KTable.join`` / ``left_join`` / ``outer_join`` on the primary keys; when
  the ON clause equates a non-key column of the left input with the right table's key,
  a foreign-key join (``KTable.join`` / ``left_join`` with a ``foreign_key_extractor``),
  keyed by the left input's key.

RIGHT joins are the mirrored LEFT joins (Kafka Streams has no right join). The joined
row is ``{"left": l_row, "right": r_row}`` (a side may be None in outer joins), nested on
the left along a chain; ``JoinScope`` resolves qualified and unqualified column names on
it and ``OnClause`` reads each ON clause (``join_conditions``). WHERE filters joined
rows, the SELECT list maps them onto the sink as for one table.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from streaming.sql.catalog import TableDef
from streaming.sql.errors import SqlError, error_at, node_offset
from streaming.sql.join_conditions import JoinScope
from streaming.sql.join_inputs import JoinInput, table_input
from streaming.sql.join_steps import JoinStep


class JoinCompiler:
    """Compiles the FROM ... JOIN ... ON part of one INSERT into a stream or table of
    joined rows."""

    def __init__(self, compiler: Any, select: exp.Select, sink: TableDef) -> None:
        self.compiler = compiler
        self.source = compiler.source
        self.select = select
        self.sink = sink
        from_ = select.args.get("from_") or select.args.get("from")
        self.joins: list[exp.Join] = select.args["joins"]
        if from_ is None or not isinstance(from_.this, exp.Table):
            raise self.error(select, "SELECT needs FROM <table>")
        for join in self.joins:
            if not isinstance(join.this, exp.Table):
                raise self.error(join, "a join needs a table on each side")
        self.first_node: exp.Table = from_.this
        self.first = compiler.table(self.first_node)
        aliases = [self.first_node.alias or self.first.name]
        for join in self.joins:
            table = compiler.table(join.this)
            alias = join.this.alias or table.name
            if alias in aliases:
                raise self.error(join.this, f"both tables are called {alias}")
            aliases.append(alias)
        self.aliases = aliases
        #: the scope of the joined rows (set by ``build``)
        self.scope: JoinScope | None = None
        #: the tables (alias, table) whose keys the joined rows keep, and the aliases of
        #: the tables an outer join may leave NULL (set by ``build``)
        self.keyed_by: tuple[tuple[str, TableDef], ...] = ()
        self.padded: set[str] = set()

    def error(self, node: exp.Expr | int, message: str) -> SqlError:
        offset = node if isinstance(node, int) else node_offset(node)
        return error_at(self.source, offset, message)

    def build(self) -> tuple[Any, bool]:
        """The joined rows: a KStream (False) or a KTable (True) (see ``JoinScope``)."""
        current = self.first_input()
        steps: list[JoinStep] = []
        for join, alias in zip(self.joins, self.aliases[1:], strict=True):
            step = JoinStep(
                self.compiler, self.select, join, current, self.compiler.table(join.this), alias
            )
            steps.append(step)
            current = step.build()
        self.check_filters(steps)
        self.scope = steps[-1].scope
        self.keyed_by = current.keyed_by
        for step in steps:
            if step.side in ("RIGHT", "FULL"):
                self.padded.update(t.alias for t in step.input.tables)
            if step.side in ("LEFT", "FULL"):
                self.padded.add(step.right_alias)
        return current.rows, current.is_upsert

    def first_input(self) -> JoinInput:
        """The FROM table's rows as the first join's left input (a global table's none:
        the join rejects it)."""
        table = self.first
        if table.is_global:
            rows = None
        elif table.is_upsert:
            rows = self.compiler.source_of(table)
        else:
            rows = self.compiler.source_of(table).filter(lambda k, v: isinstance(v, dict))
        return table_input(table, self.aliases[0], rows)

    def check_filters(self, steps: list[JoinStep]) -> None:
        """An inner join's further ON conditions filter the final rows (WHERE): a later
        FULL or RIGHT join would NULL-pad the rows they should keep, so not supported."""
        for i, step in enumerate(steps[:-1]):
            if not step.on.filtered:
                continue
            for later in steps[i + 1 :]:
                if later.side in ("FULL", "RIGHT"):
                    raise self.error(
                        step.on.filtered[0],
                        f"a condition besides the join key ({step.on.filtered[0].sql()}) "
                        f"before a {later.side} join is not supported yet: move it into a "
                        "subquery",
                    )
