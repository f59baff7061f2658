"""``SET 'key' = 'value'``: Flink's configuration statements, for the statements after
them.

``'table.exec.state.ttl'`` (a Flink duration: ``'1 h'``, ``'30 min'``, ``'86400000'``
ms; ``'0'`` keeps state for good) bounds the state of the regular joins compiled after
it (``regular_join``). The SQL client's own options (``'sql-client.*'``) and
``'execution.runtime-mode' = 'streaming'`` change nothing here and are accepted; any
other key is an error naming it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.tokens import Token, TokenType

from streaming.sql.errors import error_at, node_offset
from streaming.sql.rewrite import duration_ms

STATE_TTL = "table.exec.state.ttl"

_STATE_TTL_HINT = re.compile(r"/\*\+\s*STATE_TTL\s*\(", re.IGNORECASE)


def _text(node: exp.Expr) -> str:
    """A SET item's key or value as written (quoted or not)."""
    if isinstance(node, exp.Literal):
        return str(node.this)
    return node.sql().replace('"', "")


@dataclass
class Settings:
    """The options SET so far."""

    #: ``'table.exec.state.ttl'`` in ms (None: no TTL)
    state_ttl_ms: int | None = None

    def apply(self, tree: exp.Set, source: str, at: int) -> None:
        """Take the options of one SET statement."""
        for item in tree.expressions:
            assignment = item.this if isinstance(item, exp.SetItem) else item
            if not isinstance(assignment, exp.EQ):
                raise error_at(source, at, "SET needs 'key' = 'value'")
            key, value = _text(assignment.this), _text(assignment.expression)
            where = node_offset(assignment.this, at)
            if key == STATE_TTL:
                try:
                    ttl = duration_ms(value)
                except ValueError as e:
                    raise error_at(
                        source,
                        node_offset(assignment.expression, at),
                        f"SET '{STATE_TTL}' = '{value}': {e}",
                    ) from None
                self.state_ttl_ms = ttl or None
            elif key.startswith("sql-client.") or (
                key == "execution.runtime-mode" and value.lower() == "streaming"
            ):
                continue
            else:
                raise error_at(
                    source,
                    where,
                    f"SET '{key}' is not supported (the option read here is '{STATE_TTL}')",
                )


def state_ttl_hint(select: exp.Select, source: str) -> dict[str, tuple[int | None, int]]:
    """Flink's ``SELECT /*+ STATE_TTL('o' = '1d', 'c' = '12h') */ ...``: the state TTL of
    each named input (table or alias) of the query's joins, with the offset of its name
    for errors (a TTL of 0: kept for good). Other hints are an error naming them."""
    hint = select.args.get("hint")
    ttls: dict[str, tuple[int | None, int]] = {}
    for call in hint.expressions if hint is not None else []:
        name = call.name.upper() if isinstance(call, exp.Func) else call.sql()
        at = node_offset(call, node_offset(select))
        if name != "STATE_TTL":
            raise error_at(source, at, f"the hint {name} is not supported (only STATE_TTL)")
        for item in call.expressions:
            if not isinstance(item, exp.EQ):
                raise error_at(source, at, "STATE_TTL needs 'input' = 'duration' pairs")
            key, value = _text(item.this), _text(item.expression)
            try:
                ttl = duration_ms(value)
            except ValueError as e:
                raise error_at(source, at, f"STATE_TTL '{key}' = '{value}': {e}") from None
            ttls[key] = (ttl or None, at)
    return ttls


def is_state_ttl_hint(text: str, at: int, previous: Token | None) -> bool:
    """Whether the hint at ``at`` of ``text`` is ``/*+ STATE_TTL(...) */`` right after
    SELECT (a query hint, which sqlglot parses; a table hint it would drop)."""
    after_select = previous is not None and previous.token_type == TokenType.SELECT
    return after_select and _STATE_TTL_HINT.match(text, at) is not None


def only_state_ttl(hint: exp.Expr) -> bool:
    """Whether a query's hint holds STATE_TTL calls only."""
    calls = hint.expressions if isinstance(hint, exp.Hint) else []
    return bool(calls) and all(
        isinstance(call, exp.Func) and call.name.upper() == "STATE_TTL" for call in calls
    )
