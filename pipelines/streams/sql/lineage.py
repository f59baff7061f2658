"""Which tables (and so topics) a SQL application reads and writes, read from its statements.

The ``CREATE TABLE`` statements declare the tables over topics (the compiler's catalog);
each ``INSERT INTO sink SELECT ... FROM ...`` writes ``sink`` and reads every declared
table its query names (a window TVF's ``TABLE t`` and subqueries included), as does a
``CREATE TABLE t ... AS SELECT`` (which writes ``t``). A view is expanded into the tables
its query reads; views and subqueries have no topic, so they are never listed. Nothing is listed by hand:
the catalogue of stream applications and the Dagster asset graph take their inputs and
outputs from here.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from streaming.sql.catalog import TableDef
from streaming.sql.compiler import Compiler, parse
from streaming.sql.rewrite import split_statements


@dataclass(frozen=True)
class SqlLineage:
    """The tables the INSERT statements read (``sources``) and write (``sinks``), each in
    declaration order."""

    sources: tuple[TableDef, ...]
    sinks: tuple[TableDef, ...]

    @property
    def source_topics(self) -> tuple[str, ...]:
        """The topics read."""
        return tuple(t.topic for t in self.sources)

    @property
    def sink_topics(self) -> tuple[str, ...]:
        """The topics written."""
        return tuple(t.topic for t in self.sinks)


def read_lineage(text: str, compiler: Compiler | None = None) -> SqlLineage:
    """The lineage of the statements in ``text``.

    ``compiler``: one that has compiled ``text`` already (its catalog is used, e.g. with
    renamed topics); by default ``text`` is compiled here, so an invalid file fails with the
    compiler's ``SqlError`` rather than yielding a partial lineage."""
    if compiler is None:
        compiler = Compiler(text)
        compiler.compile_all()
    tables = compiler.tables
    #: view -> the names its query reads (views expanded below)
    views: dict[str, set[str]] = {}
    read: set[str] = set()
    written: set[str] = set()

    def reads(query: exp.Expr) -> set[str]:
        names: set[str] = set()
        for table in query.find_all(exp.Table):
            if table.name in views:
                names |= views[table.name]
            elif table.name in tables:
                names.add(table.name)
        return names

    for statement in split_statements(text):
        tree = parse(statement, text)
        if isinstance(tree, exp.Create) and tree.expression is not None:
            # CREATE TABLE|VIEW name AS SELECT: a view is what it reads; a table is written
            target = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
            query_reads = reads(tree.expression)
            if str(tree.args.get("kind") or "").upper() == "VIEW":
                views[target.name] = query_reads
                continue
            written.add(target.name)
            read |= query_reads
        elif isinstance(tree, exp.Insert):
            target = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
            written.add(target.name)
            read |= reads(tree.expression)
    order = [n for n, t in tables.items() if t.topic and not t.is_view]
    return SqlLineage(
        sources=tuple(tables[n] for n in order if n in read),
        sinks=tuple(tables[n] for n in order if n in written),
    )
