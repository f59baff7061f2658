"""Flink SQL constructs the compiler does not handle, refused by name.

A statement that uses one raises a ``SqlError`` that names the construct and points at
it, before the compiler tries the statement (which would otherwise fail on a detail:
"column ... must be in GROUP BY" for an OVER aggregation):

- ``check_tokens`` reads the statement's tokens, for what sqlglot drops (a table hint, a
  comment to its tokenizer);
  ``explain_parse_error`` names the construct behind a parse error where it knows it
  (``METADATA`` outside a CREATE TABLE's column list);
- ``check_tree`` walks the parsed statement: OVER aggregations but in the SELECT list of a
  query over one table (``over``; in pull and push queries all), ``ROW_NUMBER()`` /
  ``RANK()`` / ``DENSE_RANK()`` Top-N and deduplication but those the compiler runs
  (``dedup``, ``topn``, ``window_rank``: a window Top-N over a SESSION or processing-time
  TVF is refused there), set operations,
  WITH, UNNEST, subqueries in expressions, QUALIFY, hints, ``INSERT ... VALUES`` and
  ``INSERT OVERWRITE``.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.tokens import Token

from streaming.sql import dedup, over, topn, tvf_rows, window_join
from streaming.sql.errors import SqlError, error_at, node_offset
from streaming.sql.rewrite import Statement, tokenize
from streaming.sql.settings import is_state_ttl_hint, only_state_ttl

NOT_YET = "is not supported yet"

#: the time attributes of Flink's group windows
TIME_ATTRIBUTE_CALLS = tuple(
    f"{window}_{time}"
    for window in ("TUMBLE", "HOP", "SESSION")
    for time in ("ROWTIME", "PROCTIME")
)

#: the ranking functions of Flink's Top-N and deduplication
RANKINGS = (exp.RowNumber, exp.Rank, exp.DenseRank)


def check_tokens(statement: Statement, source: str) -> None:
    """Refuse, by name, a construct of the statement's text that sqlglot cannot parse."""
    tokens = tokenize(statement.text)
    previous_end = statement.start
    previous: Token | None = None
    for token in tokens:
        # a table hint is a comment to sqlglot's tokenizer, which would drop it
        hint = statement.text.find("/*+", previous_end, token.start)
        if hint >= 0 and not is_state_ttl_hint(statement.text, hint, previous):
            raise error_at(source, hint, f"a hint (/*+ ... */) {NOT_YET}")
        previous_end, previous = token.end + 1, token


def explain_parse_error(statement: Statement, source: str) -> SqlError | None:
    """The error naming the construct behind a parse error of the statement, if known."""
    tokens = tokenize(statement.text)
    for token, following in zip(tokens, [*tokens[1:], None], strict=True):
        if token.text.upper() == "METADATA" and _word(following) in ("FROM", "VIRTUAL", ","):
            return error_at(
                source,
                token.start,
                "METADATA declares a column of a CREATE TABLE's column list (name type "
                "METADATA [FROM 'key'] [VIRTUAL]), not of this statement",
            )
    return None


def _word(token: Token | None) -> str:
    return token.text.upper() if token is not None else ""


def check_tree(
    tree: exp.Expr, statement: Statement, source: str, over_aggregations: bool = False
) -> None:
    """Refuse, by name and position, the first construct of ``tree`` the compiler does
    not handle (OVER aggregations, unless ``over_aggregations``)."""
    # the ROW_NUMBER() of a deduplication or Top-N the compiler runs is no problem
    handled = {
        id(recognised.window)
        for select in tree.find_all(exp.Select)
        if (from_ := select.args.get("from_")) is not None
        for find in (dedup.find, topn.find)
        if (recognised := find(select, from_.this)) is not None
    }
    found = [
        problem
        for node in tree.walk()
        if id(node) not in handled and (problem := _problem(node, statement, over_aggregations))
    ]
    if found:
        offset, message = min(found, key=lambda problem: problem[0])
        raise error_at(source, offset, message)


