"""Token-level pre-processing of Flink SQL constructs that sqlglot does not parse.

sqlglot parses Flink's DDL, queries and most group-window functions, but not the Flink
constructs below. This module takes them out of the text before sqlglot parses it, and
returns what they said:

- ``WATERMARK FOR ts AS ts - INTERVAL 'n' UNIT`` inside ``CREATE TABLE (...)``,
- a trailing ``EMIT CHANGES`` / ``EMIT FINAL``, and a trailing ``ON CONFLICT DO
  DEDUPLICATE`` (what a keyed sink does anyway),
- a leading ``EXPLAIN``,
- the window table-valued functions ``TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), size))``,
  ``TABLE(HOP(TABLE t, DESCRIPTOR(ts), slide, size))``,
  ``TABLE(CUMULATE(TABLE t, DESCRIPTOR(ts), step, size))`` and
  ``TABLE(SESSION(TABLE t [PARTITION BY k, ...], DESCRIPTOR(ts), gap))``, replaced by the
  table name ``t``;
- ``MATCH_RECOGNIZE (...)`` after a table (``match_clause``), the table and its alias kept.

It also renames the group-window function ``SESSION(`` (a keyword to sqlglot) to
``SESSWIN(``, a name of the same length that sqlglot parses as a function call, and
before all that reads backtick identifiers and statement sets (``surface``).

A removed construct is overwritten with spaces (newlines kept), so every position that
sqlglot reports, and every error this front end raises, refers to the text as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from itertools import pairwise

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, Tokenizer, TokenType

from streaming.sql.computed_columns import MetadataColumn, take_metadata
from streaming.sql.errors import SqlError, error_at, node_offset
from streaming.sql.match_clause import MatchClause, take_match_recognize
from streaming.sql.surface import StatementSets, quote_backticks, take_execute_openers

_UNIT_MS = {
    "MILLISECOND": 1,
    "SECOND": 1_000,
    "MINUTE": 60_000,
    "HOUR": 3_600_000,
    "DAY": 86_400_000,
}

#: the unit labels of Flink's duration strings (``TimeUtils``), whole milliseconds and up
_DURATION_UNITS = {
    **dict.fromkeys(("d", "day", "days"), "DAY"),
    **dict.fromkeys(("h", "hour", "hours"), "HOUR"),
    **dict.fromkeys(("m", "min", "minute", "minutes"), "MINUTE"),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), "SECOND"),
    **dict.fromkeys(("ms", "milli", "millis", "millisecond", "milliseconds"), "MILLISECOND"),
}
_DURATION = re.compile(r"\s*(\d+)\s*([a-z]*)\s*")


@dataclass(frozen=True)
class Watermark:
    """``WATERMARK FOR column AS column - INTERVAL delay``: the delay becomes the grace."""

    column: str
    delay_ms: int
    offset: int


#: What the group-window function ``SESSION(`` is renamed to (same length, positions kept).
SESSION_ALIAS = "SESSWIN"


@dataclass(frozen=True)
class WindowTvf:
    """``TABLE(TUMBLE|HOP|CUMULATE|SESSION(TABLE table, DESCRIPTOR(column), ...))`` in a
    FROM clause.

    For CUMULATE, ``slide_ms`` is the step; for SESSION, ``size_ms`` and ``slide_ms`` are
    the gap and ``partition`` the columns of its ``PARTITION BY``.
    """

    kind: str
    table: str
    column: str
    size_ms: int
    slide_ms: int
    offset: int
    partition: tuple[str, ...] = ()
    #: where the TVF's text ends
    end: int = 0


@dataclass(frozen=True)
class LateralTable:
    """``[, | CROSS JOIN | LEFT JOIN] LATERAL TABLE(fn(args)) [AS] alias[(columns)]
    [ON TRUE]`` after the table ``after`` (its alias or name) in a FROM clause."""

    call: exp.Anonymous
    alias: str | None
    columns: tuple[str, ...]
    left: bool
    after: str
    #: where the function's name is
    offset: int


@dataclass
class Statement:
    """One statement: the text sqlglot parses (whole text, other statements blanked) and
    the Flink clauses taken out of it."""

    start: int
    end: int
    text: str
    explain: bool = False
    emit: str | None = None
    emit_offset: int = 0
    watermark: Watermark | None = None
    #: a CREATE TABLE's METADATA columns (``computed_columns``)
    metadata: tuple[MetadataColumn, ...] = ()
    #: the statement's first window TVF (of its outer query once subqueries take theirs)
    window_tvf: WindowTvf | None = None
    #: every window TVF of the statement, in text order (subqueries may have one each)
    window_tvfs: tuple[WindowTvf, ...] = ()
    #: its ``LATERAL TABLE(...)`` joins not compiled yet, in text order
    laterals: list[LateralTable] = field(default_factory=list)
    #: its ``MATCH_RECOGNIZE (...)`` clauses not compiled yet, in text order
    match_recognize: list[MatchClause] = field(default_factory=list)

    def final(self, windowed: bool) -> bool:
        """Whether a query of this statement emits final results: a windowed aggregation
        does unless it says ``EMIT CHANGES`` (Flink's window aggregations emit each window
        once, when it closes); ``EMIT FINAL`` says so explicitly."""
        return self.emit == "FINAL" or (windowed and self.emit is None)


def interval_ms(node: exp.Expr, source: str, offset: int | None = None) -> int:
    """Milliseconds of ``INTERVAL 'n' UNIT`` (UNIT may be plural, e.g. MINUTES); errors
    point at ``offset`` when given (sqlglot keeps no position for the INTERVAL keyword)."""
    at = node_offset(node) if offset is None else offset
    if not isinstance(node, exp.Interval):
        raise error_at(source, at, f"expected an INTERVAL, got {node.sql()}")
    amount_text = node.this.name if node.this is not None else ""
    unit = node.unit.name.upper() if node.unit is not None else ""
    if not unit and " " in amount_text:
        amount_text, unit = amount_text.split(None, 1)
        unit = unit.upper()
    unit = unit[:-1] if unit.endswith("S") else unit
    if unit not in _UNIT_MS:
        raise error_at(source, at, f"unsupported INTERVAL unit {unit or '?'}")
    try:
        millis = Decimal(amount_text.strip()) * _UNIT_MS[unit]
    except InvalidOperation:
        raise error_at(source, at, f"INTERVAL needs a number, got {amount_text!r}") from None
    if millis != millis.to_integral_value():
        raise error_at(
            source, at, f"INTERVAL '{amount_text}' {unit} is not a whole number of milliseconds"
        )
    return int(millis)


def duration_ms(text: str) -> int:
    """Milliseconds of a Flink duration string, as Flink reads option values (``'5 s'``,
    ``'1min'``, ``'2 hours'``; a bare number is ms); a ValueError says what is wrong."""
    match = _DURATION.fullmatch(text.lower())
    if match is None:
        raise ValueError("not a whole number with a unit")
    amount, label = match.groups()
    unit = _DURATION_UNITS.get(label) if label else "MILLISECOND"
    if unit is None:
        raise ValueError(f"unknown time unit {label!r}")
    return int(amount) * _UNIT_MS[unit]


def tokenize(text: str) -> list[Token]:
    """sqlglot's tokens of ``text``; a tokenizer error becomes a ``SqlError``."""
    try:
        return Tokenizer().tokenize(text)
    except TokenError as e:
        raise SqlError(str(e).splitlines()[0], line=1, column=1) from None


