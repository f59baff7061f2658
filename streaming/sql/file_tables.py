"""``filesystem`` tables in a topology: a sink's rows written to files (``write_files``),
and a bounded table looked up by a stream (``lookup_join``).

A filesystem table read ``FOR SYSTEM_TIME AS OF`` a stream's processing time is Flink's
lookup join (Flink's filesystem source is a lookup source: it reads its files into a
cache once and answers each lookup from it). Here the files are read once, at the first
row that looks them up, into an index by the table's columns that the ON clause equates;
each stream row then joins every table row of its key (INNER or LEFT). As in Flink, the
table is bounded and read once: files added later are not seen. This needs no topic, no
re-keying and no co-partitioning, like a ``GlobalKTable`` join, but it holds the whole
file in each process rather than in a store.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from sqlglot import exp

from streaming.dsl import Named
from streaming.sql.catalog import TableDef
from streaming.sql.errors import error_at, node_offset
from streaming.sql.expressions import compile_expression
from streaming.sql.file_sink import FileSink, FileSinkBuilder, FileSinkProcessor
from streaming.sql.filesystem import DEFAULT_PARTITION, FileFormat, directory, read_rows
from streaming.sql.join_inputs import JoinInput, joined


def file_format(table: TableDef) -> FileFormat:
    """The format of the table's files: its columns but the partition ones."""
    columns = {
        name: column
        for name, column in table.format_columns().items()
        if name not in table.partition_keys
    }
    return FileFormat(table.value_format, columns, table.options)


def write_files(compiler: Any, out: Any, sink: TableDef) -> None:
    """The rows of ``out`` (a stream of (key, row)) appended to the sink's files."""
    if sink.is_upsert:
        raise compiler.error(compiler.statement_start, f"{sink.name} is append-only")
    root = directory(sink.options["path"])
    fmt = file_format(sink)
    default = sink.options.get("partition.default-name", DEFAULT_PARTITION)
    name = compiler.unique(f"{sink.name}-files")

    def make() -> FileSink:
        return FileSink(name, root, fmt, sink.partition_keys, default)

    compiler.builder.add_state_store(FileSinkBuilder(name, make))
    out.process(
        lambda: FileSinkProcessor(name), name, named=Named.as_(compiler.unique(f"{name}-sink"))
    )


class FileLookup:
    """A bounded filesystem table's rows by the values of some of its columns, read on
    first use (once per process, shared by its tasks)."""

    def __init__(self, table: TableDef, columns: tuple[str, ...]) -> None:
        self.root = directory(table.options["path"])
        self.format = file_format(table)
        self.partition_keys = table.partition_keys
        self.columns = columns
        self._index: dict[tuple[Any, ...], list[dict[str, Any]]] | None = None
        self._lock = threading.Lock()

    def matches(self, key: tuple[Any, ...]) -> list[dict[str, Any]]:
        """The table rows whose lookup columns equal ``key``."""
        index = self._index
        if index is None:
            with self._lock:
                index = self._index = self._index or self._read()
        return index.get(key, [])

    def _read(self) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
        index: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        for row in read_rows(self.root, self.format, self.partition_keys):
            key = tuple(row.get(column) for column in self.columns)
            if None not in key:
                index.setdefault(key, []).append(row)
        return index


def lookup_join(step: Any) -> JoinInput:
    """``stream JOIN files FOR SYSTEM_TIME AS OF stream.proctime ON expr = files.col [AND
    ...]``: each stream row joined with the file rows of its key (``FileLookup``)."""
    right: TableDef = step.right
    version = step.join.this.args.get("version")
    source = step.source
    if not step.as_of_proctime(version):
        raise error_at(
            source,
            node_offset(step.join.this),
            f"{right.name} is a 'filesystem' table: a stream joins it as a lookup table, "
            f"FROM stream JOIN {right.name} FOR SYSTEM_TIME AS OF stream.proctime (a "
            "PROCTIME() column) ON ...",
        )
    if step.input.is_upsert:
        raise error_at(
            source, node_offset(step.join), f"a lookup join of {right.name} needs a stream"
        )
    if step.side not in ("INNER", "LEFT"):
        raise error_at(
            source, node_offset(step.join), f"a lookup join is INNER or LEFT, not {step.side}"
        )
    probes, columns = _equalities(step, right)
    lookup = FileLookup(right, columns)
    left_join = step.side == "LEFT"

    def rows(value: Any) -> list[dict[str, Any]]:
        probe = joined(value, None)
        key = tuple(fn(probe) for fn in probes)
        found = [] if None in key else lookup.matches(key)
        if not found:
            return [probe] if left_join else []
        return [joined(value, row) for row in found]

    out = step.input.rows.filter(lambda k, v: isinstance(v, dict)).flat_map_values(rows)
    return step.output(out, False, keys=step.input.keys)


def _equalities(step: Any, right: TableDef) -> tuple[list[Callable[[Any], Any]], tuple[str, ...]]:
    """The ON clause's ``left expression = right.column`` terms: the left expressions
    (evaluated on a joined row without its right side) and the right columns."""
    on = step.join.args.get("on")
    if on is None:
        raise error_at(step.source, node_offset(step.join), "a lookup join needs ON")
    node = on
    while isinstance(node, exp.Paren):
        node = node.this
    terms = list(node.flatten()) if isinstance(node, exp.And) else [node]
    probes: list[Callable[[Any], Any]] = []
    columns: list[str] = []
    for term in terms:
        pair = _split(step, term) if isinstance(term, exp.EQ) else None
        if pair is None:
            raise error_at(
                step.source,
                node_offset(term),
                f"unsupported lookup join condition {term.sql()}: a lookup join of "
                f"{right.name} needs equalities of a column of {right.name} with an "
                "expression of the stream's columns",
            )
        expression, column = pair
        probes.append(compile_expression(expression, step.scope).fn)
        columns.append(column)
    return probes, tuple(columns)


def _split(step: Any, term: exp.EQ) -> tuple[exp.Expr, str] | None:
    """``(left expression, right column)`` of an equality, in either order (None: it is
    not one)."""
    for expression, other in ((term.this, term.expression), (term.expression, term.this)):
        if not isinstance(other, exp.Column) or step.scope.side_of(other)[0] != "right":
            continue
        sides = {step.scope.side_of(c)[0] for c in expression.find_all(exp.Column)}
        if sides <= {"left"}:
            return expression, other.name
    return None
