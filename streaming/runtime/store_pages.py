"""Pages of one local store partition for scans served over HTTP: up to a limit of decoded
entries after a cursor key, read a bounded chunk per hold of the stream thread's lock so that
a scan never blocks processing for long. The query service reads its own process's stores
with this, and a worker process answers its stores' pages with it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson

LONG_MAX = (1 << 63) - 1
#: entries read per hold of the stream thread's lock
SCAN_CHUNK = 256
#: a store key above every real one (the end of a key range read to the segment's end)
_MAX_KEY = b"\xff" * 1024


def read_page(
    lock: Any,
    typed: Any,
    kind: str,
    bounds: tuple,
    after: bytes | None,
    limit: int,
    scan_chunk: int = SCAN_CHUNK,
) -> tuple[list[dict[str, Any]], bool, bytes | None]:
    """Up to ``limit`` decoded entries of one local store partition after the cursor key
    ``after``, whether more follow, and the cursor key of the last one (a worker process
    answers its stores' pages with this too)."""
    rows, more = _read_partition(lock, typed, kind, bounds, after, limit, scan_chunk)
    return _decode(typed, kind, rows), more, rows[-1][0] if rows else None


def _read_partition(
    lock: Any,
    typed: Any,
    kind: str,
    bounds: tuple,
    after: bytes | None,
    limit: int,
    scan_chunk: int,
) -> tuple[list[tuple[bytes, bytes]], bool]:
    """Raw (key, value) entries after ``after``, at most ``limit``, and whether more follow.

    Reads ``scan_chunk`` entries per hold of the stream thread's ``lock``, each chunk a
    fresh range read after the last key, and yields the interpreter between chunks so that
    the stream thread gets the lock back: a scan never blocks processing for long."""
    from streaming.state.key_value_store import KeyValueStore
    from streaming.state.window_store import WindowStore

    chunk: Callable[[bytes | None, int], list[tuple[bytes, bytes]]]
    if kind == "keyvalue" and isinstance(typed, KeyValueStore):
        lo = None if bounds[0] is None else typed.raw_key(bounds[0])
        hi = None if bounds[1] is None else typed.raw_key(bounds[1])
        raw = typed.wrapped

        def chunk(last: bytes | None, n: int) -> list[tuple[bytes, bytes]]:
            start = lo if last is None else last + b"\x00"
            # with lo set, start is bytes (lo, or the key after last)
            if lo is not None and start < lo:  # type: ignore[operator]
                start = lo
            return _take(raw.range(start, hi), n)

    elif kind == "window" and isinstance(typed, WindowStore):
        chunk = _window_chunker(typed.wrapped, bounds[0], bounds[1])
    else:
        return _read_whole(lock, typed, kind, bounds, after, limit)
    rows: list[tuple[bytes, bytes]] = []
    last = after
    while len(rows) <= limit:
        want = min(scan_chunk, limit + 1 - len(rows))
        with lock:
            got = chunk(last, want)
        rows.extend(got)
        if len(got) < want:
            break
        last = got[-1][0]
        time.sleep(0)  # let the stream thread take the lock (and the GIL) first
    more = len(rows) > limit
    return rows[:limit], more


def _read_whole(
    lock: Any, typed: Any, kind: str, bounds: tuple, after: bytes | None, limit: int
) -> tuple[list[tuple[bytes, Any]], bool]:
    # a store without raw range reads (none of the built-in kinds): one read, ordered by
    # the JSON of its keys; rows are (that JSON, (key, value))
    with lock:
        if kind == "keyvalue":
            items = list(typed.all() if bounds == (None, None) else typed.range(*bounds))
        else:
            items = list(typed.fetch_all(*bounds))
    rows = sorted(((_json_key(k), (k, v)) for k, v in items), key=lambda row: row[0])
    if after is not None:
        rows = [row for row in rows if row[0] > after]
    return rows[:limit], len(rows) > limit


def _decode(typed: Any, kind: str, rows: list[tuple[bytes, Any]]) -> list[dict[str, Any]]:
    from streaming.state.key_value_store import KeyValueStore
    from streaming.state.window_store import WindowStore

    if kind == "keyvalue":
        if not isinstance(typed, KeyValueStore):
            return [{"key": k, "value": _plain(v)} for _, (k, v) in rows]
        key_from, value_from = typed.key_from, typed.value_from
        return [{"key": key_from(k), "value": _plain(value_from(v))} for k, v in rows]
    if not isinstance(typed, WindowStore):
        return [
            {"key": w.key, "start": w.window.start, "end": w.window.end, "value": _plain(v)}
            for _, (w, v) in rows
        ]
    split = typed.key_schema.split
    key_from, value_from = typed.key_from, typed.value_from
    size = typed.window_size
    out = []
    for k, v in rows:
        key, start = split(k)
        out.append(
            {
                "key": key_from(key),
                "start": start,
                "end": min(start + size, LONG_MAX),
                "value": _plain(value_from(v)),
            }
        )
    return out


def _plain(value: Any) -> Any:
    return value.value if hasattr(value, "timestamp") and hasattr(value, "value") else value


def _take(iterator: Any, n: int) -> list[Any]:
    out = []
    for item in iterator:
        out.append(item)
        if len(out) >= n:
            break
    return out


def _window_chunker(
    raw: Any, time_from: int, time_to: int
) -> Callable[[bytes | None, int], list[tuple[bytes, bytes]]]:
    """Reads of a window bytes store in its scan order (segment by segment, store-key bytes
    inside a segment) restarting after a given store key: the rest of that key's segment
    (a key range from its key for key-first stores, a time range from its start for
    time-first ones), then the later segments."""
    from streaming.state.key_schema import WindowKeySchema
    from streaming.state.segments import java_div

    schema = raw.key_schema
    interval = raw.segment_interval
    key_first = isinstance(schema, WindowKeySchema)

    def chunk(last: bytes | None, n: int) -> list[tuple[bytes, bytes]]:
        if last is None:
            return _take(raw.fetch_all(time_from, time_to), n)
        key, start = schema.split(last)
        segment = java_div(start, interval)
        seg_from = max(time_from, segment * interval)
        seg_to = min(time_to, segment * interval + interval - 1)
        if key_first:
            # (keys sharing a prefix with trailing NUL bytes may order differently; as Kafka)
            rest = raw.fetch_key_range(key, _MAX_KEY, seg_from, seg_to)
        else:
            rest = raw.fetch_all(max(seg_from, start), seg_to)
        out = _take((kv for kv in rest if kv[0] > last), n)
        if len(out) < n and seg_to < time_to:
            out.extend(_take(raw.fetch_all(seg_to + 1, time_to), n - len(out)))
        return out

    return chunk


def _json_key(key: Any) -> bytes:
    """The JSON of a key, the order and cursor of a store without raw range reads."""
    return orjson.dumps(key, default=str, option=orjson.OPT_NON_STR_KEYS)
