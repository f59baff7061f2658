"""Flink SQL surface syntax that sqlglot's tokenizer does not read, handled on the text.

- Backtick identifiers (`` `name` ``, Flink's quoting) become double-quoted ones, which
  sqlglot reads as quoted identifiers; string literals and comments are left alone.
- Statement sets: ``EXECUTE STATEMENT SET BEGIN <INSERT>; ...; END;`` and the SQL
  client's ``BEGIN STATEMENT SET; <INSERT>; ...; END;``. All the statements of a text
  compile into one topology anyway, so a statement set is the INSERTs it holds: its
  opening and ``END`` are taken out (``StatementSets``), and a statement in it that is
  not an ``INSERT INTO`` is an error, as in Flink.

Both keep every character's position (a replaced character becomes one of the same
length, a removed clause spaces), so positions in errors refer to the text as written.
"""

from __future__ import annotations

import re

from sqlglot.tokens import Token, TokenType

from streaming.sql.errors import error_at

_EXECUTE_SET = re.compile(r"EXECUTE\s+STATEMENT\s+SET\s+BEGIN\b", re.IGNORECASE)


def quote_backticks(text: str) -> str:
    """``text`` with each backtick-quoted identifier double-quoted instead."""
    chars = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "'":  # a string literal ('' inside is a quote)
            i += 1
            while i < n and not (text[i] == "'" and text[i + 1 : i + 2] != "'"):
                i += 2 if text[i] == "'" else 1
        elif text.startswith("--", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
        elif text.startswith("/*", i):
            i = text.find("*/", i + 2)
            i = n if i < 0 else i + 1
        elif c == '"':
            i = text.find('"', i + 1)
            i = n if i < 0 else i
        elif c == "`":
            end = text.find("`", i + 1)
            if end < 0:
                raise error_at(text, i, "a backtick identifier needs its closing `")
            if '"' in text[i + 1 : end]:
                raise error_at(text, i, 'an identifier cannot hold a " character here')
            chars[i] = chars[end] = '"'
            i = end
        i += 1
    return "".join(chars)


def take_execute_openers(text: str, tokens: list[Token]) -> tuple[str, list[int]]:
    """Blank each ``EXECUTE STATEMENT SET BEGIN`` that starts a statement (sqlglot reads
    what follows ``EXECUTE`` as one opaque string); returns the text and their offsets."""
    chars = list(text)
    offsets = []
    for token in tokens:
        if token.token_type == TokenType.EXECUTE:
            match = _EXECUTE_SET.match(text, token.start)
            if match is not None:
                offsets.append(token.start)
                for i in range(match.start(), match.end()):
                    if chars[i] != "\n":
                        chars[i] = " "
    return "".join(chars), offsets


class StatementSets:
    """Follows the statement sets of a text statement by statement (token groups)."""

    def __init__(self, text: str, execute_openers: list[int]) -> None:
        self.text = text
        self.openers = list(execute_openers)
        #: where the open statement set starts (None: none is open)
        self.open_at: int | None = None

    def is_marker(self, group: list[Token]) -> bool:
        """Whether ``group`` only opens (``BEGIN STATEMENT SET``) or closes (``END``) a
        statement set: such a group is no statement. Checks that a statement in a set is
        an INSERT."""
        start = group[0].start
        if self.openers and self.openers[0] < start:
            self.open(self.openers.pop(0))
        words = [t.text.upper() for t in group]
        if words == ["BEGIN", "STATEMENT", "SET"]:
            self.open(start)
            return True
        if words == ["END"]:
            if self.open_at is None:
                raise error_at(self.text, start, "END without BEGIN STATEMENT SET")
            self.open_at = None
            return True
        if self.open_at is not None and group[0].token_type != TokenType.INSERT:
            raise error_at(
                self.text,
                start,
                "a STATEMENT SET holds INSERT INTO statements only: end it (END;) before "
                "this statement",
            )
        return False

    def open(self, at: int) -> None:
        if self.open_at is not None:
            raise error_at(self.text, at, "a STATEMENT SET cannot open inside another one")
        self.open_at = at

    def finish(self) -> None:
        """The end of the text: every statement set must have ended."""
        if self.openers:
            self.open(self.openers.pop(0))
        if self.open_at is not None:
            raise error_at(self.text, self.open_at, "STATEMENT SET without END")
