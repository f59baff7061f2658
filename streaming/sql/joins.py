"""Joins of two tables -> the DSL's KStream/KTable joins.

``FROM l [alias] [LEFT | FULL [OUTER]] JOIN r [alias] ON l.x = r.y [AND <time bound>]``
maps by what the two tables are:

- stream-table (``l`` an append stream, ``r`` an upsert table): ``KStream.join`` /
  ``left_join`` with the ``KTable``. The table is keyed by its key column, so the equality
  must name it; the stream is re-keyed by its join column (``select_key``, which makes the
  DSL repartition it) unless its Kafka key already is that column, written the same way.
  ``r FOR SYSTEM_TIME AS OF l.ts`` makes the table versioned
  (``Materialized.as_versioned``, a day of history) and the join buffers each stream row for the stream's
  WATERMARK delay (``Joined.with_grace_period``), so a row meets the table as of its time.
- stream-stream (an interval join): the ON clause also needs
  ``r.ts BETWEEN l.ts - INTERVAL ... AND l.ts + INTERVAL ...`` on the two time attributes;
  ``KStream.join`` / ``left_join`` / ``outer_join`` with ``JoinWindows`` whose before/after
  come from the bounds and whose grace is the larger WATERMARK delay of the two.
  Both sides are re-keyed by their join column where needed, written the same way.
- table-table: ``KTable.join`` / ``left_join`` / ``outer_join`` on the primary keys; when
  the ON clause equates a non-key column of the left table with the right table's key,
  a foreign-key join (``KTable.join`` / ``left_join`` with a ``foreign_key_extractor``),
  keyed by the left table's key.

The joined row is ``{"left": l_row, "right": r_row}`` (a side may be None in outer
joins); ``JoinScope`` resolves qualified and unqualified column names on it and
``OnClause`` reads the ON clause (``join_conditions``). WHERE filters joined rows, the
SELECT list maps them onto the sink as for one table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlglot import exp

from streaming import serdes
from streaming.dsl import Joined, JoinWindows, Materialized, StreamJoined
from streaming.sql.catalog import TableDef, raw_key
from streaming.sql.errors import SqlError, error_at, node_offset
from streaming.sql.join_conditions import Equality, JoinScope, OnClause, TimeBound, bound_node

#: How long (in the table's stream time) a versioned table keeps old rows. Flink keeps a
#: version until the join's watermark passes it; a stream and its table advance apart
#: here, so a day covers how far a stream's time usually lags its table's.
VERSIONED_HISTORY_MS = 24 * 60 * 60 * 1000


def joined(left: Any, right: Any) -> dict[str, Any]:
    """The ValueJoiner of every SQL join: both rows, as the JoinScope reads them."""
    return {"left": left, "right": right}


def key_maker(column: str, key_format: str) -> Callable[[Any], Any]:
    """``value -> Kafka key`` of a row keyed by ``column``, written as a table with that
    key column and ``key_format`` writes it (``raw``: the value's text; ``json``:
    ``{column: value}``); None for a NULL value, which joins nothing."""
    if key_format == "json":
        return lambda value: None if value is None else {column: value}
    return lambda value: None if value is None else raw_key(value)


def plain_key(table: TableDef, column: str) -> bool:
    """Whether ``table``'s Kafka key is exactly ``column``."""
    return table.key_fields == (column,)


