"""The row pattern matcher of MATCH_RECOGNIZE on its own (no Kafka, no SQL): PATTERN's
text, greedy and reluctant quantifiers, AFTER MATCH SKIP, WITHIN, and a match that waits
for an earlier partial match, as Flink's CEP NFA does."""

from __future__ import annotations

from typing import Any

import pytest

from streaming.sql.row_pattern import (
    Element,
    Matcher,
    MatchError,
    PatternError,
    Skip,
    parse_pattern,
)


def feed(matcher: Matcher, values: list[Any], times: list[int] | None = None) -> list[list[Any]]:
    """The matches of ``values`` (rows ``{"v": value}``), each as [(variable, value)]."""
    state: dict[str, Any] = {}
    found = []
    for seq, value in enumerate(values):
        ts = times[seq] if times else seq
        state, matches = matcher.step(state, seq, ts, {"v": value})
        found.extend([[(var, row["v"]) for var, row in m.rows] for m in matches])
    return found


def value_is(wanted: Any) -> Any:
    return lambda ctx: ctx.rows[-1][1]["v"] == wanted


def below(limit: int) -> Any:
    return lambda ctx: ctx.rows[-1][1]["v"] < limit


@pytest.mark.parametrize(
    ("text", "elements"),
    [
        ("A B C", [("A", 1, 1, True), ("B", 1, 1, True), ("C", 1, 1, True)]),
        ("A+ B*? C", [("A", 1, None, True), ("B", 0, None, False), ("C", 1, 1, True)]),
        (
            "A? B{2} C{2,} D{,3}? E{1,4}?",
            [
                ("A", 0, 1, True),
                ("B", 2, 2, True),
                ("C", 2, None, True),
                ("D", 0, 3, False),
                ("E", 1, 4, False),
            ],
        ),
        ('"A""" l', [('A"', 1, 1, True), ("l", 1, 1, True)]),
    ],
)
def test_pattern_text(text, elements):
    assert parse_pattern(text) == tuple(Element(*e) for e in elements)


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ("A (B C)+", "(", "a pattern group"),
        ("A | B", "|", "an alternation (|)"),
        ("PERMUTE(A, B)", "PERMUTE", "PERMUTE in a pattern is not supported"),
        ("^A B", "^", "an anchor (^)"),
        ("A {- B -} C", "{", "an exclusion"),
        ("A B??", "??", "the reluctant optional quantifier"),
        ("A* B?", "", "a pattern that can match no rows"),
        ("A B+", "+", "a greedy quantifier on the last variable (B)"),
        ("A B A", "A", "pattern variable A appears twice"),
        ("A B{3,2}", "{", "matches no rows"),
    ],
)
def test_patterns_flink_does_not_run(text, where, message):
    with pytest.raises(PatternError) as info:
        parse_pattern(text)
    assert message in str(info.value)
    assert info.value.offset == (text.rindex(where) if where else 0)


def test_strict_contiguity():
    matcher = Matcher(parse_pattern("A B"), {"A": value_is("a"), "B": value_is("b")}, Skip())
    assert feed(matcher, ["a", "x", "b", "a", "b"]) == [[("A", "a"), ("B", "b")]]


def test_greedy_loop_takes_what_it_can():
    # the documentation's A B* C: rows that are both B and C go to the greedy B*
    conditions = {"A": lambda c: c.rows[-1][1]["v"] > 10, "B": below(15)}
    conditions["C"] = lambda c: c.rows[-1][1]["v"] > 12
    greedy = Matcher(parse_pattern("A B* C"), conditions, Skip("PAST LAST ROW"))
    values = [10, 11, 12, 13, 14, 16]
    assert [m[-1] for m in feed(greedy, values)] == [("C", 16)]
    reluctant = Matcher(parse_pattern("A B*? C"), conditions, Skip("PAST LAST ROW"))
    assert [m[-1] for m in feed(reluctant, values)] == [("C", 13), ("C", 16)]


