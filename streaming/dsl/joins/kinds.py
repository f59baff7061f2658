"""Join kinds (inner, left, outer) and the joiner every join calls."""

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
