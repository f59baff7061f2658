"""A ``filesystem`` table in the DuckDB translation (``batch``): DuckDB's read of its files.

``read_sql(table)`` is DuckDB SQL reading the table's visible files as they are when it is
called (``filesystem.visible_files``: names starting with ``.`` or ``_`` left out, as the
stream's reader leaves them out), with its declared columns and the values the stream
reads (``formats.CsvRows`` / ``FileFormat.rows``):

- csv: ``read_csv`` of every field as text (Flink's quoting: ``"``, doubled inside), then
  each converted as the stream converts it: the null literal (``'csv.null-literal'``) is
  NULL, an empty field NULL unless the column is a STRING, BIGINT and DOUBLE trimmed and
  cast (NULL if they do not convert), BOOLEAN ``true``/``false`` in any case, TIMESTAMP
  the text as written;
- json: ``read_json`` of one object per line, each column of its declared type;
- partition columns (``PARTITIONED BY``): the text of the file's ``key=value``
  directories, unescaped (``__DEFAULT_PARTITION__`` is NULL).

``BatchQuery.run`` registers it under the table's name when the caller gives no relation
for the table: a lookup join in batch meets the table as it is when the batch runs.
"""

from __future__ import annotations

from pathlib import Path

from sqlglot import exp

from streaming.sql.catalog import TableDef
from streaming.sql.file_tables import file_format
from streaming.sql.filesystem import (
    DEFAULT_PARTITION,
    FileFormat,
    directory,
    unescape_path_name,
    visible_files,
)

_JSON_TYPES = {"BIGINT": "BIGINT", "DOUBLE": "DOUBLE", "BOOLEAN": "BOOLEAN"}


def read_sql(table: TableDef) -> str:
    """DuckDB SQL of the rows of the filesystem ``table``'s files as they are now."""
    root = directory(table.options["path"])
    fmt = file_format(table)
    groups: dict[tuple[tuple[str, str | None], ...], list[Path]] = {}
    for path in visible_files(root):
        groups.setdefault(_partition(root, path, table.partition_keys), []).append(path)
    if not groups:
        return _empty(fmt, table.partition_keys)
    reads = []
    for partition, paths in groups.items():
        values = [
            f"{_literal(value)} AS {_name(key)}"
            for key, value in sorted(partition, key=lambda kv: table.partition_keys.index(kv[0]))
        ]
        columns = ", ".join([*_converted(fmt), *values])
        reads.append(f"SELECT {columns} FROM {_read(fmt, paths)}")
    return " UNION ALL BY NAME ".join(reads) if len(reads) > 1 else reads[0]


def _partition(root: Path, path: Path, keys: tuple[str, ...]) -> tuple[tuple[str, str | None], ...]:
    """The partition values of the file ``path`` under ``root``, by key (every key of
    ``keys``: NULL when no directory names it)."""
    found: dict[str, str | None] = dict.fromkeys(keys)
    for part in path.relative_to(root).parts[:-1] if root.is_dir() else ():
        key, eq, value = part.partition("=")
        if eq and key in keys:
            found[key] = None if value == DEFAULT_PARTITION else unescape_path_name(value)
    return tuple(found.items())


def _read(fmt: FileFormat, paths: list[Path]) -> str:
    """DuckDB's table function reading ``paths``: text fields for csv, typed for json."""
    files = "[" + ", ".join(_literal(str(p)) for p in paths) + "]"
    if fmt.format == "json":
        types = {name: _JSON_TYPES.get(c.kind, "VARCHAR") for name, c in fmt.columns.items()}
        struct = _struct(types)
        return f"read_json({files}, format = 'newline_delimited', columns = {struct})"
    struct = _struct(dict.fromkeys(fmt.columns, "VARCHAR"))
    every = "[" + ", ".join(_literal(name) for name in fmt.columns) + "]"
    return (
        f"read_csv({files}, header = false, auto_detect = false, columns = {struct}, "
        f"delim = {_literal(fmt.csv.delimiter)}, quote = {_literal(fmt.csv.quote)}, "
        f"escape = {_literal(fmt.csv.quote)}, allow_quoted_nulls = false, "
        f"force_not_null = {every})"
    )


def _converted(fmt: FileFormat) -> list[str]:
    """Each file column's value as the stream reads it (csv: from its text)."""
    if fmt.format == "json":
        return [_name(name) for name in fmt.columns]
    out = []
    for name, column in fmt.columns.items():
        field = _name(name)
        nulls = [f"{field} = {_literal(fmt.csv.null_literal)}"] if fmt.csv.null_literal else []
        if column.kind != "STRING":
            nulls.append(f"{field} = ''")
        trimmed = f"trim({field})"
        if column.kind in ("BIGINT", "DOUBLE"):
            value = f"TRY_CAST({trimmed} AS {column.kind})"
        elif column.kind == "BOOLEAN":
            value = f"CASE lower({trimmed}) WHEN 'true' THEN true WHEN 'false' THEN false END"
        elif column.kind == "STRING":
            value = field
        else:
            value = trimmed
        if nulls:
            value = f"CASE WHEN {' OR '.join(nulls)} THEN NULL ELSE {value} END"
        out.append(f"{value} AS {field}")
    return out


def _empty(fmt: FileFormat, partition_keys: tuple[str, ...]) -> str:
    """No rows, with the table's columns (no file to read yet)."""
    types = {name: _JSON_TYPES.get(c.kind, "VARCHAR") for name, c in fmt.columns.items()}
    types.update(dict.fromkeys(partition_keys, "VARCHAR"))
    columns = ", ".join(f"CAST(NULL AS {kind}) AS {_name(name)}" for name, kind in types.items())
    return f"SELECT {columns} WHERE false"


def _struct(types: dict[str, str]) -> str:
    return "{" + ", ".join(f"{_literal(n)}: {_literal(t)}" for n, t in types.items()) + "}"


def _literal(value: str | None) -> str:
    return exp.null().sql("duckdb") if value is None else exp.Literal.string(value).sql("duckdb")


def _name(column: str) -> str:
    return exp.to_identifier(column, quoted=True).sql("duckdb")
