"""``FROM t MATCH_RECOGNIZE (...) [AS] alias``: the clause taken out of a statement's text.

sqlglot's default dialect does not read MATCH_RECOGNIZE, and no dialect reads Flink's
``WITHIN INTERVAL ...`` after PATTERN nor ``AFTER MATCH SKIP TO v``. ``take_match_recognize``
(called while a statement is prepared, see ``rewrite``) blanks the clause (the table and
its alias stay, so the query reads ``FROM t AS alias``), parses it with a dialect that
knows the keyword (WITHIN and AFTER MATCH SKIP read from its tokens), and returns what
it said as a ``MatchClause``; ``match_recognize`` compiles it. Positions stay those of
the text as written.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError
from sqlglot.tokens import Token, TokenType
from sqlglot.tokens import Tokenizer as BaseTokenizer

from streaming.sql.errors import error_at

_PREFIX = "SELECT * FROM t "


class _MatchDialect(Dialect):
    """sqlglot's default dialect with MATCH_RECOGNIZE a keyword (its parser reads it)."""

    class Tokenizer(BaseTokenizer):
        KEYWORDS = {**BaseTokenizer.KEYWORDS, "MATCH_RECOGNIZE": TokenType.MATCH_RECOGNIZE}


@dataclass(frozen=True)
class MatchClause:
    """One MATCH_RECOGNIZE clause: its parsed body, the table it reads, the PATTERN's
    text and where things are."""

    node: exp.MatchRecognize
    #: the name of the table before MATCH_RECOGNIZE (after a subquery: its alias, set
    #: once the statement is parsed, see ``match_recognize.bind_clauses``)
    after: str
    #: where MATCH_RECOGNIZE is
    offset: int
    #: the text inside PATTERN ( ... ) and where it starts
    pattern: str
    pattern_offset: int
    #: WITHIN's interval, if any, and where WITHIN is
    within: exp.Expr | None
    within_offset: int
    #: where each top-level keyword of the clause is (upper case)
    keywords: dict[str, int]
    #: after a subquery: where its closing parenthesis is
    subquery_end: int | None = None
    #: the words after AFTER MATCH SKIP (none: no AFTER MATCH SKIP)
    skip: tuple[str, ...] = ()


def take_match_recognize(text: str, tokens: list[Token], chars: list[str]) -> MatchClause | None:
    """Blank the first MATCH_RECOGNIZE clause not blanked yet and return what it said."""
    n = len(tokens)
    found = [
        i
        for i, t in enumerate(tokens)
        if t.text.upper() == "MATCH_RECOGNIZE" and chars[t.start] != " "
    ]
    if not found:
        return None
    i = found[0]
    token = tokens[i]
    if i + 1 >= n or tokens[i + 1].token_type != TokenType.L_PAREN:
        raise error_at(text, token.start, "MATCH_RECOGNIZE needs its clauses in (...)")
    before = tokens[i - 1] if i > 0 else None
    subquery = before is not None and before.token_type == TokenType.R_PAREN
    if before is None or (
        before.token_type not in (TokenType.VAR, TokenType.IDENTIFIER) and not subquery
    ):
        raise error_at(
            text, token.start, "MATCH_RECOGNIZE reads a table, a view or a subquery before it"
        )
    close = _matching_paren(tokens, i + 1)
    body = tokens[i + 2 : close]
    keywords = _keywords(body)
    if "SUBSET" in keywords:
        raise error_at(text, keywords["SUBSET"], "SUBSET is not supported (as in Flink)")
    if "PATTERN" not in keywords:
        raise error_at(text, token.start, "MATCH_RECOGNIZE needs a PATTERN (...)")
    at = next(j for j, t in enumerate(body) if t.start == keywords["PATTERN"])
    if at + 1 >= len(body) or body[at + 1].token_type != TokenType.L_PAREN:
        raise error_at(text, keywords["PATTERN"], "PATTERN needs its pattern in (...)")
    pattern_close = _matching_paren(body, at + 1)
    open_paren = body[at + 1]
    pattern_start = open_paren.end + 1
    pattern = text[pattern_start : body[pattern_close].start]
    within: exp.Expr | None = None
    within_offset = 0
    # parts sqlglot does not read, read here: WITHIN (Flink's) and AFTER MATCH SKIP (as
    # ``SKIP TO v``, Calcite's short SKIP TO LAST v, is no sqlglot syntax)
    dropped: list[tuple[int, int]] = []
    if "WITHIN" in keywords:
        within_offset = keywords["WITHIN"]
        w = _index(body, within_offset)
        end = _until(body, w, ("DEFINE", "SUBSET"))
        if end == w + 1:
            raise error_at(text, within_offset, "WITHIN needs an INTERVAL")
        within = _parse_interval(text, body[w + 1 : end])
        dropped.append((w, end))
    skip: tuple[str, ...] = ()
    if "AFTER" in keywords:
        a = _index(body, keywords["AFTER"])
        end = _until(body, a, ("PATTERN",))
        words = [t.text for t in body[a:end]]
        if [w.upper() for w in words[:3]] != ["AFTER", "MATCH", "SKIP"]:
            raise error_at(text, keywords["AFTER"], "expected AFTER MATCH SKIP ... before PATTERN")
        skip = tuple(words[3:])
        dropped.append((a, end))
    if token.start < len(_PREFIX):
        raise error_at(text, token.start, "MATCH_RECOGNIZE needs SELECT ... FROM t before it")
    fragment = [c if c == "\n" else " " for c in text]
    fragment[token.start - len(_PREFIX) : token.start] = _PREFIX
    last = tokens[close].end
    fragment[token.start : last + 1] = text[token.start : last + 1]
    for first, end in dropped:
        _blank(fragment, body[first].start, body[end - 1].end)
    # PATTERN's text is read by row_pattern: sqlglot reads it as one opaque string
    node = _parse(text, "".join(fragment))
    for j in range(i, close + 1):
        _blank(chars, tokens[j].start, tokens[j].end)
    return MatchClause(
        node=node,
        after="" if subquery else before.text,
        offset=token.start,
        pattern=pattern,
        pattern_offset=pattern_start,
        within=within,
        within_offset=within_offset,
        keywords=keywords,
        subquery_end=before.start if subquery else None,
        skip=skip,
    )


