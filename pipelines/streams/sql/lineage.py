"""Which tables (and so topics) a SQL application reads and writes, read from its statements.

The ``CREATE TABLE`` statements declare the tables over topics (the compiler's catalog);
each ``INSERT INTO sink SELECT ... FROM ...`` writes ``sink`` and reads every declared
table its query names (a window TVF's ``TABLE t`` included). Nothing is listed by hand:
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
    read: set[str] = set()
    written: set[str] = set()
    for statement in split_statements(text):
        tree = parse(statement, text)
        if not isinstance(tree, exp.Insert):
            continue
        target = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
        written.add(target.name)
        query = tree.expression
        read.update(t.name for t in query.find_all(exp.Table) if t.name in tables)
    order = list(tables)
    return SqlLineage(
        sources=tuple(tables[n] for n in order if n in read),
        sinks=tuple(tables[n] for n in order if n in written),
    )