def _problem(node: exp.Expr, statement: Statement, overs: bool) -> tuple[int, str] | None:
    """(offset, message) if ``node`` is a construct the compiler does not handle."""
    if (
        isinstance(node, exp.Window)
        and node.arg_key != "windows"
        and not (overs and _compiled_over(node))
    ):
        return node_offset(node, statement.start), _over(node, overs)
    if isinstance(node, exp.Union | exp.Intersect | exp.Except):
        word = type(node).__name__.upper()
        word += "" if node.args.get("distinct") else " ALL"
        return keyword_offset(node, statement, word.split()[0]), f"{word} {NOT_YET}"
    if isinstance(node, exp.With):
        return keyword_offset(node, statement, "WITH"), (
            f"WITH (a common table expression) {NOT_YET}: use a subquery in FROM or CREATE VIEW"
        )
    if isinstance(node, exp.Unnest):
        return keyword_offset(node, statement, "UNNEST"), f"UNNEST {NOT_YET}"
    if isinstance(node, exp.Lateral):
        return keyword_offset(node, statement, "LATERAL"), f"LATERAL {NOT_YET}"
    if isinstance(node, exp.Subquery | exp.Select) and _in_expression(node):
        return keyword_offset(node, statement, "SELECT"), (
            f"a subquery in an expression (IN, EXISTS or a scalar subquery) {NOT_YET}"
        )
    if isinstance(node, exp.Select):
        for arg, word, what in (
            ("qualify", "QUALIFY", "QUALIFY"),
            ("hint", "/*+", "a hint (/*+ ... */)"),
            ("windows", "WINDOW", "a named window (WINDOW w AS ...) without OVER w"),
        ):
            if arg == "hint" and node.args.get("joins") and only_state_ttl(node.args[arg]):
                continue  # a regular join's (regular_join)
            if node.args.get(arg) and not (overs and arg == "windows" and over.over_calls(node)):
                return keyword_offset(node.args[arg], statement, word), f"{what} {NOT_YET}"
    if isinstance(node, exp.Anonymous) and node.name.upper() in TIME_ATTRIBUTE_CALLS:
        return node_offset(node, statement.start), (
            f"{node.name.upper()} (a group window's time attribute) {NOT_YET}: select the "
            "window's start or end, which stays the time attribute of a view of the result"
        )
    if (
        isinstance(node, exp.Column)
        and node.name == "window_time"
        and statement.window_tvfs
        and not _in_window_join(node)
        and not _reads_tvf_rows(node, statement)
    ):
        return node_offset(node, statement.start), (
            f"window_time {NOT_YET}: window_start and window_end are"
        )
    if isinstance(node, exp.Insert):
        if isinstance(node.expression, exp.Values):
            return keyword_offset(node, statement, "VALUES"), f"INSERT INTO ... VALUES {NOT_YET}"
        if node.args.get("overwrite"):
            return keyword_offset(node, statement, "OVERWRITE"), (
                "INSERT OVERWRITE is not supported: a Kafka topic is appended to (or upserted)"
            )
    return None


def _reads_tvf_rows(node: exp.Expr, statement: Statement) -> bool:
    """Whether ``node`` is in a query of a window TVF's rows as they are (``tvf_rows``),
    which have a ``window_time``."""
    select = node.find_ancestor(exp.Select)
    return select is not None and tvf_rows.reads_tvf_rows(statement, select) is not None


def _in_window_join(node: exp.Expr) -> bool:
    """Whether ``node`` is in a query that joins two subqueries (a window join, whose
    TVF rows have a ``window_time``: ``window_join``)."""
    parent = node.parent
    while parent is not None:
        if isinstance(parent, exp.Select) and window_join.joins_subqueries(parent):
            return True
        parent = parent.parent
    return False


def _compiled_over(window: exp.Window) -> bool:
    """Whether ``window`` is an OVER aggregation the compiler runs (``over``): in the
    SELECT list of a query over one table."""
    if isinstance(window.this, RANKINGS):
        return False
    select = window.parent_select
    if select is None or select.args.get("joins"):
        return False
    return any(w is window for item in select.expressions for w in item.find_all(exp.Window))


def _over(window: exp.Window, overs: bool) -> str:
    """What an ``f(...) OVER (...)`` is called in Flink's documentation (``overs``: where
    OVER aggregations are compiled)."""
    function = window.this
    if not isinstance(function, RANKINGS):
        where = " here: only in the SELECT list of a query over one table" if overs else ""
        return f"OVER aggregation ({function.sql()} OVER (...)) {NOT_YET}{where}"
    partition = window.args.get("partition_by") or []
    by_window = any(
        isinstance(p, exp.Column) and p.name in ("window_start", "window_end") for p in partition
    )
    kind = "window Top-N or window deduplication" if by_window else "Top-N or deduplication"
    return (
        f"{kind} ({function.sql()} OVER (PARTITION BY ... ORDER BY ...)) {NOT_YET} here: "
        "it runs in a subquery in FROM, PARTITION BY and ORDER BY columns, its number "
        "bounded in the outer WHERE (rn <= N, rn < N or rn = N)"
    )


def _in_expression(node: exp.Expr) -> bool:
    """Whether a query sits inside an expression rather than in FROM / JOIN, a set
    operation or a statement."""
    parent = node.parent
    if parent is None or isinstance(
        parent, exp.From | exp.Join | exp.Insert | exp.Create | exp.With | exp.CTE
    ):
        return False
    return not isinstance(parent, exp.Union | exp.Intersect | exp.Except | exp.Subquery)


def keyword_offset(node: exp.Expr | list[exp.Expr], statement: Statement, word: str) -> int:
    """Where ``word`` (a keyword sqlglot keeps no position for) first appears in the
    statement at or after the node's start, else the node's start."""
    first = node[0] if isinstance(node, list) else node
    start = node_offset(first, statement.start)
    tokens = tokenize(statement.text)
    starts = [t.start for t in tokens if t.text.upper().split()[:1] == [word]]
    before = [offset for offset in starts if offset <= start]
    after = [offset for offset in starts if offset >= start]
    if after and not before:
        return after[0]
    return before[-1] if before else start
