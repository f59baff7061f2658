"""Nexmark's Java UDFs as Python functions, registered (``register``) under their class
names so that Nexmark's ``CREATE FUNCTION ... AS 'com.github.nexmark.flink.udf...'`` runs
verbatim (``streaming.sql.java_functions``)."""

from __future__ import annotations

from streaming.sql import java_functions

#: the class q14 creates ``count_char`` from
COUNT_CHAR_CLASS = "com.github.nexmark.flink.udf.CountChar"


def count_char(s: str | None, character: str | None) -> int:
    """How many bytes of ``s`` (UTF-8) equal the first byte of ``character``: Nexmark's
    ``CountChar.eval`` (0 for a NULL ``s``)."""
    if s is None:
        return 0
    if not character:
        raise ValueError("count_char needs a character to count")
    return s.encode().count(character.encode()[:1])


def register() -> None:
    """Run ``count_char`` for Nexmark's ``CountChar`` class (q14)."""
    java_functions.register(COUNT_CHAR_CLASS, count_char)