def test_optional_variable_keeps_both_branches():
    # A B? C where a row is both B and C: the match without B ends first
    matcher = Matcher(parse_pattern("A B? C"), {"A": value_is("a")}, Skip("PAST LAST ROW"))
    assert feed(matcher, ["a", "x", "y"]) == [[("A", "a"), ("C", "x")]]


SUM_BELOW_30 = {"A": lambda ctx: sum(r["v"] for r in ctx.of("A")) < 30}
SKIP_ROWS = [7, 9, 10, 5, 10, 7, 14]


@pytest.mark.parametrize(
    ("skip", "starts"),
    [
        (Skip("PAST LAST ROW"), [7, 10]),
        (Skip("TO NEXT ROW"), [7, 9, 10, 5, 10]),
        (Skip("TO LAST", "A"), [7, 10, 10]),
        (Skip("TO FIRST", "C"), [7, 5]),
    ],
)
def test_after_match_skip(skip, starts):
    # the documentation's A+ C with SUM(A.price) < 30
    matcher = Matcher(parse_pattern("A+ C"), SUM_BELOW_30, skip)
    assert [m[0][1] for m in feed(matcher, SKIP_ROWS)] == starts


def test_skip_to_a_variable_without_rows_fails_as_in_flink():
    matcher = Matcher(parse_pattern("A B? C"), {"A": value_is("a")}, Skip("TO FIRST", "B"))
    with pytest.raises(MatchError, match="no row of the match is mapped to B"):
        feed(matcher, ["a", "x"])


def test_within_drops_partial_matches_that_started_that_long_ago():
    matcher = Matcher(
        parse_pattern("A B"), {"A": value_is("a"), "B": value_is("b")}, Skip(), within_ms=10
    )
    assert feed(matcher, ["a", "b"], [0, 9]) == [[("A", "a"), ("B", "b")]]
    assert feed(matcher, ["a", "b"], [0, 10]) == []


def test_a_match_waits_for_an_earlier_partial_match():
    # as Flink's NFA: the match that starts at "fast" is complete at "c", but the partial
    # match that started at "slow" (its C needs another A) is still going: the match comes
    # out when that one ends, at "stop"
    conditions = {
        "B": lambda ctx: ctx.rows[-1][1]["v"] != "stop",
        "C": lambda ctx: ctx.rows[-1][1]["v"] == "c" and ctx.of("A")[0]["v"] != "slow",
    }
    matcher = Matcher(parse_pattern("A B*? C"), conditions, Skip("PAST LAST ROW"))
    state: dict[str, Any] = {}
    out: list[list[Any]] = []
    for seq, value in enumerate(["slow", "fast", "c", "stop"]):
        state, matches = matcher.step(state, seq, seq, {"v": value})
        out.append([[r["v"] for _, r in m.rows] for m in matches])
    assert out == [[], [], [], [["fast", "c"]]]


def test_time_passing_without_rows_times_partial_matches_out():
    # the watermark moves past WITHIN with no row of the partition: its partial match
    # ends, and the match that waited for it comes out
    conditions = {
        "B": lambda ctx: True,
        "C": lambda ctx: ctx.rows[-1][1]["v"] == "c" and ctx.of("A")[0]["v"] != "slow",
    }
    matcher = Matcher(parse_pattern("A B*? C"), conditions, Skip("PAST LAST ROW"), within_ms=10)
    state: dict[str, Any] = {}
    for seq, value in enumerate(["slow", "fast", "c"]):
        state, matches = matcher.step(state, seq, seq, {"v": value})
        assert matches == []
    assert matcher.expires(state) == 10  # "slow" started at 0
    state, matches = matcher.advance_time(state, 9)
    assert matches == []
    state, matches = matcher.advance_time(state, 10)
    assert [[r["v"] for _, r in m.rows] for m in matches] == [["fast", "c"]]
    assert state == {"threads": [], "completed": []}
    assert matcher.expires(state) is None