def split_statements(text: str) -> list[Statement]:
    """The statements of ``text`` (separated by ``;``), each with its Flink clauses out
    (backtick identifiers double-quoted, statement sets taken apart: ``surface``)."""
    text = quote_backticks(text)
    text, execute_openers = take_execute_openers(text, tokenize(text))
    text_without_explain, explains = _take_explains(text)
    groups: list[list[Token]] = [[]]
    for token in tokenize(text_without_explain):
        if token.token_type == TokenType.SEMICOLON:
            groups.append([])
        else:
            groups[-1].append(token)
    statements = []
    previous_end = -1
    sets = StatementSets(text, execute_openers)
    for group in filter(None, groups):
        if not sets.is_marker(group):
            explain = any(previous_end < offset < group[0].start for offset in explains)
            statements.append(_prepare(text, group, explain=explain))
        previous_end = group[-1].end
    sets.finish()
    return statements


def _take_explains(text: str) -> tuple[str, list[int]]:
    """Blank the ``EXPLAIN`` keywords that start statements.

    sqlglot's tokenizer reads everything after ``EXPLAIN`` as one opaque command string;
    without the keyword the explained statement is tokenized like any other.
    """
    chars = list(text)
    offsets = []
    for token in tokenize(text):
        if token.token_type == TokenType.COMMAND and token.text.upper() == "EXPLAIN":
            offsets.append(token.start)
            _blank(chars, token.start, token.end)
    return "".join(chars), offsets


