"""SqlError: a compile error that points at a line and column of the SQL text.

Every error the SQL front end raises is a ``SqlError``; its message starts with
``line L, column C:`` so that a user sees where the problem is without a stack trace.
"""

from __future__ import annotations

from typing import Any


class SqlError(ValueError):
    """A problem in a SQL text, at ``line`` and ``column`` (both 1-based)."""

    def __init__(self, message: str, *, line: int, column: int) -> None:
        super().__init__(f"line {line}, column {column}: {message}")
        self.message = message
        self.line = line
        self.column = column


def line_column(text: str, offset: int) -> tuple[int, int]:
    """The 1-based line and column of character ``offset`` in ``text``."""
    offset = max(0, min(offset, len(text)))
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, column


def error_at(text: str, offset: int, message: str) -> SqlError:
    """A ``SqlError`` for ``message`` at character ``offset`` of ``text``."""
    line, column = line_column(text, offset)
    return SqlError(message, line=line, column=column)


def node_offset(node: Any, default: int = 0) -> int:
    """The character offset where a sqlglot node starts (its earliest positioned token).

    sqlglot records positions on identifiers and function names (``node.meta``); a node
    without one takes the earliest position among its descendants.
    """
    starts = [
        n.meta["start"]
        for n in node.walk()
        if getattr(n, "meta", None) and isinstance(n.meta.get("start"), int)
    ]
    return min(starts) if starts else default
