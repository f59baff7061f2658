"""Flink's built-in scalar functions that sqlglot has no node of its own for (or one the
expression compiler does not handle): DATE_FORMAT, HOUR, SPLIT_INDEX, REGEXP_EXTRACT,
TO_TIMESTAMP_LTZ.

Each is a ``ScalarFunction`` (called as a Python function is, after its arguments); a
function registered for a compilation under the same name takes precedence. NULL in any
argument gives NULL, as in Flink.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from streaming.sql.functions import ScalarFunction
from streaming.sql.timestamps import parse_timestamp

#: Java ``SimpleDateFormat`` letters (runs of them) and their ``strftime`` forms
JAVA_PATTERN = re.compile(r"yyyy|yy|MM|dd|HH|mm|ss|SSS|'[^']*'")
STRFTIME = {"yyyy": "%Y", "yy": "%y", "MM": "%m", "dd": "%d", "HH": "%H", "mm": "%M", "ss": "%S"}


def _moment(value: Any) -> datetime | None:
    millis = parse_timestamp(value)
    return None if millis is None else datetime.fromtimestamp(millis / 1000, tz=UTC)


def date_format(value: Any, pattern: str | None) -> str | None:
    """``DATE_FORMAT(timestamp, 'yyyy-MM-dd HH:mm')``: the timestamp (UTC) in a Java
    date pattern (``yyyy yy MM dd HH mm ss SSS`` and quoted text)."""
    moment = _moment(value)
    if moment is None or pattern is None:
        return None
    millis = f"{moment.microsecond // 1000:03d}"

    def part(match: re.Match[str]) -> str:
        token = match.group(0)
        if token.startswith("'"):
            return token[1:-1]
        return millis if token == "SSS" else moment.strftime(STRFTIME[token])

    return JAVA_PATTERN.sub(part, pattern)


def hour(value: Any) -> int | None:
    """``HOUR(timestamp)``: the hour of the day, 0-23 (UTC)."""
    moment = _moment(value)
    return None if moment is None else moment.hour


def split_index(text: str | None, separator: str | None, index: int | None) -> str | None:
    """``SPLIT_INDEX(text, separator, n)``: the n-th (from 0) piece of ``text`` split at
    every ``separator`` (empty pieces kept); NULL past the last piece or for n < 0."""
    if text is None or separator is None or index is None or index < 0 or text == "":
        return None
    pieces = text.split(separator) if separator else [text]
    return pieces[index] if index < len(pieces) else None


@lru_cache(maxsize=64)
def _regex(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern)
    except re.error:
        return None


def regexp_extract(text: str | None, pattern: str | None, group: int | None = 0) -> str | None:
    """``REGEXP_EXTRACT(text, regex[, group])``: group ``group`` (0: the whole match) of
    the first match of ``regex`` in ``text``; NULL without a match, for a group that did
    not take part or does not exist, or for an invalid regex."""
    if text is None or pattern is None or group is None:
        return None
    regex = _regex(pattern)
    match = regex.search(text) if regex is not None else None
    if match is None or not 0 <= group <= regex.groups:  # type: ignore[union-attr]
        return None
    return match.group(group)


def to_timestamp_ltz(epoch: int | float | None, precision: int | None = 3) -> int | None:
    """``TO_TIMESTAMP_LTZ(epoch, precision)``: the instant of an epoch number in seconds
    (precision 0) or milliseconds (3, the default), as epoch ms (a TIMESTAMP)."""
    if epoch is None or precision is None or isinstance(epoch, bool):
        return None
    if precision not in (0, 3):
        raise ValueError(f"TO_TIMESTAMP_LTZ precision is 0 or 3, not {precision}")
    return int(epoch * 1000) if precision == 0 else int(epoch)


BUILTINS: dict[str, ScalarFunction] = {
    f.name.lower(): f
    for f in (
        ScalarFunction("DATE_FORMAT", date_format, "STRING"),
        ScalarFunction("HOUR", hour, "BIGINT"),
        ScalarFunction("SPLIT_INDEX", split_index, "STRING"),
        ScalarFunction("REGEXP_EXTRACT", regexp_extract, "STRING"),
        ScalarFunction("TO_TIMESTAMP_LTZ", to_timestamp_ltz, "TIMESTAMP"),
    )
}


def lookup(name: str) -> ScalarFunction | None:
    """The built-in function called ``name`` (any case), None if there is none."""
    return BUILTINS.get(name.lower())
