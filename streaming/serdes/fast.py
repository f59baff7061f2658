"""One-argument serdes equal to the built-in serdes' own, for the runtime's hot path.

``deserializer(serde)`` gives ``f(data)`` that returns what ``serde.deserialize(topic, data)``
returns whenever ``f`` returns, without the serde's method frame (``orjson.loads`` for
``Json``, ``bytes.decode`` for ``String``). Where ``f`` raises (``ValueError`` or
``TypeError``: a tombstone, bytes that do not decode, input of another type), the caller
calls the serde itself, which returns or raises what it always does. Only serdes whose
``deserialize`` is a pure function of its input are covered, so that second call is
indistinguishable from the first; any other serde gets None.

``serializer(serde)`` likewise gives ``f(data)`` for ``serde.serialize(topic, data)``, for
data that is not None (every built-in serde writes None as None): ``orjson.dumps`` for
``Json`` (which calls no user code, so a failure may be repeated through the serde),
``str.encode`` for ``String`` (refusing what is not a ``str``, as the serde does).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from streaming import serdes

#: what ``f`` raises where the caller must ask the serde itself
FALLBACK_ERRORS = (ValueError, TypeError)


def _identity(data: Any) -> Any:
    return data


_DESERIALIZERS: dict[type, Callable[[Any], Any]] = {
    serdes.Json: orjson.loads,
    serdes.String: bytes.decode,
    serdes.Bytes: _identity,
}


def deserializer(serde: Any) -> Callable[[Any], Any] | None:
    """The one-argument equivalent of ``serde.deserialize`` (exact built-in classes only:
    a subclass may change ``deserialize``), else None."""
    return _DESERIALIZERS.get(type(serde))


_SERIALIZERS: dict[type, Callable[[Any], Any]] = {
    serdes.Json: orjson.dumps,
    serdes.String: str.encode,
}


def serializer(serde: Any) -> Callable[[Any], Any] | None:
    """The one-argument equivalent of ``serde.serialize`` for data other than None (exact
    built-in classes only), else None."""
    return _SERIALIZERS.get(type(serde))
