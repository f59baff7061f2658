"""Python functions that SQL tests load with ``CREATE FUNCTION ... AS 'sql_udfs.<name>'``."""

from __future__ import annotations

from collections.abc import Iterator

NOT_A_FUNCTION = 42


def shout(text: str | None) -> str | None:
    """The text upper-cased with a '!' (NULL stays NULL)."""
    return None if text is None else text.upper() + "!"


def words(text: str | None) -> Iterator[tuple[str, int]]:
    """Each word of the text with its length (none for NULL or blank text)."""
    for word in (text or "").split():
        yield word, len(word)


class Longest:
    """The longest string seen (an aggregate with retract and merge)."""

    def create_accumulator(self) -> list:
        return []

    def accumulate(self, acc: list, value: str | None) -> None:
        if value is not None:
            acc.append(value)

    def retract(self, acc: list, value: str | None) -> None:
        if value is not None and value in acc:
            acc.remove(value)

    def merge(self, acc: list, others: list) -> None:
        for other in others:
            acc.extend(other)

    def get_value(self, acc: list) -> str | None:
        return max(acc, key=lambda v: (len(v), v)) if acc else None
