"""Joins: which module builds a join depends on what is joined with what.

``KStream.join/left_join/outer_join`` and ``KTable.join/left_join/outer_join`` call
:func:`stream_join` / :func:`table_join`; each join kind lives in its own module:

- ``stream_stream``: KStream-KStream, windowed (``JoinWindows``), with the outer-join store;
- ``stream_table``: KStream-KTable, plain or versioned;
- ``global_table``: KStream-GlobalKTable, with a key selector;
- ``table_table``: KTable-KTable on the primary key;
- ``foreign_key``: KTable-KTable on a foreign key extracted from the left value.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

INNER, LEFT, OUTER = "inner", "left", "outer"


def as_joiner(joiner: Callable[..., Any]) -> Callable[[Any, Any, Any], Any]:
    """A ``(key, left, right) -> value`` joiner from a ValueJoiner ``(left, right)`` or a
    ValueJoinerWithKey ``(key, left, right)``, told apart by how many arguments it takes."""
    try:
        params = inspect.signature(joiner).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature: assume (left, right)
        return lambda key, left, right: joiner(left, right)
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) >= 3 or any(p.kind is p.VAR_POSITIONAL for p in params):
        return joiner
    return lambda key, left, right: joiner(left, right)


def stream_join(stream: Any, other: Any, kind: str, args: tuple, kwargs: dict) -> Any:
    """Dispatch a KStream join on the type of ``other``."""
    from streaming.dsl.kstream import KStream
    from streaming.dsl.ktable import GlobalKTable, KTable

    if isinstance(other, KStream):
        from streaming.dsl.joins import stream_stream

        return stream_stream.join(stream, other, kind, *args, **kwargs)
    if kind == OUTER:
        raise TypeError(f"outer_join() needs a KStream to join with, got {other!r}")
    if isinstance(other, KTable):
        from streaming.dsl.joins import stream_table

        return stream_table.join(stream, other, kind, *args, **kwargs)
    if isinstance(other, GlobalKTable):
        from streaming.dsl.joins import global_table

        return global_table.join(stream, other, kind, *args, **kwargs)
    raise TypeError(f"a KStream joins a KStream, KTable or GlobalKTable, not {other!r}")


def table_join(table: Any, other: Any, kind: str, args: tuple, kwargs: dict) -> Any:
    """Dispatch a KTable join: on the primary key, or on a foreign key when one is extracted."""
    from streaming.dsl.ktable import KTable

    if not isinstance(other, KTable):
        raise TypeError(f"a KTable joins a KTable, not {other!r}")
    if "foreign_key_extractor" in kwargs or (len(args) >= 2 and callable(args[1])):
        if kind == OUTER:
            raise TypeError("a foreign-key join is inner or left, not outer")
        from streaming.dsl.joins import foreign_key

        return foreign_key.join(table, other, kind, *args, **kwargs)
    from streaming.dsl.joins import table_table

    return table_table.join(table, other, kind, *args, **kwargs)