def _index(body: list[Token], offset: int) -> int:
    """The index of the token of ``body`` at ``offset``."""
    return next(j for j, t in enumerate(body) if t.start == offset)


def _until(body: list[Token], start: int, words: tuple[str, ...]) -> int:
    """The index of the first token after ``start`` that is one of ``words`` (or the end)."""
    end = start + 1
    while end < len(body) and body[end].text.upper() not in words:
        end += 1
    return end


def _keywords(body: list[Token]) -> dict[str, int]:
    """Where the clause's top-level keywords are."""
    found: dict[str, int] = {}
    depth = 0
    for token in body:
        if token.token_type == TokenType.L_PAREN:
            depth += 1
        elif token.token_type == TokenType.R_PAREN:
            depth -= 1
        word = token.text.upper()
        if depth == 0 and word in (
            "PARTITION",
            "PARTITION BY",
            "ORDER",
            "ORDER BY",
            "MEASURES",
            "ONE",
            "ALL",
            "AFTER",
            "PATTERN",
            "WITHIN",
            "SUBSET",
            "DEFINE",
        ):
            found.setdefault(word.split()[0], token.start)
    return found


def _parse(text: str, fragment: str) -> exp.MatchRecognize:
    """The MatchRecognize node of ``SELECT * FROM t MATCH_RECOGNIZE (...)``."""
    try:
        tree = sqlglot.parse_one(fragment, read=_MatchDialect, error_message_context=len(fragment))
    except ParseError as e:
        error = e.errors[0] if e.errors else {}
        offset = len(error.get("start_context") or "")
        description = error.get("description") or "cannot parse MATCH_RECOGNIZE"
        raise error_at(text, offset, f"syntax error in MATCH_RECOGNIZE: {description}") from None
    node = tree.args.get("match")
    assert isinstance(node, exp.MatchRecognize)
    return node


def _parse_interval(text: str, tokens: list[Token]) -> exp.Expr:
    """The expression of ``tokens`` (WITHIN's interval), positions kept."""
    start, end = tokens[0].start, tokens[-1].end
    fragment = "".join(c if c == "\n" else " " for c in text[:start]) + text[start : end + 1]
    try:
        return sqlglot.parse_one(fragment)
    except ParseError:
        raise error_at(text, start, f"cannot parse {text[start : end + 1]!r}") from None


def _matching_paren(tokens: list[Token], open_index: int) -> int:
    """Index of the ``)`` that closes the ``(`` at ``open_index`` (or the last token)."""
    depth = 0
    for i in range(open_index, len(tokens)):
        if tokens[i].token_type == TokenType.L_PAREN:
            depth += 1
        elif tokens[i].token_type == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                return i
    return len(tokens) - 1


def _blank(chars: list[str], start: int, end: int) -> None:
    for i in range(start, end + 1):
        if chars[i] != "\n":
            chars[i] = " "
