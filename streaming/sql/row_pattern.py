"""The row pattern matcher of MATCH_RECOGNIZE: an NFA over the rows of one partition.

Pure Python, no Kafka: ``parse_pattern`` reads a PATTERN's text into ``Element``s,
``Matcher.step`` feeds one row to a partition's state and returns the state after it and
the matches that come out; ``Matcher.advance_time`` moves the partition's time (the
watermark) without a row. ``match_recognize`` keeps each partition's state in a state
store and feeds the rows in their ORDER BY order.

The semantics are Flink's (its CEP library, to which Flink compiles MATCH_RECOGNIZE):

- concatenation is strict contiguity: a partial match that cannot take the next row of
  its partition ends;
- a partial match starts at every row;
- a greedy loop (``A+``, ``A*``, ``A{n,}``, ``A{n,m}``) takes a row it can take and then
  does not try the next variable with it (Flink ANDs the next variable's condition with
  NOT the loop's); a reluctant one (``A+?``) tries the next variable first and also keeps
  the branch that takes the row; ``A?`` keeps both branches, taking first;
- a partial match whose first row is ``WITHIN`` or more before the row being fed (or
  the time it is advanced to) is dropped, so a match spans less than ``WITHIN``, as
  Flink's NFA times out;
- a match comes out once no partial match that started before it is left (matches come
  out in the order of their first rows, the preferred one first among those of one
  row), and it ends the partial matches and the matches not out yet that AFTER MATCH
  SKIP says: PAST LAST ROW those that started at or before its last row; TO NEXT ROW
  (the default, as Calcite's) those that started at or before its first row; TO FIRST /
  LAST v those that started before the first / last row mapped to ``v``.

A partial match is a JSON-ready list ``[element, count, start_ts, rows]`` (``rows``:
``[seq, variable, row]`` in order), so a state store keeps a partition's state (its
partial matches and its matches waiting to come out) as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlglot.errors import TokenError
from sqlglot.tokens import Token, Tokenizer, TokenType

Row = dict[str, Any]
#: a partial match: [element index, rows taken by that element, start time, rows]
Thread = list[Any]


class PatternError(ValueError):
    """A PATTERN (or AFTER MATCH SKIP) Flink does not run; ``offset`` is into the
    pattern's text."""

    def __init__(self, message: str, offset: int = 0) -> None:
        super().__init__(message)
        self.offset = offset


class MatchError(RuntimeError):
    """A match AFTER MATCH SKIP cannot skip from (Flink fails the job likewise)."""


@dataclass(frozen=True)
class Element:
    """One pattern variable with its quantifier: ``minimum`` to ``maximum`` rows (None:
    no upper bound), greedy or reluctant."""

    variable: str
    minimum: int = 1
    maximum: int | None = 1
    greedy: bool = True


@dataclass(frozen=True)
class Skip:
    """AFTER MATCH SKIP: ``PAST LAST ROW``, ``TO NEXT ROW``, ``TO FIRST`` or ``TO LAST``
    (with ``variable``)."""

    mode: str = "TO NEXT ROW"
    variable: str | None = None


def parse_pattern(text: str) -> tuple[Element, ...]:
    """The elements of a PATTERN's text (without its parentheses), checked as Flink
    checks them."""
    try:
        tokens = Tokenizer().tokenize(text)
    except TokenError:
        raise PatternError(f"cannot read the pattern {text!r}") from None
    elements: list[Element] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if (
            token.token_type not in (TokenType.VAR, TokenType.IDENTIFIER)
            and not token.text.isalpha()
        ):
            raise PatternError(_unsupported(token), token.start)
        name = token.text
        if name.upper() == "PERMUTE" and i + 1 < len(tokens) and tokens[i + 1].text == "(":
            raise PatternError("PERMUTE in a pattern is not supported (as in Flink)", token.start)
        if any(e.variable == name for e in elements):
            raise PatternError(
                f"pattern variable {name} appears twice in the pattern: a variable is one "
                "element of the pattern here",
                token.start,
            )
        i += 1
        minimum, maximum, i = _quantifier(tokens, i)
        greedy = True
        if i < len(tokens) and tokens[i].token_type == TokenType.PLACEHOLDER:
            if (minimum, maximum) == (1, 1):
                raise PatternError("a reluctant ? needs a quantifier before it", tokens[i].start)
            greedy = False
            i += 1
        if (minimum, maximum) == (0, 1) and not greedy:
            raise PatternError(
                f"the reluctant optional quantifier ({name}??) is not supported (as in Flink)",
                token.start,
            )
        elements.append(Element(name, minimum, maximum, greedy))
    if not elements:
        raise PatternError("the pattern is empty")
    if all(e.minimum == 0 for e in elements):
        raise PatternError("a pattern that can match no rows is not supported (as in Flink)")
    last = elements[-1]
    if last.greedy and last.maximum != last.minimum:
        raise PatternError(
            f"a greedy quantifier on the last variable ({last.variable}) is not supported "
            "(as in Flink): end the pattern with a plain variable or a reluctant quantifier",
            tokens[-1].start,
        )
    return tuple(elements)