class JoinCompiler:
    """Compiles the FROM ... JOIN ... ON part of one INSERT into a stream or table of
    joined rows."""

    def __init__(self, compiler: Any, select: exp.Select, sink: TableDef) -> None:
        self.compiler = compiler
        self.source = compiler.source
        self.select = select
        self.sink = sink
        from_ = select.args.get("from_") or select.args.get("from")
        joins = select.args["joins"]
        if len(joins) > 1:
            raise self.error(joins[1], "joins of more than two tables are not supported yet")
        self.join: exp.Join = joins[0]
        if from_ is None or not isinstance(from_.this, exp.Table):
            raise self.error(select, "SELECT needs FROM <table>")
        if not isinstance(self.join.this, exp.Table):
            raise self.error(self.join, "a join needs a table on each side")
        left_node, right_node = from_.this, self.join.this
        self.left = compiler.table(left_node)
        self.right = compiler.table(right_node)
        self.scope = JoinScope(
            self.left,
            self.right,
            left_node.alias or self.left.name,
            right_node.alias or self.right.name,
            self.source,
        )
        if self.scope.left_alias == self.scope.right_alias:
            raise self.error(right_node, f"both tables are called {self.scope.left_alias}")
        self.version = right_node.args.get("version")
        self.on = OnClause(self.scope, select, self.join, self.source)
        self.side = self.on.side
        #: the tables whose keys a join of two tables keeps (both: equal keys)
        self.keyed_by: tuple[TableDef, ...] = (self.left, self.right)

    def error(self, node: exp.Expr | int, message: str) -> SqlError:
        offset = node if isinstance(node, int) else node_offset(node)
        return error_at(self.source, offset, message)

    def build(self) -> tuple[Any, bool]:
        """The joined rows: a KStream (False) or a KTable (True) of ``{"left", "right"}``."""
        equality, bound = self.on.condition()
        left, right = self.left, self.right
        for table, node in ((left, self.select), (right, self.join.this)):
            if table.is_global and (table is left or left.is_upsert):
                raise self.error(
                    node,
                    f"{table.name} is a global table: it joins only as the table of a "
                    "stream-table join (FROM stream JOIN global_table ON ...)",
                )
        if left.is_upsert and right.is_upsert:
            if bound is not None:
                raise self.error(bound_node(self.join), "a join of two tables takes no time bound")
            return self.table_table(equality), True
        if left.is_upsert and not plain_key(left, equality.left):
            raise self.error(
                self.join.this,
                f"a foreign-key join needs a PRIMARY KEY on {right.name} ({right.name} is an "
                f"append stream): {left.name}.{equality.left} must name a row of a table",
            )
        if left.is_upsert:
            raise self.error(
                self.join,
                f"a join of the table {left.name} with the stream {right.name} is not "
                "supported yet: put the stream first (FROM stream JOIN table)",
            )
        if right.is_upsert:
            if bound is not None:
                raise self.error(bound_node(self.join), "a stream-table join takes no time bound")
            return self.stream_table(equality), False
        if bound is None and self.on.bound_error is not None:
            raise SqlError(
                "a join of two streams needs a time bound between the time attributes: "
                + self.on.bound_error.message,
                line=self.on.bound_error.line,
                column=self.on.bound_error.column,
            )
        if bound is None:
            raise self.error(
                self.join,
                f"a join of two streams needs a time bound: ON ... AND "
                f"{self.scope.right_alias}.ts BETWEEN {self.scope.left_alias}.ts - INTERVAL ... "
                f"AND {self.scope.left_alias}.ts + INTERVAL ...",
            )
        return self.stream_stream(equality, bound), False

    def no_version(self, what: str) -> None:
        if self.version is not None:
            raise self.error(self.join.this, f"FOR SYSTEM_TIME AS OF needs {what}")

    def stream_of(self, table: TableDef) -> Any:
        """The table's source stream, rows that are not JSON objects dropped."""
        return self.compiler.source_of(table).filter(lambda k, v: isinstance(v, dict))

    def stream_table(self, equality: Equality) -> Any:
        left, right = self.left, self.right
        if not plain_key(right, equality.right):
            raise self.error(
                equality.node,
                f"a join needs an equality on the key of {right.name} "
                f"({', '.join(right.key_fields) or 'none'}), not {right.name}.{equality.right}",
            )
        if self.side == "FULL":
            raise self.error(self.join, "a stream-table join is INNER or LEFT, not FULL")
        if right.is_global:
            return self.stream_global(equality)
        stream = self.stream_of(left)
        if not (plain_key(left, equality.left) and same_key(left, right, equality)):
            make = key_maker(equality.right, right.key_format)
            column = equality.left
            stream = stream.select_key(lambda k, v: make(v.get(column)))
        joined_with = Joined.with_(key_serde=right.key_serde(), value_serde=serdes.Json())
        if self.version is not None:
            table, grace = self.versioned_table(), self.versioned_grace()
            if grace > 0:
                joined_with = joined_with.with_grace_period(grace)
        else:
            table = self.compiler.source_of(right)
        if joined_with.grace_period_ms is None:
            join = stream.left_join if self.side == "LEFT" else stream.join
            return join(table, joined, joined=joined_with)
        # The grace buffer takes no null keys (as in Kafka): an inner join drops such rows,
        # a left join passes them on at once with no table row.
        keyed = stream.filter(lambda k, v: k is not None)
        result = (keyed.left_join if self.side == "LEFT" else keyed.join)(
            table, joined, joined=joined_with
        )
        if self.side == "LEFT":
            unkeyed = stream.filter(lambda k, v: k is None).map_values(lambda v: joined(v, None))
            result = result.merge(unkeyed)
        return result

    def stream_global(self, equality: Equality) -> Any:
        """A stream joined with a ``GlobalKTable``: each row looks up the table by its join
        column (``KStream.join(global_table, key_selector, joiner)``), no re-keying and no
        co-partitioning; a row whose join column is NULL finds nothing."""
        if self.version is not None:
            raise self.error(
                self.join.this,
                f"{self.right.name} is a global table: it keeps no versions, so it is not "
                "read FOR SYSTEM_TIME AS OF (declare it partitioned for a versioned join)",
            )
        make = key_maker(equality.right, self.right.key_format)
        column = equality.left
        stream = self.stream_of(self.left)
        table = self.compiler.source_of(self.right)
        join = stream.left_join if self.side == "LEFT" else stream.join
        return join(table, lambda k, v: make(v.get(column)), joined)

    def versioned_grace(self) -> int:
        """The stream's WATERMARK delay: how long a row waits for the table's versions."""
        return self.left.watermark.delay_ms if self.left.watermark else 0

    def versioned_table(self) -> Any:
        """``FOR SYSTEM_TIME AS OF l.ts``: the table in a versioned store that keeps
        ``VERSIONED_HISTORY_MS`` of history."""
        version = self.version
        column = version.expression if version is not None else None
        kind = version.args.get("kind") if version is not None else None
        if not isinstance(column, exp.Column) or kind != "AS OF":
            raise self.error(self.join.this, "expected FOR SYSTEM_TIME AS OF <stream>.<ts>")
        side, table = self.scope.side_of(column)
        if side != "left" or table.watermark is None or table.watermark.column != column.name:
            raise self.error(
                column,
                f"FOR SYSTEM_TIME AS OF needs the time attribute of {self.left.name}"
                + (f" ({self.left.watermark.column})" if self.left.watermark else ""),
            )
        if self.right.name in self.compiler._sources or self.right.is_view:
            raise self.error(
                self.join.this,
                f"FOR SYSTEM_TIME AS OF needs {self.right.name} read into a versioned store: "
                f"{self.right.name} is read elsewhere too (or is a view), not supported yet",
            )
        table = self.compiler.source_of(
            self.right, materialized=self.versioned_store(VERSIONED_HISTORY_MS)
        )
        self.compiler.versioned.add(self.right.name)
        return table

    def versioned_store(self, retention_ms: int) -> Materialized:
        name = self.compiler.unique(f"{self.right.name}-versioned")
        return (
            Materialized.as_versioned(name, retention_ms)
            .with_key_serde(self.right.key_serde())
            .with_value_serde(serdes.Json())
        )

    def stream_stream(self, equality: Equality, bound: TimeBound) -> Any:
        self.no_version("a table on the right of a stream")
        left, right = self.left, self.right
        if plain_key(left, equality.left):
            key_format = left.key_format
            make = key_maker(equality.left, key_format)
        elif plain_key(right, equality.right):
            key_format = right.key_format
            make = key_maker(equality.right, key_format)
        else:
            key_format = "raw"
            make = key_maker(equality.left, key_format)
        key_name = equality.left if plain_key(left, equality.left) else equality.right
        streams, unjoined = [], []
        for side, table, column in (
            ("left", left, equality.left),
            ("right", right, equality.right),
        ):
            stream = self.stream_of(table)
            keyed = plain_key(table, column) and table.key_format == key_format
            if not keyed or (key_format == "json" and column != key_name):
                stream = stream.select_key(lambda k, v, c=column: make(v.get(c)))
            # SQL: a NULL join column equals nothing (not even NULL), so such a row never
            # joins; a LEFT / FULL join passes it on at once with no other side.
            if side == "left" and self.side in ("LEFT", "FULL"):
                unjoined.append(
                    stream.filter(lambda k, v, c=column: k is None or v.get(c) is None).map_values(
                        lambda v: joined(v, None)
                    )
                )
            elif side == "right" and self.side == "FULL":
                unjoined.append(
                    stream.filter(lambda k, v, c=column: k is None or v.get(c) is None).map_values(
                        lambda v: joined(None, v)
                    )
                )
            streams.append(
                stream.filter(lambda k, v, c=column: k is not None and v.get(c) is not None)
            )
        grace = max(t.watermark.delay_ms if t.watermark else 0 for t in (left, right))
        windows = JoinWindows(before_ms=bound.before_ms, after_ms=bound.after_ms, grace_ms=grace)
        key_serde = serdes.Json() if key_format == "json" else serdes.String()
        stream_joined = StreamJoined.with_(
            key_serde=key_serde, value_serde=serdes.Json(), other_value_serde=serdes.Json()
        )
        first, second = streams
        join = {"INNER": first.join, "LEFT": first.left_join, "FULL": first.outer_join}[self.side]
        result = join(second, joined, windows, stream_joined=stream_joined)
        for rows in unjoined:
            result = result.merge(rows)
        return result

    def table_table(self, equality: Equality) -> Any:
        self.no_version("a stream on the left of the table")
        left, right = self.left, self.right
        if plain_key(right, equality.right) and not plain_key(left, equality.left):
            self.keyed_by = (left,)  # the joined rows keep the left table's keys
            return self.foreign_key(equality)
        if not plain_key(right, equality.right):
            raise self.error(
                equality.node,
                f"a join of two tables needs an equality on the key of the right table "
                f"{right.name} ({', '.join(right.key_fields) or 'none'}), not "
                f"{right.name}.{equality.right}"
                + (
                    " (for a foreign-key join put the table whose column names the other's "
                    "key first)"
                    if plain_key(left, equality.left)
                    else ""
                ),
            )
        if not same_key(left, right, equality):
            raise self.error(
                equality.node,
                f"join without co-partitioning: {left.name} and {right.name} write their keys "
                f"differently ('key.format' {left.key_format} and {right.key_format})",
            )
        first = self.compiler.source_of(left)
        second = self.compiler.source_of(right)
        join = {"INNER": first.join, "LEFT": first.left_join, "FULL": first.outer_join}[self.side]
        return join(second, joined)

    def foreign_key(self, equality: Equality) -> Any:
        """``l.fk = r.key``: ``KTable.join`` / ``left_join`` with a foreign-key extractor.

        Each left row joins the right row its column names (written as the right table
        writes its key); the result is keyed by the left's key and updates when either
        side changes. A NULL foreign key joins nothing (a LEFT join keeps the left row).
        """
        if self.side == "FULL":
            raise self.error(self.join, "a foreign-key join is INNER or LEFT, not FULL")
        make = key_maker(equality.right, self.right.key_format)
        column = equality.left
        first = self.compiler.source_of(self.left)
        second = self.compiler.source_of(self.right)
        join = first.left_join if self.side == "LEFT" else first.join
        return join(second, lambda v: make(v.get(column)) if isinstance(v, dict) else None, joined)


def same_key(left: TableDef, right: TableDef, equality: Equality) -> bool:
    """Whether both tables write a key of their join column the same way (raw text, or
    a JSON object of the same column name)."""
    if left.key_format != right.key_format:
        return False
    return left.key_format == "raw" or equality.left == equality.right