def _blank(chars: list[str], start: int, end: int) -> None:
    """Overwrite ``chars[start:end + 1]`` with spaces, keeping newlines."""
    for i in range(start, end + 1):
        if chars[i] != "\n":
            chars[i] = " "


def _prepare(text: str, tokens: list[Token], *, explain: bool) -> Statement:
    start, end = tokens[0].start, tokens[-1].end
    chars = [c if c == "\n" else " " for c in text]
    chars[start : end + 1] = text[start : end + 1]
    statement = Statement(start=start, end=end, text="", explain=explain)
    tokens = _take_on_conflict(text, tokens, chars)
    if len(tokens) >= 2 and tokens[-2].text.upper() == "EMIT":
        mode = tokens[-1].text.upper()
        if mode not in ("CHANGES", "FINAL"):
            raise error_at(
                text,
                tokens[-1].start,
                f"EMIT {mode} is not supported: use EMIT CHANGES or EMIT FINAL",
            )
        statement.emit, statement.emit_offset = mode, tokens[-2].start
        _blank(chars, tokens[-2].start, tokens[-1].end)
        tokens = tokens[:-2]
    statement.watermark = _take_watermark(text, tokens, chars)
    statement.metadata = take_metadata(text, tokens, chars)
    tvfs: list[WindowTvf] = []
    while (tvf := _take_window_tvf(text, tokens, chars, tvfs[-1].end if tvfs else -1)) is not None:
        tvfs.append(tvf)
    statement.window_tvfs = tuple(tvfs)
    statement.window_tvf = tvfs[0] if tvfs else None
    while (lateral := _take_lateral_table(text, tokens, chars)) is not None:
        statement.laterals.append(lateral)
    while (clause := take_match_recognize(text, tokens, chars)) is not None:
        statement.match_recognize.append(clause)
    for previous, token, following in zip(tokens, tokens[1:], tokens[2:], strict=False):
        # CREATE TEMPORARY SYSTEM FUNCTION: a temporary function (one namespace here)
        if (previous.text.upper(), token.text.upper(), following.text.upper()) == (
            "TEMPORARY",
            "SYSTEM",
            "FUNCTION",
        ):
            _blank(chars, token.start, token.end)
    for token, following in pairwise(tokens):
        if (
            token.text.upper() == "SESSION"
            and following.token_type == TokenType.L_PAREN
            and chars[token.start] != " "
        ):
            chars[token.start : token.end + 1] = SESSION_ALIAS
    statement.text = "".join(chars)
    return statement


def _take_on_conflict(text: str, tokens: list[Token], chars: list[str]) -> list[Token]:
    """Blank a trailing ``ON CONFLICT DO DEDUPLICATE`` (Flink's conflict strategy of a
    sink's PRIMARY KEY: the last row of a key wins, which is what a keyed sink here does);
    the other strategies are errors that name them."""
    if len(tokens) < 4 or [t.text.upper() for t in tokens[-4:-1]] != ["ON", "CONFLICT", "DO"]:
        return tokens
    strategy = tokens[-1].text.upper()
    if strategy != "DEDUPLICATE":
        raise error_at(
            text,
            tokens[-1].start,
            f"ON CONFLICT DO {strategy} is not supported: a sink keeps each key's last row "
            "(ON CONFLICT DO DEDUPLICATE)",
        )
    _blank(chars, tokens[-4].start, tokens[-1].end)
    return tokens[:-4]


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


def _split_args(tokens: list[Token]) -> list[list[Token]]:
    """Split the tokens between two parentheses at their top-level commas."""
    args: list[list[Token]] = [[]]
    depth = 0
    for token in tokens:
        if token.token_type == TokenType.COMMA and depth == 0:
            args.append([])
            continue
        if token.token_type == TokenType.L_PAREN:
            depth += 1
        elif token.token_type == TokenType.R_PAREN:
            depth -= 1
        args[-1].append(token)
    return args


def _parse_fragment(text: str, tokens: list[Token]) -> exp.Expr:
    """Parse the text of ``tokens`` as one SQL expression, positions kept."""
    start, end = tokens[0].start, tokens[-1].end
    fragment = "".join(c if c == "\n" else " " for c in text[:start]) + text[start : end + 1]
    try:
        return sqlglot.parse_one(fragment)
    except ParseError:
        raise error_at(text, start, f"cannot parse {text[start : end + 1]!r}") from None


