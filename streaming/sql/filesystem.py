"""Flink's ``filesystem`` connector: a table as the files under a directory, in Flink's
layout and formats (``file_sink`` writes them, ``read_rows`` reads them back).

- ``'path'``: the table's directory (``file://`` or a plain local path); a source may
  name one file. Partition columns (``PARTITIONED BY (dt, hm)``) are directories
  ``dt=<value>/hm=<value>/`` with Flink's (Hive's) escaping of the values (``:`` is
  ``%3A``; NULL or '' is ``__DEFAULT_PARTITION__``), and are not repeated in the files.
- ``'format'``: ``csv`` (Flink's: no header, ``,``, a field quoted as Jackson's CSV
  encoder quotes it, ``csv_line``) or ``json`` (one object per line). TIMESTAMP columns
  are written as the engine holds them, ``'yyyy-MM-dd HH:mm:ss.SSS'``.
- Files whose name starts with ``.`` or ``_`` are not read: in-progress files and marker
  files, as Flink skips them.

Flink's legacy options (``'connector.type' = 'filesystem'``, ``'connector.path'``,
``'format.type'``), as Nexmark's q13 declares its side input, mean the same.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import orjson

from streaming.sql.formats import ColumnType, CsvRows

CONNECTOR = "filesystem"
#: the formats a filesystem table reads and writes
FILE_FORMATS = ("csv", "json")
#: Flink's legacy option names -> the current ones (FLIP-122)
LEGACY_OPTIONS = {
    "connector.type": "connector",
    "connector.path": "path",
    "format.type": "format",
}
#: options Flink's filesystem sink reads that this one accepts without acting on them:
#: every file is rolled and made visible at each commit, and partitions carry no
#: commit marker (see docs/sql/reference.md)
IGNORED_OPTIONS = (
    "sink.rolling-policy.file-size",
    "sink.rolling-policy.rollover-interval",
    "sink.rolling-policy.check-interval",
    "sink.rolling-policy.inactivity-interval",
    "sink.partition-commit.trigger",
    "sink.partition-commit.delay",
    "sink.partition-commit.policy.kind",
    "sink.partition-commit.watermark-time-zone",
    "partition.time-extractor.timestamp-pattern",
    "partition.time-extractor.kind",
)
#: the options of a filesystem table
OPTIONS = ("path", "partition.default-name", *IGNORED_OPTIONS)
#: the directory name of a NULL or empty partition value (Flink's default)
DEFAULT_PARTITION = "__DEFAULT_PARTITION__"

#: the characters Flink (as Hive) escapes in a partition value: control characters and
#: ``"#%'*/:=?\{[]^`` (PartitionPathUtils.CHAR_TO_ESCAPE)
_ESCAPED = frozenset([*map(chr, range(1, 32)), *"\"#%'*/:=?\\\x7f{[]^"])
#: Jackson's CSV encoder quotes any string longer than this without looking at it
_MAX_QUOTE_CHECK = 24


def legacy_options(options: Mapping[str, str]) -> dict[str, str] | None:
    """The current option names of a legacy ``'connector.type' = 'filesystem'`` table
    (None: not one)."""
    if options.get("connector.type") != CONNECTOR:
        return None
    return {LEGACY_OPTIONS.get(key, key): value for key, value in options.items()}


def directory(path: str) -> Path:
    """The local path of a ``'path'`` option (``file:///x`` or ``/x``)."""
    parsed = urlparse(path)
    if parsed.scheme in ("", "file"):
        return Path(parsed.path if parsed.scheme else path)
    raise ValueError(f"'path' = {path!r}: only local files (file://) are supported")


def escape_path_name(value: str) -> str:
    """A partition value as a directory name, escaped as Flink escapes it."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


def unescape_path_name(name: str) -> str:
    """The partition value of an escaped directory name."""
    out, i = [], 0
    while i < len(name):
        if name[i] == "%" and i + 2 < len(name):
            try:
                out.append(chr(int(name[i + 1 : i + 3], 16)))
                i += 3
                continue
            except ValueError:
                pass
        out.append(name[i])
        i += 1
    return "".join(out)


def partition_dir(
    row: Mapping[str, Any], partition_keys: tuple[str, ...], default: str = DEFAULT_PARTITION
) -> str:
    """The relative directory of ``row``'s partition: ``k1=v1/k2=v2`` ('' unpartitioned)."""
    parts = []
    for key in partition_keys:
        value = row.get(key)
        text = "" if value is None else _text(value)
        parts.append(f"{key}={escape_path_name(text) if text else default}")
    return "/".join(parts)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _needs_quotes(text: str, delimiter: str, quote: str) -> bool:
    """Whether Jackson's CSV encoder (Flink's csv format, default loose check) quotes
    ``text``: when longer than 24 characters, or holding a character below the safe one
    (one past the highest of the delimiter, the quote character and the line end)."""
    if len(text) > _MAX_QUOTE_CHECK:
        return True
    min_safe = max(ord(delimiter), ord(quote), ord("\n")) + 1
    return any(ord(c) < min_safe for c in text)


def csv_line(
    values: list[Any],
    kinds: list[str],
    *,
    delimiter: str = ",",
    quote: str = '"',
    null_literal: str = "",
) -> str:
    """One CSV line (with its ``\\n``) as Flink's csv format writes it: numbers and
    booleans bare, strings (and timestamps, Flink's strings) quoted as ``_needs_quotes``
    says with quotes doubled inside, NULL as ``null_literal``."""
    fields = []
    for value, kind in zip(values, kinds, strict=True):
        if value is None:
            fields.append(null_literal)
        elif kind in ("STRING", "TIMESTAMP") or isinstance(value, str):
            text = str(value)
            if _needs_quotes(text, delimiter, quote):
                text = quote + text.replace(quote, quote + quote) + quote
            fields.append(text)
        else:
            fields.append(_text(value))
    return delimiter.join(fields) + "\n"


class FileFormat:
    """How rows of the non-partition ``columns`` are written to and read from a file."""

    def __init__(
        self, fmt: str, columns: Mapping[str, ColumnType], options: Mapping[str, str]
    ) -> None:
        if fmt not in FILE_FORMATS:
            raise ValueError(
                f"the filesystem connector has no format {fmt!r}: use {' or '.join(FILE_FORMATS)}"
            )
        self.format = fmt
        self.columns = dict(columns)
        self.kinds = [column.kind for column in self.columns.values()]
        self.csv = CsvRows(
            self.columns,
            delimiter=options.get("csv.field-delimiter", ","),
            quote=options.get("csv.quote-character", '"'),
            null_literal=options.get("csv.null-literal"),
        )

    def line(self, row: Mapping[str, Any]) -> bytes:
        """One row as one line of the file."""
        values = [row.get(name) for name in self.columns]
        if self.format == "json":
            return orjson.dumps(dict(zip(self.columns, values, strict=True))) + b"\n"
        text = csv_line(
            values,
            self.kinds,
            delimiter=self.csv.delimiter,
            quote=self.csv.quote,
            null_literal=self.csv.null_literal or "",
        )
        return text.encode()

    def rows(self, data: bytes) -> Iterator[dict[str, Any]]:
        """The rows of one file's bytes."""
        if self.format == "json":
            for line in data.splitlines():
                if line.strip():
                    value = orjson.loads(line)
                    yield {name: value.get(name) for name in self.columns}
            return
        reader = csv.reader(
            io.StringIO(data.decode()), delimiter=self.csv.delimiter, quotechar=self.csv.quote
        )
        for fields in reader:
            if fields:
                yield self.csv.row(fields)


def visible_files(root: Path) -> Iterator[Path]:
    """The data files under ``root`` (or ``root`` itself, a file), sorted, without those
    Flink hides (a name starting with ``.`` or ``_``: in progress, markers)."""
    if root.is_file():
        yield root
        return
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).parts
        if path.is_file() and not any(part.startswith((".", "_")) for part in relative):
            yield path


def read_rows(
    root: Path, file_format: FileFormat, partition_keys: tuple[str, ...] = ()
) -> Iterator[dict[str, Any]]:
    """Every row of the table at ``root``: each visible file's rows, with the partition
    columns taken from its directories (``k=v``; ``__DEFAULT_PARTITION__`` is NULL)."""
    for path in visible_files(root):
        partition: dict[str, Any] = {}
        for part in path.relative_to(root).parts[:-1] if root.is_dir() else ():
            key, eq, value = part.partition("=")
            if eq and key in partition_keys:
                partition[key] = None if value == DEFAULT_PARTITION else unescape_path_name(value)
        for row in file_format.rows(path.read_bytes()):
            yield {**row, **partition}