def _unsupported(token: Token) -> str:
    """Why the pattern cannot have ``token`` where a variable was expected."""
    what = {
        TokenType.L_PAREN: "a pattern group (parentheses inside PATTERN)",
        TokenType.PIPE: "an alternation (|)",
        TokenType.CARET: "an anchor (^)",
        TokenType.DOLLAR: "an anchor ($)",
        TokenType.L_BRACE: "an exclusion ({- ... -})",
    }.get(token.token_type)
    if token.text.upper() == "PERMUTE":
        what = "PERMUTE"
    if what is None:
        return f"unexpected {token.text!r} in the pattern"
    return f"{what} in a pattern is not supported (as in Flink)"


def _quantifier(tokens: list[Token], i: int) -> tuple[int, int | None, int]:
    """(minimum, maximum, next index) of the quantifier at ``tokens[i]`` (1, 1 if none)."""
    if i >= len(tokens):
        return 1, 1, i
    if tokens[i].text == "??":
        raise PatternError(
            "the reluctant optional quantifier (??) is not supported (as in Flink)",
            tokens[i].start,
        )
    kind = tokens[i].token_type
    if kind == TokenType.STAR:
        return 0, None, i + 1
    if kind == TokenType.PLUS:
        return 1, None, i + 1
    if kind == TokenType.PLACEHOLDER:
        return 0, 1, i + 1
    if kind != TokenType.L_BRACE:
        return 1, 1, i
    close = next(
        (j for j in range(i, len(tokens)) if tokens[j].token_type == TokenType.R_BRACE), None
    )
    if close is None:
        raise PatternError("a { quantifier needs its }", tokens[i].start)
    inside = [t.text for t in tokens[i + 1 : close]]
    if inside and inside[0] == "-":
        raise PatternError(_unsupported(tokens[i]), tokens[i].start)
    numbers = "".join(inside)
    low, comma, high = numbers.partition(",")
    if not (low.isdigit() or (comma and not low)) or not (high.isdigit() or not high):
        raise PatternError(f"cannot read the quantifier {{{numbers}}}", tokens[i].start)
    minimum = int(low) if low else 0
    maximum = int(high) if high else (None if comma else minimum)
    if maximum is not None and (maximum < minimum or maximum == 0):
        raise PatternError(f"the quantifier {{{numbers}}} matches no rows", tokens[i].start)
    return minimum, maximum, close + 1


class MatchContext:
    """The rows of a (partial) match, as DEFINE and MEASURES see them: in order, each
    with its pattern variable; in DEFINE the last one is the row being tried."""

    __slots__ = ("rows",)

    def __init__(self, rows: list[tuple[str, Row]]) -> None:
        self.rows = rows

    def of(self, variable: str | None) -> list[Row]:
        """The rows mapped to ``variable`` (None: every row)."""
        if variable is None:
            return [row for _, row in self.rows]
        return [row for var, row in self.rows if var == variable]


Condition = Callable[[MatchContext], bool]


