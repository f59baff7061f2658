"""Keys in, JSON out: how the query server reads keys from URLs and encodes answers.

A key in a URL is text; ``?key_type=`` says what to turn it into (``string``, ``long`` /
``int`` / ``integer`` / ``short``, ``double`` / ``float``, ``json``, ``bytes`` for UTF-8
bytes). Without it the store's key serde decides: numeric serdes give numbers, everything
else (``String``, ``Json``, custom serdes) gives the text as a string.

Answers are JSON (orjson). Values that JSON has no type for are made readable: bytes as
UTF-8 text (or ``{"base64": ...}``), ``Windowed`` keys as ``{"key", "start", "end"}``,
``ValueAndTimestamp`` as ``{"value", "timestamp"}``, sets as lists, anything else as str().
"""

from __future__ import annotations

import base64
from typing import Any

import orjson

from streaming import serdes

_INT_TYPES = {"long", "int", "integer", "short"}
_FLOAT_TYPES = {"double", "float"}
KEY_TYPES = frozenset({"string", "str", "json", "bytes", *_INT_TYPES, *_FLOAT_TYPES})


class BadKey(ValueError):
    """The key text does not parse as the requested type."""


def default_key_type(serde: Any) -> str:
    """The ``key_type`` a URL key gets when none is given, from the store's key serde."""
    if isinstance(serde, serdes.Long | serdes.Integer | serdes.Short):
        return "long"
    if isinstance(serde, serdes.Double | serdes.Float):
        return "double"
    if isinstance(serde, serdes.Bytes):
        return "bytes"
    return "string"


def parse_key(text: str, key_type: str) -> Any:
    """``text`` as a key of ``key_type`` (see the module docstring)."""
    kind = key_type.lower()
    try:
        if kind in ("string", "str"):
            return text
        if kind in _INT_TYPES:
            return int(text)
        if kind in _FLOAT_TYPES:
            return float(text)
        if kind == "json":
            return orjson.loads(text)
        if kind == "bytes":
            return text.encode()
    except (ValueError, orjson.JSONDecodeError) as exc:
        raise BadKey(f"key {text!r} is not a valid {key_type}: {exc}") from None
    raise BadKey(f"unknown key_type {key_type!r}; use one of {sorted(KEY_TYPES)}")


def to_jsonable(value: Any) -> Any:
    """``orjson`` ``default=`` hook for the types stores hold."""
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        try:
            return raw.decode()
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(raw).decode()}
    if hasattr(value, "window") and hasattr(value, "key"):  # Windowed
        return {"key": value.key, "start": value.window.start, "end": value.window.end}
    if hasattr(value, "timestamp") and hasattr(value, "value"):  # ValueAndTimestamp
        return {"value": value.value, "timestamp": value.timestamp}
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def dumps(payload: Any) -> bytes:
    """JSON bytes of ``payload`` (non-string dict keys become strings)."""
    return orjson.dumps(
        payload, default=to_jsonable, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
    )


__all__ = ["KEY_TYPES", "BadKey", "default_key_type", "dumps", "parse_key", "to_jsonable"]