def _take_watermark(text: str, tokens: list[Token], chars: list[str]) -> Watermark | None:
    """Remove ``[,] WATERMARK FOR col AS expr`` from a CREATE TABLE's column list."""
    for i, token in enumerate(tokens[:-1]):
        if token.text.upper() == "WATERMARK" and tokens[i + 1].text.upper() == "FOR":
            break
    else:
        return None
    # The clause ends at the next top-level comma or at the column list's closing paren.
    depth, j = 0, i
    while j + 1 < len(tokens):
        nxt = tokens[j + 1]
        if depth == 0 and nxt.token_type in (TokenType.COMMA, TokenType.R_PAREN):
            break
        depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(nxt.token_type, 0)
        j += 1
    clause = tokens[i : j + 1]
    if len(clause) < 5 or clause[3].text.upper() != "AS":
        raise error_at(text, token.start, "expected WATERMARK FOR column AS column - INTERVAL ...")
    column = clause[2].text
    expression = _parse_fragment(text, clause[4:])
    delay = 0
    if isinstance(expression, exp.Sub) and isinstance(expression.expression, exp.Interval):
        delay = interval_ms(expression.expression, text)
        expression = expression.this
    if not (isinstance(expression, exp.Column) and expression.name == column):
        raise error_at(
            text,
            clause[4].start,
            f"WATERMARK FOR {column} must be AS {column} or AS {column} - INTERVAL ...",
        )
    has_comma_before = i > 0 and tokens[i - 1].token_type == TokenType.COMMA
    _blank(chars, tokens[i - 1].start if has_comma_before else token.start, clause[-1].end)
    if not has_comma_before and j + 1 < len(tokens) and tokens[j + 1].token_type == TokenType.COMMA:
        _blank(chars, tokens[j + 1].start, tokens[j + 1].end)
    return Watermark(column=column, delay_ms=delay, offset=token.start)


def _take_window_tvf(
    text: str, tokens: list[Token], chars: list[str], after: int
) -> WindowTvf | None:
    """Replace the first ``TABLE(TUMBLE|HOP|CUMULATE|SESSION(TABLE t, DESCRIPTOR(ts), ...))`` that
    starts after offset ``after`` by ``t`` (``TABLE(f(...))`` without a ``TABLE t`` first
    argument, as ``LATERAL TABLE(f(x))``, is no window TVF)."""
    for i in range(len(tokens) - 4):
        if (
            tokens[i].start > after
            and tokens[i].token_type == TokenType.TABLE
            and tokens[i + 1].token_type == TokenType.L_PAREN
            and tokens[i + 3].token_type == TokenType.L_PAREN
            and tokens[i + 4].token_type == TokenType.TABLE
        ):
            break
    else:
        return None
    kind = tokens[i + 2].text.upper()
    outer_close = _matching_paren(tokens, i + 1)
    inner_close = _matching_paren(tokens, i + 3)
    if kind not in ("TUMBLE", "HOP", "CUMULATE", "SESSION"):
        raise error_at(text, tokens[i + 2].start, f"{kind} windows are not supported yet")
    args = _split_args(tokens[i + 4 : inner_close])
    expected = 4 if kind in ("HOP", "CUMULATE") else 3
    shape = {
        "TUMBLE": "TABLE t, DESCRIPTOR(ts), size",
        "HOP": "TABLE t, DESCRIPTOR(ts), slide, size",
        "CUMULATE": "TABLE t, DESCRIPTOR(ts), step, size",
        "SESSION": "TABLE t [PARTITION BY k, ...], DESCRIPTOR(ts), gap",
    }[kind]
    partition: tuple[str, ...] = ()
    if kind == "SESSION" and len(args) > 3:
        # PARTITION BY a, b: the top-level commas split it; join its parts back to arg 0
        while len(args) > 3 and len(args[1]) == 1:
            args[0].append(args.pop(1)[0])
    if kind == "SESSION" and len(args[0]) >= 4 and args[0][2].token_type == TokenType.PARTITION_BY:
        partition = tuple(t.text for t in args[0][3:])
        args[0] = args[0][:2]
    if kind != "SESSION" and len(args) == expected + 1:
        raise error_at(
            text,
            args[-1][0].start,
            f"a {kind} window offset (its last argument) is not supported yet",
        )
    if (
        len(args) != expected
        or len(args[0]) != 2
        or args[0][0].token_type != TokenType.TABLE
        or len(args[1]) != 4
        or args[1][0].text.upper() != "DESCRIPTOR"
    ):
        raise error_at(text, tokens[i + 2].start, f"{kind} takes ({shape})")
    table_token, column_token = args[0][1], args[1][2]
    intervals = [
        interval_ms(_parse_fragment(text, arg), text, offset=arg[0].start) for arg in args[2:]
    ]
    size = intervals[-1]
    slide = intervals[0] if kind in ("HOP", "CUMULATE") else size
    if kind == "CUMULATE" and (slide <= 0 or slide > size or size % slide):
        raise error_at(
            text,
            tokens[i + 2].start,
            "a CUMULATE window's size must be a positive whole multiple of its step",
        )
    _blank(chars, tokens[i].start, tokens[outer_close].end)
    chars[table_token.start : table_token.end + 1] = text[table_token.start : table_token.end + 1]
    return WindowTvf(
        kind=kind,
        table=table_token.text,
        column=column_token.text,
        size_ms=size,
        slide_ms=slide,
        offset=tokens[i].start,
        partition=partition,
        end=tokens[outer_close].end,
    )


