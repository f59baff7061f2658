"""Event time for SQL tables: Flink's JSON ``TIMESTAMP(3)`` text and epoch milliseconds.

Flink's JSON format writes ``TIMESTAMP(3)`` as ``'yyyy-MM-dd HH:mm:ss[.SSS]'`` (SQL
style, read here as UTC); ISO-8601 (``2024-01-01T10:00:00Z``) is read too. A ``BIGINT``
event-time column holds epoch milliseconds.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

from streaming.time import ConsumedRecord
from streaming.topology.processor import FixedKeyProcessor, Record

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


#: epoch ms of the whole seconds of ``'yyyy-MM-dd HH:mm:ss'`` (or ``T``) texts parsed lately:
#: rows of a stream share their second with their neighbours, and ``fromisoformat`` and
#: the arithmetic around it cost several times a lookup
_SECONDS: dict[str, int] = {}
_SECONDS_MAX = 4096


def parse_timestamp(value: Any) -> int | None:
    """Epoch milliseconds of a TIMESTAMP value (text or number), or None if unreadable."""
    if value.__class__ is str and len(value) == 23:
        base = _SECONDS.get(value[:19])
        if base is not None and value[19] == ".":
            fraction = value[20:]
            if fraction.isascii() and fraction.isdigit():
                return base + int(fraction)
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None  # NaN / infinity: no instant
    if isinstance(value, int | float):
        return int(value)
    if not isinstance(value, str):
        return None
    text = value.strip().replace("T", " ").removesuffix("Z")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    millis = (parsed - _EPOCH) // timedelta(milliseconds=1)
    if len(value) == 23 and _is_plain_millis(value):
        if len(_SECONDS) >= _SECONDS_MAX:
            _SECONDS.clear()
        _SECONDS[value[:19]] = millis - int(value[20:])
    return millis


def _is_plain_millis(text: str) -> bool:
    """Whether ``text`` is ``yyyy-MM-dd HH:mm:ss.SSS`` (or with ``T``), nothing around it."""
    return (
        text.isascii()
        and text[4] == text[7] == "-"
        and text[10] in " T"
        and text[13] == text[16] == ":"
        and text[19] == "."
        and (text[:4] + text[5:7] + text[8:10] + text[11:13] + text[14:16] + text[17:19]).isdigit()
        and text[20:].isdigit()
    )


def format_timestamp(millis: int) -> str:
    """``'yyyy-MM-dd HH:mm:ss.SSS'`` in UTC, as Flink's JSON format writes TIMESTAMP(3)."""
    moment = datetime.fromtimestamp(millis / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{millis % 1000:03d}"


class ColumnTimestampExtractor:
    """Event time from a column of a JSON row: TIMESTAMP text or BIGINT epoch ms.

    A row without a readable value keeps the record's own timestamp (as
    ``FieldTimestampExtractor`` does).
    """

    def __init__(self, column: str) -> None:
        self.column = column

    def extract(self, record: ConsumedRecord, partition_time: int) -> int:
        millis = self.timestamp_of_value(record.value)
        return record.timestamp if millis is None else millis

    def timestamp_of_value(self, value: Any) -> int | None:
        """The event time of a decoded row (None: the record keeps its own). The stream
        threads stamp records with it as they queue them, without a record to extract from."""
        return parse_timestamp(value.get(self.column)) if isinstance(value, dict) else None


class ColumnTimestamper(FixedKeyProcessor):
    """Forwards each row with its record time set from a column (TIMESTAMP text or epoch
    ms), as a source's ``ColumnTimestampExtractor`` would read it; a row without a
    readable value (or a delete) keeps its time.

    A view of window results makes a window bound its time attribute this way: windows
    and interval joins over the view then see each row at its window's bound.
    """

    def __init__(self, column: str) -> None:
        self.column = column

    def process(self, record: Record) -> None:
        value = record.value
        millis = parse_timestamp(value.get(self.column)) if isinstance(value, dict) else None
        self.context.forward(record if millis is None else record.with_timestamp(millis))


class ProctimeStamper(FixedKeyProcessor):
    """Sets a row's ``name AS PROCTIME()`` column to the processing time: the wall clock
    (epoch ms) of the stream thread when the row is read, as Flink's ``PROCTIME()``. The
    record keeps its timestamp, unless ``stamp_record``: a window over the processing time
    stamps it so right before its aggregation (the record time is the row's window)."""

    def __init__(self, column: str, *, stamp_record: bool = False) -> None:
        self.column = column
        self.stamp_record = stamp_record

    def process(self, record: Record) -> None:
        value = record.value
        if isinstance(value, dict):
            now = self.context.current_system_time_ms()
            record = record.with_value({**value, self.column: now})
            if self.stamp_record:
                record = record.with_timestamp(now)
        self.context.forward(record)
