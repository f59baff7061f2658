"""The left input of a join and the helpers every join uses.

``JoinInput`` is one table's rows (the first join's left side) or the joined rows of the
joins before: the DSL stream or table of them, where each table's row sits in a joined
row, which columns the Kafka key is the value of (so a join re-keys only when it must)
and the time attribute the record timestamps are. ``joined`` / ``mirrored`` are the
ValueJoiners; ``key_maker`` writes a join column as a table writes its key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streaming.sql.catalog import OBJECT_KEY_FORMATS, TableDef, raw_key
from streaming.sql.join_conditions import Equality, ScopeTable, read_path


def joined(left: Any, right: Any) -> dict[str, Any]:
    """The ValueJoiner of every SQL join: both rows, as the JoinScope reads them."""
    return {"left": left, "right": right}


def mirrored(right: Any, left: Any) -> dict[str, Any]:
    """The ValueJoiner of a mirrored (RIGHT) join: the DSL's left value is the SQL's right
    row, so the joined row keeps the SQL order."""
    return {"left": left, "right": right}


def key_maker(column: str, key_format: str) -> Callable[[Any], Any]:
    """``value -> Kafka key`` of a row keyed by ``column``, written as a table with that
    key column and ``key_format`` writes it (``raw``: the value's text; ``json``:
    ``{column: value}``); None for a NULL value, which joins nothing."""
    if key_format in OBJECT_KEY_FORMATS:
        return lambda value: None if value is None else {column: value}
    return lambda value: None if value is None else raw_key(value)


def plain_key(table: TableDef, column: str) -> bool:
    """Whether ``table``'s Kafka key is exactly ``column``."""
    return table.key_fields == (column,)


@dataclass(frozen=True)
class JoinInput:
    """The left input of a join: one table's rows or the joined rows of the joins before."""

    #: a KStream, or a KTable when every table in it is a table (rows: see ``JoinScope``)
    rows: Any
    is_upsert: bool
    #: its tables and where their rows sit in its rows
    tables: tuple[ScopeTable, ...]
    #: the (alias, column) references whose value its Kafka key is (not NULL-padded ones)
    keys: frozenset[tuple[str, str]]
    key_format: str
    #: the field of a JSON key (``'key.format' = 'json'``), else None
    key_name: str | None
    #: the tables (alias, table) whose key columns its rows keep as their Kafka key (for
    #: the sink)
    keyed_by: tuple[tuple[str, TableDef], ...]
    #: (alias, column) of the time attribute its record timestamps are (None: none is)
    time: tuple[str, str] | None
    #: the WATERMARK delay of that time attribute
    delay_ms: int
    #: the table itself when the input is one table (the first join), else None
    base: TableDef | None

    def reader(self, alias: str, column: str) -> Callable[[Any], Any]:
        """``row -> value`` of ``alias.column`` in this input's rows."""
        entry = next(t for t in self.tables if t.alias == alias)
        return read_path(entry.path, column)

    def keyed(self, equality: Equality) -> bool:
        """Whether the Kafka key already is the equality's left column."""
        return (equality.left_alias, equality.left) in self.keys

    def same_key(self, right: TableDef, equality: Equality) -> bool:
        """Whether the key is written as ``right`` writes a key of its join column (raw
        text, or a JSON object of the same column name)."""
        if self.key_format != right.key_format:
            return False
        return self.key_format == "raw" or self.key_name == equality.right


def table_input(table: TableDef, alias: str, rows: Any) -> JoinInput:
    """A table's rows as the left input of the first join."""
    single = len(table.key_fields) == 1
    watermark = table.watermark
    return JoinInput(
        rows=rows,
        is_upsert=table.is_upsert,
        tables=(ScopeTable(alias, table, ()),),
        keys=frozenset({(alias, table.key_fields[0])}) if single else frozenset(),
        key_format=table.key_format,
        key_name=table.key_fields[0] if single else None,
        keyed_by=((alias, table),),
        time=(alias, watermark.column) if watermark else None,
        delay_ms=watermark.delay_ms if watermark else 0,
        base=table,
    )