_JOIN_WORDS = ("CROSS", "LEFT", "OUTER", "INNER")


def _take_lateral_table(text: str, tokens: list[Token], chars: list[str]) -> LateralTable | None:
    """Blank the first ``LATERAL TABLE(fn(...))`` join not blanked yet, with what joins it
    to the FROM table (``,``, ``CROSS JOIN``, ``LEFT JOIN``, ``JOIN ... ON TRUE``)."""
    n = len(tokens)
    for i in range(1, n - 3):
        if (
            tokens[i].text.upper() == "LATERAL"
            and tokens[i + 1].text.upper() == "TABLE"
            and chars[tokens[i].start] != " "
        ):
            break
    else:
        return None
    first = i - 1
    if tokens[first].token_type == TokenType.JOIN:
        while first > 0 and tokens[first - 1].text.upper() in _JOIN_WORDS:
            first -= 1
    elif tokens[first].token_type != TokenType.COMMA:
        raise error_at(
            text, tokens[i].start, "LATERAL TABLE joins a table: FROM t, LATERAL TABLE(f(...))"
        )
    joined_by = {t.text.upper() for t in tokens[first:i]}
    if first == 0:
        raise error_at(text, tokens[i].start, "LATERAL TABLE needs a table before it")
    if (
        tokens[i + 2].token_type != TokenType.L_PAREN
        or i + 4 >= n
        or tokens[i + 4].token_type != TokenType.L_PAREN
    ):
        raise error_at(
            text, tokens[i].start, "LATERAL TABLE takes a function call: LATERAL TABLE(f(...))"
        )
    name_token = tokens[i + 3]
    close_call = _matching_paren(tokens, i + 4)
    close = _matching_paren(tokens, i + 2)
    if close != close_call + 1:
        raise error_at(text, name_token.start, "LATERAL TABLE takes one function call")
    inner = tokens[i + 5 : close_call]
    args = [_parse_fragment(text, arg) for arg in _split_args(inner)] if inner else []
    call = exp.Anonymous(this=name_token.text, expressions=args)
    end = close
    alias: str | None = None
    columns: tuple[str, ...] = ()
    if end + 1 < n and tokens[end + 1].token_type == TokenType.ALIAS:
        end += 1
    if end + 1 < n and tokens[end + 1].token_type in (TokenType.VAR, TokenType.IDENTIFIER):
        end += 1
        alias = tokens[end].text
        if end + 1 < n and tokens[end + 1].token_type == TokenType.L_PAREN:
            close_columns = _matching_paren(tokens, end + 1)
            columns = tuple(
                t.text for t in tokens[end + 2 : close_columns] if t.token_type != TokenType.COMMA
            )
            end = close_columns
    left = "LEFT" in joined_by
    if end + 1 < n and tokens[end + 1].token_type == TokenType.ON:
        if end + 2 >= n or tokens[end + 2].text.upper() != "TRUE":
            raise error_at(text, tokens[end + 1].start, "a join of LATERAL TABLE is ON TRUE (only)")
        end += 2
    elif left:
        raise error_at(text, tokens[first].start, "LEFT JOIN LATERAL TABLE(...) needs ON TRUE")
    _blank(chars, tokens[first].start, tokens[end].end)
    return LateralTable(
        call=call,
        alias=alias,
        columns=columns,
        left=left,
        after=tokens[first - 1].text,
        offset=name_token.start,
    )
