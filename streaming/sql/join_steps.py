"""One join of a chain -> one DSL join: its left input (a table, or the joined rows of
the joins before) with the next table.

``JoinStep`` joins the left input (a ``JoinInput``, see ``join_inputs``) with the next
table by what the two are (see ``joins``): a stream-table join re-keys the input by its
join column unless its key already is that column, written as the table writes its key;
an interval join (the first join of a chain) re-keys both sides; a join of tables joins
on the keys or by a foreign key. A RIGHT join compiles as the mirrored LEFT join (the
sides swapped, the joiner swapping them back, an interval join's bounds mirrored), as
Kafka Streams has none.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sqlglot import exp

from streaming import serdes
from streaming.dsl import Joined, JoinWindows, Materialized, StreamJoined
from streaming.sql.catalog import OBJECT_KEY_FORMATS, TableDef
from streaming.sql.errors import SqlError, error_at, node_offset
from streaming.sql.file_tables import lookup_join
from streaming.sql.join_conditions import (
    Equality,
    JoinScope,
    OnClause,
    ScopeTable,
    TimeBound,
    bound_node,
)
from streaming.sql.join_inputs import JoinInput, joined, key_maker, mirrored, plain_key

#: How long (in the table's stream time) a versioned table keeps old rows. Flink keeps a
#: version until the join's watermark passes it; a stream and its table advance apart
#: here, so a day covers how far a stream's time usually lags its table's.
VERSIONED_HISTORY_MS = 24 * 60 * 60 * 1000


class JoinStep:
    """One join of ``select``: ``left`` joined with the table of ``join``."""

    def __init__(
        self,
        compiler: Any,
        select: exp.Select,
        join: exp.Join,
        left: JoinInput,
        right: TableDef,
        right_alias: str,
    ) -> None:
        self.compiler = compiler
        self.source = compiler.source
        self.select = select
        self.join = join
        self.input = left
        self.right = right
        self.right_alias = right_alias
        nested = tuple(replace(t, path=("left", *t.path)) for t in left.tables)
        self.scope = JoinScope((*nested, ScopeTable(right_alias, right, ("right",))), self.source)
        version = join.this.args.get("version")
        # AS OF the processing time is Flink's lookup join: the table's current rows
        self.version = None if self.as_of_proctime(version) else version
        self.on = OnClause(self.scope, select, join, self.source)
        self.side = self.on.side

    def error(self, node: exp.Expr | int, message: str) -> SqlError:
        offset = node if isinstance(node, int) else node_offset(node)
        return error_at(self.source, offset, message)

    def output(self, rows: Any, is_upsert: bool, **changes: Any) -> JoinInput:
        """The joined rows as the left input of the next join."""
        base = dict(
            rows=rows,
            is_upsert=is_upsert,
            tables=self.scope.tables,
            keys=frozenset(),
            key_format=self.input.key_format,
            key_name=self.input.key_name,
            keyed_by=self.input.keyed_by,
            time=self.input.time,
            delay_ms=self.input.delay_ms,
            base=None,
        )
        base.update(changes)
        return JoinInput(**base)

    def kept_keys(self, equality: Equality) -> frozenset[tuple[str, str]]:
        """The key columns of rows joined on the key (the table's join column equal to the
        input's key): the input's, unless its side may be NULL-padded (RIGHT, FULL), and
        the table's join column, unless its side may be (LEFT, FULL)."""
        keys = set() if self.side in ("RIGHT", "FULL") else set(self.input.keys)
        if self.side in ("INNER", "RIGHT"):
            keys.add((self.right_alias, equality.right))
        return frozenset(keys)

    def build(self) -> JoinInput:
        """The joined rows (nested as ``JoinScope`` reads them)."""
        if self.right.is_file:
            return lookup_join(self)
        equality, bound = self.on.condition()
        left, right = self.input, self.right
        left_table = left.base
        if left_table is not None and left_table.is_global:
            raise self.error(
                self.select,
                f"{left_table.name} is a global table: it joins only as the table of a "
                "stream-table join (FROM stream JOIN global_table ON ...)",
            )
        if right.is_global and left.is_upsert:
            raise self.error(
                self.join.this,
                f"{right.name} is a global table: it joins only as the table of a "
                "stream-table join (FROM stream JOIN global_table ON ...)",
            )
        if left.is_upsert and right.is_upsert:
            if bound is not None:
                raise self.error(bound_node(self.join), "a join of two tables takes no time bound")
            return self.table_table(equality)
        if left.is_upsert and not left.keyed(equality):
            name = left_table.name if left_table else "the joined rows"
            raise self.error(
                self.join.this,
                f"a foreign-key join needs a PRIMARY KEY on {right.name} ({right.name} is an "
                f"append stream): {name}.{equality.left} must name a row of a table",
            )
        if left.is_upsert:
            stream_first = "LEFT JOIN" if self.side == "RIGHT" else "JOIN"
            name = left_table.name if left_table else "the joined tables"
            raise self.error(
                self.join,
                f"a join of the table {name} with the stream {right.name} is not "
                f"supported yet: put the stream first (FROM stream {stream_first} table)",
            )
        if right.is_upsert:
            if bound is not None:
                raise self.error(bound_node(self.join), "a stream-table join takes no time bound")
            return self.stream_table(equality)
        if left_table is None:
            raise self.error(
                self.join,
                f"a join of joined rows with the stream {right.name} is not supported yet: "
                "an interval join comes first in a chain of joins",
            )
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
                f"AND {self.scope.left_alias}.ts + INTERVAL ... (a regular join of two "
                "streams, without one, is not supported yet)",
            )
        return self.stream_stream(left_table, equality, bound)

    def as_of_proctime(self, version: exp.Expr | None) -> bool:
        """Whether ``FOR SYSTEM_TIME AS OF`` names a PROCTIME() column of a table before."""
        if version is None or version.args.get("kind") != "AS OF":
            return False
        column = version.expression
        if not isinstance(column, exp.Column):
            return False
        entry = self.scope.entry_of(column)
        return entry.alias != self.right_alias and entry.table.proctime == column.name

    def no_version(self, what: str) -> None:
        if self.version is not None:
            raise self.error(self.join.this, f"FOR SYSTEM_TIME AS OF needs {what}")

    def stream_of(self, table: TableDef) -> Any:
        """The table's source stream, rows that are not JSON objects dropped."""
        return self.compiler.source_of(table).filter(lambda k, v: isinstance(v, dict))

    # -- a stream with a table ------------------------------------------------------------

    def stream_table(self, equality: Equality) -> JoinInput:
        left, right = self.input, self.right
        if not plain_key(right, equality.right):
            raise self.error(
                equality.node,
                f"a join needs an equality on the key of {right.name} "
                f"({', '.join(right.key_fields) or 'none'}), not {right.name}.{equality.right}",
            )
        if self.side == "FULL":
            raise self.error(self.join, "a stream-table join is INNER or LEFT, not FULL")
        if self.side == "RIGHT":
            raise self.error(
                self.join,
                f"a RIGHT join would keep every row of the table {right.name} joined with a "
                "stream: a stream-table (temporal or lookup) join keeps the stream's rows, "
                "INNER or LEFT (Flink has no RIGHT one either)",
            )
        if right.is_global:
            return self.stream_global(equality)
        stream = left.rows
        keyed = left.keyed(equality) and left.same_key(right, equality)
        if not keyed:
            make = key_maker(equality.right, right.key_format)
            read = left.reader(equality.left_alias, equality.left)
            stream = stream.select_key(lambda k, v: make(read(v)))
        joined_with = Joined.with_(key_serde=right.key_serde(), value_serde=serdes.Json())
        if self.version is not None:
            # Kafka Streams' versioned join keeps at least its grace period of history
            grace = left.delay_ms
            table = self.versioned_table(max(VERSIONED_HISTORY_MS, grace))
            if grace > 0:
                joined_with = joined_with.with_grace_period(grace)
        else:
            table = self.compiler.source_of(right)
        # re-keyed: the key is the value of the input's join column, as the table writes it
        kept = self.kept_keys(equality)
        after = dict(
            keys=kept if keyed else kept - left.keys | {(equality.left_alias, equality.left)},
            key_format=right.key_format,
            key_name=equality.right,
        )
        if joined_with.grace_period_ms is None:
            join = stream.left_join if self.side == "LEFT" else stream.join
            return self.output(join(table, joined, joined=joined_with), False, **after)
        # The grace buffer takes no null keys (as in Kafka): an inner join drops such rows,
        # a left join passes them on at once with no table row.
        kept = stream.filter(lambda k, v: k is not None)
        result = (kept.left_join if self.side == "LEFT" else kept.join)(
            table, joined, joined=joined_with
        )
        if self.side == "LEFT":
            unkeyed = stream.filter(lambda k, v: k is None).map_values(lambda v: joined(v, None))
            result = result.merge(unkeyed)
        return self.output(result, False, **after)

    def stream_global(self, equality: Equality) -> JoinInput:
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
        read = self.input.reader(equality.left_alias, equality.left)
        stream = self.input.rows
        table = self.compiler.source_of(self.right)
        join = stream.left_join if self.side == "LEFT" else stream.join
        rows = join(table, lambda k, v: make(read(v)), joined)
        return self.output(rows, False, keys=self.input.keys)

    def versioned_table(self, history_ms: int) -> Any:
        """``FOR SYSTEM_TIME AS OF l.ts``: the table in a versioned store that keeps
        ``history_ms`` of history."""
        version = self.version
        column = version.expression if version is not None else None
        kind = version.args.get("kind") if version is not None else None
        if not isinstance(column, exp.Column) or kind != "AS OF":
            raise self.error(self.join.this, "expected FOR SYSTEM_TIME AS OF <stream>.<ts>")
        entry = self.scope.entry_of(column)
        if (entry.alias, column.name) != self.input.time:
            base = self.input.base
            raise self.error(
                column,
                (
                    f"FOR SYSTEM_TIME AS OF needs the time attribute of {base.name}"
                    + (f" ({base.watermark.column})" if base.watermark else "")
                )
                if base is not None
                else "FOR SYSTEM_TIME AS OF needs the time attribute of the joined rows"
                + (f" ({'.'.join(self.input.time)})" if self.input.time else ""),
            )
        if self.right.name in self.compiler._sources or self.right.is_view:
            raise self.error(
                self.join.this,
                f"FOR SYSTEM_TIME AS OF needs {self.right.name} read into a versioned store: "
                f"{self.right.name} is read elsewhere too (or is a view), not supported yet",
            )
        table = self.compiler.source_of(self.right, materialized=self.versioned_store(history_ms))
        self.compiler.versioned.add(self.right.name)
        return table

    def versioned_store(self, retention_ms: int) -> Materialized:
        name = self.compiler.unique(f"{self.right.name}-versioned")
        return (
            Materialized.as_versioned(name, retention_ms)
            .with_key_serde(self.right.key_serde())
            .with_value_serde(serdes.Json())
        )

    # -- two streams ------------------------------------------------------------------------

    def stream_stream(self, left: TableDef, equality: Equality, bound: TimeBound) -> JoinInput:
        self.no_version("a table on the right of a stream")
        right = self.right
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
        # the preserved sides: a RIGHT join is the mirrored LEFT join
        keeps = {"INNER": (), "LEFT": ("left",), "RIGHT": ("right",), "FULL": ("left", "right")}
        streams, unjoined = [], []
        for side, table, column in (
            ("left", left, equality.left),
            ("right", right, equality.right),
        ):
            stream = self.input.rows if side == "left" else self.stream_of(table)
            keyed = plain_key(table, column) and table.key_format == key_format
            if not keyed or (key_format in OBJECT_KEY_FORMATS and column != key_name):
                stream = stream.select_key(lambda k, v, c=column: make(v.get(c)))
            # SQL: a NULL join column equals nothing (not even NULL), so such a row never
            # joins; an outer join passes it on at once with no other side. Under an
            # empty bound no row joins: each preserved row passes on at once.
            if side in keeps[self.side]:
                pad = (lambda v: joined(v, None)) if side == "left" else (lambda v: joined(None, v))
                never = (
                    stream
                    if bound.empty
                    else stream.filter(lambda k, v, c=column: k is None or v.get(c) is None)
                )
                unjoined.append(never.map_values(pad))
            streams.append(
                stream.filter(lambda k, v, c=column: k is not None and v.get(c) is not None)
            )
        grace = max(t.watermark.delay_ms if t.watermark else 0 for t in (left, right))
        key_serde = serdes.Json() if key_format in OBJECT_KEY_FORMATS else serdes.String()
        stream_joined = StreamJoined.with_(
            key_serde=key_serde, value_serde=serdes.Json(), other_value_serde=serdes.Json()
        )
        first, second = streams
        if bound.empty:
            result = unjoined.pop()
        elif self.side == "RIGHT":
            # right rows within [left - before, left + after] <=> left rows within
            # [right - after, right + before]
            windows = JoinWindows(
                before_ms=bound.after_ms, after_ms=bound.before_ms, grace_ms=grace
            )
            result = second.left_join(first, mirrored, windows, stream_joined=stream_joined)
        else:
            windows = JoinWindows(
                before_ms=bound.before_ms, after_ms=bound.after_ms, grace_ms=grace
            )
            join = {"INNER": first.join, "LEFT": first.left_join, "FULL": first.outer_join}
            result = join[self.side](second, joined, windows, stream_joined=stream_joined)
        for rows in unjoined:
            result = result.merge(rows)
        keys = {
            "INNER": {(equality.left_alias, equality.left), (self.right_alias, equality.right)},
            "LEFT": {(equality.left_alias, equality.left)},
            "RIGHT": {(self.right_alias, equality.right)},
            "FULL": set(),
        }[self.side]
        # the joined rows' timestamps are the later of the two rows': no time attribute
        return self.output(
            result,
            False,
            keys=frozenset(keys),
            key_format=key_format,
            key_name=key_name,
            time=None,
            delay_ms=grace,
        )

    # -- two tables -----------------------------------------------------------------------

    def table_table(self, equality: Equality) -> JoinInput:
        self.no_version("a stream on the left of the table")
        left, right = self.input, self.right
        if plain_key(right, equality.right) and not left.keyed(equality):
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
                    if left.keyed(equality)
                    else ""
                ),
            )
        if not left.same_key(right, equality):
            name = left.base.name if left.base else "the joined rows"
            raise self.error(
                equality.node,
                f"join without co-partitioning: {name} and {right.name} write their keys "
                f"differently ('key.format' {left.key_format} and {right.key_format})",
            )
        first = left.rows
        second = self.compiler.source_of(right)
        if self.side == "RIGHT":
            rows = second.left_join(first, mirrored)
        else:
            join = {"INNER": first.join, "LEFT": first.left_join, "FULL": first.outer_join}
            rows = join[self.side](second, joined)
        return self.output(
            rows,
            True,
            keys=self.kept_keys(equality),
            keyed_by=(*left.keyed_by, (self.right_alias, right)),
        )

    def foreign_key(self, equality: Equality) -> JoinInput:
        """``l.fk = r.key``: ``KTable.join`` / ``left_join`` with a foreign-key extractor.

        Each left row joins the right row its column names (written as the right table
        writes its key); the result is keyed by the left's key and updates when either
        side changes. A NULL foreign key joins nothing (a LEFT join keeps the left row).
        """
        if self.side in ("FULL", "RIGHT"):
            raise self.error(self.join, f"a foreign-key join is INNER or LEFT, not {self.side}")
        make = key_maker(equality.right, self.right.key_format)
        read = self.input.reader(equality.left_alias, equality.left)
        first = self.input.rows
        second = self.compiler.source_of(self.right)
        join = first.left_join if self.side == "LEFT" else first.join
        rows = join(second, lambda v: make(read(v)) if isinstance(v, dict) else None, joined)
        # the joined rows keep the left's keys
        return self.output(rows, True, keys=self.input.keys)
