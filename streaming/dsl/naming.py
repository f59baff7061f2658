"""Processor names: a user's ``Named`` (or string), and whether a name was generated."""

from __future__ import annotations

import re
from typing import Any

_INTERNAL_NAME = re.compile(r"KSTREAM.*-[0-9]{10}")


def as_name(named: Any) -> str | None:
    """Accept ``Named``, a plain string, or None."""
    if named is None or isinstance(named, str):
        return named
    return getattr(named, "name", None)


def is_generated_name(name: str) -> bool:
    """Whether ``name`` is one the builder generated (``KSTREAM-...-0000000007``)."""
    return bool(_INTERNAL_NAME.fullmatch(name))