@dataclass
class Matcher:
    """Feeds rows to a partition's partial matches (``step``)."""

    elements: tuple[Element, ...]
    #: variable -> its DEFINE condition (a variable without one takes every row)
    conditions: dict[str, Condition]
    skip: Skip
    within_ms: int | None = None

    def step(
        self, state: dict[str, Any], seq: int, ts: int, row: Row
    ) -> tuple[dict[str, Any], list[MatchContext]]:
        """Feed the partition's row number ``seq`` at time ``ts`` to its ``state``
        (``{"threads": partial matches, "completed": matches not out yet}``): the state
        after it and the matches that come out."""
        successors: list[tuple[Thread, bool]] = []
        for element, count, start, rows in [*self._alive(state, ts), [0, 0, ts, []]]:
            successors.extend(self._advance(element, count, start, rows, seq, row))
        partial = [t for t, done in successors if not done]
        completed = [*state.get("completed", []), *(t for t, done in successors if done)]
        return self._emit(partial, completed)

    def advance_time(
        self, state: dict[str, Any], ts: int
    ) -> tuple[dict[str, Any], list[MatchContext]]:
        """Time passes to ``ts`` (the watermark) without a row: the partial matches it
        times out (WITHIN) end, and the matches that waited for them come out."""
        return self._emit(self._alive(state, ts), list(state.get("completed", [])))

    def finish(self, state: dict[str, Any]) -> list[MatchContext]:
        """The end of the input (Flink's last watermark): every partial match ends, and
        the matches that waited for them come out."""
        return self._emit([], list(state.get("completed", [])))[1]

    def expires(self, state: dict[str, Any]) -> int | None:
        """When the first of the state's partial matches times out (None: never)."""
        threads = state.get("threads", [])
        if self.within_ms is None or not threads:
            return None
        return int(min(t[2] for t in threads)) + self.within_ms

    def _alive(self, state: dict[str, Any], ts: int) -> list[Thread]:
        """The partial matches that have not timed out at ``ts``."""
        within = self.within_ms
        return [t for t in state.get("threads", []) if within is None or t[2] + within > ts]

    def _emit(
        self, partial: list[Thread], completed: list[Thread]
    ) -> tuple[dict[str, Any], list[MatchContext]]:
        """The matches that come out, and the state left."""
        completed.sort(key=_first_seq)  # stable: the preferred of one start first
        matches: list[MatchContext] = []
        # as Flink's NFA: a match comes out once no partial match started before it
        while completed and (
            not partial or _first_seq(completed[0]) <= min(map(_first_seq, partial))
        ):
            match = completed.pop(0)
            matches.append(MatchContext([(var, r) for _, var, r in match[3]]))
            bound = self._skip_to(match)
            partial = [t for t in partial if _first_seq(t) >= bound]
            completed = [t for t in completed if _first_seq(t) >= bound]
        return {"threads": partial, "completed": completed}, matches

    def _advance(
        self, element: int, count: int, start: int, rows: list[Any], seq: int, row: Row
    ) -> list[tuple[Thread, bool]]:
        """The partial matches (with whether each is complete) that the one at
        ``element`` (``count`` rows into it) becomes by taking ``row``, preferred first."""
        current = self.elements[element]
        can_take = (current.maximum is None or count < current.maximum) and self._accepts(
            current.variable, rows, row
        )
        taken: list[tuple[Thread, bool]] = []
        if can_take:
            thread = [element, count + 1, start, [*rows, [seq, current.variable, row]]]
            taken.append((thread, self._complete(element, count + 1)))
        proceeded: list[tuple[Thread, bool]] = []
        last = element + 1 == len(self.elements)
        # a greedy loop that takes the row does not also try the next variable with it
        loop_takes = current.greedy and can_take and current.maximum != 1
        if count >= current.minimum and not last and not loop_takes:
            proceeded = self._advance(element + 1, 0, start, rows, seq, row)
        return taken + proceeded if current.greedy else proceeded + taken

    def _accepts(self, variable: str, rows: list[Any], row: Row) -> bool:
        condition = self.conditions.get(variable)
        if condition is None:
            return True
        context = MatchContext([*((var, r) for _, var, r in rows), (variable, row)])
        return condition(context) is True

    def _complete(self, element: int, count: int) -> bool:
        """Whether a partial match ``count`` rows into ``element`` is a match: the rest of
        the pattern may take no rows."""
        return count >= self.elements[element].minimum and all(
            e.minimum == 0 for e in self.elements[element + 1 :]
        )

    def _skip_to(self, thread: Thread) -> int:
        """The first row (seq) a partial match may start at after the match ``thread``."""
        rows = thread[3]
        mode = self.skip.mode
        if mode == "PAST LAST ROW":
            return int(rows[-1][0]) + 1
        if mode == "TO NEXT ROW":
            return int(rows[0][0]) + 1
        if mode == "TO NEXT ROW":
            return int(rows[0][0]) + 1
        mapped = [seq for seq, var, _ in rows if var == self.skip.variable]
        if not mapped:
            raise MatchError(
                f"AFTER MATCH SKIP {mode} {self.skip.variable}: no row of the match is "
                f"mapped to {self.skip.variable}"
            )
        to = int(mapped[0] if mode == "TO FIRST" else mapped[-1])
        if to == int(rows[0][0]):
            raise MatchError(
                f"AFTER MATCH SKIP {mode} {self.skip.variable}: the row is the match's "
                "first row, where the next match would start again"
            )
        return to


def _first_seq(thread: Thread) -> int:
    return int(thread[3][0][0])
